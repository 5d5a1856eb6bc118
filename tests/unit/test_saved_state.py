"""The moto server's saved state (localdev/moto_server.py ``SavedState``; docs/operations/local-state.md):
what is saved comes back whole in a fresh server, the table stream starts after the records it
had, and only requests that change something make the state dirty."""
from __future__ import annotations

import threading

import boto3
from moto import mock_aws

from localdev import moto_server


def _table(ddb) -> None:
    ddb.create_table(TableName='t', KeySchema=[{'AttributeName': 'pk', 'KeyType': 'HASH'}],
                     AttributeDefinitions=[{'AttributeName': 'pk', 'AttributeType': 'S'}],
                     BillingMode='PAY_PER_REQUEST',
                     StreamSpecification={'StreamEnabled': True, 'StreamViewType': 'NEW_AND_OLD_IMAGES'})


def test_a_saved_state_loads_whole_in_a_fresh_server(tmp_path):
    path = tmp_path / 'state.pickle'
    with mock_aws():
        ddb = boto3.client('dynamodb', region_name='us-east-1')
        _table(ddb)
        for i in range(3):
            ddb.put_item(TableName='t', Item={'pk': {'S': f'k{i}'}, 'v': {'N': str(i)}})
        s3 = boto3.client('s3', region_name='us-east-1')
        s3.create_bucket(Bucket='kept-bucket')
        s3.put_object(Bucket='kept-bucket', Key='a/b.txt', Body=b'hello')
        sqs = boto3.client('sqs', region_name='us-east-1')
        queue = sqs.create_queue(QueueName='kept-queue')['QueueUrl']
        sqs.send_message(QueueUrl=queue, MessageBody='waiting')   # a queue holds locks: pickled too
        moto_server.DIRTY[0] = True
        assert moto_server.SavedState(str(path), threading.Lock()).save()
        assert not moto_server.SavedState(str(path), threading.Lock()).save()   # nothing changed since
    with mock_aws():   # a fresh server: empty until loaded
        ddb = boto3.client('dynamodb', region_name='us-east-1')
        assert ddb.list_tables()['TableNames'] == []
        assert moto_server.SavedState(str(path), threading.Lock()).load() == path.stat().st_size
        assert ddb.get_item(TableName='t', Key={'pk': {'S': 'k2'}})['Item']['v'] == {'N': '2'}
        s3 = boto3.client('s3', region_name='us-east-1')
        assert s3.get_object(Bucket='kept-bucket', Key='a/b.txt')['Body'].read() == b'hello'
        sqs = boto3.client('sqs', region_name='us-east-1')
        queue = sqs.get_queue_url(QueueName='kept-queue')['QueueUrl']
        assert [m['Body'] for m in sqs.receive_message(QueueUrl=queue)['Messages']] == ['waiting']
        # the stream starts after the records it had: a reader from its start sees only new writes
        arn = ddb.describe_table(TableName='t')['Table']['LatestStreamArn']
        streams = boto3.client('dynamodbstreams', region_name='us-east-1',   # moto's in-process host
                               endpoint_url='https://streams.dynamodb.us-east-1.amazonaws.com')
        shard = streams.describe_stream(StreamArn=arn)['StreamDescription']['Shards'][0]['ShardId']
        ddb.put_item(TableName='t', Item={'pk': {'S': 'new'}})
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType='TRIM_HORIZON')
        records = streams.get_records(ShardIterator=it['ShardIterator'])['Records']
        assert [r['dynamodb']['Keys']['pk']['S'] for r in records] == ['new']


def test_only_changes_make_the_state_dirty():
    def env(method='POST', target=None, path='/'):
        out = {'REQUEST_METHOD': method, 'PATH_INFO': path}
        if target:
            out['HTTP_X_AMZ_TARGET'] = target
        return out
    assert moto_server.changes_state(env(target='DynamoDB_20120810.TransactWriteItems'))
    assert moto_server.changes_state(env(target='AmazonSQS.SendMessage'))
    assert moto_server.changes_state(env('PUT', path='/bucket/key'))   # S3 put
    assert not moto_server.changes_state(env(target='DynamoDB_20120810.Query'))
    assert not moto_server.changes_state(env(target='DynamoDBStreams_20120810.GetRecords'))
    assert not moto_server.changes_state(env(target='AmazonSQS.ReceiveMessage'))
    assert not moto_server.changes_state(env(target='AWSEvents.ListEventBuses'))
    assert not moto_server.changes_state(env('GET', path='/bucket/key'))
