"""Careless input is never silently misread (issue 41, finding 3; docs/api/conventions.md
"Unknown fields and parameters", "Bodies"): each item through HTTP."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.conftest import ADMIN_KEY

SDK = {'x-access-token': ADMIN_KEY}   # the platform SDK's header (no x-api-key): the allowance


def _raw(api, method: str, path: str, body: bytes | None, headers: dict[str, str]):
    """A request with exactly ``headers`` (Api.call always adds a JSON content type)."""
    resp = api._client.http.request(method, path, headers=headers, body=body)
    return resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, json.loads(resp.body or b'null')


# ----------------------------------------------------------------------------- unknown body fields

def test_a_misspelled_body_field_is_400_naming_the_closest_known_field(api, org_id):
    r = api.post('/api/projects', {'nmae': 'Typo', 'organizationId': org_id})
    assert r.status == 400, r.json
    assert "'nmae' (did you mean 'name'?)" in r.json['message'] and 'Project body' in r.json['message']
    assert r.json['unknown'] == ['nmae']
    page = api.get("/api/projects?filter=name=='Typo'").json
    assert page['totalElements'] == 0   # nothing was created


def test_a_misspelled_field_on_update_is_400_and_changes_nothing(api, org_id):
    project = api.post('/api/projects', {'name': 'P', 'organizationId': org_id}).json
    r = api.put(f"/api/projects/{project['id']}", {'descripton': 'x'})
    assert r.status == 400 and "did you mean 'description'?" in r.json['message'], r.json
    assert api.get(f"/api/projects/{project['id']}").json['changeSequence'] == 1


def test_a_get_body_sent_back_as_a_put_is_still_accepted(api, org_id):
    """Every field a GET answers (server fields, embedded references) is known, though not written."""
    project = api.post('/api/projects', {'name': 'Round', 'organizationId': org_id}).json
    got = api.get(f"/api/projects/{project['id']}").json
    assert 'organization' in got   # an embedded reference
    r = api.put(f"/api/projects/{project['id']}", got)
    assert r.status == 200, r.json
    assert 'x-ignored-fields' not in r.headers


def _offered(message: str) -> set[str]:
    """The field names a refusal's message offers: the list after its last ': '."""
    return {name.strip() for name in message.rsplit(': ', 1)[1].split(',')}


SERVER_ONLY = {'id', 'uuid', 'createdOn', 'updatedOn', 'createdByUserId', 'clientIpHash', 'userEmail',
               'deleted', 'deletedDate', 'builtIn'}


@pytest.mark.parametrize('path,entity,body', [
    ('/api/events', 'Event', {'eventType': 'x'}),                  # org scope; clientIpHash is server-only
    ('/api/projects', 'Project', {'name': 'P'}),
    ('/api/document-statuses', 'DocumentStatus', {'status': 'Checked'}),   # project scope
])
def test_an_unknown_field_s_400_offers_only_what_a_client_may_send(api, org_id, path, entity, body):
    """Issue 46 item 8: the refusal listed ~30 'known' fields, server-only ones (clientIpHash,
    createdOn) included. It offers the create body's fields as /v3/api-docs describes them."""
    schemas = api.get('/v3/api-docs').json['components']['schemas']
    if 'projectId' in schemas[f'{entity}CreateRequest']['properties']:
        owner = {'projectId': api.post('/api/projects', {'name': 'Owner', 'organizationId': org_id}).json['id']}
    else:
        owner = {'organizationId': org_id}
    r = api.post(path, {**body, **owner, 'bogusField': 1})
    assert r.status == 400 and r.json['unknown'] == ['bogusField'], r.json
    offered = _offered(r.json['message'])
    assert offered == set(schemas[f'{entity}CreateRequest']['properties']), offered
    assert not offered & SERVER_ONLY, offered & SERVER_ONLY
    assert 'a client may send' in r.json['message']


def test_an_unknown_field_on_update_offers_the_update_body_s_fields(api, org_id):
    schemas = api.get('/v3/api-docs').json['components']['schemas']
    project = api.post('/api/projects', {'name': 'P', 'organizationId': org_id}).json
    r = api.put(f"/api/projects/{project['id']}", {'createdon': 'x'})
    assert r.status == 400, r.json
    offered = _offered(r.json['message'])
    assert offered == set(schemas['ProjectUpdateRequest']['properties']), offered
    assert 'changeSequence' in offered and not offered & SERVER_ONLY
    assert "did you mean 'createdOn'" not in r.json['message']   # a server field is never suggested


def test_the_sdk_s_unknown_fields_are_ignored_and_listed_in_a_header(api, org_id):
    r = api.post('/api/projects', {'name': 'From SDK', 'organizationId': org_id, 'sdkOnly': {}, 'nmae': 'x'},
                 key=None, headers=SDK)
    assert r.status == 201, r.json
    assert r.headers['x-ignored-fields'] == 'nmae, sdkOnly'
    assert r.json['name'] == 'From SDK'


# ----------------------------------------------------------------------------- unknown query parameters

def test_a_misspelled_query_parameter_is_400_naming_the_closest(api):
    r = api.get('/api/projects?pagesize=500')
    assert r.status == 400, r.json
    assert "'pagesize' (did you mean 'pageSize'?)" in r.json['message']


def test_the_sdk_s_unknown_query_parameters_are_ignored_and_listed(api):
    r = api.get('/api/projects?pageSize=2&queryContext=x', key=None, headers=SDK)
    assert r.status == 200, r.json
    assert r.headers['x-ignored-parameters'] == 'queryContext'


# ----------------------------------------------------------------------------- content types

def test_a_body_without_content_type_is_415_saying_what_to_send(api, org_id):
    status, _, body = _raw(api, 'POST', '/api/projects',
                           json.dumps({'name': 'NoType', 'organizationId': org_id}).encode(),
                           {'x-api-key': ADMIN_KEY})
    assert status == 415, body
    assert 'Content-Type: application/json' in body['message'] and body['status'] == 415
    assert api.get("/api/projects?filter=name=='NoType'").json['totalElements'] == 0


def test_a_form_encoded_body_is_415_saying_send_application_json(api):
    status, _, body = _raw(api, 'POST', '/api/projects', b'name=Acme',
                           {'x-api-key': ADMIN_KEY, 'content-type': 'application/x-www-form-urlencoded'})
    assert status == 415, body
    assert 'application/x-www-form-urlencoded' in body['message']
    assert 'send the body as JSON with the header Content-Type: application/json' in body['message']


# ----------------------------------------------------------------------------- oversized bodies

def test_an_oversized_json_body_is_413_like_the_front_door_s(api, org_id):
    r = api.post('/api/projects', {'name': 'Big', 'organizationId': org_id, 'description': 'x' * 1_000_000})
    assert r.status == 413, r.body[:300]
    assert r.json['status'] == 413 and 'larger than' in r.json['message']


# ----------------------------------------------------------------------------- view

@pytest.mark.parametrize('view', ['summary', 'full'])
def test_both_views_are_accepted(api, view):
    assert api.get(f'/api/document-families?view={view}').status == 200


def test_a_bad_view_names_both_values(api):
    r = api.get('/api/document-families?view=bogus')
    assert r.status == 400
    assert "'summary'" in r.json['message'] and "'full'" in r.json['message']


# ----------------------------------------------------------------------------- filters

def test_a_double_quoted_filter_literal_suggests_single_quotes(api):
    r = api.get('/api/projects?filter=name%3D%3D%22Acme%22')
    assert r.status == 400, r.json
    assert 'single quotes' in r.json['message'] and "name == 'Acme'" in r.json['message']


# ----------------------------------------------------------------------------- the front door's own answers

@pytest.fixture
def door(platform):
    """The local front door (localdev/server.py, what `make run` serves) on a free port."""
    from app import app
    from localdev.server import serve_in_thread
    app_class = type(app)
    server, _ = serve_in_thread(app)
    try:
        yield f'http://127.0.0.1:{server.server_address[1]}'
    finally:
        server.shutdown()
        server.server_close()
        app.__class__ = app_class


def _fetch(url: str, method: str = 'GET', data: bytes | None = None):
    request = urllib.request.Request(url, method=method, data=data, headers={'x-api-key': ADMIN_KEY})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, json.loads(resp.read() or b'null')
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, json.loads(err.read() or b'null')


def test_an_unknown_route_s_404_carries_request_id_and_rate_headers(door):
    status, headers, body = _fetch(f'{door}/api/no-such-thing')
    assert status == 404 and body['status'] == 404
    assert headers['x-request-id']
    assert {'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'} <= set(headers)


def test_a_known_route_s_answer_carries_the_same_headers(door):
    status, headers, _ = _fetch(f'{door}/api/projects?pageSize=1')
    assert status == 200 and headers['x-request-id'] and 'x-ratelimit-limit' in headers
