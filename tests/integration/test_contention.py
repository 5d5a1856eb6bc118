"""Contention, through HTTP against the real local stack (`python -m localdev.run` in a child
process: its threaded server runs our code concurrently, its moto server applies one request at
a time, as DynamoDB does per item). 50 writers are released together by a barrier.

After every test the invariant checker (`python -m chalicelib.ops.check_table`) must find
nothing: uniqueness items, counters, child counters and references all consistent."""
from __future__ import annotations

import uuid

import pytest

from tests.live import LiveStack

N = 50


@pytest.fixture(scope='module')
def stack(tmp_path_factory):
    live = LiveStack(tmp_path_factory.mktemp('contention'))
    yield live
    live.stop()


@pytest.fixture(autouse=True)
def invariants(stack):
    yield
    stack.chaos(rate=0)
    code, report = stack.check()
    assert code == 0, report


@pytest.fixture(scope='module')
def org(stack):
    slug = f'org-{uuid.uuid4().hex[:8]}'
    return stack.created('/api/organizations', {'name': slug, 'slug': slug})


@pytest.fixture(scope='module')
def project(stack, org):
    return stack.created('/api/projects', {'name': 'Contended', 'organizationId': org['id']})


def statuses(answers) -> list[int]:
    return sorted(a.status for a in answers)


def test_unlocked_puts_all_land_and_each_moves_the_sequence_once(stack, project):
    path = f"/api/projects/{project['id']}"
    before = stack.get(path).body['changeSequence']
    answers = stack.burst([lambda i=i: stack.put(path, {'description': f'writer {i}', 'color': f'#{i:06d}'})
                           for i in range(N)])
    assert statuses(answers) == [200] * N, [a for a in answers if a.status != 200][:3]
    # every writer saw its own write land: the sequences it got back are all different
    assert sorted(a.body['changeSequence'] for a in answers) == list(range(before + 1, before + N + 1))
    for a in answers:
        i = int(a.body['description'].split()[1])
        assert a.body['color'] == f'#{i:06d}'   # each answer is that writer's change, whole
    stored = stack.get(path).body
    assert stored['changeSequence'] == before + N
    last = next(a.body for a in answers if a.body['changeSequence'] == before + N)
    assert (stored['description'], stored['color']) == (last['description'], last['color'])
    assert stored['updatedOn'] == last['updatedOn']


def test_locked_puts_with_one_sequence_one_wins_and_the_rest_learn_the_current_one(stack, project):
    path = f"/api/projects/{project['id']}"
    seq = stack.get(path).body['changeSequence']
    answers = stack.burst([lambda i=i: stack.put(path, {'notes': f'locked {i}', 'changeSequence': seq})
                           for i in range(N)])
    assert statuses(answers) == [200] + [409] * (N - 1)
    winner = next(a.body for a in answers if a.status == 200)
    assert winner['changeSequence'] == seq + 1
    for a in answers:
        if a.status == 409:
            assert a.body['changeSequence'] == seq + 1 and a.body['status'] == 409
    assert stack.get(path).body == winner


def test_creates_with_one_slug_one_wins(stack, org):
    slug = f'same-{uuid.uuid4().hex[:6]}'
    answers = stack.burst([lambda i=i: stack.post('/api/projects', {
        'name': f'racer {i}', 'slug': slug, 'organizationId': org['id']}) for i in range(N)])
    assert statuses(answers) == [201] + [409] * (N - 1), [a for a in answers if a.status not in (201, 409)][:3]
    winner = next(a.body for a in answers if a.status == 201)
    page = stack.get(f"/api/projects?filter=slug=='{slug}'&filter=organizationId=='{org['id']}'").body
    assert [p['id'] for p in page['content']] == [winner['id']] and page['totalElements'] == 1


@pytest.fixture(scope='module')
def task(stack, org, project):
    for i in range(5):
        stack.created('/api/task-statuses', {'organizationId': org['id'], 'label': f'S{i}', 'slug': f's{i}'})
    return stack.created('/api/tasks', {'projectId': project['id'], 'title': 'contended', 'statusSlug': 's0'})


def test_set_task_status_with_locking_one_wins(stack, task):
    path = f"/api/tasks/{task['id']}"
    seq = stack.get(path).body['changeSequence']
    answers = stack.burst([lambda i=i: stack.put(f'{path}/status', {'statusSlug': f's{1 + i % 4}',
                                                                   'changeSequence': seq}) for i in range(N)])
    assert statuses(answers) == [200] + [409] * (N - 1)
    winner = next(a.body for a in answers if a.status == 200)
    assert all(a.body['changeSequence'] == seq + 1 for a in answers if a.status == 409)
    assert stack.get(path).body == winner


def test_unlocked_status_changes_read_modify_write_correctly(stack, task):
    """statusSlug is indexed (its per-value counters move with it): no single-UpdateItem path.
    Under 50 concurrent writers each either lands (200) or, after its retries, is told to come
    back (503 + Retry-After, nothing written): never a 409 it did not ask for, never a 500, the
    sequence moves once per 200 and the per-value counters stay exact (the checker)."""
    path = f"/api/tasks/{task['id']}"
    before = stack.get(path).body['changeSequence']
    answers = stack.burst([lambda i=i: stack.put(f'{path}/status', {'statusSlug': f's{i % 5}'})
                           for i in range(N)])
    assert {a.status for a in answers} <= {200, 503}, [a for a in answers if a.status not in (200, 503)][:3]
    assert all(a.headers.get('retry-after') for a in answers if a.status == 503)
    landed = [a.body for a in answers if a.status == 200]
    assert len(landed) >= N // 2
    assert sorted(b['changeSequence'] for b in landed) == list(range(before + 1, before + len(landed) + 1))
    assert stack.get(path).body['changeSequence'] == before + len(landed)


def test_a_project_deleted_while_children_are_created_leaves_no_orphan(stack, org):
    parent = stack.created('/api/projects', {'name': 'Doomed', 'organizationId': org['id']})
    creates = [lambda i=i: stack.post('/api/tasks', {'projectId': parent['id'], 'title': f't{i}'})
               for i in range(20)]
    deletes = [lambda: stack.delete(f"/api/projects/{parent['id']}") for _ in range(5)]
    answers = stack.burst(creates + deletes)
    made, removed = answers[:20], answers[20:]
    assert {a.status for a in made} <= {201, 400}, made
    assert {a.status for a in removed} <= {204, 404, 409}, removed
    if any(a.status == 204 for a in removed):
        assert stack.get(f"/api/projects/{parent['id']}").status == 404
    else:   # it held tasks all along: the 409 names them
        assert any('tasks' in a.body['message'] for a in removed if a.status == 409)
    # the checker (fixture) proves no task outlived its project and the child counter is exact
