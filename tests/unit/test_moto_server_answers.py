"""The local moto's answers to DynamoDB's item operations, dumped as moto holds them
(localdev/moto_server.py ``plain_json_answers``), are the answers moto's own serializer writes:
for every operation it covers, every kind of attribute value, the optional members (a page's
LastEvaluatedKey, consumed capacity, collection metrics, returned values), and answers with
nothing in them."""
from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws
from moto.core import responses

from localdev import moto_server
from tests.moto_tables import table_with_index

VALUES = {
    'pk': {'S': 'p#1'}, 'sk': {'S': '#'}, 'g': {'S': 'group'}, 'r': {'S': '001'},
    'text': {'S': 'ünïcode \u2603 "quoted" \\ back'}, 'n': {'N': '-12.5e3'}, 'b1': {'B': b'\x00\xff\x10 raw'},
    'strings': {'SS': ['a', 'b']}, 'numbers': {'NS': ['1', '2.5']}, 'blobs': {'BS': [b'\x01', b'\x02\x03']},
    'f1': {'BOOL': False}, 'nothing': {'NULL': True}, 'empty': {'S': ''},
    'nested': {'M': {'seq': {'L': [{'S': 'x'}, {'N': '0'}, {'M': {'deep': {'B': b'\xfe'}}}, {'L': []}]},
                     'map': {'M': {}}}},
}


@pytest.fixture
def ddb():
    moto_server.plain_json_answers()   # tests/conftest.py has patched moto already: a no-op then
    with mock_aws():
        client = boto3.client('dynamodb', region_name='us-east-1')
        table_with_index(client, 'answers')
        yield client


@pytest.fixture
def both(monkeypatch):
    """Each answer of the calls made, written both ways: (operation, dumped, serialized)."""
    seen: list[tuple[str, tuple, tuple]] = []
    dumped = responses.ActionResult.execute_result
    shaped = moto_server.SHAPED['execute_result']
    assert shaped is not None and dumped is not shaped

    def execute_result(self, context):
        answer = dumped(self, context)
        seen.append((context.operation_model.name, answer, shaped(self, context)))
        return answer
    monkeypatch.setattr(responses.ActionResult, 'execute_result', execute_result)
    return seen


def _key(n: int) -> dict:
    return {'pk': {'S': f'p#{n}'}, 'sk': {'S': '#'}}


def _calls(ddb) -> None:
    for n in range(1, 5):
        ddb.put_item(TableName='answers', Item={**VALUES, **_key(n), 'r': {'S': f'{n:03d}'}},
                     ReturnConsumedCapacity='TOTAL')
    ddb.put_item(TableName='answers', Item={**VALUES, **_key(1)}, ReturnValues='ALL_OLD',
                 ReturnConsumedCapacity='INDEXES', ReturnItemCollectionMetrics='SIZE')
    ddb.get_item(TableName='answers', Key=_key(1), ConsistentRead=True)
    ddb.get_item(TableName='answers', Key=_key(99), ReturnConsumedCapacity='TOTAL')
    ddb.get_item(TableName='answers', Key=_key(2), ProjectionExpression='nested.seq[2], b1')
    ddb.query(TableName='answers', KeyConditionExpression='pk = :p', ExpressionAttributeValues={':p': {'S': 'p#3'}},
              ReturnConsumedCapacity='TOTAL')
    ddb.query(TableName='answers', IndexName='by_g', KeyConditionExpression='g = :g', Limit=2,
              ExpressionAttributeValues={':g': {'S': 'group'}})
    ddb.query(TableName='answers', IndexName='by_g', KeyConditionExpression='g = :g', Select='COUNT',
              ExpressionAttributeValues={':g': {'S': 'group'}})
    ddb.query(TableName='answers', KeyConditionExpression='pk = :p', ExpressionAttributeValues={':p': {'S': 'none'}})
    ddb.scan(TableName='answers', Limit=3, FilterExpression='f1 = :f',
             ExpressionAttributeValues={':f': {'BOOL': False}})
    ddb.batch_get_item(RequestItems={'answers': {'Keys': [_key(1), _key(2), _key(77)], 'ConsistentRead': True}},
                       ReturnConsumedCapacity='TOTAL')
    ddb.batch_get_item(RequestItems={'answers': {'Keys': [_key(3)], 'ProjectionExpression': 'pk, numbers, blobs'}})
    for returned in ('UPDATED_NEW', 'ALL_NEW', 'UPDATED_OLD', 'ALL_OLD', 'NONE'):
        ddb.update_item(TableName='answers', Key=_key(4), ReturnValues=returned,
                        UpdateExpression='SET nested.#m.#k = :v, b1 = :b ADD n :one',
                        ExpressionAttributeNames={'#m': 'map', '#k': 'k'},
                        ExpressionAttributeValues={':v': {'L': [{'NULL': True}]}, ':b': {'B': b'\x07'},
                                                   ':one': {'N': '1'}})
    ddb.update_item(TableName='answers', Key=_key(5), UpdateExpression='SET blobs = :bs',
                    ExpressionAttributeValues={':bs': {'BS': [b'\x09']}}, ReturnValues='ALL_NEW')
    ddb.batch_write_item(RequestItems={'answers': [{'PutRequest': {'Item': {**VALUES, **_key(6)}}},
                                                   {'DeleteRequest': {'Key': _key(5)}}]},
                         ReturnConsumedCapacity='TOTAL', ReturnItemCollectionMetrics='SIZE')
    ddb.transact_write_items(TransactItems=[
        {'Put': {'TableName': 'answers', 'Item': {**VALUES, **_key(7)}}},
        {'Update': {'TableName': 'answers', 'Key': _key(6), 'UpdateExpression': 'REMOVE b1'}},
        {'ConditionCheck': {'TableName': 'answers', 'Key': _key(1), 'ConditionExpression': 'attribute_exists(pk)'}}],
        ReturnConsumedCapacity='TOTAL')
    ddb.transact_get_items(TransactItems=[{'Get': {'TableName': 'answers', 'Key': _key(7)}},
                                          {'Get': {'TableName': 'answers', 'Key': _key(88)}}])
    ddb.delete_item(TableName='answers', Key=_key(7), ReturnValues='ALL_OLD')
    ddb.delete_item(TableName='answers', Key=_key(7), ReturnValues='ALL_OLD')


def test_dumped_answers_are_the_serialized_answers(ddb, both):
    _calls(ddb)
    operations = {name for name, _, _ in both}
    assert moto_server.PLAIN_JSON_OPERATIONS <= operations, moto_server.PLAIN_JSON_OPERATIONS - operations
    for name, (status, headers, body), (want_status, want_headers, want_body) in both:
        assert (status, headers.get('Content-Type')) == (want_status, want_headers.get('Content-Type')), name
        assert json.loads(body) == json.loads(want_body), name


def test_what_clients_read_is_the_same(ddb):
    """The values boto3 hands back (blobs as bytes, sets, nested lists) survive the round trip."""
    ddb.put_item(TableName='answers', Item=VALUES)
    got = ddb.get_item(TableName='answers', Key={'pk': VALUES['pk'], 'sk': VALUES['sk']})['Item']
    assert got == VALUES
    page = ddb.query(TableName='answers', IndexName='by_g', KeyConditionExpression='g = :g',
                     ExpressionAttributeValues={':g': {'S': 'group'}})
    assert page['Items'] == [{k: VALUES[k] for k in ('pk', 'sk', 'g', 'r')}] and page['Count'] == 1
    assert 'LastEvaluatedKey' not in page


def test_errors_and_other_operations_keep_the_serializer(ddb, both):
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException) as refused:
        ddb.put_item(TableName='answers', Item=VALUES, ConditionExpression='attribute_exists(pk)')
    assert refused.value.response['Error']['Code'] == 'ConditionalCheckFailedException'
    assert ddb.describe_table(TableName='answers')['Table']['TableName'] == 'answers'
    assert ddb.list_tables()['TableNames'] == ['answers']
