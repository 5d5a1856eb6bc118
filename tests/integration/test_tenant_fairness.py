"""One organization's burst does not starve another, on the real local server (issue 50;
docs/operations/worker.md "Fairness between organizations"): organization B's 2-page invoice
reaches its **extracted data** (its data objects readable through the store's data API, as a
client reads them: docs/api/extraction.md) within 2x its time on an idle platform while
organization A's burst of small text documents is being processed. B's project has an assistant
whose pipeline runs an EXTRACT step with the invoice definition of tests/extraction_corpus.py
(parse stage, pipeline start, extraction: five messages in a row on the activity queue); A's
documents go to a project WITHOUT an assistant (each is parsed: two messages), so every one of
B's messages has a backlog of A's ahead of it in the queue's arrival order.

B is uploaded right after A's last upload (A's created events still being read by the table
stream, A's parse triggers and steps in the queue: the upload's own trigger and the fair
pollers carry B past them). The idle time is measured first, on the same server, once the
warm-up's events are published (``settle``). `make test`
runs a burst of ``BURST`` (35) documents; `make load-fairness` the issue's 200
(``FAIRNESS_BURST=200``, bench/README.md "Tenant fairness (issue 50)").

The helpers are shared with bench/bench_tenant_fairness.py. Every target is 127.0.0.1."""
from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from urllib.parse import quote

import pytest
from urllib3 import encode_multipart_formdata

from tests import extraction_corpus
from tests.integration.test_extraction_local import assistant_place
from tests.live import LiveStack

BURST = int(os.environ.get('FAIRNESS_BURST') or 35)
UPLOAD_THREADS = 8
WITHIN_FACTOR = 2.0
SLACK_SECONDS = 1.0    # the poll interval of the wait (0.2 s) and of the local pollers (0.2 s), twice


def invoice() -> bytes:
    """B's 2-page invoice (tests/extraction_corpus.py: 45 line items run over two pages)."""
    return extraction_corpus.invoice_pdf(extraction_corpus.invoice_values(items=extraction_corpus.many_items(45)))


def place(live: LiveStack, slug: str | None) -> dict:
    """An organization (the default one for None) with a project and a document store: A's."""
    if slug is None:
        org = next(o for o in live.get('/api/organizations').body['content'] if o.get('slug') == 'default')
    else:
        org = live.created('/api/organizations', {'name': slug, 'slug': slug})
    project = live.created('/api/projects', {'name': f'fair-{uuid.uuid4().hex[:6]}', 'organizationId': org['id']})
    store = live.created('/api/document-stores', {'projectId': project['id'], 'name': 'inbox',
                                                  'slug': f'inbox-{uuid.uuid4().hex[:8]}'})
    return {'org': org, 'project': project, 'inbox': store}


def extracting_place(live: LiveStack, slug: str) -> dict:
    """A new organization whose project's assistant extracts what lands in its inbox with the
    invoice definition into a data store (tests/integration/test_extraction_local.py's
    ``assistant_place``, in an organization of its own): B's."""
    org = live.created('/api/organizations', {'name': slug, 'slug': slug})
    made = assistant_place(live, {'taxons': extraction_corpus.invoice_definition()}, 'invoice', org=org)
    return {'org': org, 'project': made['project'], 'inbox': made['inbox'], 'data': made['base']}


def upload(live: LiveStack, where: dict, name: str, data: bytes, media_type: str) -> dict:
    body, content_type = encode_multipart_formdata({'file': (name, data, media_type)})
    answer = live.call('POST', f"/api/stores/{where['org']['slug']}/{where['inbox']['slug']}/fs?path=in/{name}",
                       raw=body, content_type=content_type)
    assert answer.status == 201, answer
    return answer.body


def parsed(live: LiveStack, family_id: str) -> bool:
    return live.get(f'/api/document-families/{family_id}/document').body['version'] >= 1


def extracted(live: LiveStack, where: dict, family_id: str) -> bool:
    """The family's extracted data readable (its invoice object in the data store)."""
    page = live.get(f"{where['data']}/dataObjects?pageSize=1&path=invoice&documentFamilyId={family_id}").body
    return bool(page.get('content'))


def _epoch(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso.replace('Z', '+00:00')).timestamp() if iso else None


def stages(live: LiveStack, family_id: str, began: float) -> dict:
    """Where B's time went, from the family's executions (their server-side timestamps, read once
    B is done: no polling beside the measured path), in seconds from the upload's request: the
    parse stage's run created (``stagesCreated``) and ended (``parsed``), the assistant's run
    created (``pipelineCreated``) and ended (``extractionEnded``)."""
    page = live.get('/api/executions?pageSize=20&filter=' + quote(f"documentFamilyId == '{family_id}'")).body
    out: dict[str, float | None] = {}
    for execution in page.get('content') or []:
        which = 'pipeline' if execution.get('assistantId') else 'stages'
        created, ended = _epoch(execution.get('createdOn')), _epoch(execution.get('endDate'))
        out[f'{which}Created'] = round(created - began, 2) if created else None
        out['extractionEnded' if which == 'pipeline' else 'parsed'] = round(ended - began, 2) if ended else None
    return out


def time_to_extract(live: LiveStack, where: dict, name: str, data: bytes, limit: float) -> dict:
    """Upload ``data`` to ``where``'s inbox and wait until its extracted data is readable:
    ``seconds`` from the upload's request to it (None past ``limit``), ``uploaded`` (the upload
    answered), and the stages between (``stages``)."""
    began_wall, started = time.time(), time.monotonic()
    family = upload(live, where, name, data, 'application/pdf')
    out: dict = {'uploaded': round(time.monotonic() - started, 2), 'seconds': None, 'family': family['id']}
    while time.monotonic() - started < limit:
        if extracted(live, where, family['id']):
            out['seconds'] = time.monotonic() - started
            break
        time.sleep(0.2)
    out.update(stages(live, family['id'], began_wall))
    return out


def burst(live: LiveStack, where: dict, count: int) -> list[dict]:
    """``count`` small text documents uploaded at once (UPLOAD_THREADS at a time)."""
    def one(n: int) -> dict:
        return upload(live, where, f'a-{n:04d}.txt', f'Document {n} of the burst\nline two\n'.encode(),
                      'text/plain')
    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        return list(pool.map(one, range(count)))


def queued(live: LiveStack, families: list[dict], limit: float) -> float | None:
    """Wait until the table stream has published the families' created events: the seconds it
    took (None past ``limit``)."""
    wanted = {f['id'] for f in families}
    started = time.monotonic()
    flt = quote("eventType=='document-families.created'")
    while time.monotonic() - started < limit:
        seen: set[str] = set()
        for page in range((len(wanted) + 150) // 100 + 1):   # pages count from 0
            body = live.get(f'/api/events?filter={flt}&sort=createdOn:desc&pageSize=100&page={page}').body
            for event in body.get('content') or []:
                payload = event.get('payload') or {}
                seen.update(payload.get('resourceIds') or [payload.get('resourceId')])
            if not body.get('content'):
                break
        if wanted <= seen:
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def settle(live: LiveStack, quiet: float = 2.0, limit: float = 30.0) -> None:
    """Wait until the platform is idle: no event published for ``quiet`` seconds (the stream
    drain's idle poll, 0.5 s, plus its batching window, up to 1 s, fit in it). After the warm-up,
    the stream is still publishing its document's events (~60: its data objects, executions...)
    for a second or two; an "idle" run measured meanwhile shares moto with them."""
    started = last_change = time.monotonic()
    newest = None
    while time.monotonic() - started < limit:
        page = live.get('/api/events?pageSize=1&sort=createdOn:desc').body.get('content') or []
        now = time.monotonic()
        if (page[0]['id'] if page else None) != newest:
            newest, last_change = (page[0]['id'] if page else None), now
        elif now - last_change >= quiet:
            return
        time.sleep(0.25)


def unparsed(live: LiveStack, families: list[dict]) -> int:
    return sum(1 for f in families if not parsed(live, f['id']))


@pytest.fixture(scope='module')
def live(tmp_path_factory):
    stack = LiveStack(tmp_path_factory.mktemp('fairness'))
    yield stack
    stack.stop()


def test_a_burst_of_one_organization_does_not_starve_another(live):
    a, b = place(live, None), extracting_place(live, f'fair-b-{uuid.uuid4().hex[:6]}')
    pdf = invoice()
    assert time_to_extract(live, b, 'warm.pdf', pdf, 60)['seconds'] is not None   # the readers loaded once
    settle(live)
    idle = time_to_extract(live, b, 'idle.pdf', pdf, 60)
    assert idle['seconds'] is not None, ''.join(live.output[-30:])
    families = burst(live, a, BURST)
    limit = WITHIN_FACTOR * idle['seconds'] + SLACK_SECONDS
    busy = time_to_extract(live, b, 'busy.pdf', pdf, limit)
    left = unparsed(live, families)
    print(f'B idle {idle}, behind A: {busy}, {left} of A unparsed')
    assert left > BURST // 4, f'only {left} of the burst left: B did not run beside it'
    assert busy['seconds'] is not None, \
        f'B not extracted within {limit:.1f} s (idle: {idle}) behind {left} of A: {busy}'
