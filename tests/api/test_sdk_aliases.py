"""The platform SDK's other paths (chalicelib/kernel/http/aliases.py) answer as the contract routes
they alias, with the same permission checks, and stay out of /v3/api-docs. Through the real SDK:
tests/integration/test_sdk_aliases.py."""
from __future__ import annotations

import uuid

from tests.conftest import make_org, make_user


def _project(api, name='p'):
    r = api.post('/api/projects', {'name': f'{name}-{uuid.uuid4().hex[:6]}'})
    assert r.status == 201, r.json
    return r.json


def test_camel_case_paths_answer_as_the_contract_paths(api, org_id):
    pack = api.post('/api/extensionPacks', {'organizationId': org_id, 'name': 'p', 'slug': 'pk', 'version': '1.0.0'})
    assert pack.status == 201, pack.json
    pid = pack.json['id']
    for alias, canonical in ((f'/api/extensionPacks/{pid}', f'/api/extension-packs/{pid}'),
                             ('/api/extensionPacks/default/pk/1.0.0', '/api/extension-packs/default/pk/1.0.0'),
                             ('/api/extensionPacks/default/pk', '/api/extension-packs/default/pk'),
                             (f'/api/extensionPacks/{pid}/sequence', f'/api/extension-packs/{pid}/sequence')):
        a, c = api.get(alias), api.get(canonical)
        assert (a.status, a.json) == (c.status, c.json) and a.status == 200, alias
    listed = api.get('/api/extensionPacks?filter=slug == \'pk\'')
    assert listed.status == 200 and [p['id'] for p in listed.json['content']] == [pid]
    put = api.put(f'/api/extensionPacks/{pid}', {'name': 'renamed', 'changeSequence': 1})
    assert put.status == 200 and put.json['name'] == 'renamed'
    assert api.put(f'/api/extensionPacks/{pid}', {'name': 'stale', 'changeSequence': 1}).status == 409
    assert api.delete(f'/api/extensionPacks/{pid}').status == 204
    assert api.get(f'/api/extension-packs/{pid}').status == 404


def test_aliases_check_permissions_like_the_contract_paths(api, org_id):
    project = _project(api)
    assistant = api.post(f'/api/projects/{project["id"]}/assistants', {'name': 'a'}).json
    _, viewer = make_user(api, org_id, 'VIEWER')
    as_viewer = api.as_key(viewer)
    assert as_viewer.get(f'/api/projects/{project["id"]}/assistants').status == 200
    for call, canonical in (
            (lambda a: a.post(f'/api/projects/{project["id"]}/assistants', {'name': 'x'}),
             lambda a: a.post('/api/assistants', {'name': 'x', 'projectId': project['id']})),
            (lambda a: a.put(f'/api/projects/{project["id"]}/assistants/{assistant["id"]}', {'name': 'y'}),
             lambda a: a.put(f'/api/assistants/{assistant["id"]}', {'name': 'y'})),
            (lambda a: a.delete(f'/api/projects/{project["id"]}/assistants/{assistant["id"]}'),
             lambda a: a.delete(f'/api/assistants/{assistant["id"]}'))):
        assert call(as_viewer).status == canonical(as_viewer).status == 403
    assert api.as_key(None).get(f'/api/projects/{project["id"]}/assistants').status == 401
    assert api.as_key(None).get('/api/extensionPacks').status == 401


def test_another_organizations_project_is_a_404_and_nothing_is_written(api, org_id):
    other_org = make_org(api)
    foreign = api.post('/api/projects', {'name': 'f', 'organizationId': other_org['id']}).json
    foreign_assistant = api.post('/api/assistants', {'name': 'fa', 'projectId': foreign['id']}).json
    _, manager = make_user(api, org_id, 'MANAGE')   # of the default organization, not the other one
    as_manager = api.as_key(manager)
    base = f'/api/projects/{foreign["id"]}'
    assert as_manager.get(f'{base}/assistants').status == 404
    assert as_manager.get(f'{base}/documentStores').status == 404
    assert as_manager.post(f'{base}/assistants', {'name': 'sneak'}).status == 404
    assert as_manager.put(f'{base}/assistants/{foreign_assistant["id"]}', {'name': 'x'}).status == 404
    assert as_manager.delete(f'{base}/assistants/{foreign_assistant["id"]}').status == 404
    listed = api.get(f'/api/assistants?filter=projectId == \'{foreign["id"]}\'').json['content']
    assert [a['name'] for a in listed] == ['fa']


def test_nested_assistant_paths_keep_to_their_project(api):
    one, two = _project(api, 'one'), _project(api, 'two')
    made = api.post(f'/api/projects/{one["id"]}/assistants', {'name': 'a', 'project': None})
    assert made.status == 201 and made.json['projectId'] == one['id']
    assert api.post(f'/api/projects/{one["id"]}/assistants', {'name': 'b', 'projectId': two['id']}).status == 400
    assert api.post(f'/api/projects/{one["id"]}/assistants', {'name': 'b', 'project': {'id': two['id']}}).status == 400
    assert [a['id'] for a in api.get(f'/api/projects/{one["id"]}/assistants').json] == [made.json['id']]
    assert api.get(f'/api/projects/{two["id"]}/assistants').json == []
    # an assistant is addressed under its own project only
    assert api.put(f'/api/projects/{two["id"]}/assistants/{made.json["id"]}', {'name': 'x'}).status == 404
    assert api.delete(f'/api/projects/{two["id"]}/assistants/{made.json["id"]}').status == 404
    assert api.put(f'/api/projects/{one["id"]}/assistants/{made.json["id"]}',
                   {'name': 'x', 'projectId': two['id']}).status == 400
    put = api.put(f'/api/projects/{one["id"]}/assistants/{made.json["id"]}', {'name': 'x', 'changeSequence': 1})
    assert put.status == 200 and put.json['name'] == 'x'
    assert api.get(f'/api/projects/{one["id"]}/assistants/not-a-uuid').status in (400, 404, 405)
    assert api.delete(f'/api/projects/{one["id"]}/assistants/{made.json["id"]}').status == 204
    assert api.get(f'/api/assistants/{made.json["id"]}').status == 404
    assert api.get('/api/projects/not-a-uuid/assistants').status == 400


def test_project_lists_are_one_page_as_a_bare_array_and_the_sdk_query_is_decoded(api):
    project = _project(api)
    for i in range(3):
        assert api.post('/api/data-forms', {'projectId': project['id'], 'name': f'f{i}', 'slug': f'f{i}'}).status == 201
    full = api.get(f'/api/projects/{project["id"]}/dataForms?pageSize=2&sort=name:desc')
    assert full.status == 200 and [f['name'] for f in full.json] == ['f2', 'f1']
    # the SDK sends query=%252A for '*' with x-access-token (pages from 1)
    sdk = api.get(f'/api/projects/{project["id"]}/dataForms?query=%252A&page=1&pageSize=10',
                  key=None, headers={'x-access-token': api.key})
    assert sdk.status == 200 and len(sdk.json) == 3


def test_aliases_are_hidden_from_the_document_and_alias_documented_routes(api):
    from app import app
    from chalicelib.kernel.http import aliases
    doc = api.get('/v3/api-docs', key=None).json
    assert aliases.ROUTES
    for (alias, method), canonical in aliases.ROUTES.items():
        assert method in app.routes[alias] and canonical in doc['paths'], (alias, canonical)
        assert method.lower() not in doc['paths'].get(alias, {}), alias
    # an alias beside a documented method on the same path hides only itself
    assert set(doc['paths']['/api/executions/{executionId}/cancel']) == {'post'}


def test_put_cancel_and_user_memberships_as_the_sdk_calls_them(api, org_id, users):
    project = _project(api)
    execution = api.post('/api/executions', {'projectId': project['id']}).json
    put = api.put(f'/api/executions/{execution["id"]}/cancel', None)
    assert put.status == 200 and put.json['status'] == 'CANCELLED', put.json
    assert api.put(f'/api/executions/{execution["id"]}/cancel', None).status == 409
    assert api.as_key(users['VIEWER']).put(f'/api/executions/{execution["id"]}/cancel', None).status == \
        api.as_key(users['VIEWER']).post(f'/api/executions/{execution["id"]}/cancel', None).status
    me = api.as_key(users['MEMBER']).get('/api/account/me').json
    listed = api.get(f'/api/users/{me["id"]}/memberships')
    assert listed.status == 200 and [(m['organizationId'], m['role']) for m in listed.json] == [(org_id, 'MEMBER')]
    # a user sees only themselves among others' users: another's memberships are a 404 for a member
    other = api.as_key(users['VIEWER']).get('/api/account/me').json
    assert api.as_key(users['MEMBER']).get(f'/api/users/{other["id"]}/memberships').status == \
        api.as_key(users['MEMBER']).get(f'/api/users/{other["id"]}').status
