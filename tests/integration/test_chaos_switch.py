"""The chaos switch of the local AWS endpoint (localdev/chaos.py inside localdev/moto_server.py),
driven with real boto3 clients over loopback: faults parse into the right AWS error codes,
never reach moto (except slow answers, which do), repeat with a seed, and are counted."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError, ReadTimeoutError
from botocore.parsers import QueryParser

from localdev import chaos

ROOT = Path(__file__).resolve().parents[2]
TABLE, BUCKET, QUEUE = 'chaos-table', 'chaos-bucket', 'chaos-queue'
REGION = 'us-east-1'
# total_max_attempts=1 is "no retry" (retries={'max_attempts': 1} still retries once).
NO_RETRY = Config(retries={'total_max_attempts': 1}, connect_timeout=2, read_timeout=5,
                  signature_version='s3v4')
STATUS = {service: {f.code: f.status for f in faults} for service, faults in chaos.FAULTS.items()}


@dataclass
class Stack:
    url: str
    initial: dict[str, Any]
    dynamodb: Any
    s3: Any
    sqs: Any
    queue_url: str

    def client(self, service: str, config: Config = NO_RETRY) -> Any:
        return boto3.client(service, endpoint_url=self.url, region_name=REGION, config=config,
                            aws_access_key_id='x', aws_secret_access_key='x')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _moto_env(**chaos_vars: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('AWS_', 'CHAOS_'))}
    env.update(PYTHONPATH=str(ROOT), **chaos_vars)
    return env


@pytest.fixture(scope='module')
def stack():
    port = _free_port()
    env = _moto_env(CHAOS_RATE='1.0', CHAOS_SERVICES='dynamodb', CHAOS_KINDS='throttle,internal',
                    CHAOS_SEED='11', CHAOS_SLOW_SECONDS='1.5')
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.moto_server', '-H', '127.0.0.1', '-p', str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f'http://127.0.0.1:{port}'
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(f'{url}/moto-api/', timeout=1)
            break
        except Exception:  # noqa: BLE001 - not up yet
            assert proc.poll() is None and time.time() < deadline, 'moto server did not start'
            time.sleep(0.1)
    initial = chaos.remote_state(url)
    chaos.remote_configure(url, rate=0)
    stack = Stack(url, initial, None, None, None, '')
    stack.dynamodb, stack.s3, stack.sqs = (stack.client(s) for s in ('dynamodb', 's3', 'sqs'))
    stack.dynamodb.create_table(TableName=TABLE, BillingMode='PAY_PER_REQUEST',
                                KeySchema=[{'AttributeName': 'pk', 'KeyType': 'HASH'}],
                                AttributeDefinitions=[{'AttributeName': 'pk', 'AttributeType': 'S'}])
    stack.s3.create_bucket(Bucket=BUCKET)
    stack.queue_url = stack.sqs.create_queue(QueueName=QUEUE)['QueueUrl']
    yield stack
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(autouse=True)
def clean(stack):
    """Every test starts from chaos off, default services and kinds, seed 11, zero counters."""
    switch(stack, rate=0, services=sorted(chaos.DEFAULT_SERVICES), kinds=list(chaos.CATEGORIES),
           seed=11, slowSeconds=1.5)


def switch(stack: Stack, **changes: Any) -> dict[str, Any]:
    chaos.remote_configure(stack.url, **changes)
    return chaos.remote_reset(stack.url)


def outcome(call: Callable[[], Any]) -> str | None:
    """None if ``call`` succeeds, else the AWS error code (checked against its HTTP status)."""
    try:
        call()
    except ClientError as err:
        return err.response['Error']['Code']
    return None


def failure(call: Callable[[], Any]) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value


def get(stack: Stack, pk: str) -> Any:
    return stack.dynamodb.get_item(TableName=TABLE, Key={'pk': {'S': pk}}, ConsistentRead=True)


def test_the_environment_sets_the_switch(stack):
    assert stack.initial == {
        'settings': {'rate': 1.0, 'services': ['dynamodb'], 'kinds': ['internal', 'throttle'],
                     'seed': 11, 'slowSeconds': 1.5},
        'calls': 0, 'injected': 0, 'byService': {}}


def test_every_targeted_call_faults_and_other_services_pass(stack):
    switch(stack, rate=1.0, services='dynamodb', kinds='throttle,internal')
    for i in range(20):
        err = failure(lambda i=i: get(stack, f'k{i}'))
        code = err.response['Error']['Code']
        assert err.response['ResponseMetadata']['HTTPStatusCode'] == STATUS['dynamodb'][code]
    stack.s3.put_object(Bucket=BUCKET, Key='fine', Body=b'ok')
    assert stack.s3.get_object(Bucket=BUCKET, Key='fine')['Body'].read() == b'ok'
    counts = chaos.remote_state(stack.url)['byService']
    assert (counts['dynamodb']['calls'], counts['dynamodb']['injected']) == (20, 20)
    assert (counts['s3']['calls'], counts['s3']['injected']) == (2, 0)


def test_dynamodb_faults_parse_into_their_codes_and_modeled_exceptions(stack):
    switch(stack, rate=1.0, services='dynamodb', kinds='throttle,internal')
    seen = set()
    for i in range(40):
        err = failure(lambda i=i: stack.dynamodb.put_item(TableName=TABLE, Item={'pk': {'S': f'p{i}'}}))
        code = err.response['Error']['Code']
        assert err.response['ResponseMetadata']['HTTPStatusCode'] == STATUS['dynamodb'][code]
        assert err.response['Error']['Message']
        assert err.response['ResponseMetadata']['RequestId']
        if code != 'ServiceUnavailable':  # the one kind botocore's model does not name
            assert isinstance(err, getattr(stack.dynamodb.exceptions, code))
        seen.add(code)
    assert seen == set(STATUS['dynamodb'])


def test_s3_faults_parse_including_a_presigned_upload_part(stack):
    upload_id = stack.s3.create_multipart_upload(Bucket=BUCKET, Key='big')['UploadId']
    url = stack.s3.generate_presigned_url('upload_part', Params={
        'Bucket': BUCKET, 'Key': 'big', 'UploadId': upload_id, 'PartNumber': 1})
    assert 'X-Amz-Credential=' in url
    part = b'x' * (2 * 1024 * 1024)  # a large body: the fault must come back, not a reset

    def put_part() -> Any:  # urllib's default form content type would make moto drop partNumber
        return urllib.request.urlopen(urllib.request.Request(
            url, data=part, method='PUT', headers={'Content-Type': 'application/octet-stream'}), timeout=10)

    switch(stack, rate=1.0, services='s3', kinds='throttle,internal')
    seen = set()
    for _ in range(12):
        err = failure(lambda: stack.s3.put_object(Bucket=BUCKET, Key='k', Body=b'v'))
        code = err.response['Error']['Code']
        assert err.response['ResponseMetadata']['HTTPStatusCode'] == STATUS['s3'][code]
        assert err.response['ResponseMetadata']['RequestId']
        seen.add(code)
    assert seen == {'SlowDown', 'InternalError'}
    for _ in range(3):
        with pytest.raises(urllib.error.HTTPError) as caught:
            put_part()
        error = ET.fromstring(caught.value.read())
        assert error.tag == 'Error' and caught.value.code == STATUS['s3'][error.findtext('Code')]
    counts = chaos.remote_state(stack.url)['byService']
    assert list(counts) == ['s3']  # the presigned PUTs were told apart as S3
    assert (counts['s3']['calls'], counts['s3']['injected']) == (15, 15)

    switch(stack, rate=0)
    with put_part() as resp:
        etag = resp.headers['ETag']
    stack.s3.complete_multipart_upload(Bucket=BUCKET, Key='big', UploadId=upload_id, MultipartUpload={
        'Parts': [{'PartNumber': 1, 'ETag': etag}]})
    assert stack.s3.head_object(Bucket=BUCKET, Key='big')['ContentLength'] == len(part)
    assert chaos.remote_state(stack.url)['byService']['s3']['calls'] == 3


def test_sqs_faults_parse_in_the_json_and_the_query_protocol(stack):
    switch(stack, rate=1.0, services='sqs', kinds='throttle,internal')
    seen = set()
    for _ in range(30):
        err = failure(lambda: stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody='m'))
        code = err.response['Error']['Code']
        assert err.response['ResponseMetadata']['HTTPStatusCode'] == STATUS['sqs'][code]
        if code == 'RequestThrottled':
            assert isinstance(err, stack.sqs.exceptions.RequestThrottled)
        seen.add(code)
    assert seen == set(STATUS['sqs'])

    # An SDK on the older query protocol: a signed form POST, answered in <ErrorResponse>.
    request = AWSRequest('POST', stack.url + '/', data=(f'Action=SendMessage&QueueUrl={stack.queue_url}'
                         '&MessageBody=m&Version=2012-11-05').encode(),
                         headers={'Content-Type': 'application/x-www-form-urlencoded'})
    SigV4Auth(Credentials('x', 'x'), 'sqs', REGION).add_auth(request)
    prepared = request.prepare()
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(urllib.request.Request(prepared.url, data=prepared.body, method='POST',
                                                      headers=dict(prepared.headers)), timeout=10)
    parsed = QueryParser().parse({'status_code': caught.value.code, 'headers': dict(caught.value.headers),
                                  'body': caught.value.read()}, None)
    assert STATUS['sqs'][parsed['Error']['Code']] == caught.value.code
    assert chaos.remote_state(stack.url)['byService']['sqs']['injected'] == 31


def test_eventbridge_and_secrets_manager_faults_parse(stack):
    switch(stack, rate=1.0, services='events,secretsmanager', kinds='throttle,internal')
    events, secrets = stack.client('events'), stack.client('secretsmanager')
    codes = {'events': set(), 'secretsmanager': set()}
    for _ in range(12):
        codes['events'].add(outcome(lambda: events.put_events(
            Entries=[{'Source': 's', 'DetailType': 'd', 'Detail': '{}'}])))
        codes['secretsmanager'].add(outcome(lambda: secrets.get_secret_value(SecretId='none')))
    assert codes == {service: set(STATUS[service]) for service in codes}


def test_a_seed_repeats_the_fault_positions(stack):
    def run(interleave_s3: bool = False) -> list[str | None]:
        positions = []
        for i in range(30):
            if interleave_s3:
                outcome(lambda: stack.s3.list_objects_v2(Bucket=BUCKET))
            positions.append(outcome(lambda i=i: get(stack, f'r{i}')))
        return positions

    switch(stack, rate=0.5, services='dynamodb,s3', kinds='throttle,internal', seed=7)
    first = run()
    assert 5 < sum(code is not None for code in first) < 25
    chaos.remote_reset(stack.url)
    assert run() == first
    chaos.remote_reset(stack.url)
    assert run(interleave_s3=True) == first  # each service has its own stream
    switch(stack, seed=8)
    assert run() != first
    switch(stack, rate=0.25, seed=7)
    lower = run()
    assert {i for i, c in enumerate(lower) if c} < {i for i, c in enumerate(first) if c}


def test_an_injected_write_is_not_stored(stack):
    switch(stack, rate=1.0, services='dynamodb,s3', kinds='throttle,internal')
    failure(lambda: stack.dynamodb.put_item(TableName=TABLE, Item={'pk': {'S': 'lost'}}))
    failure(lambda: stack.dynamodb.transact_write_items(TransactItems=[
        {'Put': {'TableName': TABLE, 'Item': {'pk': {'S': 'lost-tx'}}}}]))
    failure(lambda: stack.s3.put_object(Bucket=BUCKET, Key='lost', Body=b'x'))
    switch(stack, rate=0)
    assert 'Item' not in get(stack, 'lost')
    assert 'Item' not in get(stack, 'lost-tx')
    assert failure(lambda: stack.s3.head_object(Bucket=BUCKET, Key='lost')).response['Error']['Code'] == '404'


def test_a_slow_answer_times_the_client_out_yet_reaches_moto_without_holding_the_server(stack):
    switch(stack, rate=1.0, services='dynamodb', kinds='slow', slowSeconds=3.0)
    impatient = stack.client('dynamodb', NO_RETRY.merge(Config(read_timeout=0.5)))
    errors: list[BaseException] = []

    def slow_put() -> None:
        try:
            impatient.put_item(TableName=TABLE, Item={'pk': {'S': 'slow'}})
        except BaseException as err:  # noqa: BLE001 - handed to the test thread
            errors.append(err)

    thread = threading.Thread(target=slow_put)
    thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    stack.s3.list_objects_v2(Bucket=BUCKET)  # not targeted: served while the slow call waits
    assert time.monotonic() - started < 2.5  # behind the server's lock it would take ~2.8 s
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], ReadTimeoutError)
    assert chaos.remote_state(stack.url)['byService']['dynamodb'] == {
        'calls': 1, 'injected': 1, 'kinds': {'slow': 1}}

    switch(stack, rate=0)
    deadline = time.monotonic() + 10
    while 'Item' not in get(stack, 'slow'):  # forwarded after the delay: the write happened
        assert time.monotonic() < deadline, 'the slow call never reached moto'
        time.sleep(0.1)


def test_counts_add_up_and_reset_zeroes_them(stack):
    switch(stack, rate=0.5, services='dynamodb,s3,sqs', kinds='throttle,internal')
    failed = {'dynamodb': 0, 's3': 0, 'sqs': 0}
    calls = {'dynamodb': lambda: get(stack, 'c'),
             's3': lambda: stack.s3.list_objects_v2(Bucket=BUCKET),
             'sqs': lambda: stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody='m')}
    for _ in range(10):
        for service, call in calls.items():
            failed[service] += outcome(call) is not None
    urllib.request.urlopen(f'{stack.url}/moto-api/', timeout=5).read()  # neither is counted
    state = chaos.remote_state(stack.url)
    assert state['calls'] == 30
    assert state['injected'] == sum(failed.values()) > 0
    for service, counts in state['byService'].items():
        assert counts['calls'] == 10
        assert counts['injected'] == failed[service] == sum(counts['kinds'].values())
    assert chaos.remote_reset(stack.url) == {**state, 'calls': 0, 'injected': 0, 'byService': {}}


def test_rate_zero_injects_nothing(stack):
    switch(stack, rate=0, services=list(chaos.SERVICES))
    for i in range(10):
        stack.dynamodb.put_item(TableName=TABLE, Item={'pk': {'S': f'z{i}'}})
        assert get(stack, f'z{i}')['Item']
        stack.s3.put_object(Bucket=BUCKET, Key=f'z{i}', Body=b'z')
        assert stack.s3.get_object(Bucket=BUCKET, Key=f'z{i}')['Body'].read() == b'z'
        stack.sqs.send_message(QueueUrl=stack.queue_url, MessageBody='z')
    state = chaos.remote_state(stack.url)
    assert (state['calls'], state['injected']) == (50, 0)


def test_bad_settings_are_refused_and_change_nothing(stack):
    before = chaos.remote_state(stack.url)['settings']
    for body in (b'{"rate": 2}', b'{"rate": true}', b'{"services": "dynamo"}', b'{"kinds": "slowish"}',
                 b'{"seed": 1.5}', b'{"slowSeconds": -1}', b'{"colour": 1}', b'[]', b'{'):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(urllib.request.Request(f'{stack.url}/_chaos', data=body, method='POST'),
                                   timeout=5)
        assert caught.value.code == 400 and json.loads(caught.value.read())['error']
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f'{stack.url}/_chaos/reset', timeout=5)
    assert caught.value.code == 405
    assert chaos.remote_state(stack.url)['settings'] == before

    bad = subprocess.run([sys.executable, '-m', 'localdev.moto_server', '-p', str(_free_port())], check=False,
                         cwd=ROOT, env=_moto_env(CHAOS_RATE='0.5', CHAOS_SERVICES='dynamodb,lambda'),
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unknown services ['lambda']" in bad.stderr


def test_the_switch_answers_loopback_callers_only():
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        raise AssertionError('never forwarded')

    statuses: list[str] = []
    middleware = chaos.Chaos(app, chaos.Settings())
    body = middleware({'PATH_INFO': '/_chaos', 'REQUEST_METHOD': 'GET', 'REMOTE_ADDR': '10.1.2.3'},
                      lambda status, headers: statuses.append(status))
    assert statuses == ['403 Forbidden'] and 'loopback' in json.loads(b''.join(body))['error']


def test_make_run_switches_chaos_on_after_set_up_from_a_clean_count(stack):
    from localdev.run import switch_on_chaos
    switch(stack, seed=5)
    get(stack, 'before')
    line = switch_on_chaos(stack.url, 0.3)
    assert line.startswith('chaos: 0.3 of calls to dynamodb,s3,sqs faulted') and 'CHAOS_SEED=5' in line
    state = chaos.remote_state(stack.url)
    assert state['settings']['rate'] == 0.3 and state['calls'] == 0
