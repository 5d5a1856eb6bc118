"""The local moto server's table stream (the outbox drain of `make run`, localdev/pollers.py):
a transaction that fails leaves no stream record, so no outbox event of a write that did not
happen is ever published."""
from __future__ import annotations

import boto3
import pytest

from tests.integration.test_fuzz_moto_server import TABLE, _key, dynamodb  # noqa: F401 - the fixture


def _records(url, arn):
    streams = boto3.client('dynamodbstreams', endpoint_url=url, region_name='us-east-1',
                           aws_access_key_id='x', aws_secret_access_key='x')
    shard = streams.describe_stream(StreamArn=arn)['StreamDescription']['Shards'][0]['ShardId']
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                          ShardIteratorType='TRIM_HORIZON')['ShardIterator']
    return [r['dynamodb']['Keys']['pk']['S'] for r in streams.get_records(ShardIterator=iterator)['Records']]


def test_a_failed_transaction_leaves_no_stream_record(dynamodb):  # noqa: F811 - the fixture
    from localdev.pollers import enable_stream
    client, url = dynamodb
    arn = enable_stream(TABLE, region='us-east-1', endpoint_url=url)
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(TransactItems=[
            {'Put': {'TableName': TABLE, 'Item': {**_key('EVT#lost'), 'kind': {'S': 'outbox'}}}},
            {'ConditionCheck': {'TableName': TABLE, 'Key': _key('missing'),
                                'ConditionExpression': 'attribute_exists(pk)'}}])
    client.transact_write_items(TransactItems=[
        {'Put': {'TableName': TABLE, 'Item': {**_key('EVT#kept'), 'kind': {'S': 'outbox'}}}}])
    seen = _records(url, arn)
    assert 'EVT#kept' in seen and 'EVT#lost' not in seen
