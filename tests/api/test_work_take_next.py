"""POST /api/tasks/take-next (issue 12): the oldest OPEN, unassigned task the caller may work
on, claimed with a conditional write; 20 concurrent callers get 20 different tasks."""
from __future__ import annotations

import threading
import uuid

import pytest

from tests.api.test_list_concurrency import SerialDynamo
from tests.conftest import make_user

PATH = '/api/tasks/take-next'


@pytest.fixture
def project(api, org_id):
    api.post('/api/task-statuses', {'organizationId': org_id, 'label': 'Open', 'slug': 'open', 'statusType': 'OPEN'})
    api.post('/api/task-statuses', {'organizationId': org_id, 'label': 'Done', 'slug': 'done', 'statusType': 'DONE'})
    return api.post('/api/projects', {'name': 'queue', 'organizationId': org_id}).json


def task(api, project, title, **extra):
    body = {'projectId': project['id'], 'title': title, 'statusSlug': 'open', **extra}
    r = api.post('/api/tasks', {k: v for k, v in body.items() if v is not None})
    assert r.status == 201, r.json
    return r.json


def test_takes_the_oldest_open_unassigned_task_then_204(api, org_id, project):
    user, key = make_user(api, org_id, 'MEMBER')
    task(api, project, 'closed', statusSlug='done')
    task(api, project, 'taken', assigneeId=user['id'])
    group = api.post('/api/task-groups', {'projectId': project['id'], 'name': 'g'}).json
    task(api, project, 'grouped', taskGroupId=group['id'])
    first = task(api, project, 'first')
    second = task(api, project, 'second', statusSlug=None)
    r = api.post(PATH, {'projectId': project['id']}, key=key)
    assert r.status == 200 and r.json['id'] == first['id'] and r.json['assigneeId'] == user['id']
    assert api.post(PATH, {'projectId': project['id']}, key=key).json['id'] == second['id']
    none = api.post(PATH, {'projectId': project['id']}, key=key)
    assert none.status == 204 and none.body == b''
    _, viewer = make_user(api, org_id, 'VIEWER')
    assert api.post(PATH, {'projectId': project['id']}, key=viewer).status == 403
    assert api.post(PATH, {'projectId': str(uuid.uuid4())}, key=key).status == 404
    assert api.post(PATH, {}, key=key).status == 400


def test_team_matching_strict_and_soft(api, org_id, project):
    user, key = make_user(api, org_id, 'MEMBER')
    mine = api.post('/api/teams', {'organizationId': org_id, 'name': 'mine', 'memberIds': [user['id']]}).json
    other = api.post('/api/teams', {'organizationId': org_id, 'name': 'other', 'memberIds': []}).json
    loose = task(api, project, 'no team')
    task(api, project, 'other team', teamId=other['id'])
    own = task(api, project, 'my team', teamId=mine['id'])
    # soft (no teamMatchingMode): my team's first, then tasks with no team, never another team's
    assert api.post(PATH, {'projectId': project['id']}, key=key).json['id'] == own['id']
    assert api.post(PATH, {'projectId': project['id']}, key=key).json['id'] == loose['id']
    assert api.post(PATH, {'projectId': project['id']}, key=key).status == 204
    # strict: only my teams' tasks
    assert api.put(f'/api/organizations/{org_id}', {'features': {'teamMatchingMode': 'strict'}}).status == 200
    task(api, project, 'no team again')
    assert api.post(PATH, {'projectId': project['id']}, key=key).status == 204
    again = task(api, project, 'my team again', teamId=mine['id'])
    assert api.post(PATH, {'projectId': project['id'], 'teamId': mine['id']}, key=key).json['id'] == again['id']
    assert api.post(PATH, {'projectId': project['id'], 'teamId': other['id']}, key=key).status == 403


@pytest.mark.slow
def test_twenty_concurrent_callers_get_twenty_different_tasks(api, org_id, project, monkeypatch):
    from chalicelib.core.principal import Principal
    from chalicelib.features.work import service as work_service
    made = [task(api, project, f't{n}') for n in range(24)]
    callers = [Principal(user_id=make_user(api, org_id, 'MEMBER')[0]['id'], email='',
                         memberships={org_id: 'MEMBER'}) for _ in range(20)]
    SerialDynamo().install(monkeypatch)
    taken: list = []
    errors: list = []
    barrier = threading.Barrier(20)

    def take(principal):
        barrier.wait()
        try:
            taken.append((principal.user_id, work_service.take_next({'projectId': project['id']}, principal)))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)
    threads = [threading.Thread(target=take, args=(p,)) for p in callers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ids = [t['id'] for _, t in taken if t is not None]
    assert len(ids) == 20 and len(set(ids)) == 20
    assert all(t['assigneeId'] == user for user, t in taken)
    assert set(ids) == {t['id'] for t in made[:20]}          # the oldest twenty
