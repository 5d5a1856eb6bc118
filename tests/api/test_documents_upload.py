"""Upload sessions, small uploads and the content link through HTTP (in-process moto). Parts are
uploaded with boto3 here; tests/integration/test_documents_local.py PUTs them to the presigned
URLs with plain HTTP against `make run`'s moto server."""
from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from tests import faults
from tests.support import create

MIB = 2 ** 20


@pytest.fixture
def store(api, org_id, bucket):
    return create(api, 'document-stores', org_id)


def _request(api, store, query=''):
    r = api.post(f"/api/document-stores/{store['id']}/multipart-upload-request{query}")
    assert r.status == 200, r.json
    return r.json


def _upload_parts(s3, session, chunks):
    from chalicelib.core.config import get_config
    parts = []
    for n, chunk in enumerate(chunks, 1):
        answer = s3.upload_part(Bucket=get_config().bucket_name, Key=session['storageKey'],
                                UploadId=session['uploadId'], PartNumber=n, Body=chunk)
        parts.append({'partNumber': n, 'etag': answer['ETag']})
    return parts


def _read_back(api, bucket, family):
    from chalicelib.core.config import get_config
    r = api.get(f"/api/document-families/{family['id']}/content")
    assert r.status == 307, r.json
    location = r.headers['location']
    assert get_config().bucket_name in location and 'X-Amz-Expires=300' in location
    return bucket.get_object(Bucket=get_config().bucket_name, Key=family['storageKey'])['Body'].read()


def _objects(bucket):
    from chalicelib.core.config import get_config
    return [o['Key'] for o in bucket.list_objects_v2(Bucket=get_config().bucket_name).get('Contents', [])]


def test_a_session_uploads_completes_and_reads_back(api, store, bucket):
    session = _request(api, store, '?path=/invoices/2026/../x.pdf'.replace('/../', '/'))
    assert set(session) == {'uploadId', 'storageKey', 'expiresAt'}
    assert store['organizationId'] in session['storageKey'] and store['id'] in session['storageKey']
    assert 'invoices' not in session['storageKey']
    urls = api.post(f"/api/document-stores/{store['id']}/multipart-upload-part-urls",
                    {**session, 'partNumbers': [1, 2, 3]})
    assert urls.status == 200, urls.json
    assert [p['partNumber'] for p in urls.json['parts']] == [1, 2, 3]
    assert all('partNumber=' in p['url'] and 'uploadId=' in p['url'] for p in urls.json['parts'])
    chunks = [b'a' * 5 * MIB, b'b' * 5 * MIB, b'tail']
    parts = _upload_parts(bucket, session, chunks)
    done = api.post(f"/api/document-stores/{store['id']}/multipart-upload-complete", {**session, 'parts': parts})
    assert done.status == 201, done.json
    family = done.json
    assert family['path'] == 'invoices/2026/x.pdf' and family['size'] == 10 * MIB + 4
    assert family['contentType'] == 'application/octet-stream'
    assert family['documentStoreId'] == store['id'] and family['storageKey'] == session['storageKey']
    content = api.get(f"/api/content-objects/{family['contentObjectId']}").json
    assert content['documentFamilyId'] == family['id'] and content['size'] == family['size']
    assert content['contentType'] == 0 and content['index'] == 0 and content['mixins'] == []
    assert content['source']['original_filename'] == 'x.pdf' and content['source']['mime_type']
    assert hashlib.sha256(_read_back(api, bucket, family)).digest() == hashlib.sha256(b''.join(chunks)).digest()
    # idempotent: the same complete again answers the same family, and only one exists
    again = api.post(f"/api/document-stores/{store['id']}/multipart-upload-complete", {**session, 'parts': parts})
    assert again.status == 201 and again.json['id'] == family['id']
    listed = api.get(f"/api/document-families?filter=documentStoreId=='{store['id']}'").json
    assert listed['totalElements'] == 1
    stats = api.get(f"/api/document-stores/{store['id']}/stats").json
    assert stats == {'documentStoreId': store['id'], 'documentFamilies': 1, 'bytes': 10 * MIB + 4}
    # a finished session takes no more part URLs and cannot be aborted
    assert api.post(f"/api/document-stores/{store['id']}/multipart-upload-part-urls",
                    {**session, 'partNumbers': [4]}).status == 400
    assert api.post(f"/api/document-stores/{store['id']}/multipart-upload-abort", session).status == 400


@pytest.mark.parametrize('query,word', [
    ('?contentLength=0', 'contentLength'), ('?contentLength=abc', 'contentLength'),
    ('?contentLength=-5', 'contentLength'), (f'?contentLength={6 * 2 ** 30}', 'contentLength'),
    ('?contentType=notamime', 'contentType'), ('?path=a/../../etc/passwd', 'path'), ('?path=%00x', 'path'),
])
def test_bad_request_parameters_are_400_naming_them(api, store, query, word):
    r = api.post(f"/api/document-stores/{store['id']}/multipart-upload-request{query}")
    assert r.status == 400 and word in r.json['message'], r.json


def test_defaults_and_a_generated_path(api, store, bucket):
    session = _request(api, store)
    parts = _upload_parts(bucket, session, [b'hello'])
    family = api.post(f"/api/document-stores/{store['id']}/multipart-upload-complete",
                      {**session, 'parts': parts}).json
    assert family['path'].startswith('upload-') and family['contentType'] == 'application/octet-stream'


def test_wrong_sessions_keys_etags_and_parts_are_400_and_leave_no_family(api, org_id, store, bucket):
    session = _request(api, store, '?contentType=text/plain&contentLength=5')
    base = f"/api/document-stores/{store['id']}"
    other_store = create(api, 'document-stores', org_id)
    parts = _upload_parts(bucket, session, [b'12345'])
    cases = [
        (base, {'uploadId': 'nope', 'storageKey': session['storageKey'], 'parts': parts}, 'No upload session'),
        (f"/api/document-stores/{other_store['id']}", {**session, 'parts': parts}, 'No upload session'),
        (base, {**session, 'storageKey': session['storageKey'] + 'x', 'parts': parts}, 'storageKey'),
        (base, {**session, 'parts': [{'partNumber': 1, 'etag': '"0123"'}]}, 'ETag'),
        (base, {**session, 'parts': [{'partNumber': 1}]}, 'etag'),
        (base, {**session, 'parts': [{'partNumber': 0, 'etag': 'x'}]}, 'partNumber'),
        (base, {**session, 'parts': [{'partNumber': 10001, 'etag': 'x'}]}, 'partNumber'),
        (base, {**session, 'parts': [{'partNumber': 2, 'etag': parts[0]['etag']}]}, 'ETag'),
        (base, {**session, 'parts': []}, 'parts'),
        (base, {'storageKey': session['storageKey'], 'parts': parts}, 'uploadId'),
    ]
    for path, body, word in cases:
        r = api.post(f'{path}/multipart-upload-complete', body)
        assert r.status == 400 and word in r.json['message'], (body, r.json)
    assert api.get("/api/document-families").json['totalElements'] == 0
    # after all that the session still completes (wrong parts give the claim back)
    done = api.post(f'{base}/multipart-upload-complete', {**session, 'parts': parts})
    assert done.status == 201 and done.json['size'] == 5 and done.json['contentType'] == 'text/plain'


def test_the_declared_length_is_checked(api, store, bucket):
    session = _request(api, store, '?contentLength=10')
    parts = _upload_parts(bucket, session, [b'short'])
    r = api.post(f"/api/document-stores/{store['id']}/multipart-upload-complete", {**session, 'parts': parts})
    assert r.status == 400 and 'contentLength' in r.json['message']
    assert _objects(bucket) == [] and api.get('/api/document-families').json['totalElements'] == 0


def test_part_urls_never_outlive_the_session_and_expired_sessions_are_refused(api, store, bucket, monkeypatch):
    from chalicelib.core import clock
    session = _request(api, store)
    expires = clock.parse_instant(session['expiresAt'])
    urls = api.post(f"/api/document-stores/{store['id']}/multipart-upload-part-urls",
                    {**session, 'partNumbers': [1]}).json
    expiry = int(urls['parts'][0]['url'].split('X-Amz-Expires=')[1].split('&')[0])
    assert 86_000 < expiry <= 86_400
    parts = _upload_parts(bucket, session, [b'late'])
    real_now = clock.now
    monkeypatch.setattr(clock, 'now', lambda: expires + dt.timedelta(seconds=1))
    for route, extra in (('part-urls', {'partNumbers': [1]}), ('complete', {'parts': parts})):
        r = api.post(f"/api/document-stores/{store['id']}/multipart-upload-{route}", {**session, **extra})
        assert r.status == 400 and 'expired' in r.json['message'], r.json
    monkeypatch.setattr(clock, 'now', lambda: expires - dt.timedelta(seconds=100))
    urls = api.post(f"/api/document-stores/{store['id']}/multipart-upload-part-urls",
                    {**session, 'partNumbers': [2]}).json
    assert int(urls['parts'][0]['url'].split('X-Amz-Expires=')[1].split('&')[0]) <= 100
    monkeypatch.setattr(clock, 'now', real_now)


def test_part_url_requests_are_checked(api, store):
    session = _request(api, store)
    path = f"/api/document-stores/{store['id']}/multipart-upload-part-urls"
    for numbers in ([], [0], [10001], [1, 1], ['1'], list(range(1, 1002)), None):
        r = api.post(path, {**session, 'partNumbers': numbers})
        assert r.status == 400 and 'partNumbers' in r.json['message'], (numbers, r.json)


def test_abort_ends_the_session(api, store, bucket):
    session = _request(api, store)
    parts = _upload_parts(bucket, session, [b'x'])
    base = f"/api/document-stores/{store['id']}"
    assert api.post(f'{base}/multipart-upload-abort', session).status == 204
    assert api.post(f'{base}/multipart-upload-abort', session).status == 204   # idempotent
    r = api.post(f'{base}/multipart-upload-complete', {**session, 'parts': parts})
    assert r.status == 400 and 'aborted' in r.json['message']
    from chalicelib.core.config import get_config
    assert bucket.list_multipart_uploads(Bucket=get_config().bucket_name).get('Uploads', []) == []


def test_another_users_session_is_not_theirs(api, org_id, store):
    from tests.conftest import make_user
    _, key = make_user(api, org_id, 'MEMBER')
    session = _request(api, store)
    r = api.as_key(key).post(f"/api/document-stores/{store['id']}/multipart-upload-abort", session)
    assert r.status == 400 and 'No upload session' in r.json['message']


def test_a_failing_table_at_complete_deletes_the_object_and_leaves_no_family(api, store, bucket, monkeypatch):
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('STORE_RETRY_BUDGET_SECONDS', '0.2')
    reset_config()
    get_config()   # read now: chalice's test client swaps os.environ during requests
    session = _request(api, store)
    parts = _upload_parts(bucket, session, [b'payload'])

    def rule(op, params):
        if op == 'TransactWriteItems' and faults.transaction_size(params) > 2:
            return faults.cancelled(*(['ThrottlingError'] + ['None'] * (faults.transaction_size(params) - 1)))
        return None
    with faults.inject(rule) as answered:
        r = api.post(f"/api/document-stores/{store['id']}/multipart-upload-complete", {**session, 'parts': parts})
    assert answered and r.status == 503, r.json
    assert api.get('/api/document-families').json['totalElements'] == 0
    assert api.get('/api/content-objects').json['totalElements'] == 0
    assert _objects(bucket) == []
    r = api.post(f"/api/document-stores/{store['id']}/multipart-upload-complete", {**session, 'parts': parts})
    assert r.status == 400   # the upload is gone with its object: start a new session


def test_an_upload_whose_write_landed_but_whose_answer_was_lost_is_done(api, store, bucket, monkeypatch):
    """The table kept failing after the family's transaction had landed (chaos run of cc4faf9:
    the object was deleted under a stored family): the family is read back, and the upload is
    done, its object kept."""
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('STORE_RETRY_BUDGET_SECONDS', '0.2')
    reset_config()
    get_config()   # read now: chalice's test client swaps os.environ during requests
    rule = faults.lands_then_lost(('TransactWriteItems',), when=lambda params: faults.transaction_size(params) > 2)
    with faults.inject(rule) as answered:
        r = api.call('POST', f"/api/document-stores/{store['id']}/upload?path=lost.bin", raw=b'payload',
                     headers={'content-type': 'application/octet-stream'})
    assert answered and r.status == 201, r.json
    assert api.get(f"/api/document-families/{r.json['id']}").status == 200
    assert _objects(bucket) == [r.json['storageKey']]
    assert _read_back(api, bucket, r.json) == b'payload'


def test_an_upload_the_table_cannot_confirm_keeps_its_object(api, store, bucket, monkeypatch):
    """Neither the write nor the read-back answers: whether the family exists is unknown, so the
    object is kept (a family never names an object that is gone) and the answer is 503."""
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('STORE_RETRY_BUDGET_SECONDS', '0.2')
    reset_config()
    get_config()
    seen: list[str] = []

    def rule(op, params):   # the write, then every read after it, unanswered
        if op == 'TransactWriteItems' or (seen and op in ('GetItem', 'BatchGetItem')):
            seen.append(op)
            return faults.timeout()
        return None
    with faults.inject(rule):
        r = api.call('POST', f"/api/document-stores/{store['id']}/upload?path=unknown.bin", raw=b'payload',
                     headers={'content-type': 'application/octet-stream'})
    assert r.status == 503 and 'GetItem' in seen, (r.json, seen)
    assert api.get('/api/document-families').json['totalElements'] == 0
    assert len(_objects(bucket)) == 1


def test_a_failing_s3_at_complete_leaves_the_session_usable(api, store, bucket):
    from chalicelib.features.documents import blobs
    session = _request(api, store)
    parts = _upload_parts(bucket, session, [b'payload'])
    with faults.inject(lambda op, params: faults.error('InternalError') if op == 'CompleteMultipartUpload' else None,
                       clients=[blobs.client()], service='s3') as answered:
        r = api.post(f"/api/document-stores/{store['id']}/multipart-upload-complete", {**session, 'parts': parts})
    assert answered and r.status == 503, r.json
    assert api.get('/api/document-families').json['totalElements'] == 0
    r = api.post(f"/api/document-stores/{store['id']}/multipart-upload-complete", {**session, 'parts': parts})
    assert r.status == 201


def test_small_uploads_raw_and_form(api, store, bucket):
    payload = bytes(range(256)) * 100
    r = api.call('POST', f"/api/document-stores/{store['id']}/upload?path=docs/raw.bin", raw=payload,
                 headers={'content-type': 'application/octet-stream'})
    assert r.status == 201, r.json
    assert r.json['size'] == len(payload) and r.json['path'] == 'docs/raw.bin'
    assert _read_back(api, bucket, r.json) == payload
    boundary = 'XyZ123'
    form = (f'--{boundary}\r\nContent-Disposition: form-data; name="other"\r\n\r\nignored\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="scan.pdf"\r\n'
            f'Content-Type: application/pdf\r\n\r\n').encode() + payload + f'\r\n--{boundary}--\r\n'.encode()
    r = api.call('POST', f"/api/document-stores/{store['id']}/upload", raw=form,
                 headers={'content-type': f'multipart/form-data; boundary={boundary}'})
    assert r.status == 201, r.json
    assert r.json['path'] == 'scan.pdf' and r.json['contentType'] == 'application/pdf'
    assert _read_back(api, bucket, r.json) == payload


def test_small_upload_limits(api, store, bucket):
    base = f"/api/document-stores/{store['id']}/upload"
    r = api.call('POST', base, raw=b'', headers={'content-type': 'application/octet-stream'})
    assert r.status == 400
    r = api.call('POST', base, raw=b'x' * (5 * MIB + 1), headers={'content-type': 'application/octet-stream'})
    assert r.status == 413
    r = api.call('POST', base, raw=b'--b\r\n\r\n', headers={'content-type': 'multipart/form-data; boundary=b'})
    assert r.status == 400
    assert _objects(bucket) == []


def test_content_of_a_family_without_a_file_is_404(api, org_id, bucket):
    family = create(api, 'document-families', org_id)
    r = api.get(f"/api/document-families/{family['id']}/content")
    assert r.status == 404


def test_a_viewer_cannot_upload(api, users, store):
    r = api.as_key(users['VIEWER']).post(f"/api/document-stores/{store['id']}/multipart-upload-request")
    assert r.status == 403
