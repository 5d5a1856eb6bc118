"""python -m chalicelib.ops.migrate_scale (issue 27): a table written in the previous layout
(children counted in ``KIDS#`` legacy counters, no ``gv`` mark) is moved to guard shards,
idempotently and resumably, and the invariant checker is clean before and after."""
from __future__ import annotations

import pytest

from tests.invariants import table_invariants  # noqa: F401 - the checker fixture

pytestmark = pytest.mark.usefixtures('table_invariants')


def _to_old_layout(family_path: str, record: dict, parent_family: str, parent_id: str) -> None:
    """Rewrite one record as the previous release stored it (bypassing the API)."""
    from chalicelib.kernel import parents
    from chalicelib.kernel.store import model, table
    client = model.client()
    name = model.configure().Meta.table_name
    client.update_item(TableName=name, Key={'pk': {'S': table.entity_pk(family_path, record['id'])},
                                            'sk': {'S': '#'}}, UpdateExpression='REMOVE gv')
    client.update_item(TableName=name, Key={'pk': {'S': parents.guard_of(parent_family, parent_id, record['id'])},
                                            'sk': {'S': '#'}},
                       UpdateExpression='ADD cnt :m', ExpressionAttributeValues={':m': {'N': '-1'}})
    client.update_item(TableName=name, Key={'pk': {'S': parents.kids_pk(parent_family, parent_id)},
                                            'sk': {'S': parents.shard_of(record['id'])}},
                       UpdateExpression='ADD cnt :one', ExpressionAttributeValues={':one': {'N': '1'}})


def test_an_old_layout_table_is_migrated_clean_idempotently_and_resumably(api, org_id, tmp_path):
    from chalicelib.ops import check_table, migrate_scale
    project = api.post('/api/projects', {'name': 'P', 'organizationId': org_id}).json
    tasks = [api.post('/api/tasks', {'projectId': project['id'], 'title': f't{n}'}).json for n in range(6)]
    team = api.post('/api/teams', {'organizationId': org_id, 'name': 'T'}).json
    for task in tasks:
        _to_old_layout('tasks', task, 'projects', project['id'])
    _to_old_layout('teams', team, 'organizations', org_id)
    _to_old_layout('projects', project, 'organizations', org_id)
    violations, _ = check_table.run()
    assert violations == []                      # the old layout is consistent in itself
    state = tmp_path / 'cursor.json'
    first = migrate_scale.migrate(state=state, page_size=7, out=lambda line: None)
    assert first['guarded'] == 8 and first['skipped'] == 0
    assert state.read_text() == 'null'           # ran to the end, page by page
    again = migrate_scale.migrate(out=lambda line: None)
    assert again['guarded'] == 0                 # idempotent
    violations, _ = check_table.run()
    assert violations == []
    from chalicelib.kernel.store import table
    assert all(table.get('tasks', t['id']).guarded for t in tasks)
    for task in tasks:
        assert api.delete(f"/api/tasks/{task['id']}").status == 204
    assert api.delete(f"/api/projects/{project['id']}").status == 204


def test_the_old_rate_counters_on_acl_items_are_removed(api):
    """The previous gate kept per-second counters on the user's ACL item (``rs05``,
    ``rk_{cred}_05``, ...): the migration removes them, in pieces moto's expression validator takes,
    and the checker's acl-items check is clean afterwards."""
    from chalicelib.features.identity import gate
    from chalicelib.kernel.store import model
    from chalicelib.ops import check_table, migrate_scale
    me = api.get('/api/account/me').json
    client = model.client()
    name = model.configure().Meta.table_name
    key = {'pk': {'S': f"users#{me['id']}"}, 'sk': {'S': 'ACL'}}
    stale = {f'rs{s:02d}': {'N': '3'} for s in range(60)} | {f'rk_abcd1234_{s:02d}': {'N': '2'} for s in range(60)}
    names = {f'#a{i}': n for i, n in enumerate(stale)}
    client.update_item(TableName=name, Key=key, ExpressionAttributeNames=names,
                       ExpressionAttributeValues={f':v{i}': v for i, v in enumerate(stale.values())},
                       UpdateExpression='SET ' + ', '.join(f'#a{i} = :v{i}' for i in range(len(stale))))
    before = client.get_item(TableName=name, Key=key, ConsistentRead=True)['Item']
    assert len(gate.legacy_counters(before)) == 120
    assert any(v.check == 'acl-items' for v in check_table.run()[0])     # the checker sees them
    totals = migrate_scale.migrate(out=lambda line: None)
    assert totals['acl'] >= 1
    after = client.get_item(TableName=name, Key=key, ConsistentRead=True)['Item']
    assert gate.legacy_counters(after) == [] and 'acl_' in ''.join(after)   # memberships kept
    assert not [v for v in check_table.run()[0] if v.check == 'acl-items']
