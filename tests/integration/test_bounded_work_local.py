"""Issue 24 on the real local stack (tests/live.py; docs/operations/worker.md,
docs/api/lifecycle.md): the worker spends the invocation's time and no more (finding 4), and a
multipart upload's parts are bound to the declared size (finding 8). The invariant checker is
clean afterwards."""
from __future__ import annotations

import json
import time

import pytest

from tests.live import LiveStack

TIMEOUT = 12          # the worker's Lambda timeout in this stack (WORKER_TIMEOUT_SECONDS)
VISIBILITY = 16       # the queue's visibility timeout: longer than an invocation, as on AWS
SLOW = ('$sum($map([1..3000], function($x){ $sum($map([1..3000], function($y){ $x * $y })) }))')


@pytest.fixture(scope='module')
def stack(tmp_path_factory):
    live = LiveStack(tmp_path_factory.mktemp('state'), WORKER_TIMEOUT_SECONDS=str(TIMEOUT),
                     QUEUE_VISIBILITY_TIMEOUT=str(VISIBILITY))
    yield live
    live.stop()


@pytest.fixture(scope='module')
def project(stack):
    org = stack.created('/api/organizations', {'name': 'bounded', 'slug': 'bounded-work'})
    return stack.created('/api/projects', {'name': 'P', 'organizationId': org['id']})


def _logged(stack, message: str) -> list[dict]:
    out = []
    for line in list(stack.output):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get('message') == message:
            out.append(entry)
    return out


def test_three_slow_attempts_end_inside_the_invocation_and_the_unfinished_one_comes_back(stack, project):
    steps = [{'name': f'slow-{n}', 'stepType': 'SCRIPT', 'options': {'expression': SLOW},
              'executionPolicy': {'timeoutSeconds': 4, 'maxAttempts': 1, 'onExhausted': 'CONTINUE'}}
             for n in range(3)]
    plan = stack.created('/api/activity-plans', {'projectId': project['id'], 'name': 'slow', 'steps': steps})
    started = stack.post(f"/api/activity-plans/{plan['id']}/start", {'projectId': project['id']})
    assert started.status == 202, started
    activity = started.body['id']
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        done = stack.get(f'/api/activities/{activity}').body
        if done['status'] == 'COMPLETED':
            break
        time.sleep(0.5)
    assert done['status'] == 'COMPLETED', done
    executions = stack.get(f"/api/executions?filter=activityId=='{activity}'").body['content']
    # nothing lost: each ran exactly one attempt (its own time box), none was counted twice
    assert sorted((e['status'], e.get('endReason'), e['attempts']) for e in executions) == \
        [('FAILED', 'TIMED_OUT', 1)] * 3, executions
    # they did not run back to back in one invocation (3 x 4 s > 12 s - 3 s of margin): the
    # attempt(s) the first invocation had no time for started after a redelivery, once the
    # visibility timeout counted from the batch's receive had passed
    from chalicelib.core.clock import parse_instant
    runs = sorted((parse_instant(e['startDate']), parse_instant(e['endDate'])) for e in executions)
    gaps = [(b[0] - a[1]).total_seconds() for a, b in zip(runs, runs[1:], strict=False)]
    assert max(gaps) >= VISIBILITY - TIMEOUT - 1, gaps
    # the batch of the three attempts: it ended before the invocation's timeout, with the
    # attempt it had no time left for reported as a batch item failure (redelivered, then run)
    batches = [b for b in _logged(stack, 'queue batch') if b['received'] == 3]
    assert batches, _logged(stack, 'queue batch')
    batch = batches[0]
    assert 1 <= len(batch['failed']) <= 2 and batch['remaining_ms'] > 0, batch
    deferred = {d['message_id'] for d in _logged(stack, 'message deferred')}
    assert set(batch['failed']) <= deferred
    # nothing went to the dead-letter queue
    import boto3
    sqs = boto3.client('sqs', region_name='us-east-1', endpoint_url=stack.moto_url,
                       aws_access_key_id='local', aws_secret_access_key='local')
    dlq = [u for u in sqs.list_queues().get('QueueUrls', []) if u.endswith('-dlq')]
    assert dlq
    for url in dlq:
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=['ApproximateNumberOfMessages'])
        assert attrs['Attributes']['ApproximateNumberOfMessages'] == '0'
    code, report = stack.check('--settle-seconds', '0')
    assert code == 0, report[-3000:]


def _put_part(url: str, data: bytes) -> tuple[int, str | None]:
    import http.client
    import urllib.parse
    parsed = urllib.parse.urlsplit(url)
    assert parsed.hostname == '127.0.0.1'
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    try:
        conn.request('PUT', f'{parsed.path}?{parsed.query}', body=data,
                     headers={'Content-Type': 'application/octet-stream'})
        resp = conn.getresponse()
        resp.read()
        return resp.status, resp.getheader('ETag')
    finally:
        conn.close()


def test_a_1_mib_part_on_a_16_byte_session_is_refused(stack, project):
    import urllib.parse
    store = stack.created('/api/document-stores', {'projectId': project['id'], 'name': 'S'})
    base = f"/api/document-stores/{store['id']}"
    session = stack.post(f'{base}/multipart-upload-request?contentLength=16&path=small.bin')
    assert session.status == 200, session
    assert (session.body['partSize'], session.body['partCount']) == (5 * 2 ** 20, 1)
    urls = stack.post(f'{base}/multipart-upload-part-urls', {**session.body, 'partNumbers': [1]})
    assert urls.status == 200, urls
    (part,) = urls.body['parts']
    assert part['size'] == 16
    signed = urllib.parse.parse_qs(urllib.parse.urlsplit(part['url']).query)['X-Amz-SignedHeaders'][0]
    assert 'content-length' in signed.split(';')          # AWS refuses any other length at the PUT
    beyond = stack.post(f'{base}/multipart-upload-part-urls', {**session.body, 'partNumbers': [2]})
    assert beyond.status == 400 and 'parts are 1 to 1' in beyond.body['message'], beyond
    status, etag = _put_part(part['url'], b'x' * 2 ** 20)   # moto does not check the signature...
    assert status == 200
    done = stack.post(f'{base}/multipart-upload-complete',
                      {**session.body, 'parts': [{'partNumber': 1, 'etag': etag}]})
    # ...so the complete does: refused, the upload aborted, nothing stored
    assert done.status == 400 and 'Part 1 holds 1048576 bytes' in done.body['message'], done
    assert 'must hold 16' in done.body['message']
    again = stack.post(f'{base}/multipart-upload-complete',
                       {**session.body, 'parts': [{'partNumber': 1, 'etag': etag}]})
    assert again.status == 400 and 'aborted' in again.body['message'], again
    families = stack.get(f"/api/document-families?filter=documentStoreId=='{store['id']}'")
    assert families.status == 200 and families.body['totalElements'] == 0, families
    # the right length goes through
    session = stack.post(f'{base}/multipart-upload-request?contentLength=16&path=ok.bin').body
    (part,) = stack.post(f'{base}/multipart-upload-part-urls', {**session, 'partNumbers': [1]}).body['parts']
    status, etag = _put_part(part['url'], b'y' * 16)
    assert status == 200
    made = stack.post(f'{base}/multipart-upload-complete', {**session, 'parts': [{'partNumber': 1, 'etag': etag}]})
    assert made.status == 201 and made.body['size'] == 16, made
    code, report = stack.check('--settle-seconds', '0')
    assert code == 0, report[-3000:]
