"""Document families: documentStatus as a whole DocumentStatus of the family's project, and the
delete cascade (content objects, linked deltas, files)."""
from __future__ import annotations

import pytest

from tests.api.test_documents_upload import _objects
from tests.support import create


@pytest.fixture
def project(api, org_id):
    return create(api, 'projects', org_id)


def _status(api, project, slug, status_type='UNRESOLVED'):
    r = api.post('/api/document-statuses', {'projectId': project['id'], 'status': slug.title(), 'slug': slug,
                                            'statusType': status_type, 'color': '#112233', 'icon': 'flag'})
    assert r.status == 201, r.json
    return r.json


def test_document_status_by_id_or_slug_of_the_family_project(api, org_id, project):
    draft = _status(api, project, 'draft')
    done = _status(api, project, 'done', 'RESOLVED')
    other = _status(api, create(api, 'projects', org_id), 'draft')
    made = api.post('/api/document-families', {'projectId': project['id'], 'path': 'a.pdf',
                                               'documentStatus': {'id': draft['id']}})
    assert made.status == 201, made.json
    assert made.json['documentStatus'] == draft
    assert {'id', 'status', 'slug', 'color', 'icon', 'statusType'} <= set(made.json['documentStatus'])
    path = f"/api/document-families/{made.json['id']}"
    r = api.put(path, {'documentStatus': {'slug': 'done'}})
    assert r.status == 200 and r.json['documentStatus'] == done
    assert api.get(path).json['documentStatus'] == done
    for bad in ({'id': other['id']}, {'slug': 'nope'}, {'id': '00000000-0000-0000-0000-000000000000'}, {'x': 1}):
        r = api.put(path, {'documentStatus': bad})
        assert r.status == 400 and 'documentStatus' in r.json['message'], (bad, r.json)
    r = api.post('/api/document-families', {'projectId': project['id'], 'documentStatus': {'id': other['id']}})
    assert r.status == 400
    assert api.put(path, api.get(path).json).status == 200   # a GET body sent back


def test_document_status_filters(api, project):
    draft = _status(api, project, 'draft')
    done = _status(api, project, 'done', 'RESOLVED')
    for status in (draft, done, done):
        assert api.post('/api/document-families', {'projectId': project['id'],
                                                   'documentStatus': {'id': status['id']}}).status == 201
    pin = f"projectId=='{project['id']}'"
    r = api.get(f"/api/document-families?filter={pin} and documentStatus.status=='Done'")
    assert r.status == 200 and r.json['totalElements'] == 2
    r = api.get(f"/api/document-families?filter={pin} and documentStatus.statusType=='UNRESOLVED'")
    assert r.json['totalElements'] == 1
    r = api.get(f"/api/document-families?filter=documentStatus.id=='{done['id']}'")
    assert r.json['totalElements'] == 2


def test_an_upload_starts_in_the_project_unresolved_status(api, project, bucket):  # noqa: F811
    _status(api, project, 'done', 'RESOLVED')
    new = _status(api, project, 'new')
    store = api.post('/api/document-stores', {'projectId': project['id'], 'name': 's'}).json
    r = api.call('POST', f"/api/document-stores/{store['id']}/upload", raw=b'data',
                 headers={'content-type': 'application/octet-stream'})
    assert r.status == 201 and r.json['documentStatus'] == new


def test_deleting_a_family_deletes_its_content_objects_deltas_and_files(api, project, bucket):  # noqa: F811
    store = api.post('/api/document-stores', {'projectId': project['id'], 'name': 's'}).json
    family = api.call('POST', f"/api/document-stores/{store['id']}/upload?path=x.txt", raw=b'data',
                      headers={'content-type': 'application/octet-stream'}).json
    keep = api.call('POST', f"/api/document-stores/{store['id']}/upload?path=y.txt", raw=b'other',
                    headers={'content-type': 'application/octet-stream'}).json
    fid = family['id']
    extra = api.post('/api/content-objects', {'projectId': project['id'], 'documentFamilyId': fid, 'index': 1})
    assert extra.status == 201
    saved = api.put(f'/api/document-families/{fid}/document',
                    {'version': 0, 'nodes': [{'id': 'root', 'nodeType': 'page'}]})
    assert saved.status == 200, saved.json
    delta = api.post('/api/linked-deltas', {'documentFamilyId': fid,
                                            'operations': [{'op': 'add', 'node': {'id': 'c', 'parentId': 'root'}}]})
    assert delta.status == 201, delta.json
    assert len(_objects(bucket)) == 4   # the two families' files, two document versions
    assert api.delete(f'/api/document-families/{fid}').status == 204
    assert api.get(f"/api/content-objects?filter=documentFamilyId=='{fid}'").json['totalElements'] == 0
    assert api.get(f"/api/linked-deltas?filter=documentFamilyId=='{fid}'").json['totalElements'] == 0
    assert api.get(f"/api/content-objects/{extra.json['id']}").status == 404
    assert _objects(bucket) == [keep['storageKey']]
    stats = api.get(f"/api/document-stores/{store['id']}/stats").json
    assert stats['documentFamilies'] == 1 and stats['bytes'] == 5
    assert api.get(f"/api/content-objects/{keep['contentObjectId']}").status == 200


def test_an_uploaded_family_keeps_its_size_and_upload_fields(api, project, bucket):  # noqa: F811
    store = api.post('/api/document-stores', {'projectId': project['id'], 'name': 's'}).json
    family = api.call('POST', f"/api/document-stores/{store['id']}/upload", raw=b'1234',
                      headers={'content-type': 'application/octet-stream'}).json
    r = api.put(f"/api/document-families/{family['id']}", {'size': 99, 'storageKey': 'elsewhere',
                                                         'contentType': 'text/html', 'path': 'renamed.bin'})
    assert r.status == 200
    assert (r.json['size'], r.json['storageKey'], r.json['contentType'], r.json['path']) == \
        (4, family['storageKey'], family['contentType'], 'renamed.bin')


def test_content_object_fields_keep_their_types(api, project):
    source = {'mime_type': 'application/pdf', 'original_filename': 'a.pdf', 'document_family_id': 'x',
              'last_modified': '2026', 'headers': {'X-A': '1'}}
    r = api.post('/api/content-objects', {'projectId': project['id'], 'source': source, 'size': 10, 'index': 2,
                                          'contentType': 1, 'mixins': ['spatial']})
    assert r.status == 201, r.json
    assert r.json['source'] == source
    assert (r.json['size'], r.json['index'], r.json['contentType'], r.json['mixins']) == (10, 2, 1, ['spatial'])
    r = api.post('/api/content-objects', {'projectId': project['id'], 'size': '10'})
    assert r.status == 400
