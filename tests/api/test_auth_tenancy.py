"""Tenancy and permissions through HTTP: the built-in roles and permissions as records, the
Manage area, organization suspension and support access, cross-organization writes."""
from __future__ import annotations

import datetime as dt
import uuid

import pytest

from chalicelib.kernel.access import PERMISSIONS, ROLE_PERMISSIONS
from tests.conftest import make_org


@pytest.fixture
def other_org(api):
    """A second organization whose manager has no role in the default one."""
    from chalicelib.features.identity.bootstrap import SYSTEM
    from chalicelib.features.identity.service import create_api_key
    from chalicelib.kernel.crud import create
    org = create('organizations', {'name': 'Other', 'slug': f'o-{uuid.uuid4().hex[:8]}'}, SYSTEM)
    email = f'other-{uuid.uuid4().hex[:8]}@example.com'
    user = create('users', {'email': email}, SYSTEM)
    create('memberships', {'organizationId': org['id'], 'userId': user['id'], 'role': 'MANAGE'}, SYSTEM)
    return {'org': org, 'user': user, 'api': api.as_key(create_api_key(user['id'], email, 't')['key'])}


# ----------------------------------------------------------------------------- roles and permissions

def test_roles_and_permissions_list_the_one_table(api, org_id, users):
    viewer = api.as_key(users['VIEWER'])
    roles = viewer.get('/api/roles?pageSize=100')
    assert roles.status == 200
    by_name = {r['name']: r for r in roles.json['content']}
    assert set(by_name) == set(ROLE_PERMISSIONS)
    for name, perms in ROLE_PERMISSIONS.items():
        assert by_name[name]['permissions'] == sorted(perms) and by_name[name]['builtIn'] is True
        assert by_name[name]['organizationId'] == org_id
    perms = viewer.get('/api/permissions?pageSize=100')
    assert perms.status == 200
    assert {p['name'] for p in perms.json['content']} == set(PERMISSIONS)
    assert {p['name'] for p in perms.json['content']} == set().union(*ROLE_PERMISSIONS.values())
    one = viewer.get(f"/api/roles/{by_name['MEMBER']['id']}")
    assert one.status == 200 and one.json == by_name['MEMBER']
    filtered = viewer.get("/api/roles?filter=name=='VIEWER'")
    assert [r['name'] for r in filtered.json['content']] == ['VIEWER']


def test_every_new_organization_gets_its_built_ins(api):
    org = make_org(api)
    roles = api.get(f"/api/roles?filter=organizationId=='{org['id']}'&pageSize=100").json
    assert {r['name'] for r in roles['content']} == set(ROLE_PERMISSIONS)
    assert roles['totalElements'] == len(ROLE_PERMISSIONS)


def test_built_ins_are_read_only_even_for_platform_admins(api, users):
    manager = api.as_key(users['MANAGE'])
    role = api.get("/api/roles?filter=name=='MEMBER'").json['content'][0]
    perm = api.get("/api/permissions?filter=name=='resource:write'").json['content'][0]
    for caller in (api, manager):
        assert caller.put(f"/api/roles/{role['id']}", {'permissions': ['platform:admin']}).status == 403
        assert caller.delete(f"/api/roles/{role['id']}").status == 403
        assert caller.put(f"/api/permissions/{perm['id']}", {'name': 'x'}).status == 403
        assert caller.delete(f"/api/permissions/{perm['id']}").status == 403
    assert api.get(f"/api/roles/{role['id']}").json['permissions'] == sorted(ROLE_PERMISSIONS['MEMBER'])


def test_custom_roles_are_managed_by_managers_and_can_never_be_built_in(api, org_id, users):
    manager, member = api.as_key(users['MANAGE']), api.as_key(users['MEMBER'])
    body = {'name': 'Auditor', 'slug': 'auditor', 'permissions': ['resource:read'], 'builtIn': True,
            'organizationId': org_id}
    assert member.post('/api/roles', body).status == 403
    made = manager.post('/api/roles', body)
    assert made.status == 201 and made.json['builtIn'] is False
    updated = manager.put(f"/api/roles/{made.json['id']}", {'description': 'reads', 'builtIn': True})
    assert updated.status == 200 and updated.json['builtIn'] is False
    assert manager.post('/api/roles', {**body, 'slug': 'viewer'}).status == 409   # built-in slug taken
    assert member.delete(f"/api/roles/{made.json['id']}").status == 403
    assert manager.delete(f"/api/roles/{made.json['id']}").status == 204
    perm = manager.post('/api/permissions', {'name': 'report:export', 'organizationId': org_id})
    assert perm.status == 201 and perm.json['builtIn'] is False


# ----------------------------------------------------------------------------- the Manage area

@pytest.mark.parametrize('family,body', [
    ('teams', {'name': 't'}), ('roles', {'name': 'r'}), ('permissions', {'name': 'p'}),
])
def test_manage_area_needs_manage(api, org_id, users, family, body):
    body = {**body, 'organizationId': org_id}
    assert api.as_key(users['VIEWER']).post(f'/api/{family}', body).status == 403
    assert api.as_key(users['MEMBER']).post(f'/api/{family}', body).status == 403
    made = api.as_key(users['MANAGE']).post(f'/api/{family}', body)
    assert made.status == 201
    assert api.as_key(users['MEMBER']).put(f"/api/{family}/{made.json['id']}", {'name': 'x'}).status == 403
    assert api.as_key(users['MEMBER']).get(f"/api/{family}/{made.json['id']}").status == 200


def test_memberships_are_managed_by_managers_within_their_rank(api, org_id, users):
    manager, member = api.as_key(users['MANAGE']), api.as_key(users['MEMBER'])
    target = api.post('/api/users', {'email': f'm{uuid.uuid4().hex[:6]}@example.com'}).json
    body = {'organizationId': org_id, 'email': target['email'], 'role': 'VIEWER'}
    assert member.post('/api/memberships', body).status == 403
    made = manager.post('/api/memberships', body)       # a manager invites (features/identity/memberships.py)
    assert made.status == 201 and made.json['status'] == 'INVITED' and made.json['userId'] == target['id']
    assert manager.put(f"/api/memberships/{made.json['id']}", {'role': 'MANAGE'}).status == 200
    assert manager.put(f"/api/memberships/{made.json['id']}", {'role': 'PLATFORM_ADMIN'}).status == 403
    admin_membership = api.get("/api/memberships?filter=role=='PLATFORM_ADMIN'").json['content'][0]
    assert manager.put(f"/api/memberships/{admin_membership['id']}", {'role': 'VIEWER'}).status == 403
    assert manager.delete(f"/api/memberships/{admin_membership['id']}").status == 403
    # nor hand the admin's membership to an accomplice, nor touch it at all
    from chalicelib.features.identity.service import create_api_key
    accomplice = api.post('/api/users', {'email': f'a{uuid.uuid4().hex[:6]}@example.com'}).json
    r = manager.put(f"/api/memberships/{admin_membership['id']}", {'userId': accomplice['id']})
    assert r.status in (400, 403), r.json
    assert manager.put(f"/api/memberships/{admin_membership['id']}", {'role': 'PLATFORM_ADMIN'}).status == 403
    assert manager.put(f"/api/memberships/{made.json['id']}", {'userId': accomplice['id']}).status == 400
    accomplice_key = create_api_key(accomplice['id'], accomplice['email'], 'k')['key']
    assert api.as_key(accomplice_key).get('/api/account/me').json['memberships'] == []
    assert api.get('/api/account/me').json['platformAdmin'] is True
    assert api.get('/api/account/me').json['platformAdmin'] is True
    assert manager.delete(f"/api/memberships/{made.json['id']}").status == 204


def test_platform_fields_are_the_platforms_and_support_access_is_granted_with_an_expiry(
        api, org_id, users, other_org):
    manager, member = api.as_key(users['MANAGE']), api.as_key(users['MEMBER'])
    for body in ({'organizationStatus': 'SUSPENDED'}, {'supportAccess': True},
                 {'supportAccessExpiresAt': '2030-01-01T00:00:00Z'}):
        assert member.put(f'/api/organizations/{org_id}', body).status == 403
        assert api.as_key(users['VIEWER']).put(f'/api/organizations/{org_id}', body).status == 403
        assert other_org['api'].put(f'/api/organizations/{org_id}', body).status == 404
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(days=3)).isoformat()
    r = manager.put(f'/api/organizations/{org_id}', {'supportAccess': True, 'supportAccessExpiresAt': soon})
    assert r.status == 200 and r.json['supportAccess'] is True
    r = manager.put(f'/api/organizations/{org_id}', {'organizationStatus': 'SUSPENDED'})
    assert r.status == 403 and 'organizationStatus' in r.json['message']
    r = api.put(f'/api/organizations/{org_id}', {'organizationStatus': 'SUSPENDED'})
    assert r.status == 200 and r.json['organizationStatus'] == 'SUSPENDED'
    r = api.put(f'/api/organizations/{org_id}', {'organizationStatus': 'ACTIVE'})
    assert r.status == 200 and r.json['organizationStatus'] == 'ACTIVE'
    assert other_org['api'].put(f"/api/organizations/{other_org['org']['id']}",
                                {'organizationStatus': 'SUSPENDED'}).status == 403


def test_creating_organizations_needs_manage_somewhere_or_platform_admin(api, users):
    body = {'name': 'New', 'slug': f'n-{uuid.uuid4().hex[:8]}'}
    assert api.as_key(users['VIEWER']).post('/api/organizations', body).status == 403
    assert api.as_key(users['MEMBER']).post('/api/organizations', body).status == 403
    made = api.as_key(users['MANAGE']).post('/api/organizations', body)
    assert made.status == 201
    # the creator manages it
    me = api.as_key(users['MANAGE']).get('/api/account/me').json
    assert {'organizationId': made.json['id'], 'role': 'MANAGE'} in me['memberships']


# ----------------------------------------------------------------------------- tenancy

def test_another_organizations_resources_are_404_and_absent_from_lists(api, org_id, other_org):
    project = api.post('/api/projects', {'name': 'secret', 'organizationId': org_id}).json
    theirs = other_org['api']
    assert theirs.get(f"/api/projects/{project['id']}").status == 404
    assert theirs.put(f"/api/projects/{project['id']}", {'name': 'x'}).status == 404
    assert theirs.delete(f"/api/projects/{project['id']}").status == 404
    assert theirs.get(f"/api/projects/{project['id']}/sequence").status == 404
    assert theirs.get('/api/projects').json['content'] == []
    assert theirs.get(f"/api/projects?filter=organizationId=='{org_id}'").json['content'] == []
    assert [o['id'] for o in theirs.get('/api/organizations').json['content']] == [other_org['org']['id']]
    assert api.get(f"/api/projects/{project['id']}").json['name'] == 'secret'


def test_a_caller_supplied_organization_never_moves_a_resource(api, org_id, users, other_org):
    theirs = other_org['api']
    # create into an organization the caller cannot see: refused, nothing created
    r = theirs.post('/api/projects', {'name': 'intruder', 'organizationId': org_id})
    assert r.status == 400
    assert api.get("/api/projects?filter=name=='intruder'").json['totalElements'] == 0
    # project-scoped: the project decides, a supplied organizationId is ignored
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    r = theirs.post('/api/tasks', {'projectId': project['id'], 'organizationId': other_org['org']['id']})
    assert r.status == 400
    # a viewer sees the organization but may not write into it
    r = api.as_key(users['VIEWER']).post('/api/projects', {'name': 'v', 'organizationId': org_id})
    assert r.status == 403
    # an update cannot move a resource: ownership fields in the body are ignored
    own = theirs.post('/api/projects', {'name': 'mine'}).json
    moved = theirs.put(f"/api/projects/{own['id']}", {'organizationId': org_id, 'name': 'mine2'})
    assert moved.status == 200 and moved.json['organizationId'] == other_org['org']['id']
    task = api.post('/api/tasks', {'projectId': project['id']}).json
    other_project = theirs.post('/api/projects', {'name': 'q'}).json
    r = api.put(f"/api/tasks/{task['id']}", {'projectId': other_project['id']})
    assert r.status == 200 and r.json['projectId'] == project['id']


def test_a_member_of_two_organizations_writes_only_where_permitted(api, org_id, other_org, users):
    from chalicelib.features.identity.service import create_api_key
    user = api.post('/api/users', {'email': f'two{uuid.uuid4().hex[:6]}@example.com'}).json
    membership = {'organizationId': org_id, 'userId': user['id'], 'role': 'VIEWER'}
    assert api.post('/api/memberships', membership).status == 201
    invited = other_org['api'].post('/api/memberships', {'organizationId': other_org['org']['id'],
                                                         'email': user['email'], 'role': 'MEMBER'})
    assert invited.status == 201 and invited.json['status'] == 'INVITED'
    two = api.as_key(create_api_key(user['id'], user['email'], 'k')['key'])
    assert two.put(f"/api/memberships/{invited.json['id']}", {'status': 'ACTIVE'}).status == 200
    assert two.post('/api/labels', {'name': 'x', 'organizationId': org_id}).status == 403
    assert two.post('/api/labels', {'name': 'x', 'organizationId': other_org['org']['id']}).status == 201
    assert two.post('/api/labels', {'name': 'x'}).status == 400        # which organization?
    listed = two.get('/api/labels').json['content']
    assert {label['organizationId'] for label in listed} <= {org_id, other_org['org']['id']}


def test_users_see_only_people_who_share_an_organization(api, org_id, other_org, users):
    me = api.as_key(users['VIEWER']).get('/api/account/me').json
    theirs = other_org['api']
    assert theirs.get(f"/api/users/{me['id']}").status == 404
    assert me['id'] not in {u['id'] for u in theirs.get('/api/users?pageSize=100').json['content']}
    assert api.as_key(users['MEMBER']).get(f"/api/users/{me['id']}").status == 200
    assert api.as_key(users['MEMBER']).put(f"/api/users/{me['id']}", {'title': 'x'}).status == 403
    assert api.as_key(users['VIEWER']).put(f"/api/users/{me['id']}", {'title': 'me'}).status == 200
