"""Big documents read in parallel page ranges (issue 50; docs/api/processing.md "The parse stage",
features/parsing/fanout.py), through the HTTP layer and the real worker path (tests/work_support.py:
the outbox stream and the queues driven with the payloads AWS sends), on a real 8-page PDF.

Small ranges keep it fast: 2 pages a range (4 ranges), 2 queued at once. The split document is
compared with the same file read without a split (a family of its own, through the same routes)
and with the readers' single read of the file in process."""
from __future__ import annotations

import dataclasses
import re
import time
import uuid
from pathlib import Path

import pytest

from chalicelib.features.documents import blobs, deltas
from chalicelib.features.parsing import readers
from chalicelib.features.parsing.readers import limits
from chalicelib.features.work import store as work_store
from tests import faults

PDF = (Path(__file__).resolve().parents[1] / 'fixtures' / 'documents' / 'lppl.pdf').read_bytes()
SMALL = limits.FanOut(text_range_pages=2, ocr_range_pages=2, in_flight=2, check_seconds=1, retry_seconds=1)


@pytest.fixture
def store(api, org_id, bucket):
    project = api.post('/api/projects', {'name': f'fan-{uuid.uuid4().hex[:6]}', 'organizationId': org_id}).json
    made = api.post('/api/document-stores', {'projectId': project['id'], 'name': 'inbox',
                                             'slug': f'inbox-{uuid.uuid4().hex[:8]}'})
    assert made.status == 201, made.json
    return made.json


@pytest.fixture
def sent(monkeypatch):
    """Every range message is delivered twice and each batch of them in reverse order, the last
    range's 3 s late (the stage looks at its ranges in between); the bodies of the range messages
    sent are recorded."""
    seen: list[dict] = []
    real = work_store.send_messages

    def send(messages, **kwargs):
        ranges = [(b, 3 if b.get('range') == 3 else d) for b, d in messages if b.get('type') == 'parse.range']
        seen.extend(b for b, _ in ranges)
        others = [(b, d) for b, d in messages if b.get('type') != 'parse.range']
        return real(others + [m for m in reversed(ranges) for _ in range(2)], **kwargs)

    monkeypatch.setattr(work_store, 'send_messages', send)
    return seen


def upload(api, store, path):
    r = api.post(f"/api/document-stores/{store['id']}/upload?path={path}", raw=PDF,
                 headers={'content-type': 'application/pdf'})
    assert r.status == 201, r.json
    return r.json


def settle(work, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        published = work.publish_outbox()
        received = work.drain(seconds=10)
        if not published and not received:
            return
    raise AssertionError('the outbox and the queues did not settle')


def parse_run(api, family_id):
    r = api.get(f"/api/executions?filter=documentFamilyId == '{family_id}'&pageSize=100")
    assert r.status == 200, r.json
    [run] = [e for e in r.json['content'] if (e.get('metadata') or {}).get('stage') == 'parse']
    return run


def parsed_events(api, family_id):
    r = api.get("/api/events?filter=eventType == 'document-families.parsed'&pageSize=100")
    assert r.status == 200, r.json
    return [e['payload'] for e in r.json['content'] if e['payload']['resourceId'] == family_id]


def part_of(page: int):
    """A rule: S3 PutObject of the part object starting at ``page`` (the range's pages)."""
    return lambda op, params: op == 'PutObject' and params['_path'].endswith(f'/{page:06d}.json')


def test_a_split_document_is_the_single_read_under_duplicates_reordering_and_a_range_failing_once(
        api, store, work, sent, monkeypatch):
    single = upload(api, store, 'big/single.pdf')   # 8 pages < 200: read without a split
    settle(work)
    assert sent == []
    monkeypatch.setattr(limits, 'FANOUT', SMALL)
    split = upload(api, store, 'big/split.pdf')
    failures = {'left': 1}

    def once(op, params):
        if part_of(5)(op, params) and failures['left']:
            failures['left'] -= 1
            return faults.error('InternalError')
        return None

    with faults.inject(once, clients=[blobs.client()], service='s3') as answered:
        settle(work)
    assert answered == ['PutObject'], 'the fault was injected once'
    # 4 ranges, each queued once by the stage or the range before it, range 3 once more (its retry)
    assert sorted((b['range'], b['try']) for b in sent) == [(0, 1), (1, 1), (2, 1), (2, 2), (3, 1)]
    run = parse_run(api, split['id'])
    assert run['status'] == 'SUCCEEDED', run['statusMessages']
    output = run['output']['parse']
    assert output['parsed'] is True and output['pageCount'] == 8 and output['parser'] == 'pdf-text'

    # the same nodes, ids, order and boxes as the same file read in one go
    one = api.get(f"/api/document-families/{single['id']}/document").json
    many = api.get(f"/api/document-families/{split['id']}/document").json
    assert many['nodes'] == one['nodes'] and len(many['nodes']) > 500
    whole = readers.read(PDF, media_type='application/pdf', filename='lppl.pdf', deadline=time.monotonic() + 60)
    assert many['nodes'] == deltas.ordered(whole.nodes)
    assert api.get(f"/api/document-families/{split['id']}/text").body == \
        api.get(f"/api/document-families/{single['id']}/text").body

    # progress: pagesRead of pageCount moved on the run's looks, from the split to the end
    lines = [m['message'] for m in run['statusMessages']]
    assert any('8 pages split into 4 ranges of 2 pages (2 queued)' in line for line in lines), lines
    read = [int(n) for line in lines for n in re.findall(r'(\d+) of 8 pages read', line)]
    assert read == sorted(read) and any(0 < n < 8 for n in read) and all(n < 8 for n in read), lines
    assert output['nodeCount'] == len(many['nodes'])
    # one event when reading ended, for each family
    [event] = parsed_events(api, split['id'])
    assert event['parse'] == {'documentVersion': output['documentVersion'], 'pageCount': 8, 'pagesRead': 8,
                              'ranges': 4, 'parser': 'pdf-text'}
    assert event['changedFields'] == ['documentVersion']
    assert [e['parse']['ranges'] for e in parsed_events(api, single['id'])] == [1]


def test_a_range_failing_for_good_fails_the_stage_with_its_reason(api, store, work, monkeypatch):
    monkeypatch.setattr(limits, 'FANOUT', dataclasses.replace(SMALL, retry_seconds=0))
    family = upload(api, store, 'big/broken.pdf')
    with faults.inject(lambda op, params: faults.error('InternalError') if part_of(3)(op, params) else None,
                       clients=[blobs.client()], service='s3') as answered:
        settle(work)
    assert answered == ['PutObject'] * 3   # range 2 tried 3 times, alone
    run = parse_run(api, family['id'])
    assert run['status'] == 'FAILED'
    assert re.search(r"range 2 of 4 \(pages 3-4\): pages 3-4 failed 3 times: ", run['statusMessages'][-1]['message'])
    after = api.get(f"/api/document-families/{family['id']}").json
    assert not after.get('documentVersion')   # nothing half-written
    assert parsed_events(api, family['id']) == []


def test_past_the_page_limit_a_clear_failure_and_no_range(api, store, work, sent, monkeypatch):
    monkeypatch.setattr(limits, 'FANOUT', SMALL)
    monkeypatch.setattr(limits, 'DEFAULT_LIMITS', limits.Limits(max_pages=6))
    family = upload(api, store, 'big/long.pdf')
    settle(work)
    run = parse_run(api, family['id'])
    assert run['status'] == 'FAILED'
    assert 'too-many-pages: the PDF has 8 pages, more than the limit max_pages (6) allows' in \
        run['statusMessages'][-1]['message']
    assert sent == []
