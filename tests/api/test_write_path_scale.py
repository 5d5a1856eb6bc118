"""The write path at scale (issue 27, docs/scale.md): what a write's transaction holds.

Each test sends requests through the HTTP layer and looks at the TransactWriteItems the app
sends (botocore's event hooks on the table's client): no item shared by a project's, a user's
or a tenant's writes may sit in a create's transaction. The invariant checker runs after
every test."""
from __future__ import annotations

import contextlib

import pytest

from tests.conftest import make_user
from tests.invariants import table_invariants  # noqa: F401 - the checker fixture

pytestmark = pytest.mark.usefixtures('table_invariants')


@contextlib.contextmanager
def transactions():
    """The items (pk, sk) of every TransactWriteItems sent inside, one list per transaction."""
    from chalicelib.kernel.store import model
    client = model.configure()._get_connection().connection.client
    seen: list[list[tuple[str, str, str]]] = []

    def capture(params, **_):
        items = []
        for entry in params['TransactItems']:
            (kind, spec), = entry.items()
            key = spec.get('Key') or spec.get('Item')
            items.append((kind, key['pk']['S'], key['sk']['S']))
        seen.append(items)
    client.meta.events.register('provide-client-params.dynamodb.TransactWriteItems', capture)
    try:
        yield seen
    finally:
        client.meta.events.unregister('provide-client-params.dynamodb.TransactWriteItems', capture)


def _project(api, org_id):
    r = api.post('/api/projects', {'name': 'P', 'organizationId': org_id})
    assert r.status == 201, r.json
    return r.json


def test_a_task_create_holds_no_parent_item_but_one_guard_shard_of_its_own_partition(api, org_id):
    from chalicelib.kernel import parents
    project = _project(api, org_id)
    with transactions() as seen:
        r = api.post('/api/tasks', {'projectId': project['id'], 'title': 't'})
    assert r.status == 201, r.json
    (items,) = seen
    pks = {pk for _, pk, _ in items}
    assert f"projects#{project['id']}" not in pks and f'organizations#{org_id}' not in pks
    assert not any(pk.startswith(parents.KIDS_PREFIX) for pk in pks)
    guards = [pk for pk in pks if pk.startswith(parents.GUARD_PREFIX)]
    assert guards == [parents.guard_of('projects', project['id'], r.json['id'])]


def test_an_organization_scoped_create_holds_a_guard_shard_not_the_organization(api, org_id):
    from chalicelib.kernel import parents
    with transactions() as seen:
        r = api.post('/api/teams', {'organizationId': org_id, 'name': 'T'})
    assert r.status == 201, r.json
    pks = {pk for _, pk, _ in seen[0]}
    assert f'organizations#{org_id}' not in pks
    assert parents.guard_of('organizations', org_id, r.json['id']) in pks


def test_a_create_that_read_its_project_alive_before_the_delete_is_refused(api, org_id, monkeypatch):
    """The delete closed the guard shards: a create whose read of the project was stale fails
    in its transaction (400), and leaves nothing behind."""
    from chalicelib.kernel.store import table
    project = _project(api, org_id)
    kept = table.get('projects', project['id'])
    assert api.delete(f"/api/projects/{project['id']}").status == 204
    real_get = table.get
    monkeypatch.setattr(table, 'get', lambda family, id_, consistent=True:
                        kept if (family, id_) == ('projects', project['id']) else real_get(family, id_, consistent))
    r = api.post('/api/tasks', {'projectId': project['id'], 'title': 'late'})
    assert r.status == 400 and 'projectId' in r.json['message'], r.json


def test_a_delete_refused_by_a_guard_shard_closes_none(api, org_id, monkeypatch):
    """A child counted in one shard refuses the whole delete (one transaction): the other
    shards stay open, so creates under the project go on."""
    from chalicelib.kernel import parents
    project = _project(api, org_id)
    first = api.post('/api/tasks', {'projectId': project['id'], 'title': 'held'}).json
    monkeypatch.setattr(parents, 'refuse_if_held', lambda family, stored: None)
    r = api.delete(f"/api/projects/{project['id']}")
    assert r.status == 409 and 'still holds records' in r.json['message']
    for n in range(5):
        assert api.post('/api/tasks', {'projectId': project['id'], 'title': f'more {n}'}).status == 201
    assert api.get(f"/api/tasks/{first['id']}").status == 200


def test_a_child_written_before_guards_is_uncounted_from_its_legacy_counter(api, org_id):
    """A record without the ``gv`` mark (written by the previous release, counted in
    ``KIDS#``): its delete moves the legacy counter, the parent's delete then succeeds and the
    checker stays clean."""
    from chalicelib.kernel import parents
    from chalicelib.kernel.store import model, table
    project = _project(api, org_id)
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 'old'}).json
    client = model.client()
    name = model.configure().Meta.table_name
    guard = parents.guard_of('projects', project['id'], task['id'])
    client.update_item(TableName=name, Key={'pk': {'S': table.entity_pk('tasks', task['id'])}, 'sk': {'S': '#'}},
                       UpdateExpression='REMOVE gv')
    client.delete_item(TableName=name, Key={'pk': {'S': guard}, 'sk': {'S': '#'}})
    client.update_item(TableName=name, Key={'pk': {'S': parents.kids_pk('projects', project['id'])},
                                            'sk': {'S': parents.shard_of(task['id'])}},
                       UpdateExpression='ADD cnt :one', ExpressionAttributeValues={':one': {'N': '1'}})
    assert api.put(f"/api/tasks/{task['id']}", {'title': 'still old'}).status == 200
    assert api.delete(f"/api/tasks/{task['id']}").status == 204
    assert api.delete(f"/api/projects/{project['id']}").status == 204


def test_creates_assigned_to_one_user_hold_neither_their_user_nor_their_acl_item(api, org_id):
    """References are checked by a read before the transaction (issue 27), not held in it."""
    user, _ = make_user(api, org_id, 'MEMBER')
    project = _project(api, org_id)
    with transactions() as seen:
        r = api.post('/api/tasks', {'projectId': project['id'], 'title': 't', 'assigneeId': user['id']})
    assert r.status == 201, r.json
    pks = {pk for _, pk, _ in seen[0]}
    assert f"users#{user['id']}" not in pks, seen[0]


def test_totals_are_exact_when_the_write_answers_and_counter_shards_spread_wide(api, org_id):
    """A create moves one random shard of 144 of its tenant's counter, spread over 16 partition
    keys (docs/scale.md "Counters"), in its own transaction: ``totalElements`` counts it as soon
    as the create has answered."""
    from chalicelib.kernel.store import table
    project = _project(api, org_id)
    url = f"/api/tasks?filter=projectId=='{project['id']}'"
    counter = table.counter_pk('tasks', org_id)

    def shards_now() -> dict[tuple[str, str], int]:
        return {(part, sk): n for p in range(table.COUNTER_PARTITIONS)
                for part in [table.counter_partition_pk(counter, p)]
                for sk, n in table.counter_shards(part).items()}
    before = shards_now()
    for n in range(30):
        assert api.post('/api/tasks', {'projectId': project['id'], 'title': f't{n}'}).status == 201
        if n % 10 == 9:
            assert api.get(url).json['totalElements'] == n + 1
    shards = {key: n - before.get(key, 0) for key, n in shards_now().items() if n != before.get(key, 0)}
    assert sum(shards.values()) == 30 and len(shards) > 8, shards
    # each shard under the partition key its number names: 16 keys, none written by more than a few
    assert all(part == table.counter_partition_pk(counter, int(sk)) for part, sk in shards), shards
    assert len({part for part, _ in shards}) > 6, shards


# ----------------------------------------------------------------------------- the delete in two steps

def _task_in(api, project, shards, *, title='t'):
    """A task of ``project`` whose guard shard is in ``shards``: its id (random, server-made) is
    drawn here until one lands there, and handed to the create's new record."""
    import unittest.mock
    import uuid

    from chalicelib.kernel import parents
    shards = set(shards)
    while True:
        wanted = uuid.uuid4()
        if parents.guard_shard('projects', str(wanted)) in shards:
            break
    from chalicelib.kernel import records
    real = records.new_record

    def new_record(family, values, **kwargs):
        if family.path == 'tasks' and kwargs.get('id_') is None:
            kwargs['id_'] = str(wanted)
        return real(family, values, **kwargs)
    with unittest.mock.patch.object(records, 'new_record', new_record):
        r = api.post('/api/tasks', {'projectId': project['id'], 'title': title})
    assert r.status == 201, r.json
    assert r.json['id'] == str(wanted)
    return r.json


def _closed(project_id):
    from chalicelib.kernel import parents
    from chalicelib.kernel.store import repository as repo
    from chalicelib.kernel.store import table
    return [n for n in range(parents.GUARD_SHARDS['projects'])
            if (table.guard_state(repo.guard_pk('projects', project_id, n)) or (False, None))[0]]


def test_a_project_has_more_guard_shards_than_its_delete_transaction_holds(api, org_id):
    """144 shards (one create in 144 holds one: 1,000 creates/s per project at 10 % conflicts,
    docs/scale.md): the delete closes the shards past 88 first, then the rest in its own
    transaction; once deleted, every shard is closed and a late create is refused."""
    from chalicelib.kernel import parents
    assert parents.GUARD_SHARDS['projects'] >= 143 > parents.INLINE_GUARDS['projects']
    project = _project(api, org_id)
    with transactions() as seen:
        assert api.delete(f"/api/projects/{project['id']}").status == 204
    sizes = [len(items) for items in seen]
    assert len(seen) == 2 and max(sizes) <= 100, sizes
    assert _closed(project['id']) == list(range(parents.GUARD_SHARDS['projects']))


def test_a_child_in_a_shard_closed_ahead_refuses_the_delete_and_nothing_stays_closed(api, org_id, monkeypatch):
    from chalicelib.kernel import parents
    project = _project(api, org_id)
    held = _task_in(api, project, range(parents.INLINE_GUARDS['projects'], parents.GUARD_SHARDS['projects']))
    monkeypatch.setattr(parents, 'refuse_if_held', lambda family, stored: None)   # the transactions decide
    r = api.delete(f"/api/projects/{project['id']}")
    assert r.status == 409 and 'still holds records' in r.json['message'], r.json
    assert _closed(project['id']) == []
    assert api.get(f"/api/tasks/{held['id']}").status == 200


def test_a_delete_whose_transaction_fails_reopens_the_shards_it_closed_ahead(api, org_id, monkeypatch):
    """A child in one of the delete transaction's own shards: the shards closed ahead are
    reopened, and creates that land in them succeed."""
    from chalicelib.kernel import parents
    project = _project(api, org_id)
    _task_in(api, project, range(parents.INLINE_GUARDS['projects']))
    monkeypatch.setattr(parents, 'refuse_if_held', lambda family, stored: None)
    r = api.delete(f"/api/projects/{project['id']}")
    assert r.status == 409, r.json
    assert _closed(project['id']) == []
    _task_in(api, project, range(parents.INLINE_GUARDS['projects'], parents.GUARD_SHARDS['projects']), title='after')


def _close_ahead_at(project_id, shard, when):
    from chalicelib.kernel.store import repository as repo
    token = f'{int(when)}:test'
    repo.commit([repo.close_guard_ahead(repo.guard_pk('projects', project_id, shard), token)])
    return token


def test_a_shard_left_closed_by_a_delete_that_stopped_midway_is_reopened_by_the_next_create(api, org_id):
    """A delete that timed out between its two transactions leaves shards closed under a living
    project: past CLOSING_SECONDS, a create landing there reopens it (on condition that the
    project lives) and succeeds."""
    import time

    from chalicelib.kernel import parents
    project = _project(api, org_id)
    probe = _task_in(api, project, range(parents.INLINE_GUARDS['projects'], parents.GUARD_SHARDS['projects']))
    shard = parents.guard_shard('projects', probe['id'])
    assert api.delete(f"/api/tasks/{probe['id']}").status == 204
    _close_ahead_at(project['id'], shard, time.time() - parents.CLOSING_SECONDS - 5)
    from chalicelib.ops import check_table
    violations, _ = check_table.run()
    assert [v.check for v in violations if 'stopped midway' in v.message] == ['child-counts'], violations
    _task_in(api, project, {shard}, title='heals')
    assert shard not in _closed(project['id'])


def test_a_create_waits_for_a_delete_in_flight_and_goes_on_when_it_is_undone(api, org_id, monkeypatch):
    import threading
    import time

    from chalicelib.kernel import parents
    from chalicelib.kernel.store import repository as repo
    project = _project(api, org_id)
    probe = _task_in(api, project, range(parents.INLINE_GUARDS['projects'], parents.GUARD_SHARDS['projects']))
    shard = parents.guard_shard('projects', probe['id'])
    assert api.delete(f"/api/tasks/{probe['id']}").status == 204
    token = _close_ahead_at(project['id'], shard, time.time())
    undo = threading.Timer(0.3, lambda: repo.commit([repo.reopen_guard(
        repo.guard_pk('projects', project['id'], shard), token)]))
    undo.start()
    started = time.monotonic()
    try:
        _task_in(api, project, {shard}, title='waited')
    finally:
        undo.join()
    assert time.monotonic() - started < parents.CLOSING_WAIT_SECONDS + 5


def test_a_child_of_the_previous_guard_layout_is_uncounted_from_its_own_shard(api, org_id):
    """A record counted under layout 1 (88 project shards, ``gv`` = 1) is uncounted from the
    shard that layout names, whatever the current one: the parent's delete then succeeds."""
    from chalicelib.kernel import parents
    from chalicelib.kernel.store import model, table
    project = _project(api, org_id)
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 'v1'}).json
    client = model.client()
    name = model.configure().Meta.table_name
    now, then = (parents.guard_of('projects', project['id'], task['id'], v) for v in (parents.GUARD_VERSION, 1))
    client.update_item(TableName=name, Key={'pk': {'S': table.entity_pk('tasks', task['id'])}, 'sk': {'S': '#'}},
                       UpdateExpression='SET gv = :one', ExpressionAttributeValues={':one': {'N': '1'}})
    for pk, n in ((now, '-1'), (then, '1')):
        client.update_item(TableName=name, Key={'pk': {'S': pk}, 'sk': {'S': '#'}},
                           UpdateExpression='ADD cnt :n', ExpressionAttributeValues={':n': {'N': n}})
    assert api.put(f"/api/tasks/{task['id']}", {'title': 'still v1'}).status == 200
    assert api.delete(f"/api/tasks/{task['id']}").status == 204
    assert api.delete(f"/api/projects/{project['id']}").status == 204
