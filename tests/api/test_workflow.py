"""Contract actions beyond CRUD: setTaskStatus, cancelExecution, task-group history, view=summary,
and organization rules (slug, creator membership, PLATFORM_ADMIN grants)."""
from __future__ import annotations

import uuid

from tests.conftest import make_org, make_user
from tests.support import create


def test_set_task_status_checks_the_organizations_statuses(api, org_id):
    task = create(api, 'tasks', org_id)
    path = f'/api/tasks/{task["id"]}/status'
    assert api.put(path, {'statusSlug': 'review'}).status == 400
    create(api, 'task-statuses', org_id, slug='review', label='Review', statusType='IN_PROGRESS')
    r = api.put(path, {'statusSlug': 'review'})
    assert r.status == 200, r.json
    assert r.json['statusSlug'] == 'review' and r.json['changeSequence'] == 2
    assert api.put(path, {'statusSlug': 'review', 'changeSequence': 1}).status == 409
    assert api.put(path, {}).status == 400
    assert api.put(f'/api/tasks/{uuid.uuid4()}/status', {'statusSlug': 'review'}).status == 404


def test_every_write_of_a_task_refuses_a_status_slug_that_names_no_status(api, org_id, work):
    """Contract rule 7 on every path that writes a task's statusSlug (issue 40, defect 1): before,
    POST and PUT stored any slug while PUT .../status refused it. The rule is the tasks family's
    declaration (kernel/registry.py ``slug_refs``), checked by the generic write path."""
    project = create(api, 'projects', org_id)
    body = {'projectId': project['id'], 'title': 't'}
    r = api.post('/api/tasks', {**body, 'statusSlug': 'nope'})
    assert r.status == 400 and 'statusSlug' in r.json['message'], r.json
    assert api.get('/api/tasks').json['totalElements'] == 0
    create(api, 'task-statuses', org_id, slug='review', label='Review', statusType='IN_PROGRESS')
    task = api.post('/api/tasks', {**body, 'statusSlug': 'review'})
    assert task.status == 201 and task.json['statusSlug'] == 'review'
    path = f"/api/tasks/{task.json['id']}"
    for change in ({'statusSlug': 'nope'}, {'statusSlug': 'nope', 'changeSequence': 1}, {'statusSlug': ''}):
        r = api.put(path, change)
        assert r.status == 400 and 'statusSlug' in r.json['message'], (change, r.json)
    r = api.put(f'{path}/status', {'statusSlug': 'nope'})   # the same answer as PUT (the kernel's check)
    assert r.status == 400 and r.json['message'] == \
        "Field 'statusSlug' refers to a task status that does not exist: nope", r.json
    # a status of another organization is not one of this task's statuses
    other = make_org(api)
    create(api, 'task-statuses', other['id'], slug='elsewhere', label='Elsewhere')
    assert api.put(path, {'statusSlug': 'elsewhere'}).status == 400
    # the batch update's task write is the same generic update
    r = api.post('/api/batch-update', {'projectId': project['id'], 'task': {'id': task.json['id'],
                                                                            'statusSlug': 'nope'}})
    assert r.status == 200 and r.json['task']['success'] is False and r.json['task']['error'] == 'Bad Request'
    stored = api.get(path).json
    assert stored['statusSlug'] == 'review' and stored['changeSequence'] == 1
    # null clears the field (no reference to check); a real status is accepted
    assert api.put(path, {'statusSlug': None}).status == 200
    r = api.put(path, {'statusSlug': 'review'})
    assert r.status == 200 and r.json['statusSlug'] == 'review'


def test_a_task_groups_status_slug_is_its_own_label_not_a_task_status(api, org_id):
    """A task group's statusSlug names no task status (docs/api/conventions.md, slug references):
    stored as given and filterable, where a task's would be a 400."""
    project = create(api, 'projects', org_id)
    group = api.post('/api/task-groups', {'projectId': project['id'], 'name': 'g', 'statusSlug': 'in-triage'})
    assert group.status == 201 and group.json['statusSlug'] == 'in-triage', group.json
    assert api.get("/api/task-groups?filter=statusSlug=='in-triage'").json['totalElements'] == 1
    assert api.post('/api/tasks', {'projectId': project['id'], 'title': 't', 'statusSlug': 'in-triage'}).status == 400


def test_a_task_step_naming_no_status_fails_its_activity(api, org_id, work):
    """The tasks an activity's TASK steps create take the same rule (kernel/crud.py reference_ops)."""
    plan = create(api, 'activity-plans', org_id, name='p',
                  steps=[{'name': 's', 'stepType': 'TASK', 'options': {'statusSlug': 'nope'}}])
    r = api.post(f"/api/activity-plans/{plan['id']}/start", {'projectId': plan['projectId']})
    assert r.status in (200, 201, 202), r.json
    work.drain()
    activity = api.get(f"/api/activities/{r.json['id']}").json
    assert activity['status'] == 'FAILED' and 'statusSlug' in activity['metadata']['failureReason'], activity
    assert api.get('/api/tasks').json['totalElements'] == 0


def test_a_status_change_reads_the_task_once(api, org_id):
    """Issue 40: PUT /api/tasks/{id}/status read the task to check its organization's statuses,
    then the update read it again. Now the update writes over that one read."""
    from tests import faults
    task = create(api, 'tasks', org_id)
    create(api, 'task-statuses', org_id, slug='triage', label='Triage', statusType='OPEN')
    key = f"tasks#{task['id']}"
    reads: list[str] = []

    def rule(op, params):
        if op in ('GetItem', 'BatchGetItem', 'Query') and key in str(params):
            reads.append(op)
        return None
    with faults.inject(rule):
        r = api.put(f"/api/tasks/{task['id']}/status", {'statusSlug': 'triage'})
    assert r.status == 200 and r.json['statusSlug'] == 'triage', r.json
    assert reads == ['GetItem'], reads


def test_retired_todo_status_type_is_stored_as_open(api, org_id):
    made = create(api, 'task-statuses', org_id, statusType='TODO')
    assert made['statusType'] == 'OPEN'


def test_cancel_execution(api, org_id):
    execution = create(api, 'executions', org_id)
    assert execution['status'] == 'PENDING'
    r = api.post(f'/api/executions/{execution["id"]}/cancel')
    assert r.status == 200 and r.json['status'] == 'CANCELLED'
    assert api.post(f'/api/executions/{execution["id"]}/cancel').status == 409
    assert api.post(f'/api/executions/{uuid.uuid4()}/cancel').status == 404


def test_task_group_history_records_every_write(api, org_id):
    group = create(api, 'task-groups', org_id, name='g1')
    path = f'/api/task-groups/{group["id"]}'
    assert api.put(path, {'name': 'g2', 'description': 'x'}).status == 200
    history = api.get(f'{path}/history').json
    assert [h['action'] for h in history['content']] == ['UPDATE', 'CREATE']
    assert history['content'][0]['changes'] == {'name': 'g2', 'description': 'x'}
    other = create(api, 'task-groups', org_id)
    all_history = api.get('/api/task-group-history?pageSize=100').json
    assert {h['taskGroupId'] for h in all_history['content']} == {group['id'], other['id']}
    assert api.delete(path).status == 204
    assert api.get(f'{path}/history').status == 404
    kept = api.get(f"/api/task-group-history?filter=taskGroupId=='{group['id']}'").json
    assert [h['action'] for h in kept['content']] == ['CREATE', 'UPDATE', 'DELETE']
    assert api.post('/api/task-group-history', {}).status in (404, 405)


def test_view_summary_omits_plan_detail_in_lists_only(api, org_id):
    plan = create(api, 'activity-plans', org_id, name='p', steps=[{'name': 's', 'stepType': 'TASK'}],
                  prompts=[{'p': 1}])
    task = create(api, 'tasks', org_id, projectId=plan['projectId'], title='t', plan={'big': True})
    for family, made, heavy in (('activity-plans', plan, 'steps'), ('tasks', task, 'plan')):
        summary = api.get(f'/api/{family}?view=summary').json['content']
        full = api.get(f'/api/{family}').json['content']
        assert heavy not in summary[0] and full[0][heavy] == made[heavy]
        assert api.get(f'/api/{family}/{made["id"]}?view=summary').json[heavy] == made[heavy]
    assert api.get('/api/tasks?view=nonsense').status == 400


def test_organization_slug_rules(api):
    r = api.post('/api/organizations', {'name': 'X', 'slug': 'My-Org-1'})
    assert r.status == 201 and r.json['slug'] == 'my-org-1'
    for bad in ('ab', 'a' * 101, 'has space', 'ünï'):
        assert api.post('/api/organizations', {'name': 'X', 'slug': bad}).status == 400, bad
    assert api.post('/api/organizations', {'name': 'Y', 'slug': 'MY-ORG-1'}).status == 409
    assert api.put(f'/api/organizations/{r.json["id"]}', {'slug': 'x!'}).status == 400


def test_organization_creator_becomes_its_manager(api, org_id):
    _, manager_key = make_user(api, org_id, 'MANAGE')
    manager = api.as_key(manager_key)
    org = make_org(manager)
    assert manager.get(f'/api/organizations/{org["id"]}').status == 200
    project = manager.post('/api/projects', {'name': 'p', 'organizationId': org['id']})
    assert project.status == 201


def test_only_platform_admins_grant_platform_admin(api, org_id):
    _, manager_key = make_user(api, org_id, 'MANAGE')
    manager = api.as_key(manager_key)
    user = api.post('/api/users', {'email': f'x{uuid.uuid4().hex[:6]}@example.com'}).json
    r = manager.post('/api/memberships', {'organizationId': org_id, 'email': user['email'], 'role': 'PLATFORM_ADMIN'})
    assert r.status == 403
    m = manager.post('/api/memberships', {'organizationId': org_id, 'email': user['email'], 'role': 'MEMBER'})
    assert m.status == 201
    assert manager.put(f'/api/memberships/{m.json["id"]}', {'role': 'PLATFORM_ADMIN'}).status == 403
    assert api.put(f'/api/memberships/{m.json["id"]}', {'role': 'PLATFORM_ADMIN'}).status == 200


def test_resource_schemes_cover_the_registry(api):
    from chalicelib.kernel.registry import FAMILIES
    r = api.get('/api/resolve/schemes')
    assert r.status == 200 and isinstance(r.json, list)
    assert {s['scheme'] for s in r.json} == {f.path for f in FAMILIES}
    for s in r.json:
        assert set(s) == {'scheme', 'endpointPattern', 'scope', 'description'}
        assert s['scope'] in ('platform', 'organization', 'project')
    assert api.get('/api/resolve/schemes', key=None).status == 401
