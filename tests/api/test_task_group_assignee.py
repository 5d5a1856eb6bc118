"""A grouped task's assignee is set through its task group (issues 12 and 14), through REST:
the group's assignee cascades to its tasks in the group's transaction, a PUT of assigneeId on a
grouped task is 400 naming the group, a task joining a group takes the group's assignee, and
the group's history records it all. The MCP tools (tests/integration/test_mcp.py) get the same
rule from the same hooks."""
from __future__ import annotations

from tests.conftest import make_user
from tests.support import create


def _setup(api, org_id, members=3):
    project = create(api, 'projects', org_id)
    alice, _ = make_user(api, org_id, 'MEMBER')
    bob, _ = make_user(api, org_id, 'MEMBER')
    group = create(api, 'task-groups', org_id, projectId=project['id'], name='Invoices batch')
    tasks = [create(api, 'tasks', org_id, projectId=project['id'], title=f't{i}', taskGroupId=group['id'])
             for i in range(members)]
    return project, group, tasks, alice, bob


def _task(api, id_):
    r = api.get(f'/api/tasks/{id_}')
    assert r.status == 200
    return r.json


def test_group_assignee_cascades_to_every_member_in_one_write(api, org_id):
    project, group, tasks, alice, bob = _setup(api, org_id)
    loose = create(api, 'tasks', org_id, projectId=project['id'], title='not grouped')
    r = api.put(f"/api/task-groups/{group['id']}", {'assigneeId': alice['id'], 'changeSequence': 1})
    assert r.status == 200, r.json
    for t in tasks:
        got = _task(api, t['id'])
        assert got['assigneeId'] == alice['id'] and got['changeSequence'] == 2
    assert 'assigneeId' not in _task(api, loose['id'])
    # the index serves the new value at once, and the old one no longer lists them
    page = api.get(f"/api/tasks?filter=assigneeId=='{alice['id']}'").json
    assert page['totalElements'] == 3 and {t['id'] for t in page['content']} == {t['id'] for t in tasks}
    # re-assign, then clear: the members follow
    assert api.put(f"/api/task-groups/{group['id']}", {'assigneeId': bob['id']}).status == 200
    assert {_task(api, t['id'])['assigneeId'] for t in tasks} == {bob['id']}
    assert api.get(f"/api/tasks?filter=assigneeId=='{alice['id']}'").json['totalElements'] == 0
    assert api.put(f"/api/task-groups/{group['id']}", {'assigneeId': None}).status == 200
    assert all('assigneeId' not in _task(api, t['id']) for t in tasks)
    history = api.get(f"/api/task-groups/{group['id']}/history").json['content']
    assert [h['changes'].get('assigneeId', '-') for h in history[:3]] == [None, bob['id'], alice['id']]


def test_put_of_a_grouped_tasks_assignee_is_400_naming_the_group(api, org_id):
    _, group, tasks, alice, _ = _setup(api, org_id, members=1)
    task = tasks[0]
    r = api.put(f"/api/tasks/{task['id']}", {'assigneeId': alice['id']})
    assert r.status == 400
    assert group['id'] in r.json['message'] and 'Invoices batch' in r.json['message']
    assert 'assigneeId' not in _task(api, task['id'])
    assert api.put(f"/api/task-groups/{group['id']}", {'assigneeId': alice['id']}).status == 200
    r = api.put(f"/api/tasks/{task['id']}", {'assigneeId': None})   # clearing is a change too
    assert r.status == 400 and group['id'] in r.json['message']
    assert _task(api, task['id'])['assigneeId'] == alice['id']
    # the GET body sent back as a PUT is fine (nothing changes), and other fields still change
    body = _task(api, task['id'])
    assert api.put(f"/api/tasks/{task['id']}", {**body, 'title': 'renamed'}).status == 200
    assert _task(api, task['id'])['title'] == 'renamed'


def test_tasks_joining_a_group_take_its_assignee_and_leaving_keeps_it(api, org_id):
    project, group, _, alice, bob = _setup(api, org_id, members=0)
    assert api.put(f"/api/task-groups/{group['id']}", {'assigneeId': alice['id']}).status == 200
    # created in the group: the group's assignee, another one is refused
    made = create(api, 'tasks', org_id, projectId=project['id'], taskGroupId=group['id'])
    assert made['assigneeId'] == alice['id']
    r = api.post('/api/tasks', {'projectId': project['id'], 'taskGroupId': group['id'], 'assigneeId': bob['id']})
    assert r.status == 400 and group['id'] in r.json['message']
    # joining: the task's own assignee is replaced by the group's
    loose = create(api, 'tasks', org_id, projectId=project['id'], assigneeId=bob['id'])
    r = api.put(f"/api/tasks/{loose['id']}", {'taskGroupId': group['id']})
    assert r.status == 200 and r.json['assigneeId'] == alice['id']
    r = api.put(f"/api/tasks/{loose['id']}", {'taskGroupId': group['id'], 'assigneeId': bob['id']})
    assert r.status == 400   # (it is in the group now: its assignee is the group's)
    # leaving keeps the assignee, which is then the task's own
    r = api.put(f"/api/tasks/{loose['id']}", {'taskGroupId': None})
    assert r.status == 200 and r.json['assigneeId'] == alice['id'] and 'taskGroupId' not in r.json
    assert api.put(f"/api/tasks/{loose['id']}", {'assigneeId': bob['id']}).status == 200
    history = api.get(f"/api/task-groups/{group['id']}/history").json['content']
    moves = [h['changes'] for h in history if 'taskAdded' in h['changes'] or 'taskRemoved' in h['changes']]
    assert {'taskRemoved': loose['id']} in moves and {'taskAdded': loose['id']} in moves
    assert {'taskAdded': made['id']} in moves


def test_a_group_too_large_for_one_transaction_is_refused_whole(api, org_id, monkeypatch):
    from chalicelib.features.tasks import groups as task_groups
    monkeypatch.setattr(task_groups, 'MAX_CASCADE', 2)
    _, group, tasks, alice, _ = _setup(api, org_id, members=3)
    r = api.put(f"/api/task-groups/{group['id']}", {'assigneeId': alice['id']})
    assert r.status == 400 and 'at most 2' in r.json['message']
    assert api.get(f"/api/task-groups/{group['id']}").json['changeSequence'] == 1
    assert all('assigneeId' not in _task(api, t['id']) for t in tasks)


def test_a_task_joining_while_the_group_is_reassigned_is_not_left_behind(api, org_id, monkeypatch):
    """The group read its members; a task joins before the group's write commits: the member
    counter check fails that write, which starts over and includes the newcomer."""
    from chalicelib.features.tasks import groups as task_groups
    project, group, tasks, alice, bob = _setup(api, org_id, members=2)
    newcomer = create(api, 'tasks', org_id, projectId=project['id'], title='late')
    original, calls = task_groups.member_tasks, []

    def read_then_someone_joins(group_id, org):
        found = original(group_id, org)
        calls.append(len(found))
        if len(calls) == 1:   # between the group's read and its commit
            assert api.put(f"/api/tasks/{newcomer['id']}", {'taskGroupId': group['id']}).status == 200
        return found
    monkeypatch.setattr(task_groups, 'member_tasks', read_then_someone_joins)
    r = api.put(f"/api/task-groups/{group['id']}", {'assigneeId': alice['id']})
    assert r.status == 200, r.json
    assert calls[0] == 2 and calls[-1] == 3   # the first attempt was refused and read again
    for t in [*tasks, newcomer]:
        assert _task(api, t['id'])['assigneeId'] == alice['id']


def test_a_task_joining_with_an_assignee_the_group_just_dropped_is_refused(api, org_id, monkeypatch):
    """The task read the group's assignee; the group is re-assigned before the task's write
    commits: the group's sequence check fails the join (409), nothing is written."""
    from chalicelib.features.tasks import hooks as task_hook
    project, group, _, alice, bob = _setup(api, org_id, members=0)
    assert api.put(f"/api/task-groups/{group['id']}", {'assigneeId': alice['id']}).status == 200
    joiner = create(api, 'tasks', org_id, projectId=project['id'], title='joiner')
    original, calls = task_hook._group, []

    def read_then_group_changes(group_id, org):
        found = original(group_id, org)
        calls.append(group_id)
        if len(calls) == 1:
            assert api.put(f"/api/task-groups/{group['id']}", {'assigneeId': bob['id']}).status == 200
        return found
    monkeypatch.setattr(task_hook, '_group', read_then_group_changes)
    r = api.put(f"/api/tasks/{joiner['id']}", {'taskGroupId': group['id']})
    assert r.status == 409 and 'changed meanwhile' in r.json['message']
    after = _task(api, joiner['id'])
    assert 'taskGroupId' not in after and after['changeSequence'] == 1
    monkeypatch.setattr(task_hook, '_group', original)
    r = api.put(f"/api/tasks/{joiner['id']}", {'taskGroupId': group['id']})
    assert r.status == 200 and r.json['assigneeId'] == bob['id']


def test_another_organizations_group_is_an_unknown_reference_and_stays_untouched(api, org_id):
    from tests.conftest import make_org
    project, _, _, alice, _ = _setup(api, org_id, members=0)
    other = make_org(api)
    theirs = create(api, 'task-groups', other['id'], name='theirs')
    task = create(api, 'tasks', org_id, projectId=project['id'])
    for r in (api.post('/api/tasks', {'projectId': project['id'], 'taskGroupId': theirs['id']}),
              api.put(f"/api/tasks/{task['id']}", {'taskGroupId': theirs['id']})):
        assert r.status == 400 and 'refers to a record that does not exist' in r.json['message']
    history = api.get(f"/api/task-groups/{theirs['id']}/history").json['content']
    assert [h['action'] for h in history] == ['CREATE']
