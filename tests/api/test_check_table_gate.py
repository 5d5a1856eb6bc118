"""The invariant checker knows the request gate's items (issue 27, chalicelib/ops/checks/gate.py):
clean after traffic, and each kind of damage reported; the old layout's counters on an ACL item
are reported until ``gate.legacy_cleanup_ops`` (the migration's step) removes them."""
from __future__ import annotations

import boto3

from tests.conftest import make_user

TABLE = 'platform-test'


def _ddb():
    return boto3.client('dynamodb', region_name='us-east-1')


def _violations(name):
    from chalicelib.ops import check_table
    violations, _ = check_table.run(only=[name])
    return violations


def test_gate_and_acl_items_are_clean_after_traffic(api, org_id):
    _, key = make_user(api, org_id, 'MEMBER')
    for _ in range(3):
        assert api.as_key(key).get('/api/account/me').status == 200
        assert api.get('/api/account/me').status == 200
    assert _violations('rate-gate') == [] and _violations('acl-items') == []
    from chalicelib.ops import check_table
    _, snap = check_table.run()
    assert not [k for k in snap.unclaimed_kinds() if k.startswith(('RATE#', 'users#… sk=ACL'))]


def test_counters_that_do_not_add_up_are_reported(api):
    me = api.get('/api/account/me').json
    items = _ddb().query(TableName=TABLE, KeyConditionExpression='pk = :p',
                         ExpressionAttributeValues={':p': {'S': f"RATE#{me['id']}"}})['Items']
    assert items
    _ddb().update_item(TableName=TABLE, Key={'pk': items[0]['pk'], 'sk': items[0]['sk']},
                       UpdateExpression='ADD u :one', ExpressionAttributeValues={':one': {'N': '1'}})
    found = [v for v in _violations('rate-gate') if v.key.startswith(f"RATE#{me['id']} ")]
    assert found and all(v.key == f"RATE#{me['id']} {items[0]['sk']['S']}" for v in found)
    assert any('sum of its seconds' in v.message for v in found)


def test_old_counters_on_an_acl_item_are_reported_until_the_migration_removes_them(api):
    from chalicelib.features.identity import gate
    me = api.get('/api/account/me').json
    key = {'pk': {'S': f"users#{me['id']}"}, 'sk': {'S': 'ACL'}}
    names = ['rm', 'ru'] + [f'rs{s:02d}' for s in range(60)] + [f'rk_key-{k:020d}_{s:02d}' for k in range(3)
                                                               for s in range(60)]
    for start in range(0, len(names), 40):
        part = names[start:start + 40]
        _ddb().update_item(TableName=TABLE, Key=key,
                           UpdateExpression='SET ' + ', '.join(f'#n{i} = :one' for i in range(len(part))),
                           ExpressionAttributeNames={f'#n{i}': n for i, n in enumerate(part)},
                           ExpressionAttributeValues={':one': {'N': '1'}})
    found = _violations('acl-items')
    assert len(found) == 1 and 'old layout' in found[0].message
    assert api.get('/api/account/me').status == 200          # ignored by the request path
    item = _ddb().get_item(TableName=TABLE, Key=key, ConsistentRead=True)['Item']
    ops = gate.legacy_cleanup_ops(item)
    assert len(ops) == len(names) // 50 + 1
    for op in ops + ops:                                    # idempotent
        _ddb().update_item(TableName=TABLE, **op)
    after = _ddb().get_item(TableName=TABLE, Key=key, ConsistentRead=True)['Item']
    assert gate.legacy_counters(after) == [] and gate.legacy_cleanup_ops(after) == []
    assert [n for n in after if n.startswith('acl_')] == [n for n in item if n.startswith('acl_')]
    assert _violations('acl-items') == []


def test_a_live_key_without_its_record_is_reported(api, org_id):
    from chalicelib.core.secrets import hash_key
    user, key = make_user(api, org_id, 'MEMBER')
    _ddb().delete_item(TableName=TABLE, Key={'pk': {'S': f"users#{user['id']}"},
                                             'sk': {'S': f'KEY#{hash_key(key)}'}})
    found = _violations('acl-items')
    assert len(found) == 1 and f'key_{hash_key(key)}' in found[0].message
