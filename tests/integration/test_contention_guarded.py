"""Issue 24, finding 9, through HTTP against the real local stack (tests/live.py, as
tests/integration/test_contention.py): hooks declare the fields they guard (kernel/hooks.py), so
a PUT without changeSequence that touches none of them takes the one-UpdateItem path on a family
with a hook (tasks); one that touches a guarded field re-reads and re-applies with jittered
backoff (kernel/writes.py) and does not give up under 50 concurrent writers. The invariant
checker finds nothing after each test."""
from __future__ import annotations

import uuid

import pytest

from tests.live import LiveStack

N = 50


@pytest.fixture(scope='module')
def stack(tmp_path_factory):
    live = LiveStack(tmp_path_factory.mktemp('contention-guarded'))
    yield live
    live.stop()


@pytest.fixture(autouse=True)
def invariants(stack):
    yield
    code, report = stack.check()
    assert code == 0, report


@pytest.fixture(scope='module')
def task(stack):
    slug = f'org-{uuid.uuid4().hex[:8]}'
    org = stack.created('/api/organizations', {'name': slug, 'slug': slug})
    project = stack.created('/api/projects', {'name': 'Contended', 'organizationId': org['id']})
    return stack.created('/api/tasks', {'projectId': project['id'], 'title': 'contended'})


def test_50_unlocked_puts_on_one_task_all_land(stack, task):
    path = f"/api/tasks/{task['id']}"
    before = stack.get(path).body['changeSequence']
    answers = stack.burst([lambda i=i: stack.put(path, {'title': f'writer {i}', 'description': f'd{i}'})
                           for i in range(N)])
    assert sorted(a.status for a in answers) == [200] * N, [a for a in answers if a.status != 200][:3]
    assert sorted(a.body['changeSequence'] for a in answers) == list(range(before + 1, before + N + 1))
    stored = stack.get(path).body
    assert stored['changeSequence'] == before + N
    last = next(a.body for a in answers if a.body['changeSequence'] == before + N)
    assert (stored['title'], stored['description']) == (last['title'], last['description'])


def test_50_puts_of_a_guarded_field_re_apply_and_all_land(stack, task):
    path = f"/api/tasks/{task['id']}"
    me = stack.get('/api/account/me').body['id']
    before = stack.get(path).body['changeSequence']
    answers = stack.burst([lambda i=i: stack.put(path, {'assigneeId': me if i % 2 else None, 'description': f'g{i}'})
                           for i in range(N)])
    assert sorted(a.status for a in answers) == [200] * N, [a for a in answers if a.status != 200][:3]
    assert sorted(a.body['changeSequence'] for a in answers) == list(range(before + 1, before + N + 1))
    assert stack.get(path).body['changeSequence'] == before + N
