"""Index partition keys spread over shards (kernel/store/table.py INDEX_SHARDS, docs/scale.md
"Index partitions"): a project's tasks are written under many ``by_parent`` keys, every list
still finds each of them once and in order, a paged walk of a project crosses the shards, and
records written before the spread (every key unspread) are listed right before, during and
after ``python -m chalicelib.ops.migrate_scale`` moves them."""
from __future__ import annotations

import pytest

from tests.invariants import table_invariants  # noqa: F401 - the checker fixture
from tests.support import task_statuses

pytestmark = pytest.mark.usefixtures('table_invariants')


def _raw(family: str, id_: str) -> dict:
    from chalicelib.kernel.store import model, table
    return model.client().get_item(TableName=model.configure().Meta.table_name, ConsistentRead=True,
                                   Key={'pk': {'S': table.entity_pk(family, id_)}, 'sk': {'S': '#'}})['Item']


def _unspread(family: str, id_: str) -> None:
    """Rewrite a record's index keys as the previous release wrote them (one key per partition)."""
    from chalicelib.kernel.store import model, table
    item = _raw(family, id_)
    names = [n for n in ('tpk', 'ppk', 'x1', 'x2', 'x3', 'x4', 'x5') if n in item]
    model.client().update_item(
        TableName=model.configure().Meta.table_name,
        Key={'pk': {'S': table.entity_pk(family, id_)}, 'sk': {'S': '#'}},
        UpdateExpression='SET ' + ', '.join(f'{n} = :{n}' for n in names),
        ExpressionAttributeValues={f':{n}': {'S': table.index_base_pk(item[n]['S'])} for n in names})


@pytest.fixture()
def project_tasks(api):
    """24 tasks in a project of an organization of their own: the lists below read whole tenants,
    and a test's platform may hold records of the tests before it (tests/conftest.py ``platform``)."""
    import uuid
    org_id = api.post('/api/organizations', {'name': 'spread', 'slug': f'spread-{uuid.uuid4().hex[:8]}'}).json['id']
    project = api.post('/api/projects', {'name': 'spread', 'organizationId': org_id}).json
    task_statuses(api, org_id, 'open', 'done')
    tasks = [api.post('/api/tasks', {'projectId': project['id'], 'title': f'task {n:02d}',
                                     'statusSlug': 'open' if n % 2 else 'done'}).json for n in range(24)]
    assert all('id' in t for t in tasks), tasks
    return project, tasks


def test_a_projects_tasks_are_spread_and_every_list_finds_each_once_in_order(api, project_tasks):
    from chalicelib.kernel.store import table
    project, tasks = project_tasks
    org = f"organizationId == '{project['organizationId']}'"
    keys = {_raw('tasks', t['id'])['ppk']['S'] for t in tasks}
    assert len(keys) > 8 and {table.index_base_pk(k) for k in keys} == {f"tasks#P#{project['id']}"}
    for key in keys:
        assert key == f"tasks#P#{project['id']}" or key.startswith('~')
    ids = [t['id'] for t in tasks]
    by_created = api.get(f"/api/tasks?filter=projectId == '{project['id']}'&pageSize=100").json
    assert [t['id'] for t in by_created['content']] == ids and by_created['totalElements'] == 24
    walked = [t['id'] for n in range(5)
              for t in api.get(f'/api/tasks?pageSize=5&page={n}&sort=title:desc&filter={org}').json['content']]
    assert walked == ids[::-1]
    done = api.get(f"/api/tasks?filter=statusSlug == 'done' and {org}&pageSize=4&page=1&sort=createdOn:desc").json
    assert [t['id'] for t in done['content']] == [t['id'] for t in tasks if t['statusSlug'] == 'done'][::-1][4:8]
    assert done['totalElements'] == 12


def test_a_paged_walk_of_a_project_crosses_its_shards(api, project_tasks):
    from chalicelib.kernel.store import table
    project, tasks = project_tasks
    seen, cursor, pages = [], None, 0
    while True:
        items, cursor = table.query_project_page('tasks', project['id'], start=cursor, limit=5)
        seen += [i['id'] for i in items]
        pages += 1
        assert len(items) <= 5 and pages <= 24
        if cursor is None:
            break
        assert set(cursor) <= {'pk', 'sk', 'ppk', 'csk', 'shard'} and all(isinstance(v, str) for v in cursor.values())
    assert sorted(seen) == sorted(t['id'] for t in tasks)   # each once
    assert table.project_has('tasks', project['id'])
    assert not table.project_has('tasks', tasks[0]['id'])   # no project by that id


def test_records_written_unspread_are_listed_and_the_migration_spreads_them(api, project_tasks):
    from chalicelib.kernel.store import table
    from chalicelib.ops import check_table, migrate_scale
    project, tasks = project_tasks
    org_id = project['organizationId']
    org = f"organizationId == '{org_id}'"
    for task in tasks:
        _unspread('tasks', task['id'])
    assert {_raw('tasks', t['id'])['ppk']['S'] for t in tasks} == {f"tasks#P#{project['id']}"}
    ids = sorted(t['id'] for t in tasks)

    def listed() -> tuple[list[str], list[str], list[str]]:
        walk = api.get(f'/api/tasks?pageSize=100&sort=title&filter={org}').json['content']
        pinned = api.get(f"/api/tasks?filter=projectId == '{project['id']}'&pageSize=100").json['content']
        value = api.get(f"/api/tasks?filter=statusSlug == 'open' and {org}&pageSize=100").json['content']
        return [t['id'] for t in walk], sorted(t['id'] for t in pinned), sorted(t['id'] for t in value)
    walk, pinned, value = listed()
    assert sorted(walk) == pinned == ids and value == sorted(t['id'] for t in tasks if t['statusSlug'] == 'open')
    assert check_table.run()[0] == []                   # the old layout is consistent in itself
    moved = migrate_scale.migrate(out=lambda line: None)
    should_move = sum(1 for t in tasks if table.index_shard(t['id']) != 0)
    assert moved['spread'] >= should_move > 8 and moved['skipped'] == 0
    for task in tasks:
        item = _raw('tasks', task['id'])
        assert item['tpk']['S'] == table.spread_pk(f'tasks#{org_id}', task['id'])
        assert item['ppk']['S'] == table.spread_pk(f"tasks#P#{project['id']}", task['id'])
        assert table.index_base_pk(item['x1']['S']) == table.value_pk('tasks', org_id, 'statusSlug', task['statusSlug'])
    assert listed() == (walk, pinned, value)            # the same lists after the move
    assert migrate_scale.migrate(out=lambda line: None)['spread'] == 0   # idempotent
    assert check_table.run()[0] == []


@pytest.mark.parametrize('descending', [False, True])
@pytest.mark.parametrize('limit', [1, 5, 10, 24, 60, 200])
def test_a_walk_is_exact_when_one_shard_holds_most_of_the_page(api, limit, descending):
    """The walk asks each shard for its share first, then more of the shards that could still
    hold part of the page: with 40 of the 120 first keys in one shard (far more than its share),
    every page is still exactly the first ``limit`` keys in order."""
    import uuid

    from chalicelib.kernel.store import model, table
    tenant = str(uuid.uuid4())
    ids = [str(uuid.uuid4()) for _ in range(2000)]
    crowded = [i for i in ids if table.index_shard(i) == 5][:40]
    others = [i for i in ids if table.index_shard(i) != 5][:80]
    order = crowded[:30] + others[:40] + crowded[30:] + others[40:]   # shard 5 holds the head
    rows = [(f'2026-01-01T00:00:{n // 1000:02d}.{n % 1000:03d}000Z#{id_}', id_) for n, id_ in enumerate(order)]
    with model.configure().batch_write() as batch:
        for csk, id_ in rows:
            batch.save(model.configure()(table.entity_pk('tasks', id_), '#', kind='tasks',
                                         tpk=table.spread_pk(table.tenant_pk('tasks', tenant), id_), csk=csk))
    want = sorted(rows, reverse=descending)[:limit]
    assert table.walk_index('tasks', tenant, order='createdOn', descending=descending, limit=limit) == \
        [id_ for _, id_ in want]


def test_the_checker_reports_index_keys_of_another_tenant_or_shard(api, project_tasks):
    from chalicelib.kernel.store import model, table
    from chalicelib.ops import check_table
    project, tasks = project_tasks
    org_id = project['organizationId']
    assert [v for v in check_table.run()[0] if v.check == 'index-keys'] == []
    moved = next(t for t in tasks if table.index_shard(t['id']) not in (0, 3))
    other = api.post('/api/organizations', {'name': 'other', 'slug': 'other-spread'}).json['id']
    client, name = model.client(), model.configure().Meta.table_name
    key = {'pk': {'S': table.entity_pk('tasks', moved['id'])}, 'sk': {'S': '#'}}
    client.update_item(TableName=name, Key=key, UpdateExpression='SET ppk = :p',
                       ExpressionAttributeValues={':p': {'S': f"~3#tasks#P#{project['id']}"}})
    found = [v for v in check_table.run()[0] if v.check == 'index-keys']
    assert [v.key for v in found] == [table.entity_pk('tasks', moved['id'])] and 'ppk' in found[0].message
    client.update_item(TableName=name, Key=key, UpdateExpression='SET ppk = :p, tpk = :t', ExpressionAttributeValues={
        ':p': {'S': f"tasks#P#{project['id']}"}, ':t': {'S': table.spread_pk(f'tasks#{other}', moved['id'])}})
    found = [v for v in check_table.run()[0] if v.check == 'index-keys']
    assert len(found) == 1 and 'tpk' in found[0].message and other in found[0].message
    client.update_item(TableName=name, Key=key, UpdateExpression='SET tpk = :t',
                       ExpressionAttributeValues={':t': {'S': f'tasks#{org_id}'}})   # unspread: accepted
    assert [v for v in check_table.run()[0] if v.check == 'index-keys'] == []
