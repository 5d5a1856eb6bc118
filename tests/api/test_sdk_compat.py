"""What the platform's Python SDK relies on (docs/api/sdk-compatibility.md): null on input, references
as objects on write, references embedded on read (one BatchGetItem), organization-slug paths,
pages from 1 for x-access-token. tests/integration/test_sdk_client.py drives the real SDK."""
from __future__ import annotations

import uuid

from bench.counting import count_calls
from tests.conftest import ADMIN_KEY, make_org, make_user


def _project(api, org_id, **extra):
    r = api.post('/api/projects', {'name': f'p-{uuid.uuid4().hex[:6]}', 'organizationId': org_id, **extra})
    assert r.status == 201, r.json
    return r.json


# ----------------------------------------------------------------------------- nulls

def test_null_on_create_is_not_given_and_on_update_clears(api, org_id):
    body = {'name': 'p', 'organization': {'id': org_id}, 'projectTemplateRef': None, 'statusType': None,
            'owner': None, 'status': None, 'description': None, 'memory': None}
    made = api.post('/api/projects', body)
    assert made.status == 201, made.json
    assert made.json['statusType'] == 'ACTIVE'             # the server default applied
    assert 'projectTemplateRef' not in made.json and 'ownerId' not in made.json
    path = f"/api/projects/{made.json['id']}"
    assert api.put(path, {'description': 'd', 'statusType': 'ARCHIVED'}).status == 200
    cleared = api.put(path, {'description': None, 'statusType': None}).json
    assert 'description' not in cleared and cleared['statusType'] == 'ACTIVE'   # back to the default
    for required in ({'name': None}, {'name': None, 'organization': {'id': org_id}}):
        r = api.post('/api/projects', required)
        assert r.status == 400 and "'name'" in r.json['message']
    assert api.put(path, {'name': None}).status == 400
    org = make_org(api)
    assert api.put(f"/api/organizations/{org['id']}", {'slug': None}).status == 400   # platform-wide identity
    assert api.post('/api/organizations', {'name': 'Slugless Co', 'slug': None}).json['slug'] == 'slugless-co'


# ----------------------------------------------------------------------------- references on write

def test_references_as_objects(api, org_id):
    project = _project(api, org_id)
    task = api.post('/api/tasks', {'title': 't', 'project': {'id': project['id'], 'name': 'ignored'}})
    assert task.status == 201 and task.json['projectId'] == project['id']
    same = api.post('/api/tasks', {'title': 't', 'project': {'id': project['id']}, 'projectId': project['id']})
    assert same.status == 201
    other = _project(api, org_id)
    both = api.post('/api/tasks', {'title': 't', 'project': {'id': project['id']}, 'projectId': other['id']})
    assert both.status == 400 and 'different' in both.json['message']
    for bad in ({'name': 'x'}, 'abc', 7, []):
        r = api.post('/api/tasks', {'title': 't', 'projectId': project['id'], 'project': bad})
        assert r.status == 400 and "'project'" in r.json['message'], bad
    missing = api.post('/api/tasks', {'title': 't', 'project': {'id': str(uuid.uuid4())}})
    assert missing.status == 400
    # a reference that is not ownership: set, changed and cleared through the object
    status = api.post('/api/project-statuses', {'status': 'Live', 'organizationId': org_id}).json
    path = f"/api/projects/{project['id']}"
    assert api.put(path, {'status': {'id': status['id']}}).json['statusId'] == status['id']
    cleared = api.put(path, {'status': None}).json
    assert 'statusId' not in cleared and 'status' not in cleared
    assert api.put(path, {'status': {'id': status['id']}, 'statusId': None}).status == 400


def test_ownership_object_on_update_is_ignored_like_the_id(api, org_id):
    project = _project(api, org_id)
    other = make_org(api)
    r = api.put(f"/api/projects/{project['id']}", {'organization': {'id': other['id']}, 'description': 'x'})
    assert r.status == 200 and r.json['organizationId'] == org_id


# ----------------------------------------------------------------------------- references on read

def test_get_and_list_embed_the_contract_references(api, org_id, platform):
    status = api.post('/api/project-statuses', {'status': 'Live', 'organizationId': org_id}).json
    project = _project(api, org_id, ownerId=platform['userId'], statusId=status['id'])
    got = api.get(f"/api/projects/{project['id']}").json
    assert got['organization']['id'] == org_id and got['organization']['slug'] == 'default'
    assert 'memory' not in got['organization']                      # heavy fields left out
    assert got['owner']['email'] == 'admin@example.com'
    assert got['status']['status'] == 'Live'
    assert got['status']['organization']['id'] == org_id            # the SDK's ProjectStatus requires it
    assert project['organization']['id'] == org_id                  # create responses embed too
    page = api.get(f"/api/projects?filter=id=='{project['id']}'").json
    assert page['content'][0]['owner']['id'] == platform['userId']
    assistant = api.post('/api/assistants', {'name': 'a', 'project': {'id': project['id']}}).json
    assert assistant['project']['name'] == project['name']
    group = api.post('/api/product-groups', {'name': 'g'}).json
    product = api.post('/api/products', {'name': 'pr', 'productGroup': {'id': group['id']}}).json
    api.put(f"/api/product-groups/{group['id']}", {'name': 'renamed'})
    assert api.get(f"/api/products/{product['id']}").json['productGroup']['name'] == 'renamed'  # current, not a copy
    from chalicelib.core.principal import Principal
    from chalicelib.kernel import embedding
    from chalicelib.kernel.registry import family
    gone = str(uuid.uuid4())   # a reference to a record that no longer exists: the id stays, as {id} (issue 27)
    dangling = embedding.embed_one(family('products'), {**product, 'productGroupId': gone},
                                   Principal(user_id=platform['userId'], email='a@b.c', platform_admin=True))
    assert dangling['productGroupId'] == gone and dangling['productGroup'] == {'id': gone}
    ks = api.post('/api/knowledge-sets', {'name': 'k', 'project': project}).json   # a whole GET body as reference
    assert ks['projectId'] == project['id'] and ks['project']['id'] == project['id']
    assert ks['organization']['id'] == org_id


def test_one_batch_get_per_page_with_ids_deduplicated(api, org_id, platform, monkeypatch):
    from chalicelib.kernel import embedding
    project = _project(api, org_id)
    for n in range(6):
        api.post('/api/tasks', {'title': f't{n}', 'projectId': project['id'], 'assigneeId': platform['userId']})
    url = f"/api/tasks?filter=projectId=='{project['id']}'&pageSize=100"
    with count_calls() as embedded:
        page = api.get(url)
    assert page.status == 200 and len(page.json['content']) == 6
    assert all(t['project']['id'] == project['id'] and t['assignee']['id'] == platform['userId']
               for t in page.json['content'])
    keys = []
    real = embedding.table.batch_get
    monkeypatch.setattr(embedding.table, 'batch_get', lambda wanted: keys.append(list(wanted)) or real(wanted))
    api.get(url)
    assert len(keys) == 1 and len(keys[0]) == 2          # 12 references, 2 distinct records, one call
    monkeypatch.setattr(embedding, 'embeds_of', lambda path: {})
    with count_calls() as bare:
        api.get(url)
    extra = embedded - bare
    assert extra == {'BatchGetItem': 1}, (embedded, bare)


def test_a_reference_the_caller_may_not_see_is_its_id_only(api, org_id):
    manager_user, manager_key = make_user(api, org_id, 'MANAGE')
    invited = api.as_key(manager_key).post('/api/memberships', {'email': f'new-{uuid.uuid4().hex[:6]}@example.com',
                                                               'role': 'MEMBER', 'organizationId': org_id})
    assert invited.status == 201, invited.json
    assert invited.json['user'] == {'id': invited.json['userId']}       # an invitee's record is not theirs to see
    assert invited.json['organization']['id'] == org_id
    assert api.get(f"/api/memberships/{invited.json['id']}").json['user']['email'].startswith('new-')   # admin sees it


# ----------------------------------------------------------------------------- organization-slug paths

def test_organization_slug_paths(api, org_id):
    prompt = api.post('/api/prompts', {'name': 'P', 'slug': 'greeting', 'organizationId': org_id}).json
    assert api.get('/api/prompts/default/greeting').json == api.get(f"/api/prompts/{prompt['id']}").json
    page = api.get('/api/prompts/default?pageSize=5').json
    assert [p['id'] for p in page['content']] == [prompt['id']]
    pack = api.post('/api/extension-packs', {'name': 'E', 'slug': 'pack', 'version': '1.2.0',
                                             'organizationId': org_id}).json
    assert api.get('/api/extension-packs/default/pack/1.2.0').json['id'] == pack['id']
    assert api.get('/api/extension-packs/default/pack').json['id'] == pack['id']
    assert api.get('/api/extension-packs/default/pack/9.9.9').status == 404
    dd = api.post('/api/data-definitions', {'name': 'D', 'slug': 'dd', 'organizationId': org_id}).json
    assert api.get('/api/data-definitions/default/dd').json['id'] == dd['id']
    for missing in ('/api/prompts/default/nope', '/api/prompts/no-such-org/greeting', '/api/prompts/no-such-org'):
        r = api.get(missing)
        assert r.status == 404 and set(r.json) == {'error', 'message', 'status'}, missing
    other = make_org(api)
    _, outsider = make_user(api, other['id'], 'MEMBER')
    assert api.as_key(outsider).get('/api/prompts/default/greeting').status == 404   # invisible = unknown
    assert api.as_key(outsider).get('/api/prompts/default').status == 404


# ----------------------------------------------------------------------------- paging

def test_pages_count_from_one_for_x_access_token_only(api, org_id):
    for _ in range(3):
        _project(api, org_id)
    legacy = {'x-access-token': ADMIN_KEY}

    def page(n, headers):
        r = api.get(f'/api/projects?pageSize=2&sort=name&page={n}', key=None, headers=headers)
        assert r.status == 200, r.json
        return r.json
    first = page(1, legacy)
    assert page(0, legacy)['content'] == first['content'] and first['number'] == 1 and first['first']
    second = page(2, legacy)
    assert second['number'] == 2 and second['last'] and second['content'] != first['content']
    assert page(1, {'x-api-key': ADMIN_KEY})['content'] == second['content']     # the contract: from 0
    assert page(0, {'x-api-key': ADMIN_KEY})['number'] == 0
    both = page(1, {'x-api-key': ADMIN_KEY, 'x-access-token': ADMIN_KEY})        # x-api-key wins: from 0
    assert both['content'] == second['content']
    assert api.get('/api/prompts/default?page=1', key=None, headers=legacy).json['number'] == 1


def test_a_failed_embedding_never_reports_a_committed_write_as_failed(api, org_id, monkeypatch):
    from botocore.exceptions import ClientError

    from chalicelib.kernel import embedding

    def throttled(keys):
        raise ClientError({'Error': {'Code': 'ThrottlingException', 'Message': 'slow down'}}, 'BatchGetItem')
    monkeypatch.setattr(embedding.table, 'batch_get', throttled)
    made = api.post('/api/projects', {'name': 'kept', 'organizationId': org_id})
    assert made.status == 201 and 'organization' not in made.json and made.json['organizationId'] == org_id
    monkeypatch.undo()
    assert api.get(f"/api/projects/{made.json['id']}").json['organization']['id'] == org_id
