"""The store file API of the platform's SDK and CLI through HTTP (in-process moto):
GET /api/stores/{orgSlug}/{storeSlug}, and POST / GET / DELETE .../[{version}/]fs?path=.
tests/integration/test_sdk_client.py drives the same routes with the real SDK and CLI."""
from __future__ import annotations

import uuid
from urllib.parse import unquote, urlsplit

import pytest
from urllib3 import encode_multipart_formdata

from tests.conftest import make_org, make_user
from tests.support import create


def _slug() -> str:
    return f'store-{uuid.uuid4().hex[:8]}'


@pytest.fixture
def store(api, org_id, bucket):
    return create(api, 'document-stores', org_id, slug=_slug(), name='Invoices')


def _form(fields: dict, file: bytes | None = b'%PDF-1.4 hello', filename='a.pdf', mime='application/pdf'):
    parts = dict(fields)
    if file is not None:
        parts['file'] = (filename, file, mime) if mime else (filename, file)
    body, content_type = encode_multipart_formdata(parts)
    return body, {'content-type': content_type}


def _upload(api, base, path, data=b'%PDF-1.4 hello', fields=None, **kw):
    body, headers = _form(fields or {}, data, **kw)
    return api.call('POST', f'{base}/fs?path={path}', raw=body, headers=headers)


def _bytes_at(api, bucket, url):
    """Follow the 307 the way the SDK's requests session does, reading the object from moto."""
    from chalicelib.core.config import get_config
    r = api.get(url)
    assert r.status == 307, (r.status, r.json)
    location = urlsplit(r.headers['location'])
    assert get_config().bucket_name in r.headers['location'] and 'X-Amz-Expires=300' in location.query
    key = unquote(location.path.lstrip('/')).removeprefix(get_config().bucket_name + '/')
    return bucket.get_object(Bucket=get_config().bucket_name, Key=key)['Body'].read()


def test_the_store_by_org_slug_carries_what_the_sdk_reads(api, store):
    r = api.get(f"/api/stores/default/{store['slug']}")
    assert r.status == 200, r.json
    assert r.json['type'] == 'store' and r.json['storeType'] == 'DOCUMENT'
    assert r.json['slug'] == store['slug'] and r.json['orgSlug'] == 'default'
    assert r.json['id'] == store['id'] and r.json['name'] == 'Invoices'
    assert api.get('/api/stores/default/no-such-store').status == 404
    missing = api.get(f"/api/stores/no-such-org-{uuid.uuid4().hex[:6]}/{store['slug']}")
    assert missing.status == 404 and set(missing.json) == {'error', 'message', 'status'}


def test_upload_read_back_and_delete_through_both_url_forms(api, store, bucket):
    base = f"/api/stores/default/{store['slug']}"
    data = bytes(range(256)) * 40
    r = _upload(api, f'{base}/None', '/scans/2026/./a.pdf', data,
                fields={'externalData': '{"po": "4711"}', 'source': 'cli'})
    assert r.status == 201, r.json
    family = r.json
    assert family['path'] == 'scans/2026/a.pdf' and family['size'] == len(data)
    assert family['documentStoreId'] == store['id'] and family['contentType'] == 'application/pdf'
    assert family['metadata'] == {'externalData': '{"po": "4711"}', 'source': 'cli'}
    assert family['labels'] == [] and family['locked'] is False
    for url in (f'{base}/fs?path=scans/2026/a.pdf', f'{base}/None/fs?path=/scans/2026/a.pdf',
                f'{base}/1.0.0/fs?path=scans\\2026\\a.pdf'):
        assert _bytes_at(api, bucket, url) == data
    meta = api.get(f'{base}/None/fs?path=scans/2026/a.pdf&meta=true')
    assert meta.status == 200 and meta.json['id'] == family['id']
    assert api.get(f"/api/document-families/{family['id']}").json['metadata']['source'] == 'cli'

    assert api.delete(f'{base}/None/fs?path=scans/2026/a.pdf').status == 204
    assert api.get(f'{base}/fs?path=scans/2026/a.pdf').status == 404
    assert api.get(f"/api/document-families/{family['id']}").status == 404
    assert api.delete(f'{base}/fs?path=scans/2026/a.pdf').status == 404


def test_a_path_answers_its_newest_family_and_delete_clears_the_path(api, store, bucket):
    base = f"/api/stores/default/{store['slug']}"
    first = _upload(api, base, 'same.txt', b'one', mime='text/plain').json
    second = _upload(api, base, 'same.txt', b'two', mime='text/plain').json
    assert first['id'] != second['id']
    assert _bytes_at(api, bucket, f'{base}/fs?path=same.txt') == b'two'
    # another store of the organization at the same path is not this store's file
    other = create(api, 'document-stores', store['organizationId'], slug=_slug())
    assert _upload(api, f"/api/stores/default/{other['slug']}", 'same.txt', b'other').status == 201
    assert api.delete(f'{base}/fs?path=same.txt').status == 204
    assert api.get(f'{base}/fs?path=same.txt').status == 404
    for family in (first, second):
        assert api.get(f"/api/document-families/{family['id']}").status == 404
    assert _bytes_at(api, bucket, f"/api/stores/default/{other['slug']}/fs?path=same.txt") == b'other'


def test_the_file_as_the_body_and_the_filename_as_the_default_path(api, store, bucket):
    base = f"/api/stores/default/{store['slug']}"
    raw = api.call('POST', f'{base}/fs?path=raw.bin', raw=b'\x00\x01raw',
                   headers={'content-type': 'application/octet-stream'})
    assert raw.status == 201 and raw.json['path'] == 'raw.bin' and raw.json['metadata'] == {}
    named = _upload(api, base, '', b'named', filename='letter.pdf')
    assert named.status == 201 and named.json['path'] == 'letter.pdf'
    assert _bytes_at(api, bucket, f'{base}/fs?path=letter.pdf') == b'named'


def test_bad_input_is_400(api, store):
    base = f"/api/stores/default/{store['slug']}"
    for r in (api.get(f'{base}/fs'), api.get(f'{base}/fs?path='), api.delete(f'{base}/None/fs'),
              api.get(f'{base}/fs?path=a/../b'), _upload(api, base, 'a/../b'),
              _upload(api, base, 'x.pdf', None, fields={'note': 'no file'}),
              _upload(api, base, 'x.pdf', b''),
              _upload(api, base, 'x.pdf', fields={'bad': b'\xff\xfe'}),
              api.call('POST', f'{base}/fs?path=x', raw=b'--x\r\n', headers={'content-type': 'multipart/form-data'})):
        assert r.status == 400, (r.status, r.json)
        assert set(r.json) == {'error', 'message', 'status'} and r.json['status'] == 400
    too_many = _upload(api, base, 'x.pdf', fields={f'f{i}': 'v' for i in range(101)})
    assert too_many.status == 400 and 'at most 100 fields' in too_many.json['message']


def test_slugs_held_by_several_projects_are_409_not_a_guess(api, org_id, bucket):
    slug = _slug()
    a = create(api, 'document-stores', org_id, slug=slug)
    b = create(api, 'document-stores', org_id, slug=slug)
    assert a['projectId'] != b['projectId']
    for r in (api.get(f'/api/stores/default/{slug}'), _upload(api, f'/api/stores/default/{slug}', 'x.pdf')):
        assert r.status == 409, r.json
        assert a['id'] in r.json['message'] and b['id'] in r.json['message']
    assert api.delete(f"/api/document-stores/{b['id']}").status == 204
    assert api.get(f'/api/stores/default/{slug}').json['id'] == a['id']


def test_another_organizations_store_is_404_and_viewers_read_only(api, org_id, store, users, bucket):
    other_org = make_org(api)
    theirs = create(api, 'document-stores', other_org['id'], slug=_slug())
    member = api.as_key(users['MEMBER'])
    for r in (member.get(f"/api/stores/{other_org['slug']}/{theirs['slug']}"),
              member.get(f"/api/stores/{other_org['slug']}/{theirs['slug']}/fs?path=a.pdf"),
              _upload(member, f"/api/stores/{other_org['slug']}/{theirs['slug']}", 'a.pdf'),
              member.delete(f"/api/stores/{other_org['slug']}/{theirs['slug']}/fs?path=a.pdf"),
              member.get(f"/api/stores/default/{theirs['slug']}")):
        assert r.status == 404, (r.status, r.json)
    # the same slug in the caller's organization and another's: each organization resolves its own
    _, outsider = make_user(api, other_org['id'], 'MEMBER')
    mine = create(api, 'document-stores', org_id, slug=theirs['slug'])
    assert member.get(f"/api/stores/default/{theirs['slug']}").json['id'] == mine['id']
    assert api.as_key(outsider).get(f"/api/stores/{other_org['slug']}/{theirs['slug']}").json['id'] == theirs['id']

    base = f"/api/stores/default/{store['slug']}"
    assert _upload(member, base, 'by-member.pdf').status == 201
    viewer = api.as_key(users['VIEWER'])
    assert viewer.get(f"/api/stores/default/{store['slug']}").status == 200
    assert viewer.get(f'{base}/fs?path=by-member.pdf').status == 307
    assert viewer.get(f'{base}/fs?path=by-member.pdf&meta=true').status == 200
    denied = _upload(viewer, base, 'by-viewer.pdf')
    assert denied.status == 403 and set(denied.json) == {'error', 'message', 'status'}
    assert viewer.delete(f'{base}/fs?path=by-member.pdf').status == 403
    assert api.get(f'{base}/fs?path=by-viewer.pdf').status == 404
    assert api.as_key(None).get(f'{base}/fs?path=by-member.pdf').status == 401


def test_families_keyed_before_the_path_index_are_found_after_the_backfill(api, store, bucket):
    """A family written before `path` was indexed (counted, no path key): the backfill keys and
    counts that one slot, once."""
    from chalicelib.kernel.store.model import configure
    from chalicelib.kernel.store.table import counter_base_pk, entity_pk
    from chalicelib.ops.backfill_indexes import backfill
    base = f"/api/stores/default/{store['slug']}"
    families = [_upload(api, base, name, b'old').json for name in ('old.pdf', 'old.pdf', 'other.pdf')]
    model = configure()
    for family in families:   # as the code before the path index wrote them
        item = model.get(entity_pk('document-families', family['id']), '#')
        assert item.ixv is not None and item.x3 is not None
        item.update(actions=[model.x3.remove()])
    for counter in model.scan(model.pk.startswith('CNT')):   # every partition (kernel/store/table.py)
        if counter_base_pk(counter.pk).startswith(f"CNT#document-families#{store['organizationId']}#path="):
            counter.delete()
    assert api.get(f'{base}/fs?path=old.pdf&meta=true').status == 404

    first = backfill(page_size=7, out=lambda line: None)
    assert first['extended'] == 3 and first['keyed'] == 0
    assert api.get(f'{base}/fs?path=old.pdf&meta=true').json['id'] == families[1]['id']
    listed = api.get("/api/document-families?filter=path=='old.pdf'").json
    assert listed['totalElements'] == 2 and {f['id'] for f in listed['content']} == {f['id'] for f in families[:2]}
    again = backfill(page_size=7, out=lambda line: None)
    assert again['extended'] == 0 and api.get("/api/document-families?filter=path=='old.pdf'").json[
        'totalElements'] == 2
