"""Regression tests for what `make fuzz` (schemathesis over /v3/api-docs) found.

Each test names the finding: the request the fuzzer sent, what went wrong, what it must do now.
"""
from __future__ import annotations

import json

import pytest


def _project(api, org_id, **fields):
    r = api.post('/api/projects', {'organizationId': org_id, 'name': 'p', **fields})
    assert r.status == 201, r.json
    return r.json


# ----------------------------------------------------------------------------- store keys

def test_long_unique_value_is_stored_and_still_unique(api, org_id):
    """POST /api/projects with a 100 kB slug: the unique-value item's partition key passed
    DynamoDB's 2048-byte limit -> ValidationException -> 500. Long values are now keyed by
    their hash; uniqueness still holds."""
    slug = 's' * 5000
    first = api.post('/api/projects', {'organizationId': org_id, 'name': 'a', 'slug': slug})
    assert first.status == 201, first.json
    assert first.json['slug'] == slug
    again = api.post('/api/projects', {'organizationId': org_id, 'name': 'b', 'slug': slug})
    assert again.status == 409, again.json
    other = api.post('/api/projects', {'organizationId': org_id, 'name': 'c', 'slug': slug + 't'})
    assert other.status == 201, other.json
    # releasing on update and delete uses the same key
    renamed = api.put(f"/api/projects/{first.json['id']}", {'slug': 'short-slug'})
    assert renamed.status == 200, renamed.json
    reuse = api.post('/api/projects', {'organizationId': org_id, 'name': 'd', 'slug': slug})
    assert reuse.status == 201, reuse.json


def test_long_multibyte_name_fits_the_name_sort_key(api, org_id):
    """A name of 300 four-byte characters made a 1200-byte by_name sort key (limit 1024)."""
    name = '\U0001F600' * 400
    r = api.post('/api/projects', {'organizationId': org_id, 'name': name})
    assert r.status == 201, r.json
    listed = api.get('/api/projects?sort=name:desc&pageSize=100')
    assert listed.status == 200
    assert name in [p['name'] for p in listed.json['content']]


# ----------------------------------------------------------------------------- body values DynamoDB cannot hold

@pytest.mark.parametrize('metadata', [{'': 1}, {'a': {'': None}}, {'a': [{'': {}}]}])
def test_empty_object_key_is_400(api, org_id, metadata):
    """An empty key inside a free-form object: DynamoDB refuses empty attribute names (moto
    silently flattened the map, and the item then broke every read of the list: 500)."""
    r = api.post('/api/projects', {'organizationId': org_id, 'name': 'p', 'metadata': metadata,
                                   'options': metadata})
    assert r.status == 400, r.json
    assert 'key' in r.json['message']


def test_over_long_object_key_is_400(api, org_id):
    r = api.post('/api/projects', {'organizationId': org_id, 'name': 'p', 'options': {'k' * 70_000: 1}})
    assert r.status == 400, r.json


@pytest.mark.parametrize('number', ['1e-200', '-5.866948504489758e-262', '1e126', '-2.5e300'])
def test_number_outside_dynamodb_range_is_400(api, org_id, number):
    """Floats DynamoDB cannot store (magnitude below 1E-130 or from 1E+126) reached the store."""
    raw = f'{{"organizationId": "{org_id}", "name": "p", "options": {{"x": {number}}}}}'
    r = api.post('/api/projects', raw=raw)
    assert r.status == 400, r.json
    assert 'out of range' in r.json['message']


@pytest.mark.parametrize('number', ['0.0', '-0.0', '1.5', '1e-130', '9.99e125', '-3.25e-7'])
def test_number_inside_dynamodb_range_is_kept(api, org_id, number):
    raw = f'{{"organizationId": "{org_id}", "name": "p", "options": {{"x": {number}}}}}'
    r = api.post('/api/projects', raw=raw)
    assert r.status == 201, r.json
    assert r.json['options']['x'] == json.loads(number)
    again = api.get(f"/api/projects/{r.json['id']}")
    assert again.json['options']['x'] == json.loads(number)


# ----------------------------------------------------------------------------- embedded records

def test_embedded_record_is_written_by_id_and_stored_whole(api, org_id):
    """POST /api/products with productGroup {} was stored and returned, breaking the document
    (Product.productGroup is a ProductGroup: id, uuid, createdOn, ... always present). An object
    field named after a family is now written by id and stored as that family's record."""
    group = api.post('/api/product-groups', {'name': 'g'})
    assert group.status == 201
    for bad in ({}, {'name': 'g'}, {**group.json, 'id': 'not-a-uuid'}, {**group.json, 'active': 'yes'},
                {'id': '00000000-0000-4000-8000-000000000000'}):
        r = api.post('/api/products', {'name': 'p', 'productGroup': bad})
        assert r.status == 400, (bad, r.json)
        assert 'productGroup' in r.json['message']
    ok = api.post('/api/products', {'name': 'p', 'productGroup': {'id': group.json['id']}})
    assert ok.status == 201, ok.json
    assert ok.json['productGroup'] == group.json
    cleared = api.put(f"/api/products/{ok.json['id']}", {'productGroup': None})
    assert cleared.status == 200 and 'productGroup' not in cleared.json


def test_embedded_document_status_round_trips(api, org_id):
    project = _project(api, org_id)
    status = api.post('/api/document-statuses', {'projectId': project['id'], 'status': 'Draft'})
    assert status.status == 201
    sent = {**status.json, 'status': 'edited in the body', 'extra': {'dropped': True}}
    family = api.post('/api/document-families', {'projectId': project['id'], 'path': '/a.pdf',
                                                 'documentStatus': sent})
    assert family.status == 201, family.json
    stored = family.json['documentStatus']
    assert stored == status.json
    path = f"/api/document-families/{family.json['id']}"
    again = api.put(path, api.get(path).json)
    assert again.status == 200 and again.json['documentStatus'] == stored


# ----------------------------------------------------------------------------- the front door

def test_body_over_the_front_door_limit_is_a_documented_413():
    """PUT /api/content-objects/{id} with a 16 MB body: the local server (like API Gateway)
    answers 413 before the app runs; the document did not list 413 (and it carries no
    rate-limit headers, which the app adds)."""
    import socket
    import threading

    from app import app
    from chalicelib.kernel.http.docs import document
    from localdev.server import MAX_BODY, serve
    server = serve(app, '127.0.0.1', 0)
    threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()  # quick shutdown
    try:
        with socket.create_connection(server.server_address, timeout=10) as s:
            s.sendall(b'PUT /api/projects/00000000-0000-0000-0000-000000000000 HTTP/1.1\r\nHost: x\r\n'
                      b'Content-Type: application/json\r\nContent-Length: %d\r\n\r\n' % (MAX_BODY + 1))
            chunks = []
            while True:  # the server closes the connection after a 413
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            reply = b''.join(chunks).decode()
    finally:
        server.shutdown()
        server.server_close()
    assert reply.startswith('HTTP/1.1 413')
    body = json.loads(reply.split('\r\n\r\n', 1)[1])
    assert body['status'] == 413 and {'error', 'message'} <= set(body)
    doc = document(app)
    for path, method in (('/api/projects', 'post'), ('/api/projects/{id}', 'put'),
                         ('/api/account/me/api-keys', 'post')):
        assert doc['paths'][path][method]['responses']['413'] == {'$ref': '#/components/responses/PayloadTooLarge'}
    assert 'headers' not in doc['components']['responses']['PayloadTooLarge']
