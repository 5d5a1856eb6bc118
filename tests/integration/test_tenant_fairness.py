"""One organization's burst does not starve another, on the real local server (issue 50;
docs/operations/worker.md "Fairness between organizations"): organization B's 2-page invoice is
parsed within 2x its time on an idle platform while organization A's burst of 200 small text
documents is being processed (B uploaded just after A queued them: their created events
published by the table stream, their parse triggers in the queue; most of A's still unparsed
when B's is done). The idle time is measured first, on the same server.

The helpers are shared with bench/bench_tenant_fairness.py. Every target is 127.0.0.1."""
from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from urllib3 import encode_multipart_formdata

from tests import extraction_corpus
from tests.live import LiveStack

BURST = 200
UPLOAD_THREADS = 8
WITHIN_FACTOR = 2.0
SLACK_SECONDS = 1.0    # the poll interval of the wait (0.2 s) and of the stream drain, twice


def invoice() -> bytes:
    """B's 2-page invoice (tests/extraction_corpus.py: 45 line items run over two pages)."""
    return extraction_corpus.invoice_pdf(extraction_corpus.invoice_values(items=extraction_corpus.many_items(45)))


def place(live: LiveStack, slug: str | None) -> tuple[dict, dict]:
    """An organization (the default one for None) with a project and a document store."""
    if slug is None:
        org = next(o for o in live.get('/api/organizations').body['content'] if o.get('slug') == 'default')
    else:
        org = live.created('/api/organizations', {'name': slug, 'slug': slug})
    project = live.created('/api/projects', {'name': f'fair-{uuid.uuid4().hex[:6]}', 'organizationId': org['id']})
    store = live.created('/api/document-stores', {'projectId': project['id'], 'name': 'inbox',
                                                  'slug': f'inbox-{uuid.uuid4().hex[:8]}'})
    return org, store


def upload(live: LiveStack, where: tuple[dict, dict], name: str, data: bytes, media_type: str) -> dict:
    org, store = where
    body, content_type = encode_multipart_formdata({'file': (name, data, media_type)})
    answer = live.call('POST', f"/api/stores/{org['slug']}/{store['slug']}/fs?path=in/{name}", raw=body,
                       content_type=content_type)
    assert answer.status == 201, answer
    return answer.body


def parsed(live: LiveStack, family_id: str) -> bool:
    return live.get(f'/api/document-families/{family_id}/document').body['version'] >= 1


def seconds_to_parse(live: LiveStack, where: tuple[dict, dict], name: str, data: bytes, limit: float) -> float | None:
    """Upload ``data`` and wait until its parsed document is there: the seconds from the upload's
    request to it (None past ``limit``)."""
    started = time.monotonic()
    family = upload(live, where, name, data, 'application/pdf')
    while time.monotonic() - started < limit:
        if parsed(live, family['id']):
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def burst(live: LiveStack, where: tuple[dict, dict], count: int) -> list[dict]:
    """``count`` small text documents uploaded at once (UPLOAD_THREADS at a time)."""
    def one(n: int) -> dict:
        return upload(live, where, f'a-{n:04d}.txt', f'Document {n} of the burst\nline two\n'.encode(),
                      'text/plain')
    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        return list(pool.map(one, range(count)))


def queued(live: LiveStack, families: list[dict], limit: float) -> float | None:
    """Wait until the table stream has published the families' created events (their parse
    triggers are then in the queue): the seconds it took (None past ``limit``)."""
    from urllib.parse import quote
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


def unparsed(live: LiveStack, families: list[dict]) -> int:
    return sum(1 for f in families if not parsed(live, f['id']))


@pytest.fixture(scope='module')
def live(tmp_path_factory):
    stack = LiveStack(tmp_path_factory.mktemp('fairness'))
    yield stack
    stack.stop()


def test_a_burst_of_one_organization_does_not_starve_another(live):
    a, b = place(live, None), place(live, f'fair-b-{uuid.uuid4().hex[:6]}')
    pdf = invoice()
    assert seconds_to_parse(live, b, 'warm.pdf', pdf, 60) is not None   # the readers loaded once
    idle = seconds_to_parse(live, b, 'idle.pdf', pdf, 60)
    assert idle is not None, ''.join(live.output[-30:])
    families = burst(live, a, BURST)
    # A has queued its 200: their triggers went through the table stream (whose lag behind an
    # upload burst is not what this measures: docs/operations/worker.md "Fairness between
    # organizations", left for the next step)
    assert queued(live, families, 300) is not None, 'the stream did not publish the burst in 300 s'
    limit = WITHIN_FACTOR * idle + SLACK_SECONDS
    busy = seconds_to_parse(live, b, 'busy.pdf', pdf, limit)
    left = unparsed(live, families)
    print(f'B idle {idle:.2f} s, behind A: {busy} s, {left} of A unparsed')
    assert left > BURST // 4, f'only {left} of the burst left: B did not run beside it'
    assert busy is not None, f'B not parsed within {limit:.1f} s (idle: {idle:.1f} s) behind {left} of A'
