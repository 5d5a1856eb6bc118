"""The security review's findings (issue 10), each tried through HTTP the way an attacker holding
a MEMBER or MANAGE key would: references and filter paths across organizations, the e-mail
oracle and account pre-hijack, platform fields of organizations, suspension, deletion,
invitations. Limits and failure modes are in test_failure_modes.py."""
from __future__ import annotations

import datetime as dt
import uuid
from urllib.parse import quote

import pytest

from chalicelib.kernel.registry import FAMILIES
from chalicelib.kernel.registry import family as family_of
from tests.api.test_auth_credentials import EC, RSA, bearer, idp  # noqa: F401 - the JWKS fixture, shared
from tests.conftest import make_org, make_user
from tests.support import create, create_body

# Every reference field a client writes, from the registry: (family, field, target family). A
# membership's userId names the person joining (the invitation tests below), not a member.
REFERENCES = [(f, s.name, s.ref) for f in FAMILIES if not f.read_only for s in f.writable.values()
              if s.ref and (f.path, s.name) != ('memberships', 'userId')]
USER_REFERENCES = [(f, name) for f, name, target in REFERENCES if target == 'users']
OTHER_REFERENCES = [(f, name, target) for f, name, target in REFERENCES if target != 'users']


def _ids(cases):
    return [f'{c[0].path}.{c[1]}' for c in cases]


@pytest.fixture
def two_orgs(api, org_id):
    """Organization A (the default one) and B, each with a MANAGE and a MEMBER user of its own."""
    b = make_org(api)
    out = {'A': {'id': org_id}, 'B': {'id': b['id']}}
    for org in out.values():
        for role in ('MANAGE', 'MEMBER'):
            user, key = make_user(api, org['id'], role)
            org[role] = {'user': user, 'api': api.as_key(key)}
    return out


def _missing_message(field: str, value: str) -> str:
    return f"Field '{field}' refers to a record that does not exist: {value}"


def _writer(two_orgs, family):
    """A caller of organization A allowed to create records of ``family``."""
    from chalicelib.kernel.access import write_permission
    role = 'MEMBER' if write_permission(family) == 'resource:write' else 'MANAGE'
    return two_orgs['A'][role]['api']


# ----------------------------------------------------------------------------- references to users

def test_the_registry_has_the_user_references_the_review_named():
    names = {(f.path, n) for f, n in USER_REFERENCES}
    assert {('tasks', 'assigneeId'), ('task-groups', 'assigneeId'), ('projects', 'ownerId'),
            ('messages', 'userId')} <= names


@pytest.mark.parametrize('family,name', USER_REFERENCES, ids=_ids(USER_REFERENCES))
def test_a_user_reference_names_a_member_of_the_records_organization(api, two_orgs, family, name):
    """A MEMBER of A names a user of B (by id): 400 "does not exist", exactly as for a random
    id; on create and on update, and nothing is written. A member of A is accepted."""
    a, b = two_orgs['A'], two_orgs['B']
    caller = _writer(two_orgs, family)
    stranger = b['MEMBER']['user']['id']
    body = create_body(api, family, a['id'])
    for value in (stranger, str(uuid.uuid4())):
        r = caller.post(f'/api/{family.path}', {**body, name: value})
        assert r.status == 400, (family.path, name, r.status, r.json)
        assert r.json['message'] == _missing_message(name, value)
    made = caller.post(f'/api/{family.path}', {**body, name: a['MEMBER']['user']['id']})
    assert made.status == 201, made.json
    r = caller.put(f"/api/{family.path}/{made.json['id']}", {name: stranger})
    assert r.status == 400 and r.json['message'] == _missing_message(name, stranger)
    assert api.get(f"/api/{family.path}/{made.json['id']}").json[name] == a['MEMBER']['user']['id']
    # a platform admin is held to the same rule: the record would name someone who cannot see it
    assert api.post(f'/api/{family.path}', {**body, name: stranger}).status == 400


@pytest.mark.parametrize('family,name', USER_REFERENCES, ids=_ids(USER_REFERENCES))
def test_a_filter_path_through_a_user_reference_reads_only_visible_users(api, two_orgs, family, name):
    """A record names a user who then leaves A (still in B): a MEMBER of A can no longer read
    that user's e-mail one filter at a time; the path behaves as if the user were missing."""
    a, b = two_orgs['A'], two_orgs['B']
    leaver = b['MEMBER']['user']
    joined = api.post('/api/memberships', {'organizationId': a['id'], 'userId': leaver['id'], 'role': 'VIEWER'})
    assert joined.status == 201
    made = api.post(f'/api/{family.path}', {**create_body(api, family, a['id']), name: leaver['id']})
    assert made.status == 201, made.json
    stayer = api.post(f'/api/{family.path}', {**create_body(api, family, a['id']), name: a['MANAGE']['user']['id']})
    assert stayer.status == 201
    ref = name[:-2]
    reader = a['MEMBER']['api']

    def found(filter_text):
        r = reader.get(f'/api/{family.path}?pageSize=100&filter={quote(filter_text)}')
        assert r.status == 200, r.json
        return {i['id'] for i in r.json['content']}
    assert made.json['id'] in found(f"{ref}.email=='{leaver['email']}'")       # still a member: visible
    assert api.delete(f"/api/memberships/{joined.json['id']}").status == 204
    assert made.json['id'] not in found(f"{ref}.email=='{leaver['email']}'")
    assert made.json['id'] not in found(f"{ref}.email=like='{leaver['email'][:3]}*'")
    assert made.json['id'] in found(f"{ref}.email is null")                   # missing, as it were
    assert made.json['id'] in found(f"{name}=='{leaver['id']}'")               # its own field is still its own
    assert stayer.json['id'] in found(f"{ref}.email=='{a['MANAGE']['user']['email']}'")


# ----------------------------------------------------------------------------- every other reference

@pytest.mark.parametrize('family,name,target', OTHER_REFERENCES, ids=_ids(OTHER_REFERENCES))
def test_a_reference_never_names_another_organizations_record(api, two_orgs, family, name, target):
    """The same audit for every other reference of the registry: a record of B (which the
    caller of A cannot see) is the same 400 as a random id; a record of A is accepted; a
    catalogue record (global) is everyone's."""
    a, b = two_orgs['A'], two_orgs['B']
    target_family = family_of(target)
    caller = api if family.scope == 'global' else _writer(two_orgs, family)
    body = create_body(api, family, a['id'])
    tries = [str(uuid.uuid4())]
    if target_family.scope != 'global':
        tries.append(create(api, target_family, b['id'])['id'])
    for value in tries:
        r = caller.post(f'/api/{family.path}', {**body, name: value})
        assert r.status == 400, (family.path, name, r.status, r.json)
        assert r.json['message'] == _missing_message(name, value)
    own = create(api, target_family, a['id'])['id']
    made = caller.post(f'/api/{family.path}', {**body, name: own})
    assert made.status == 201, (family.path, name, made.json)
    if target_family.scope != 'global':
        r = caller.put(f"/api/{family.path}/{made.json['id']}", {name: tries[1]})
        assert r.status == 400 and r.json['message'] == _missing_message(name, tries[1])


def test_a_filter_path_never_reads_a_record_of_another_organization(api, two_orgs):
    """Data written before references were checked (simulated in the table) may point across
    organizations: the path then behaves as missing for a MEMBER of A."""
    import boto3
    a, b = two_orgs['A'], two_orgs['B']
    task = create(api, 'tasks', a['id'])
    secret = create(api, 'task-groups', b['id'], name='b-secret-plan')
    boto3.client('dynamodb', region_name='us-east-1').update_item(
        TableName='platform-test', Key={'pk': {'S': f"tasks#{task['id']}"}, 'sk': {'S': '#'}},
        UpdateExpression='SET #d.#f = :v', ExpressionAttributeNames={'#d': 'data', '#f': 'taskGroupId'},
        ExpressionAttributeValues={':v': {'S': secret['id']}})
    reader = a['MEMBER']['api']
    hits = reader.get("/api/tasks?filter=taskGroup.name=='b-secret-plan'").json
    assert hits['totalElements'] == 0
    assert reader.get("/api/tasks?filter=taskGroup.name=like='b-*'").json['totalElements'] == 0
    assert api.get("/api/tasks?filter=taskGroup.name=='b-secret-plan'").json['totalElements'] == 1


# ----------------------------------------------------------------------------- the e-mail oracle

def test_users_cannot_change_their_own_email_and_a_platform_admin_can(api, two_orgs):
    a, b = two_orgs['A'], two_orgs['B']
    me = a['MEMBER']
    taken = b['MEMBER']['user']['email']
    for address in (taken, f'free-{uuid.uuid4().hex[:6]}@example.com'):
        r = me['api'].put(f"/api/users/{me['user']['id']}", {'email': address})
        assert r.status == 400, r.json                     # the same answer, taken or not
        assert taken not in r.json['message'] and 'email' in r.json['message']
    current = me['api'].get(f"/api/users/{me['user']['id']}").json
    assert current['email'] == me['user']['email']
    assert me['api'].put(f"/api/users/{me['user']['id']}", {**current, 'title': 'x'}).status == 200   # GET body back
    assert me['api'].put(f"/api/users/{me['user']['id']}", {'email': current['email'].upper()}).status == 200
    new = f'moved-{uuid.uuid4().hex[:6]}@example.com'
    r = api.put(f"/api/users/{me['user']['id']}", {'email': new})
    assert r.status == 200 and r.json['email'] == new


def test_uniqueness_errors_never_echo_another_tenants_value(api, two_orgs):
    a, b = two_orgs['A'], two_orgs['B']
    taken = b['MEMBER']['user']['email']
    r = api.put(f"/api/users/{a['MEMBER']['user']['id']}", {'email': taken})
    assert r.status == 409 and taken not in r.json['message'], r.json
    b_slug = api.get(f"/api/organizations/{b['id']}").json['slug']
    r = a['MANAGE']['api'].post('/api/organizations', {'name': 'x', 'slug': b_slug})
    assert r.status == 409 and b_slug not in r.json['message'], r.json
    # a value that can only be the caller's own organization's is still named
    made = a['MANAGE']['api'].post('/api/teams', {'name': 't', 'slug': 'team-one', 'organizationId': a['id']})
    assert made.status == 201
    r = a['MANAGE']['api'].post('/api/teams', {'name': 't', 'slug': 'team-one', 'organizationId': a['id']})
    assert r.status == 409 and 'team-one' in r.json['message']


def test_only_platform_admins_create_users_directly(api, two_orgs):
    body = {'email': f'direct-{uuid.uuid4().hex[:6]}@example.com'}
    assert two_orgs['A']['MANAGE']['api'].post('/api/users', body).status == 403
    r = two_orgs['A']['MANAGE']['api'].post('/api/users', {'email': two_orgs['B']['MEMBER']['user']['email']})
    assert r.status == 403                                 # no 409 to tell the address is registered
    assert api.post('/api/users', body).status == 201


def test_a_bearer_token_is_bound_to_its_subject_on_first_sign_in(api, org_id, idp):  # noqa: F811 - shared fixture
    user, _ = make_user(api, org_id, 'MEMBER')
    first = api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email'], sub='idp|owner')))
    assert first.status == 200 and first.json['id'] == user['id']
    # the provider's account keeps naming the user when its address changes there
    moved = RSA.token(f'elsewhere-{uuid.uuid4().hex[:6]}@example.com', sub='idp|owner')
    assert api.get('/api/account/me', key=None, headers=bearer(moved)).json['id'] == user['id']
    # another provider account asserting the same (verified) address lands nowhere
    other = api.get('/api/account/me', key=None, headers=bearer(EC.token(user['email'], sub='idp|intruder')))
    assert other.status == 401 and 'bound' in other.json['message']


def test_an_unknown_subject_falls_back_only_to_a_verified_email(api, org_id, idp):  # noqa: F811 - shared fixture
    user, _ = make_user(api, org_id, 'MEMBER')
    for claims in ({'email_verified': None}, {'email_verified': False}, {'email_verified': 'false'},
                   {'email_verified': 1}):
        r = api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email'], sub='idp|a', **claims)))
        assert r.status == 401, (claims, r.json)
    verified = RSA.token(user['email'], sub='idp|a', email_verified='true')
    r = api.get('/api/account/me', key=None, headers=bearer(verified))
    assert r.status == 200 and r.json['id'] == user['id']
    # once bound, the subject alone names the user (its e-mail claims no longer matter)
    r = api.get('/api/account/me', key=None, headers=bearer(RSA.token(None, sub='idp|a')))
    assert r.status == 200 and r.json['id'] == user['id']


def test_a_reserved_address_does_not_capture_its_owners_sign_in(api, org_id, idp):  # noqa: F811 - shared fixture
    """The pre-hijack: an attacker signed in with their own identity, then tries to take the
    victim's address so the victim's first sign-in lands in the attacker's account."""
    attacker, attacker_key = make_user(api, org_id, 'MEMBER')
    own = bearer(RSA.token(attacker['email'], sub='idp|attacker'))
    assert api.get('/api/account/me', key=None, headers=own).status == 200
    victim_email = f'victim-{uuid.uuid4().hex[:6]}@example.com'
    r = api.as_key(attacker_key).put(f"/api/users/{attacker['id']}", {'email': victim_email})
    assert r.status == 400
    victim = api.get('/api/account/me', key=None, headers=bearer(RSA.token(victim_email, sub='idp|victim')))
    assert victim.status == 401          # no account holds the address: nothing to land in
    made = api.post('/api/users', {'email': victim_email}).json     # provisioned by a platform admin
    victim = api.get('/api/account/me', key=None, headers=bearer(RSA.token(victim_email, sub='idp|victim')))
    assert victim.status == 200 and victim.json['id'] == made['id'] != attacker['id']


# ----------------------------------------------------------------------------- platform fields

PLATFORM_CHANGES = {'organizationStatus': 'SUSPENDED', 'paymentCustomerId': 'cus_123',
                    'enterpriseOrganization': True, 'supportAccess': True,
                    'supportAccessExpiresAt': '2031-01-01T00:00:00Z'}


@pytest.mark.parametrize('name', list(PLATFORM_CHANGES))
def test_platform_fields_are_changed_by_platform_admins_only(api, two_orgs, name):
    a = two_orgs['A']
    manager = a['MANAGE']['api']
    r = manager.put(f"/api/organizations/{a['id']}", {name: PLATFORM_CHANGES[name]})
    assert r.status in (400, 403), r.json
    if name != 'supportAccess':   # a grant without an expiry: 400 (below)
        assert r.status == 403 and name in r.json['message']
    current = api.get(f"/api/organizations/{a['id']}").json
    assert current.get(name) != PLATFORM_CHANGES[name]
    assert manager.put(f"/api/organizations/{a['id']}", {**current, 'description': 'd'}).status == 200  # GET body back
    made = manager.post('/api/organizations', {'name': 'n', 'slug': f'n-{uuid.uuid4().hex[:8]}',
                                               name: PLATFORM_CHANGES[name]})
    assert made.status in (400, 403), made.json
    admin = api.put(f"/api/organizations/{a['id']}", {name: PLATFORM_CHANGES[name]})
    assert admin.status == 200, admin.json
    api.put(f"/api/organizations/{a['id']}", {'organizationStatus': 'ACTIVE'})


def test_managers_grant_and_revoke_support_access_with_an_expiry(api, two_orgs):
    a = two_orgs['A']
    manager = a['MANAGE']['api']
    path = f"/api/organizations/{a['id']}"
    now = dt.datetime.now(dt.UTC)
    for expiry in (None, (now - dt.timedelta(hours=1)).isoformat(), (now + dt.timedelta(days=31)).isoformat()):
        body = {'supportAccess': True, **({'supportAccessExpiresAt': expiry} if expiry else {})}
        r = manager.put(path, body)
        assert r.status == 400 and 'supportAccessExpiresAt' in r.json['message'], (expiry, r.json)
    assert api.get(path).json['supportAccess'] is False
    soon = (now + dt.timedelta(days=2)).isoformat()
    r = manager.put(path, {'supportAccess': True, 'supportAccessExpiresAt': soon})
    assert r.status == 200 and r.json['supportAccess'] is True and r.json['supportAccessExpiresAt']
    r = manager.put(path, {'supportAccess': False})
    assert r.status == 200 and r.json['supportAccess'] is False and 'supportAccessExpiresAt' not in r.json
    assert a['MEMBER']['api'].put(path, {'supportAccess': True, 'supportAccessExpiresAt': soon}).status == 403
    outsider = two_orgs['B']['MANAGE']['api']
    assert outsider.put(path, {'supportAccess': True, 'supportAccessExpiresAt': soon}).status == 404


# ----------------------------------------------------------------------------- suspension

def test_a_suspended_organization_is_403_to_its_members_on_every_request_that_touches_it(api, two_orgs):
    a, b = two_orgs['A'], two_orgs['B']
    project = create(api, 'projects', a['id'], name='in-a')
    label = create(api, 'labels', a['id'])
    theirs = create(api, 'labels', b['id'])
    # a member of both A and B (invited to B, accepted)
    both = a['MEMBER']
    invite = api.post('/api/memberships', {'organizationId': b['id'], 'userId': both['user']['id'], 'role': 'MEMBER'})
    assert invite.status == 201
    assert api.put(f"/api/organizations/{a['id']}", {'organizationStatus': 'SUSPENDED'}).status == 200
    calls = {
        'get organization': both['api'].get(f"/api/organizations/{a['id']}"),
        'update organization': a['MANAGE']['api'].put(f"/api/organizations/{a['id']}", {'description': 'x'}),
        'get': both['api'].get(f"/api/projects/{project['id']}"),
        'sequence': both['api'].get(f"/api/projects/{project['id']}/sequence"),
        'update': both['api'].put(f"/api/labels/{label['id']}", {'name': 'n'}),
        'delete': both['api'].delete(f"/api/labels/{label['id']}"),
        'create': both['api'].post('/api/labels', {'name': 'l', 'organizationId': a['id']}),
        'create in project': both['api'].post('/api/tasks', {'projectId': project['id']}),
        'pinned list': both['api'].get(f"/api/labels?filter=organizationId=='{a['id']}'"),
        'project list': both['api'].get(f"/api/tasks?filter=projectId=='{project['id']}'"),
        'manage': a['MANAGE']['api'].post('/api/teams', {'name': 't', 'organizationId': a['id']}),
    }
    for what, r in calls.items():
        assert r.status == 403 and 'organization suspended' in r.json['message'], (what, r.status, r.json)
    # lists spanning several organizations leave the suspended one out
    labels = both['api'].get('/api/labels?pageSize=100').json['content']
    assert {i['organizationId'] for i in labels} == {b['id']} and theirs['id'] in {i['id'] for i in labels}
    assert [o['id'] for o in both['api'].get('/api/organizations').json['content']] == [b['id']]
    people = both['api'].get('/api/users?pageSize=100').json['content']
    assert a['MANAGE']['user']['id'] not in {u['id'] for u in people}
    assert a['MANAGE']['api'].get('/api/labels').json['content'] == []
    # platform admins are not affected; reactivating gives everything back
    assert api.get(f"/api/projects/{project['id']}").status == 200
    assert api.put(f"/api/organizations/{a['id']}", {'organizationStatus': 'ACTIVE'}).status == 200
    assert both['api'].get(f"/api/projects/{project['id']}").status == 200
    assert both['api'].put(f"/api/labels/{label['id']}", {'name': 'n'}).status == 200


# ----------------------------------------------------------------------------- deleting organizations

def test_only_platform_admins_delete_organizations_and_no_access_outlives_them(api, two_orgs):
    b = two_orgs['B']
    assert b['MANAGE']['api'].delete(f"/api/organizations/{b['id']}").status == 403
    assert b['MEMBER']['api'].delete(f"/api/organizations/{b['id']}").status == 403
    assert b['MEMBER']['api'].get(f"/api/organizations/{b['id']}").status == 200
    memberships = api.get(f"/api/memberships?pageSize=100&filter=organizationId=='{b['id']}'").json['content']
    assert len(memberships) >= 2
    roles = api.get(f"/api/roles?filter=organizationId=='{b['id']}'").json['content']
    assert roles
    # its memberships end with it, in its transaction (docs/api/lifecycle.md)
    assert api.delete(f"/api/organizations/{b['id']}").status == 204
    for m in memberships:
        assert api.get(f"/api/memberships/{m['id']}").status == 404
    assert api.get(f"/api/organizations/{b['id']}").status == 404
    for role in roles:
        assert api.get(f"/api/roles/{role['id']}").status == 404
    me = b['MANAGE']['api'].get('/api/account/me').json
    assert me['memberships'] == []


def test_no_membership_slips_into_an_organization_being_deleted(api, monkeypatch):
    """Both orders of the race, forced: a membership committing after the deletion read the
    memberships it removes is caught by the deletion's transaction (409), and a deletion
    committing after the membership's organization was read is caught by the membership's
    transaction (400)."""
    from chalicelib.features.identity import organizations
    from chalicelib.features.identity.bootstrap import SYSTEM
    from chalicelib.kernel import crud
    user = api.post('/api/users', {'email': f'late-{uuid.uuid4().hex[:6]}@example.com'}).json

    def new_org():
        return crud.create('organizations', {'name': 'gone', 'slug': f'g-{uuid.uuid4().hex[:8]}'}, SYSTEM)
    # 1. the deletion read "no memberships"; one lands before its transaction
    org = new_org()
    monkeypatch.setattr(organizations, '_memberships', lambda org_id: [])
    assert api.post('/api/memberships', {'organizationId': org['id'], 'userId': user['id'],
                                         'role': 'MEMBER'}).status == 201
    r = api.delete(f"/api/organizations/{org['id']}")
    assert r.status == 409 and 'memberships' in r.json['message']
    monkeypatch.undo()
    # 2. the membership read "the organization exists"; the deletion lands before its transaction
    org = new_org()
    owner = crud._owner

    def racing(family, principal, body):
        found = owner(family, principal, body)
        if family.path == 'memberships':
            crud.delete('organizations', org['id'], SYSTEM)
        return found
    monkeypatch.setattr(crud, '_owner', racing)
    r = api.post('/api/memberships', {'organizationId': org['id'], 'userId': user['id'], 'role': 'MEMBER'})
    assert r.status == 400 and 'organizationId' in r.json['message'], r.json
    monkeypatch.undo()
    assert api.get(f"/api/organizations/{org['id']}").status == 404
    assert api.get(f"/api/memberships?filter=organizationId=='{org['id']}'").json['totalElements'] == 0


# ----------------------------------------------------------------------------- invitations

def test_a_manager_adds_someone_of_another_organization_by_email_invitation(api, two_orgs):
    a, b = two_orgs['A'], two_orgs['B']
    person = a['MEMBER']                       # belongs to A only: A is their default organization
    manager = b['MANAGE']['api']
    # by id, someone the manager cannot see is a random id to them
    r = manager.post('/api/memberships', {'organizationId': b['id'], 'userId': person['user']['id'], 'role': 'MEMBER'})
    assert r.status == 400 and r.json['message'] == _missing_message('userId', person['user']['id'])
    for junk in ('x' * 3000, person['user']['id'].upper()):
        r = manager.post('/api/memberships', {'organizationId': b['id'], 'userId': junk, 'role': 'MEMBER'})
        assert r.status == 400, r.json
    # by e-mail: an invitation, answered the same way for a registered and an unknown address
    known = manager.post('/api/memberships', {'organizationId': b['id'], 'email': person['user']['email'].upper(),
                                              'role': 'MEMBER'})
    unknown = manager.post('/api/memberships', {'organizationId': b['id'], 'role': 'MEMBER',
                                                'email': f'new-{uuid.uuid4().hex[:6]}@example.com'})
    assert known.status == unknown.status == 201
    assert set(known.json) == set(unknown.json) and known.json['status'] == unknown.json['status'] == 'INVITED'
    # nothing changes for the person until they accept: no access, default organization kept
    assert manager.get(f"/api/users/{person['user']['id']}").status == 404
    assert manager.get(f"/api/users/{unknown.json['userId']}").status == 404
    assert person['api'].get('/api/account/me').json['memberships'] == [{'organizationId': a['id'], 'role': 'MEMBER'}]
    label = person['api'].post('/api/labels', {'name': 'still-a'})
    assert label.status == 201 and label.json['organizationId'] == a['id']
    assert person['api'].get(f"/api/labels?filter=organizationId=='{b['id']}'").json['content'] == []
    # the person sees the invitation, may not change it into something else, and accepts it
    me = person['api'].get('/api/account/me').json
    assert [(i['id'], i['organizationId'], i['role']) for i in me['invitations']] == [
        (known.json['id'], b['id'], 'MEMBER')]
    path = f"/api/memberships/{known.json['id']}"
    assert person['api'].get(path).json['status'] == 'INVITED'
    assert person['api'].put(path, {'status': 'ACTIVE', 'role': 'MANAGE'}).status == 403
    assert manager.put(path, {'status': 'ACTIVE'}).status == 403       # only the person accepts
    accepted = person['api'].put(path, {'status': 'ACTIVE'})
    assert accepted.status == 200 and accepted.json['status'] == 'ACTIVE' and accepted.json['role'] == 'MEMBER'
    roles = {m['organizationId']: m['role'] for m in person['api'].get('/api/account/me').json['memberships']}
    assert roles == {a['id']: 'MEMBER', b['id']: 'MEMBER'}
    assert manager.get(f"/api/users/{person['user']['id']}").status == 200
    assert person['api'].put(path, {'status': 'INVITED'}).status == 403


def test_an_invitation_can_be_declined_and_a_new_address_gets_an_account(api, two_orgs, idp):  # noqa: F811 - shared fixture
    b = two_orgs['B']
    email = f'fresh-{uuid.uuid4().hex[:6]}@example.com'
    invited = b['MANAGE']['api'].post('/api/memberships', {'organizationId': b['id'], 'email': email, 'role': 'VIEWER'})
    assert invited.status == 201
    token = bearer(RSA.token(email, sub='idp|fresh'))
    me = api.get('/api/account/me', key=None, headers=token)
    assert me.status == 200 and me.json['id'] == invited.json['userId'] and me.json['memberships'] == []
    assert [i['organizationId'] for i in me.json['invitations']] == [b['id']]
    assert api.delete(f"/api/memberships/{invited.json['id']}", key=None, headers=token).status == 204
    assert api.get('/api/account/me', key=None, headers=token).json['invitations'] == []
    assert b['MANAGE']['api'].get(f"/api/memberships/{invited.json['id']}").status == 404


# ----------------------------------------------------------------------------- what the rules cost

def test_dynamodb_calls_of_a_members_requests(api, org_id, monkeypatch):
    """Suspension costs a member a consistent read of the organization per request that touches
    it: on a GET by id it rides in the BatchGetItem that reads the record with the admission
    (the organizations the member held on their previous request), else in the one BatchGetItem
    that reads what the answer embeds (the first request of a process: kernel/embedding.py
    ``read_ahead``); on a list, one GetItem. None for a platform admin (tests/api/test_ratelimit.py)."""
    from chalicelib.kernel.store import model
    project = create(api, 'projects', org_id)
    _, key = make_user(api, org_id, 'MEMBER')
    member = api.as_key(key)
    calls: list[str] = []
    clients = {id(c): c for c in (model.configure()._get_connection().connection.client,
                                  model.boto3_table().meta.client)}

    def record(event_name, **kwargs):
        calls.append(event_name.rsplit('.', 1)[1])

    def count(path: str) -> list[str]:
        calls.clear()
        for c in clients.values():
            c.meta.events.register('before-call.dynamodb.*', record)
        try:
            assert member.get(path).status == 200
        finally:
            for c in clients.values():
                c.meta.events.unregister('before-call.dynamodb.*', record)
        return list(calls)
    from chalicelib.features.identity import admission, ratelimit
    monkeypatch.setattr(ratelimit, 'clock', lambda: 1_800_000_000.5)   # no new minute mid-test
    assert member.get('/api/account/me').status == 200   # the member's first request this minute starts it
    admission._org_hint.clear()
    assert sorted(count(f"/api/projects/{project['id']}")) == ['BatchGetItem', 'BatchGetItem', 'UpdateItem']
    assert sorted(count(f"/api/projects/{project['id']}")) == ['BatchGetItem', 'UpdateItem']
    # a list: the gate's two calls, the page's keys (one round of 16 Queries, one per index
    # shard), its count (one round of 16 Queries, one per counter partition: kernel/store/table.py),
    # the page (one BatchGetItem)
    assert sorted(count('/api/projects')) == ['BatchGetItem', 'BatchGetItem'] + ['Query'] * 32 + ['UpdateItem']
