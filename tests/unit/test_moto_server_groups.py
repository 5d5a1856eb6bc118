"""The local moto server's index Query groups (localdev/moto_server.py ``INDEX_GROUPS``): the
same answers as moto's pass over every item, regrouped after any request that can change an
item, never after a read."""
from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from localdev import moto_server
from tests.moto_tables import table_with_index


@pytest.fixture
def grouped(monkeypatch):
    monkeypatch.setitem(moto_server.INDEX_GROUPS, 'on', True)
    with mock_aws():
        ddb = boto3.client('dynamodb', region_name='us-east-1')
        table_with_index(ddb, 'groups')
        yield ddb


def _put(ddb, n: int, group: str) -> None:
    ddb.put_item(TableName='groups', Item={'pk': {'S': f'p{n}'}, 'sk': {'S': '#'}, 'g': {'S': group},
                                           'r': {'S': f'{n:03d}'}})
    moto_server.GENERATION[0] += 1   # what the server's ``serialized`` does after a write


def _keys(ddb, group: str, **kw) -> list[str]:
    out = ddb.query(TableName='groups', IndexName='by_g', KeyConditionExpression='g = :g' + kw.get('extra', ''),
                    ExpressionAttributeValues={':g': {'S': group}, **kw.get('values', {})},
                    ScanIndexForward=kw.get('forward', True))
    return [i['pk']['S'] for i in out['Items']]


def test_an_index_query_answers_from_its_group_as_moto_would(grouped):
    for n in range(30):
        _put(grouped, n, f'g{n % 3}')
    assert _keys(grouped, 'g1') == [f'p{n}' for n in range(1, 30, 3)]
    assert _keys(grouped, 'g1', forward=False) == [f'p{n}' for n in range(28, 0, -3)]
    assert _keys(grouped, 'g2', extra=' AND begins_with(r, :r)', values={':r': {'S': '01'}}) == ['p11', 'p14', 'p17']
    assert _keys(grouped, 'nothing') == []


def test_a_change_regroups_and_a_read_does_not(grouped):
    _put(grouped, 1, 'a')
    assert _keys(grouped, 'a') == ['p1']
    _put(grouped, 2, 'a')
    assert _keys(grouped, 'a') == ['p1', 'p2']
    grouped.update_item(TableName='groups', Key={'pk': {'S': 'p1'}, 'sk': {'S': '#'}},
                        UpdateExpression='SET g = :b', ExpressionAttributeValues={':b': {'S': 'b'}})
    moto_server.GENERATION[0] += 1
    assert _keys(grouped, 'a') == ['p2'] and _keys(grouped, 'b') == ['p1']


@pytest.mark.parametrize(('target', 'path', 'changes'), [
    ('DynamoDB_20120810.PutItem', '/', True),
    ('DynamoDB_20120810.TransactWriteItems', '/', True),
    ('DynamoDB_20120810.UpdateItem', '/', True),
    ('DynamoDB_20120810.SomethingNew', '/', True),   # unknown: counted as a change
    ('DynamoDB_20120810.Query', '/', False),
    ('DynamoDB_20120810.BatchGetItem', '/', False),
    ('DynamoDBStreams_20120810.GetRecords', '/', False),
    ('AmazonSQS.ReceiveMessage', '/', False),
    ('', '/moto-api/reset', True),
    ('', '/bucket/key', False),
])
def test_which_requests_regroup(target, path, changes):
    environ = {'PATH_INFO': path, **({'HTTP_X_AMZ_TARGET': target} if target else {})}
    assert moto_server.changes_items(environ) is changes
