"""The parse stage (docs/api/processing.md "The parse stage"): ``run_slice``, one queue message at
a time, driven by the execution engine (features/work/parse_stage.py: the ``PARSE`` runner; this
module never touches the execution record). What the stage stored is served by serving.py.

It reads the family's native content from S3 (the original, never changed), asks the readers
(features/parsing/readers) for the pages from ``state['nextPage']`` on within the message's time
budget, and writes what they gave as ONE part object (deltas.part_key: a deterministic key per
run and first page, so a redelivered message rewrites the same object). The state it hands back
(page ranges done, pages of pages) rides on the execution. When the readers say there is no next
page, ``_finish`` stores the family's next document version as a manifest naming the parts
(deltas.save_parts: one conditional write of the family) together with a derived content object
(lineage DERIVED, ``sourceContentObjectId`` -> the native one; its id a UUIDv5 of the run, so a
finish delivered twice creates it once). A parse that fails (the file's fault: encrypted,
corrupt, truncated, empty, mislabelled, over a cap) deletes its parts: the family keeps its
previous document, nothing of the run is referenced.

Memory: one page range's nodes at a time (the readers hold one page); the file's bytes are read
once per message. Storage: big content in S3 only (parts, manifest, the KDDB rendering); the
table holds the family's pointer, the content object and the execution's small state.

Scans: ``ocr_here`` says whether this process reads pages without a text layer (the OCR
function, ``ocr_function``; site.py), else the run continues on the OCR function's queue.

Big PDFs (issue 50): given ``wake``, the first message surveys a PDF and, when it holds more than
one range of its reader, queues its page ranges (fanout.py) instead of reading; the step then
looks at its ranges (``_look``) until they are all read and assembles them with ``_finish``, as
the chain's last message does. ``_finish`` also publishes ``document-families.parsed``.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import clock
from chalicelib.core.errors import BadRequest
from chalicelib.core.observability import get_logger
from chalicelib.core.principal import Principal
from chalicelib.features.documents import blobs, deltas
from chalicelib.features.documents import service as documents
from chalicelib.features.parsing.site import (  # where the stage runs, shared with fanout.py
    _in_ocr_function,
    _ocr_queue,
    _readers,
    in_ocr_function,
    ocr_function,
    ocr_here,
    ocr_queue,
)
from chalicelib.kernel import records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict
from chalicelib.kernel.store.table import Stored

log = get_logger('parsing')

FAMILIES = family_of('document-families')
CONTENT_OBJECTS = family_of('content-objects')
NAMESPACE = uuid.UUID('0c4b1d0e-5a52-4e53-8f0c-7061727365d1')   # derived content object ids: uuid5(run)
DOCUMENT_CONTENT_TYPE = 1          # ContentObject.contentType: 0 the uploaded file, 1 the document
PARSER_NAME = 'parse'              # the derived content object's metadata.step
FINISH_ATTEMPTS = 5                # the family changed under the finishing write: re-read and write again
SLICE_RESERVE_SECONDS = 3.0        # kept after the readers for writing the part and answering


# ----------------------------------------------------------------------------- the stage

@dataclass
class Slice:
    """What one message of the stage did. ``kind``: ``continue`` (more pages: the engine sends
    the next message, to the OCR queue when ``ocr``), ``done`` (the version is stored, or there
    is nothing to parse: ``output`` says which), ``failed`` (the file's fault; ``message`` names
    the cause; nothing was kept), ``gone`` (the family was deleted: the run goes with it)."""
    kind: str
    message: str
    state: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] | None = None
    ocr: bool = False
    send: list[tuple[dict[str, Any], str | None, int]] = field(default_factory=list)   # fanout.py's range messages
    delay: int = 0                 # seconds before the next message (a fanned-out run's next look)


def new_state(run: str) -> dict[str, Any]:
    """The state of a parse run before its first message (``run``: unique per run, e.g. the
    execution's id). It rides on the execution (``metadata.progress``, at most a few hundred
    bytes: pages done of pages); the list of parts is in S3 (``_index``)."""
    return {'run': run, 'nextPage': 1, 'pagesDone': 0, 'pagesRead': 0, 'pageCount': None}


__all__ = ['Slice', 'derived_id', 'in_ocr_function', 'new_state', 'ocr_function', 'ocr_here', 'ocr_queue',
           'run_slice']


def run_slice(family_id: str, state: dict[str, Any], *, principal: Principal, deadline: float | None,
              ocr: bool | None = None, wake: dict[str, Any] | None = None) -> Slice:
    """One message of the parse stage (module docstring). ``deadline``: a ``time.monotonic()``
    instant the readers must stop by (the engine's attempt box); ``principal`` writes the version
    (the platform's service principal). Transient failures (S3, the table) raise: the engine
    retries the message. ``wake``: the message that runs this step again; given, a big PDF is
    read in parallel page ranges (fanout.py), and a run so planned is looked at, and assembled,
    here."""
    readers = _readers()
    family = table.get(FAMILIES.path, family_id)
    if family is None:
        return Slice('gone', 'the document family no longer exists', state)
    state = {**new_state(str(state.get('run') or uuid.uuid4())), **state}
    if not family.data.get('storageKey'):
        return Slice('done', 'nothing to parse: the family has no uploaded content', state,
                     output={'parsed': False, 'reason': 'no content'})
    if state.get('fanout'):
        return _look(family, state, principal)
    run, first = str(state['run']), int(state['nextPage'])
    data = blobs.read(family.data['storageKey'])
    media_type = str(family.data.get('contentType') or documents.DEFAULT_MIME)
    if wake is not None and first == 1 and not state.get('pagesDone'):
        try:
            planned = _plan(family, state, data, media_type, wake)
        except readers.ParseFailure as exc:
            del data
            _discard(family, state)
            return Slice('failed', f"{getattr(exc, 'cause', None) or 'unreadable'}: {exc}"[:900], state)
        if planned is not None:
            return planned
    ends = (deadline if deadline is not None else time.monotonic() + 20.0) - SLICE_RESERVE_SECONDS
    try:
        result = readers.read(data, media_type=media_type, filename=str(family.data.get('path') or ''),
                              first_page=first, deadline=ends,
                              ocr=ocr_here() if ocr is None else ocr,
                              text_chars_before=int(state.get('textChars') or 0))
    except readers.NoParser as exc:
        return Slice('done', f'{exc}: the document is kept as uploaded and the pipelines run on its metadata'[:500],
                     state, output={'parsed': False, 'reason': str(exc)[:300]})
    except readers.NeedsOcr as exc:
        page = int(getattr(exc, 'page', first) or first)
        if _in_ocr_function.get() or not _ocr_queue():
            _discard(family, state)   # nowhere to hand it over to
            return Slice('failed', f'ocr-unavailable: page {page} has no text layer and no OCR runs here '
                                   '(OCR_QUEUE_NAME is empty and Tesseract is missing)', state)
        state = {**state, 'nextPage': page}
        return Slice('continue', f'page {page} needs OCR: continued where Tesseract runs', state, ocr=True)
    except readers.ParseFailure as exc:
        _discard(family, state)
        cause = getattr(exc, 'cause', None) or 'unreadable'
        return Slice('failed', f'{cause}: {exc}'[:900], state)
    finally:
        del data
    nodes = list(result.nodes)
    root, page_nodes = _split_root(nodes)
    last = max((int(result.next_page) - 1) if result.next_page else int(result.page_count or first), first)
    index = _index(family, run)
    if root is not None and index.get('root') is None:
        index['root'] = root
    if page_nodes or not index['parts']:
        size = deltas.put_part(deltas.part_key(family, run, first), page_nodes)
        # a message delivered again re-reads from the same first page: what it wrote before goes
        index['parts'] = [p for p in index['parts'] if int(p[0]) < first] + [[first, last, len(page_nodes), size]]
    if result.warnings:
        index['warnings'] = [*index.get('warnings', []), *(str(w)[:300] for w in result.warnings)][:20]
    total_nodes = sum(int(p[2]) for p in index['parts'])
    total_bytes = sum(int(p[3]) for p in index['parts'])
    if total_nodes > deltas.MAX_PARSED_NODES or total_bytes > deltas.MAX_PARSED_BYTES:
        _discard(family, state)
        return Slice('failed', f'caps: the parsed document would hold more than {deltas.MAX_PARSED_NODES} nodes '
                               f'or {deltas.MAX_PARSED_BYTES} bytes (pages 1-{last} hold {total_nodes} nodes)', state)
    state.update(pageCount=result.page_count, pagesDone=last, pagesRead=last, parser=result.parser,
                 mediaType=result.media_type,
                 textChars=int(state.get('textChars') or 0) + int(getattr(result, 'text_chars', 0) or 0))
    if result.next_page:
        _save_index(family, run, index)
        state['nextPage'] = int(result.next_page)
        return Slice('continue', f'pages {first}-{last} of {result.page_count} read', state)
    return _finish(family, state, index, principal)


def _plan(family: Stored, state: dict[str, Any], data: bytes, media_type: str, wake: dict[str, Any]) -> Slice | None:
    """A PDF over one range of its reader: its page ranges queued (fanout.py), the step waits."""
    from chalicelib.features.parsing import fanout  # noqa: PLC0415 - small; the stage's first message only
    _, limits = fanout.settings()
    survey = _readers().survey(data, media_type=media_type, filename=str(family.data.get('path') or ''),
                               limits=limits)
    planned = fanout.plan(family.id, state, survey, wake) if survey is not None else None
    if planned is None:
        return None
    state, messages = planned
    plan = state['fanout']
    log.info('document split into page ranges', extra={'family': family.id, 'pages': plan['pageCount'],
                                                        'ranges': plan['ranges'], 'size': plan['size']})
    return Slice('continue', f"{plan['pageCount']} pages split into {plan['ranges']} ranges of {plan['size']} "
                             f"pages ({len(messages)} queued)", state, send=messages,
                 delay=fanout.settings()[0].look_after(0))


def _look(family: Stored, state: dict[str, Any], principal: Principal) -> Slice:
    """A fanned-out run: its ranges' progress, its failure, or its assembly (fanout.check)."""
    from chalicelib.features.parsing import fanout  # noqa: PLC0415 - small
    what, state, found = fanout.check(family, state)
    if what == 'failed':
        _discard(family, state)
        return Slice('failed', str(found)[:900], state)
    if what == 'waiting':
        looks = int(state.get('looks') or 0) + 1
        return Slice('continue', str(found), {**state, 'looks': looks}, delay=fanout.settings()[0].look_after(looks))
    return _finish(family, state, found, principal)


def _index_key(family: Stored, run: str) -> str:
    return f'{documents.family_folder(family.org, family.id)}parsed/{run}/index.json'


def _index(family: Stored, run: str) -> dict[str, Any]:
    """The run's parts so far ``{root, parts: [[first, last, nodes, bytes]], warnings}`` (S3: it
    grows with the page count, the execution item must not)."""
    if blobs.head(_index_key(family, run)) is None:
        return {'root': None, 'parts': []}
    return json.loads(blobs.read(_index_key(family, run)))


def _save_index(family: Stored, run: str, index: dict[str, Any]) -> None:
    blobs.put(_index_key(family, run), json.dumps(index, separators=(',', ':')).encode(), 'application/json')


def _split_root(nodes: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The reader's root node (``document``, no parent), and the rest."""
    root = next((n for n in nodes if n.get('parentId') is None and n.get('nodeType') == 'document'), None)
    return root, [n for n in nodes if n is not root]


def derived_id(run: str) -> str:
    return str(uuid.uuid5(NAMESPACE, run))


def _finish(family: Stored, state: dict[str, Any], index: dict[str, Any], principal: Principal) -> Slice:
    run = str(state['run'])
    co_id = derived_id(run)
    parts = [{'key': deltas.part_key(family, run, int(p[0])), 'first': int(p[0]), 'last': int(p[1]),
              'nodes': int(p[2]), 'bytes': int(p[3])} for p in index['parts']]
    root = dict(index.get('root') or {'id': 'doc', 'parentId': None, 'nodeType': 'document', 'content': None,
                                      'index': 0, 'features': {}})
    state = {**state, 'warnings': index.get('warnings') or []}
    root['features'] = {**(root.get('features') or {}), 'mediaType': state.get('mediaType'),
                        'pageCount': state.get('pageCount'), 'parser': state.get('parser')}
    nodes = 1 + sum(p['nodes'] for p in parts)
    size = sum(p['bytes'] for p in parts)
    for attempt in range(FINISH_ATTEMPTS):
        if table.get(CONTENT_OBJECTS.path, co_id) is not None:   # a redelivered finish: already stored
            return _done(state, co_id, family, nodes, size, again=True)
        # a family's first version has no parse result to replace: no index read (16 Queries)
        previous = _derived_objects(family) if family.data.get('documentVersion') else []

        def ops(version: int, family: Stored = family, previous: list[Stored] = previous) -> list:
            values = {'documentFamilyId': family.id, 'name': f"{str(family.data.get('path') or 'document')[-180:]}"
                                                               '.kddb',
                      'contentType': DOCUMENT_CONTENT_TYPE, 'index': 1, 'size': size, 'mixins': [],
                      'docTransitionType': 'DERIVED', 'sourceContentObjectId': family.data.get('contentObjectId'),
                      'documentVersion': str(version), 'storeRef': family.data.get('documentStoreId'),
                      'metadata': {'step': PARSER_NAME, 'parser': state.get('parser'),
                                   'mediaType': state.get('mediaType'), 'pageCount': state.get('pageCount'),
                                   'nodeCount': nodes, 'run': run},
                      'contentMetadata': {}, 'source': {}, 'created': clock.now_iso(), 'modified': clock.now_iso()}
            record = records.new_record(CONTENT_OBJECTS, values, principal=principal, org=family.org,
                                        project_id=family.data.get('projectId'), id_=co_id)
            out = records.create_ops(CONTENT_OBJECTS, [record], principal)
            for old in previous:   # the parse's earlier result is replaced, not stacked
                out += records.delete_ops(CONTENT_OBJECTS, old, principal)
            return out + _parsed_event(family, version, state, principal)
        try:
            version = deltas.save_parts(family, root, parts, principal, ops)
            return _done(state, co_id, family, nodes, size, version=version)
        except (deltas.Stale, WriteConflict):
            fresh = table.get(FAMILIES.path, family.id)
            if fresh is None:
                _discard(family, state)
                return Slice('gone', 'the document family was deleted while it was parsed', state)
            family = fresh
            time.sleep(min(0.05 * 2 ** attempt, 1.0))
        except BadRequest as exc:   # over the parsed-document caps
            _discard(family, state)
            return Slice('failed', f'caps: {exc.message}', state)
    raise deltas.Stale()   # the engine retries the message (a transient conflict)


def _parsed_event(family: Stored, version: int, state: dict[str, Any], principal: Principal) -> list:
    """``document-families.parsed``: reading ended and the document is stored (docs/api/processing.md
    "The parse stage"), in the version's own transaction: published once per run, as the version
    is written once. Besides the domain event's fields, ``parse``: ``{documentVersion, pageCount,
    pagesRead, ranges (1 for a document read in one chain), parser}``."""
    from chalicelib.kernel.store.outbox import outbox_op  # noqa: PLC0415 - small; the finishing write only
    event = records.domain_event(FAMILIES, 'parsed', [{**family.data, 'documentVersion': version}], principal,
                                 ['documentVersion'])
    if event is None:
        return []
    fan = state.get('fanout') or {}
    event['parse'] = {'documentVersion': version, 'pageCount': state.get('pageCount'),
                      'pagesRead': state.get('pagesRead') or state.get('pagesDone'),
                      'ranges': int(fan.get('ranges') or 1), 'parser': state.get('parser')}
    return [outbox_op(event)]


def _done(state: dict[str, Any], co_id: str, family: Stored, nodes: int, size: int, *, version: int | None = None,
          again: bool = False) -> Slice:
    output = {'parsed': True, 'parser': state.get('parser'), 'mediaType': state.get('mediaType'),
              'pageCount': state.get('pageCount'), 'nodeCount': nodes, 'bytes': size,
              'contentObjectId': co_id}
    if version is not None:
        output['documentVersion'] = version
    if state.get('warnings'):
        output['warnings'] = state['warnings']
    text = (f"parsed by {state.get('parser')}: {state.get('pageCount')} pages, {nodes} nodes"
            + (f', document version {version}' if version is not None else ' (stored by an earlier delivery)'))
    log.info('document parsed', extra={'family': family.id, 'nodes': nodes, 'bytes': size, 'again': again})
    return Slice('done', text, state, output=output)


def _derived_objects(family: Stored) -> list[Stored]:
    """The family's content objects an earlier parse wrote (lineage DERIVED, metadata.step parse)."""
    ids = [i for _, i in table.walk_value(CONTENT_OBJECTS.path, family.org,
                                          slot=CONTENT_OBJECTS.slot_of('documentFamilyId'),
                                          field_name='documentFamilyId', value=family.id, descending=False,
                                          limit=None)]
    found = table.batch_get((CONTENT_OBJECTS.path, i) for i in ids)
    return [s for s in found.values() if s.data.get('docTransitionType') == 'DERIVED'
            and (s.data.get('metadata') or {}).get('step') == PARSER_NAME]


def _discard(family: Stored, state: dict[str, Any]) -> None:
    """A failed run's parts and index: nothing references them; deleted (the family's delete
    sweeps any that a failure here leaves)."""
    try:
        blobs.delete_prefix(f"{documents.family_folder(family.org, family.id)}parsed/{state.get('run')}/")
    except Exception:  # noqa: BLE001 - unreferenced parts are harmless; the family's folder sweep removes them
        log.warning('parts of a failed parse of family %s were not deleted now', family.id, exc_info=True)
