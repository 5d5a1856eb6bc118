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
    """A create moves one random shard of 128 of its tenant's counter (docs/scale.md), in its
    own transaction: ``totalElements`` counts it as soon as the create has answered."""
    from chalicelib.kernel.store import table
    project = _project(api, org_id)
    url = f"/api/tasks?filter=projectId=='{project['id']}'"
    for n in range(30):
        assert api.post('/api/tasks', {'projectId': project['id'], 'title': f't{n}'}).status == 201
        if n % 10 == 9:
            assert api.get(url).json['totalElements'] == n + 1
    shards = table.counter_shards(table.counter_pk('tasks', org_id))
    assert sum(shards.values()) == 30 and len(shards) > 8, shards
