"""Issue 24, finding 8 (docs/api/lifecycle.md "Multipart uploads"): a session that declares its
length cuts it into parts of a known size, each part URL signed for its exact length, and a
part of another length is refused at complete; a user holds at most MAX_OPEN_SESSIONS open
sessions per document store. (The real local server's version: tests/integration/
test_bounded_work_local.py.)"""
from __future__ import annotations

import urllib.parse

import pytest

from tests.api.test_documents_upload import MIB, _request, _upload_parts
from tests.conftest import make_user
from tests.invariants import table_invariants  # noqa: F401 - the checker fixture

pytestmark = pytest.mark.usefixtures('table_invariants')


@pytest.fixture
def store(api, org_id, bucket):
    from tests.support import create
    return create(api, 'document-stores', org_id)


def _signed(url: str) -> list[str]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)['X-Amz-SignedHeaders'][0].split(';')


def test_part_urls_of_a_declared_length_sign_each_parts_exact_length(api, store):
    length = 12 * MIB + 3
    session = _request(api, store, f'?contentLength={length}')
    assert (session['partSize'], session['partCount']) == (5 * MIB, 3)
    path = f"/api/document-stores/{store['id']}/multipart-upload-part-urls"
    parts = api.post(path, {**session, 'partNumbers': [1, 2, 3]}).json['parts']
    assert [p['size'] for p in parts] == [5 * MIB, 5 * MIB, 2 * MIB + 3]
    assert all('content-length' in _signed(p['url']) for p in parts)
    r = api.post(path, {**session, 'partNumbers': [4]})
    assert r.status == 400 and 'parts are 1 to 3' in r.json['message'], r.json
    sized = _request(api, store, f'?contentLength={length}&partSize={6 * MIB}')
    assert (sized['partSize'], sized['partCount']) == (6 * MIB, 3)
    for query in (f'?partSize={6 * MIB}', f'?contentLength=10&partSize={MIB}', '?contentLength=10&partSize=x'):
        r = api.post(f"/api/document-stores/{store['id']}/multipart-upload-request{query}")
        assert r.status == 400 and 'partSize' in r.json['message'], (query, r.json)
    # no declared length: URLs as before, not bound to a size
    free = _request(api, store)
    (part,) = api.post(path, {**free, 'partNumbers': [7]}).json['parts']
    assert 'size' not in part and 'content-length' not in _signed(part['url'])


def test_a_part_of_another_length_is_refused_at_complete_and_the_upload_aborted(api, store, bucket):
    session = _request(api, store, '?contentLength=16')
    parts = _upload_parts(bucket, session, [b'z' * MIB])
    done = f"/api/document-stores/{store['id']}/multipart-upload-complete"
    r = api.post(done, {**session, 'parts': parts})
    assert r.status == 400 and 'Part 1 holds 1048576 bytes' in r.json['message'], r.json
    assert api.post(done, {**session, 'parts': parts}).status == 400
    assert bucket.list_multipart_uploads(Bucket=_bucket_name()).get('Uploads') in (None, [])


def _bucket_name():
    from chalicelib.core.config import get_config
    return get_config().bucket_name


def test_open_upload_sessions_are_capped_per_store_and_user(api, store, org_id):
    from chalicelib.features.documents.service import MAX_OPEN_SESSIONS
    path = f"/api/document-stores/{store['id']}/multipart-upload-request"
    sessions = [_request(api, store) for _ in range(MAX_OPEN_SESSIONS)]
    r = api.post(path)
    assert r.status == 409 and f'{MAX_OPEN_SESSIONS} open upload sessions' in r.json['message'], r.json
    _, key = make_user(api, org_id, 'MEMBER')
    assert api.as_key(key).post(path).status == 200           # per user: another user is not affected
    aborted = api.post(f"/api/document-stores/{store['id']}/multipart-upload-abort", sessions[0])
    assert aborted.status in (200, 204), aborted.json
    assert api.post(path).status == 200                        # a slot was given back
    assert api.post(path).status == 409


def test_a_slot_taken_meanwhile_by_another_session_of_the_user_is_not_the_callers_problem(api, store, monkeypatch):
    """Two session requests of one user at once read the same free slot; the one whose write
    loses reads the slots again and takes the next (documents/service.py _hold_a_slot)."""
    from chalicelib.features.documents import uploads
    first = _request(api, store)
    real = uploads.held_slots
    calls = []

    def stale_once(store_id, user_id, *, now):
        calls.append(1)
        return {} if len(calls) == 1 else real(store_id, user_id, now=now)   # slot 0 looks free once
    monkeypatch.setattr(uploads, 'held_slots', stale_once)
    second = api.post(f"/api/document-stores/{store['id']}/multipart-upload-request")
    assert second.status == 200, second.json
    assert second.json['uploadId'] != first['uploadId'] and len(calls) == 2
    me = api.get('/api/account/me').json['id']
    assert len(real(store['id'], me, now=0)) == 2   # both sessions hold a slot
