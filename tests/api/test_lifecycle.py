"""Issue 24, findings 6, 7, 10 and 11 (docs/api/lifecycle.md): executions' steps are validated
as in a plan, a suspended organization refuses UI events like every other write, deleting an
organization ends its memberships with it, and deletes leave nothing behind (work counters,
RUNNING activities, references to deleted teams and users). The invariant checker runs after
every test."""
from __future__ import annotations

import pytest

from tests.conftest import make_org, make_user
from tests.invariants import table_invariants  # noqa: F401 - the checker fixture

pytestmark = pytest.mark.usefixtures('table_invariants')


def _project(api, org_id, name='P'):
    r = api.post('/api/projects', {'name': name, 'organizationId': org_id})
    assert r.status == 201, r.json
    return r.json


# ----------------------------------------------------------------------------- finding 6

def test_an_execution_step_and_its_policy_are_validated_as_in_a_plan(api, org_id):
    project = _project(api, org_id)
    step = {'name': 's', 'stepType': 'SCRIPT', 'options': {'expression': '1'},
            'executionPolicy': {'maxAttempts': 1000000}}
    plan = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'p', 'steps': [step]})
    assert plan.status == 400 and 'maxAttempts' in plan.json['message'], plan.json
    r = api.post('/api/executions', {'projectId': project['id'], 'name': 'e', 'step': step})
    assert r.status == 400 and 'maxAttempts' in r.json['message'], r.json
    for bad in ({'name': 's', 'stepType': 'NOPE'}, {'name': 's', 'stepType': 'SCRIPT'},
                {'name': 's', 'stepType': 'SCRIPT', 'options': {'expression': '1'}, 'extra': 1}):
        r = api.post('/api/executions', {'projectId': project['id'], 'name': 'e', 'step': bad})
        assert r.status == 400 and r.json['error'] and r.json['status'] == 400, (bad, r.json)
    good = {**step, 'executionPolicy': {'maxAttempts': 3}}
    made = api.post('/api/executions', {'projectId': project['id'], 'name': 'e', 'step': good})
    assert made.status == 201, made.json
    r = api.put(f"/api/executions/{made.json['id']}", {**made.json, 'step': step})
    assert r.status == 400 and 'maxAttempts' in r.json['message'], r.json
    assert api.get(f"/api/executions/{made.json['id']}").json['step'] == good


# ----------------------------------------------------------------------------- finding 7

def test_a_suspended_organization_refuses_ui_events_like_every_other_write(api):
    org = make_org(api)
    _, key = make_user(api, org['id'], 'MEMBER')
    member = api.as_key(key)
    batch = {'events': [{'kind': 'ui.error', 'payload': {'code': 'E1'}}]}
    assert member.post('/api/events/ui/batch', batch).json == {'accepted': 1, 'dropped': 0}
    assert api.put(f"/api/organizations/{org['id']}", {'organizationStatus': 'SUSPENDED'}).status == 200
    other = member.post('/api/labels', {'name': 'l', 'organizationId': org['id']})
    r = member.post('/api/events/ui/batch', batch)
    assert other.status == 403 and 'organization suspended' in other.json['message']
    assert (r.status, r.json) == (other.status, other.json)
    named = member.post('/api/events/ui/batch', {**batch, 'organizationId': org['id']})
    assert (named.status, named.json) == (other.status, other.json)
    assert api.put(f"/api/organizations/{org['id']}", {'organizationStatus': 'ACTIVE'}).status == 200
    stored = api.get(f"/api/events?pageSize=100&filter=organizationId=='{org['id']}';eventType=='ui.error'")
    assert stored.json['totalElements'] == 1, stored.json


# ----------------------------------------------------------------------------- finding 10

def _memberships_of(api, org_id):
    r = api.get(f"/api/memberships?pageSize=100&filter=organizationId=='{org_id}'")
    assert r.status == 200, r.json
    return r.json['content']


def test_a_fresh_organization_made_by_a_platform_admin_is_deleted_with_its_memberships(api):
    org = make_org(api)
    mine = _memberships_of(api, org['id'])
    assert [m['role'] for m in mine] == ['MANAGE']      # the creator's own, made automatically
    r = api.delete(f"/api/organizations/{org['id']}")
    assert r.status == 204, r.json
    assert api.get(f"/api/organizations/{org['id']}").status == 404
    assert _memberships_of(api, org['id']) == []
    assert api.get(f"/api/memberships/{mine[0]['id']}").status == 404
    me = api.get('/api/account/me').json
    assert org['id'] not in {m['organizationId'] for m in me['memberships']}


@pytest.mark.slow   # 9 s, 100+ requests; the quick loop keeps the small organization deletes above and below
def test_an_organization_of_25_members_and_invitations_takes_them_and_their_access_with_it(api):
    org = make_org(api)
    keys = [make_user(api, org['id'], role)[1] for role in ('MANAGE', 'MEMBER', 'VIEWER') * 7]
    manager = api.as_key(keys[0])
    for n in range(3):
        invited = manager.post('/api/memberships', {'organizationId': org['id'], 'role': 'MEMBER',
                                                    'email': f'invited-{n}-{org["id"][:8]}@example.com'})
        assert invited.status == 201 and invited.json['status'] == 'INVITED', invited.json
    assert len(_memberships_of(api, org['id'])) == 25
    label = api.as_key(keys[1]).post('/api/labels', {'name': 'l', 'organizationId': org['id']})
    assert label.status == 201
    refused = api.delete(f"/api/organizations/{org['id']}")
    assert refused.status == 409 and '1 labels' in refused.json['message'], refused.json
    assert len(_memberships_of(api, org['id'])) == 25             # refused: nothing changed
    assert api.get(f"/api/organizations/{org['id']}").json['organizationStatus'] == 'ACTIVE'
    assert api.delete(f"/api/labels/{label.json['id']}").status == 204
    assert manager.delete(f"/api/organizations/{org['id']}").status == 403
    r = api.delete(f"/api/organizations/{org['id']}")
    assert r.status == 204, r.json
    assert _memberships_of(api, org['id']) == []
    for key in keys[:3]:
        member = api.as_key(key)
        assert member.get(f"/api/organizations/{org['id']}").status == 404
        assert org['id'] not in {m['organizationId'] for m in member.get('/api/account/me').json['memberships']}
        assert member.post('/api/labels', {'name': 'l', 'organizationId': org['id']}).status in (400, 404)


def test_a_membership_landing_during_the_delete_is_caught_by_its_transaction(api, monkeypatch):
    from chalicelib.features.identity import organizations
    org = make_org(api)
    monkeypatch.setattr(organizations, '_memberships', lambda org_id: [])   # read before the creator's
    r = api.delete(f"/api/organizations/{org['id']}")
    assert r.status == 409 and 'memberships' in r.json['message'], r.json
    monkeypatch.undo()
    assert len(_memberships_of(api, org['id'])) == 1
    assert api.delete(f"/api/organizations/{org['id']}").status == 204


# ----------------------------------------------------------------------------- finding 11

def test_an_activity_leaves_running_when_its_last_unfinished_execution_is_deleted_and_its_delete_cleans_up(
        api, work, org_id):
    from chalicelib.features.work import store as work_store
    project = _project(api, org_id)
    plan = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'p', 'steps': [
        {'name': 'double', 'stepType': 'SCRIPT', 'options': {'expression': '$inputs.n * 2'}}]}).json
    started = api.post(f"/api/activity-plans/{plan['id']}/start", {'projectId': project['id'], 'inputs': {'n': 1}})
    assert started.status == 202, started.json
    activity = started.json['id']
    assert work.queue.poll_once(wait_seconds=0)['received'] == 1      # the start only: its attempt waits
    assert api.get(f'/api/activities/{activity}').json['status'] == 'RUNNING'
    (execution,) = api.get(f"/api/executions?filter=activityId=='{activity}'").json['content']
    refused = api.delete(f'/api/activities/{activity}')
    assert refused.status == 409 and '1 executions.activityId' in refused.json['message'], refused.json
    assert api.delete(f"/api/executions/{execution['id']}").status == 204
    assert api.get(f'/api/activities/{activity}').json['status'] == 'COMPLETED'
    work.drain()                                                       # the attempt finds it gone
    assert work_store.work_counts(activity) == {'remaining': 0, 'failed': 0}
    assert api.delete(f'/api/activities/{activity}').status == 204
    from chalicelib.kernel.store.model import configure
    assert list(configure().query(f'ACTWORK#{activity}', consistent_read=True)) == []


def test_a_team_named_by_tasks_or_task_groups_is_refused_until_they_are_changed(api, org_id):
    project = _project(api, org_id)
    team = api.post('/api/teams', {'name': 'T', 'organizationId': org_id}).json
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't', 'teamId': team['id']}).json
    group = api.post('/api/task-groups', {'projectId': project['id'], 'name': 'g', 'teamId': team['id']})
    assert group.status == 201, group.json
    r = api.delete(f"/api/teams/{team['id']}")
    assert r.status == 409 and '1 tasks.teamId' in r.json['message'] and '1 task-groups.teamId' in r.json['message']
    assert api.put(f"/api/tasks/{task['id']}", {'teamId': None}).status == 200
    assert api.delete(f"/api/task-groups/{group.json['id']}").status == 204
    assert api.delete(f"/api/teams/{team['id']}").status == 204
    assert api.get(f"/api/tasks/{task['id']}").json.get('teamId') is None


def test_a_deleted_user_takes_their_memberships_and_is_refused_while_records_name_them(api):
    org = make_org(api)
    other = make_org(api)
    user, key = make_user(api, org['id'], 'MEMBER')
    assert api.post('/api/memberships', {'organizationId': other['id'], 'userId': user['id'],
                                         'role': 'VIEWER'}).status == 201
    project = _project(api, org['id'])
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't', 'assigneeId': user['id']}).json
    r = api.delete(f"/api/users/{user['id']}")
    assert r.status == 409 and '1 tasks.assigneeId' in r.json['message'], r.json
    assert api.as_key(key).get('/api/account/me').status == 200
    assert api.put(f"/api/tasks/{task['id']}", {'assigneeId': None}).status == 200
    assert api.delete(f"/api/users/{user['id']}").status == 204
    assert api.get(f"/api/users/{user['id']}").status == 404
    for o in (org, other):
        assert user['id'] not in {m['userId'] for m in _memberships_of(api, o['id'])}
    assert api.as_key(key).get('/api/account/me').status in (401, 403)


def test_a_user_at_the_membership_cap_is_deleted_and_one_over_is_refused(api):
    """users.MAX_MEMBERSHIPS: the delete's one transaction (with its referrer checks per
    organization) stays under DynamoDB's 100 items at the cap; one more is a 409 naming it."""
    from chalicelib.features.identity.users import MAX_MEMBERSHIPS
    orgs = [make_org(api) for _ in range(MAX_MEMBERSHIPS + 1)]
    user, _ = make_user(api, orgs[0]['id'], 'MEMBER')
    for o in orgs[1:]:
        assert api.post('/api/memberships', {'organizationId': o['id'], 'userId': user['id'],
                                             'role': 'VIEWER'}).status == 201
    r = api.delete(f"/api/users/{user['id']}")
    assert r.status == 409 and f'at most {MAX_MEMBERSHIPS}' in r.json['message'], r.json
    mine = [m for m in _memberships_of(api, orgs[-1]['id']) if m['userId'] == user['id']]
    assert api.delete(f"/api/memberships/{mine[0]['id']}").status == 204
    assert api.delete(f"/api/users/{user['id']}").status == 204, 'the cap fits one transaction'
    for o in orgs:
        assert user['id'] not in {m['userId'] for m in _memberships_of(api, o['id'])}


def test_an_organization_whose_events_were_recorded_is_deleted_and_its_log_outlives_it(api, work):
    """The events records the stream writes (the organization's log) do not hold it
    (kernel/registry.py ``log``, kernel/parents.py): before, its first recorded event made it undeletable."""
    org = make_org(api)
    while work.stream.poll_once()['records']:
        pass
    logged = api.get(f"/api/events?filter=organizationId == '{org['id']}'").json['totalElements']
    assert logged >= 1
    r = api.delete(f"/api/organizations/{org['id']}")
    assert r.status == 204, r.json
    while work.stream.poll_once()['records']:
        pass
    assert api.get(f"/api/organizations/{org['id']}").status == 404
