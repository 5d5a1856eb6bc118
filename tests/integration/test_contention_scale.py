"""The write path at scale under concurrency (issue 27, docs/scale.md), through HTTP against the
real local stack (tests/live.py): writers released together by a barrier; the invariant
checker clean after each test."""
from __future__ import annotations

import uuid

import pytest

from tests.live import LiveStack

N = 50


@pytest.fixture(scope='module')
def stack(tmp_path_factory):
    live = LiveStack(tmp_path_factory.mktemp('contention-scale'))
    yield live
    live.stop()


@pytest.fixture(autouse=True)
def invariants(stack):
    yield
    stack.published()   # the events records are written by the outbox poller: let it catch up first
    code, report = stack.check()
    assert code == 0, report


@pytest.fixture(scope='module')
def org(stack):
    slug = f'org-{uuid.uuid4().hex[:8]}'
    return stack.created('/api/organizations', {'name': slug, 'slug': slug})


def test_creates_under_a_project_being_deleted_leave_no_orphan(stack, org):
    """50 creates and the project's delete at once: either the delete is refused (409) and the
    project keeps every child that was created, or it is deleted and no child survives it."""
    project = stack.created('/api/projects', {'name': 'Doomed', 'organizationId': org['id']})
    calls = [lambda i=i: stack.post('/api/tasks', {'projectId': project['id'], 'title': f'late {i}'})
             for i in range(N)]
    calls.insert(N // 2, lambda: stack.delete(f"/api/projects/{project['id']}"))
    answers = stack.burst(calls)
    deleted = answers[N // 2]
    creates = answers[:N // 2] + answers[N // 2 + 1:]
    assert deleted.status in (204, 409), deleted
    assert all(a.status in (201, 400) for a in creates), [a for a in creates if a.status not in (201, 400)][:3]
    made = [a.body['id'] for a in creates if a.status == 201]
    if deleted.status == 204:
        assert stack.get(f"/api/projects/{project['id']}").status == 404
        assert all(stack.get(f'/api/tasks/{t}').status == 404 for t in made)
    else:
        assert stack.get(f"/api/projects/{project['id']}").status == 200
        listed = stack.get(f"/api/tasks?filter=projectId=='{project['id']}'&pageSize=100").body
        assert listed['totalElements'] == len(made)


def test_creates_assigned_to_one_user_all_succeed(stack, org):
    email = f'one-{uuid.uuid4().hex[:8]}@example.com'
    user = stack.created('/api/users', {'email': email})
    stack.created('/api/memberships', {'organizationId': org['id'], 'userId': user['id'], 'role': 'MEMBER'})
    project = stack.created('/api/projects', {'name': 'Assigned', 'organizationId': org['id']})
    answers = stack.burst([lambda i=i: stack.post('/api/tasks', {'projectId': project['id'], 'title': f'a{i}',
                                                                  'assigneeId': user['id']}) for i in range(N)])
    assert sorted(a.status for a in answers) == [201] * N, [a for a in answers if a.status != 201][:3]


def test_totals_are_exact_after_concurrent_creates_and_deletes(stack, org):
    project = stack.created('/api/projects', {'name': 'Totals', 'organizationId': org['id']})
    first = [stack.created('/api/tasks', {'projectId': project['id'], 'title': f'old {i}'}) for i in range(100)]
    calls = [lambda i=i: stack.post('/api/tasks', {'projectId': project['id'], 'title': f'new {i}'})
             for i in range(100)]
    calls += [lambda t=t: stack.delete(f"/api/tasks/{t['id']}") for t in first]
    answers = stack.burst(calls, threads=N)
    assert sorted(a.status for a in answers) == [201] * 100 + [204] * 100, \
        [a for a in answers if a.status not in (201, 204)][:3]
    listed = stack.get(f"/api/tasks?filter=projectId=='{project['id']}'&pageSize=10").body
    assert listed['totalElements'] == 100
