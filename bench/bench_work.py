"""Work orchestration figures (issue 12): activity starts per second through SQS to RUNNING on
moto (in process), and the DynamoDB + SQS calls one start costs, against a floor measured in
the same run (the raw calls a start cannot avoid: one SendMessage, ReceiveMessage,
DeleteMessage, one PutItem of the activity and one GetItem of it).

    PYTHONPATH=. .venv/bin/python bench/bench_work.py     (BENCH_STARTS, default 40)

Plan of each start: one TASK step and one SCRIPT step (so a start is: the start route, the
start message, the claim + materialisation transaction, the SCRIPT attempt, its end, the
activity's end). moto, not our code, dominates the times: read them against the floor.
"""
from __future__ import annotations

import collections
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.pop('AWS_ENDPOINT_URL', None)
os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='x', AWS_SECRET_ACCESS_KEY='x',
                  TABLE_NAME='platform-bench')

from bench.counting import count_calls  # noqa: E402

STARTS = int(os.environ.get('BENCH_STARTS', '40'))


def _resources():
    import boto3

    from chalicelib.core.config import get_config
    cfg = get_config()
    sqs = boto3.client('sqs', region_name=cfg.region)
    dlq = sqs.create_queue(QueueName=f'{cfg.activity_queue_name}-dlq')['QueueUrl']
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=['QueueArn'])['Attributes']['QueueArn']
    sqs.create_queue(QueueName=cfg.activity_queue_name, Attributes={
        'VisibilityTimeout': '30', 'RedrivePolicy': json.dumps({'deadLetterTargetArn': arn, 'maxReceiveCount': '5'})})
    boto3.client('events', region_name=cfg.region).create_event_bus(Name=cfg.event_bus_name)


def floor(n: int) -> float:
    """Seconds for n x (SendMessage, ReceiveMessage, DeleteMessage, PutItem, GetItem), raw boto3."""
    import boto3

    from chalicelib.core.config import get_config
    cfg = get_config()
    sqs = boto3.client('sqs', region_name=cfg.region)
    ddb = boto3.client('dynamodb', region_name=cfg.region)
    url = sqs.get_queue_url(QueueName=cfg.activity_queue_name)['QueueUrl']
    started = time.perf_counter()
    for i in range(n):
        sqs.send_message(QueueUrl=url, MessageBody='{}')
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1).get('Messages', []):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m['ReceiptHandle'])
        ddb.put_item(TableName=cfg.table_name, Item={'pk': {'S': f'FLOOR#{i}'}, 'sk': {'S': '#'}})
        ddb.get_item(TableName=cfg.table_name, Key={'pk': {'S': f'FLOOR#{i}'}, 'sk': {'S': '#'}}, ConsistentRead=True)
    return time.perf_counter() - started


def main() -> None:
    from moto import mock_aws
    with mock_aws():
        from chalicelib.features.identity.bootstrap import bootstrap
        result = bootstrap(api_key='pk_bench-key-000')
        _resources()
        import app
        from chalicelib.core.config import get_config
        from chalicelib.features.identity.service_token import SERVICE
        from chalicelib.features.work import service as work_service
        from chalicelib.kernel import crud
        from chalicelib.kernel.store import table
        from localdev.pollers import QueuePoller
        cfg = get_config()
        org = result['organizationId']
        project = crud.create('projects', {'name': 'bench', 'organizationId': org}, SERVICE)
        plan = crud.create('activity-plans', {'projectId': project['id'], 'name': 'p', 'steps': [
            {'name': 'review', 'stepType': 'TASK', 'options': {'title': 'Review'}},
            {'name': 'score', 'stepType': 'SCRIPT', 'options': {'expression': '$inputs.n + 1'}}]}, SERVICE)
        poller = QueuePoller(app.activity_start_worker, cfg.activity_queue_name, region=cfg.region,
                             endpoint_url=None)
        # warm up: imports, clients, the expression library
        warm = work_service.start(plan['id'], {'projectId': project['id'], 'inputs': {'n': 0}}, SERVICE)
        while poller.poll_once()['received']:
            pass
        assert table.get('activities', warm['id']).data['status'] == 'COMPLETED'

        ids = []
        with count_calls() as start_calls:
            t0 = time.perf_counter()
            for i in range(STARTS):
                started = work_service.start(plan['id'], {'projectId': project['id'], 'inputs': {'n': i}}, SERVICE)
                ids.append(started['id'])
            t_started = time.perf_counter()
        own_reads = 0

        def started(activity_id: str) -> bool:
            nonlocal own_reads
            own_reads += 1
            return table.get('activities', activity_id).data['status'] != 'PENDING'
        with count_calls() as worker_calls:
            running_at = None
            while True:
                got = poller.poll_once()['received']
                if running_at is None and all(started(a) for a in ids):
                    running_at = time.perf_counter()
                if not got:
                    break
            t_done = time.perf_counter()
        worker_calls['GetItem'] -= own_reads   # the bench's status reads are not the worker's
        statuses = collections.Counter(table.get('activities', a).data['status'] for a in ids)
        floor_s = floor(STARTS)

    def per(calls, ops):
        return sum(v for k, v in calls.items() if k in ops) / STARTS
    dynamo_ops = {'GetItem', 'PutItem', 'UpdateItem', 'DeleteItem', 'Query', 'BatchGetItem', 'TransactWriteItems'}
    sqs_ops = {'SendMessage', 'SendMessageBatch', 'ReceiveMessage', 'DeleteMessage', 'DeleteMessageBatch',
               'GetQueueUrl'}
    print(f'\nActivity starts through SQS on moto (in process), {STARTS} starts, plan = TASK + SCRIPT')
    print(f'{"":46}{"seconds":>10}{"starts/s":>10}')
    print(f'{"floor: 3 SQS + 2 DynamoDB raw calls per start":46}{floor_s:10.2f}{STARTS / floor_s:10.1f}')
    print(f'{"start route (PENDING + message)":46}{t_started - t0:10.2f}{STARTS / (t_started - t0):10.1f}')
    to_running = (running_at or t_done) - t0
    print(f'{"start -> every activity RUNNING or done":46}{to_running:10.2f}{STARTS / to_running:10.1f}')
    print(f'{"start -> every activity COMPLETED":46}{t_done - t0:10.2f}{STARTS / (t_done - t0):10.1f}')
    print(f'final statuses: {dict(statuses)}')
    print('\nAWS calls per start (the worker column includes its receives and deletes, in batches of 10)')
    print(f'{"":30}{"start route":>12}{"worker":>10}')
    for name, ops in (('DynamoDB', dynamo_ops), ('SQS', sqs_ops)):
        print(f'{name:30}{per(start_calls, ops):12.1f}{per(worker_calls, ops):10.1f}')
    for op in sorted(set(start_calls) | set(worker_calls)):
        print(f'  {op:28}{start_calls[op] / STARTS:12.2f}{worker_calls[op] / STARTS:10.2f}')


if __name__ == '__main__':
    main()
