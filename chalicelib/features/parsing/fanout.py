"""Big documents read in parallel page ranges (issue 50; docs/api/processing.md "The parse
stage", docs/operations/parsing.md "Big documents", docs/scale.md "The document path").

**Plan** (``plan``, from stage.py ``run_slice``'s first message): a PDF with more pages than one
range of its reader holds (``FanOut``, readers/limits.py: 200 pages for a text layer, 10 for a
scan, judged by its first page) is split into ranges; the first ``FanOut.in_flight`` range
messages (``parse.range``) are queued (a scan's on the OCR queue when there is one) and the
stage's step waits (it looks again every ``check_seconds``, and is woken when the last range
ends). A document over ``Limits.max_pages`` fails before any range is planned.

**A range** (``read_range``, one ``parse.range`` message): the readers read its pages (from
``from``: a range the time box cut short continues in a new message, carrying the parts it
wrote), each sub-range stored as a part object at the same deterministic key a single read would
use for its first page (deltas.part_key); then the next range not yet queued is queued (range i
queues range i + in_flight: one message in, one out, so at most ``in_flight`` are queued at
once), then the range's item is put once (ranges_store.py ``mark``). The delivery whose put
lands asks whether every range is done (one Query); the one that sees it closes the run
(``close``, conditional) and wakes the stage. A duplicate message finds its range done (or the
run closed) and does nothing, except re-asking (a wake-up lost in a crash is sent again). A range
whose read fails for a storage or table reason is retried alone (``retry``: the same message
with ``try`` + 1 after a backoff, ``FanOut.range_attempts`` tries); a range failing for good (the
file's fault, or its tries spent) records why, closes the run and wakes the stage, which fails.

**Assembly** (``check``, the stage's step on a wake-up or a look): every range done -> the
parts in page order become the index ``stage._finish`` stores as the family's next version,
exactly as a single read's (the same node ids: they are per page, readers/nodes.py; the same
root), once: ``_finish`` is the single conditional write of the chain path, and a second
wake-up finds the version stored. Progress: ``pagesRead`` of ``pageCount`` (and ``rangesRead``
of ``ranges``) on the execution's ``metadata.progress``, updated on each look.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from chalicelib.core.observability import get_logger
from chalicelib.features.documents import blobs, deltas
from chalicelib.features.documents import service as documents
from chalicelib.features.parsing import ranges_store, site
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table

log = get_logger('parsing')

FAMILIES = family_of('document-families')
RANGE = 'parse.range'          # the message type of one page range (features/work/worker.py)
RANGE_RESERVE_SECONDS = 3.0    # kept after the readers for writing the part and the range's item

Send = Callable[[list[tuple[dict[str, Any], str | None, int]]], None]   # (body, queue, delay seconds)


def settings():
    from chalicelib.features.parsing.readers import limits  # noqa: PLC0415 - small; read when used (tests change it)
    return limits.FANOUT, limits.DEFAULT_LIMITS


def ranges_of(page_count: int, size: int) -> list[tuple[int, int]]:
    return [(first, min(first + size - 1, page_count)) for first in range(1, page_count + 1, size)]


def _body(run: str, family_id: str, plan: dict[str, Any], index: int, wake: dict[str, Any]) -> dict[str, Any]:
    first, last = ranges_of(int(plan['pageCount']), int(plan['size']))[index]
    return {'type': RANGE, 'familyId': family_id, 'run': run, 'range': index, 'first': first, 'last': last,
            'from': first, 'try': 1, 'parts': [], 'plan': plan, 'wake': wake}


def _queue(plan: dict[str, Any]) -> str | None:
    return 'ocr' if plan.get('scan') and site.ocr_queue() and not site.ocr_here() else None


def plan(family_id: str, state: dict[str, Any], survey, wake: dict[str, Any]) -> tuple[dict[str, Any], list] | None:
    """The ranges of a surveyed document and the first messages to queue, or None when it is read
    in one chain (one range). ``wake``: the message that wakes the stage's step."""
    fan, _ = settings()
    ranges = fan.ranges(survey.page_count, survey.scan)
    if len(ranges) < 2:
        return None
    run = str(state['run'])
    size = ranges[0][1] - ranges[0][0] + 1
    plan_ = {'pageCount': survey.page_count, 'size': size, 'ranges': len(ranges), 'scan': survey.scan,
             'inFlight': fan.in_flight, 'mediaType': survey.media_type}
    queue = _queue(plan_)
    first = [(_body(run, family_id, plan_, i, wake), queue, 0) for i in range(min(fan.in_flight, len(ranges)))]
    state = {**state, 'fanout': plan_, 'pageCount': survey.page_count, 'pagesRead': 0, 'rangesRead': 0,
             'mediaType': survey.media_type}
    return state, first


# ----------------------------------------------------------------------------- one range

def read_range(body: dict[str, Any], *, deadline: float, send: Send) -> str:
    """One ``parse.range`` message (module docstring); what happened. Storage and table failures
    raise (the caller retries the range: ``retry``)."""
    run, index = str(body['run']), int(body['range'])
    closed, done = ranges_store.status(run, index)
    if closed:
        return f'range {index + 1}: the run is closed (a duplicate)'
    if done:
        return _after(body, send, duplicate=True)
    family = table.get(FAMILIES.path, str(body['familyId']))
    if family is None or not family.data.get('storageKey'):
        _fail(body, 'gone: the document family no longer exists', send)
        return 'the document family no longer exists'
    readers = site._readers()
    _, limits = settings()
    first, last, start = int(body['first']), int(body['last']), int(body['from'])
    ocr = site.ocr_here()
    started = time.monotonic()
    data = blobs.read(family.data['storageKey'])
    try:
        result = readers.read(data, media_type=str(family.data.get('contentType') or documents.DEFAULT_MIME),
                              filename=str(family.data.get('path') or ''), first_page=start,
                              deadline=deadline - RANGE_RESERVE_SECONDS, limits=limits, ocr=ocr,
                              page_limit=last - start + 1)
    except readers.NeedsOcr as exc:
        page = int(getattr(exc, 'page', start) or start)
        if ocr or not site.ocr_queue():
            return _fail(body, f'ocr-unavailable: page {page} has no text layer and no OCR runs here', send)
        send([({**body, 'from': page}, 'ocr', 0)])
        return f'range {index + 1}: page {page} needs OCR: continued on the OCR queue'
    except readers.ParseFailure as exc:
        cause = getattr(exc, 'cause', None) or 'unreadable'
        if cause == 'time-budget':   # a busy machine, not the file: the range's next try (``retry``)
            raise
        return _fail(body, f'{cause}: {exc}'[:600], send)
    finally:
        del data
    nodes = [n for n in result.nodes if not (n.get('parentId') is None and n.get('nodeType') == 'document')]
    stop = (int(result.next_page) - 1) if result.next_page and int(result.next_page) <= last else last
    size = deltas.put_part(deltas.part_key(family, run, start), nodes)
    parts = [*body.get('parts', []), [start, stop, len(nodes), size, int(result.text_chars or 0),
                                      1 if result.parser == 'pdf-ocr' else 0, round(time.monotonic() - started, 2)]]
    warnings = [*body.get('warnings', []), *(str(w)[:300] for w in result.warnings)][:20]
    if stop < last:   # the time box cut it short: the rest in a new message
        send([({**body, 'from': stop + 1, 'parts': parts, 'warnings': warnings}, _queue(body['plan']), 0)])
        return f'range {index + 1}: pages {start}-{stop} read, the rest continues'
    _send_next(body, send)
    if not ranges_store.mark(run, index, {'first': first, 'last': last, 'parts': parts, 'warnings': warnings}):
        return _after(body, send, duplicate=True)
    return _after(body, send, duplicate=False)


def _send_next(body: dict[str, Any], send: Send) -> None:
    """Range i queues range i + in_flight (one in, one out: at most in_flight queued at once). Sent
    before the range's item is put: a crash between the two sends it twice, never not at all."""
    plan_ = body['plan']
    following = int(body['range']) + int(plan_['inFlight'])
    if following < int(plan_['ranges']):
        send([(_body(str(body['run']), str(body['familyId']), plan_, following, body['wake']), _queue(plan_), 0)])


def _after(body: dict[str, Any], send: Send, *, duplicate: bool) -> str:
    """After a range's item: when every range is recorded, close the run and wake the stage."""
    run, index = str(body['run']), int(body['range'])
    recorded = ranges_store.ranges(run)
    total = int(body['plan']['ranges'])
    what = f"range {index + 1} of {total} (pages {body['first']}-{body['last']})" + (' again' if duplicate else '')
    if len(recorded) < total and not any(r.get('failed') for r in recorded.values()):
        return f'{what} read; {len(recorded)} of {total} ranges read'
    if ranges_store.close(run, 'failed' if any(r.get('failed') for r in recorded.values()) else 'read') or duplicate:
        send([(body['wake'], None, 0)])   # a duplicate re-sends it: the first may have been lost in a crash
        return f'{what} read; every range read: the stage is woken'
    return f'{what} read; the run was closed by another delivery'


def _fail(body: dict[str, Any], reason: str, send: Send) -> str:
    run, index = str(body['run']), int(body['range'])
    ranges_store.mark(run, index, {'first': body['first'], 'last': body['last'], 'failed': reason})
    if ranges_store.close(run, 'failed'):
        send([(body['wake'], None, 0)])
    return f"range {index + 1} (pages {body['first']}-{body['last']}) failed: {reason}"


def retry(body: dict[str, Any], reason: str, send: Send) -> str:
    """A range whose read raised (storage, the table): the same message again after a backoff, its
    own try counted; past ``range_attempts`` the range fails for good."""
    fan, _ = settings()
    tries = int(body.get('try') or 1)
    if tries >= fan.range_attempts:
        return _fail(body, f'pages {body["first"]}-{body["last"]} failed {tries} times: {reason}'[:600], send)
    delay = min(fan.retry_seconds * 2 ** (tries - 1), 60)
    send([({**body, 'try': tries + 1}, _queue(body['plan']), delay)])
    return f"range {int(body['range']) + 1}: try {tries} failed ({reason}); try {tries + 1} in {delay} s"


# ----------------------------------------------------------------------------- the stage's look

def check(family, state: dict[str, Any]) -> tuple[str, dict[str, Any], Any]:
    """The stage's look at its ranges: ('failed', state, reason), ('waiting', state, note) with
    the progress, or ('read', state, index) for ``stage._finish``."""
    from chalicelib.features.parsing.readers.nodes import root  # noqa: PLC0415 - small, pure
    plan_ = state['fanout']
    run, total = str(state['run']), int(plan_['ranges'])
    recorded = ranges_store.ranges(run)
    bounds = ranges_of(int(plan_['pageCount']), int(plan_['size']))
    for index in sorted(recorded):
        if recorded[index].get('failed'):
            first, last = bounds[index]
            return 'failed', state, f"range {index + 1} of {total} (pages {first}-{last}): {recorded[index]['failed']}"
    read = sum(int(r['last']) - int(r['first']) + 1 for r in recorded.values())
    state = {**state, 'pagesRead': read, 'pagesDone': read, 'rangesRead': len(recorded)}
    if len(recorded) < total:
        return 'waiting', state, f"{read} of {plan_['pageCount']} pages read ({len(recorded)} of {total} ranges)"
    _, limits = settings()
    parts = sorted((p for r in recorded.values() for p in r['parts']), key=lambda p: int(p[0]))
    chars = sum(int(p[4]) for p in parts)
    if chars > limits.max_text_chars:
        return 'failed', state, (f'too-much-text: the document holds more characters of text than '
                                 f"{limits.describe('max_text_chars')} allows")
    parser = 'pdf-ocr' if any(int(p[5]) for p in parts) else 'pdf-text'
    warnings = [w for i in sorted(recorded) for w in recorded[i].get('warnings', [])][:20]
    index = {'root': root(str(plan_['mediaType']), int(plan_['pageCount']), parser),
             'parts': [[int(p[0]), int(p[1]), int(p[2]), int(p[3])] for p in parts], 'warnings': warnings}
    state.update(parser=parser, pagesDone=int(plan_['pageCount']), pagesRead=int(plan_['pageCount']),
                 nextPage=None)
    return 'read', state, index
