"""Service bridges and UI events through `make run` for real: the local server (its own moto
server: Secrets Manager and DynamoDB over HTTP) calls an upstream on loopback that the
allowlist opens, as a user with curl would see it.

Every target here is 127.0.0.1 (no name is looked up): the server process cannot be put under
the test's network guard, so nothing else is ever named."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import boto3
import pytest

from tests.netguard import Upstream

ROOT = Path(__file__).resolve().parents[2]
HASH_KEY = 'local-run-hash-key'
SECRET = 'sk_local_' + 'Qw8z' * 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _call(base, method, path, body=None, key=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header('content-type', 'application/json')
    if key:
        req.add_header('x-api-key', key)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    port, moto_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith('AWS_')}
    env.update(PORT=str(port), MOTO_PORT=str(moto_port), PYTHONPATH=str(ROOT),
               LOCAL_STATE_DIR=str(tmp_path_factory.mktemp('state')),
               RATE_LIMIT_PER_MINUTE='100000', RATE_LIMIT_BURST_PER_SECOND='100000',
               BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST='127.0.0.1', BRIDGE_PROXY_TIMEOUT_SECONDS='1',
               CLIENT_IP_HASH_KEY=HASH_KEY, ORG_SECRETS_PREFIX='platform/local/org/')
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    key = None
    for line in proc.stdout:
        if 'admin API key' in line:
            key = line.rsplit(' ', 1)[-1].strip()
        if 'platform API on' in line:
            break
    assert proc.poll() is None, 'server exited during start-up'
    output: list[str] = []
    drain = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
    drain.start()   # a full pipe would block the server
    yield {'base': f'http://127.0.0.1:{port}', 'key': key, 'moto': f'http://127.0.0.1:{moto_port}',
           'output': output}
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope='module')
def upstream():
    up = Upstream()
    yield up
    up.close()


@pytest.fixture(scope='module')
def bridge(server, upstream):
    base, key = server['base'], server['key']
    status, _, me = _call(base, 'GET', '/api/account/me', key=key)
    org = json.loads(me)['memberships'][0]['organizationId']
    status, _, project = _call(base, 'POST', '/api/projects', {'name': 'bridges', 'organizationId': org}, key)
    assert status == 201, project
    project = json.loads(project)
    status, _, made = _call(base, 'POST', '/api/service-bridges', {
        'projectId': project['id'], 'name': 'local', 'baseUrl': upstream.url(''),
        'defaultHeaders': {'Authorization': 'Bearer ${secrets.LOCAL_TOKEN}'},
        'endpoints': [{'name': 'echo', 'method': 'POST', 'path': '/echo'},
                      {'name': 'status', 'path': '/status'},
                      {'name': 'slow', 'path': '/sleep?s=3'},
                      {'name': 'find', 'path': '/echo', 'requestSchema': {'required': ['id']}}]}, key)
    assert status == 201, made
    client = boto3.client('secretsmanager', endpoint_url=server['moto'], region_name='us-east-1',
                          aws_access_key_id='local', aws_secret_access_key='local')
    client.create_secret(Name=f'platform/local/org/{org}/LOCAL_TOKEN', SecretString=SECRET)
    return {**json.loads(made), 'org': org}


def test_the_proxy_calls_the_upstream_with_the_secret_and_answers_without_it(server, upstream, bridge):
    status, headers, body = _call(server['base'], 'PUT', f"/api/service-bridges/{bridge['id']}/proxy/echo?a=1",
                                  {'x': [1, 2]}, server['key'])
    assert status == 200 and headers['content-type'] == 'application/json'
    assert headers['x-bridge-upstream-status'] == '200'
    echo = json.loads(body)
    assert echo['method'] == 'POST' and echo['path'] == '/echo?a=1' and json.loads(echo['body']) == {'x': [1, 2]}
    assert upstream.seen[-1].headers['authorization'] == f'Bearer {SECRET}'
    assert SECRET.encode() not in body and echo['headers']['authorization'] == 'Bearer [secret LOCAL_TOKEN]'
    status, _, got = _call(server['base'], 'GET', f"/api/service-bridges/{bridge['id']}", key=server['key'])
    assert SECRET.encode() not in got
    time.sleep(0.5)
    assert not any(SECRET in line for line in server['output'])


def test_status_text_required_fields_and_the_deadline(server, upstream, bridge):
    base, key, bid = server['base'], server['key'], bridge['id']
    status, headers, body = _call(base, 'GET', f'/api/service-bridges/{bid}/proxy/status?code=418&type=text/plain'
                                               '&body=teapot', key=key)
    assert (status, body) == (418, b'teapot') and headers['content-type'] == 'text/plain; charset=utf-8'
    seen = len(upstream.seen)
    status, headers, body = _call(base, 'GET', f'/api/service-bridges/{bid}/proxy/find', key=key)
    assert (status, json.loads(body)) == (200, []) and len(upstream.seen) == seen
    started = time.monotonic()
    status, _, body = _call(base, 'GET', f'/api/service-bridges/{bid}/proxy/slow', key=key)
    assert status == 504 and json.loads(body)['message'] == 'the upstream did not answer within 1 s'
    assert time.monotonic() - started < 2.9
    status, _, body = _call(base, 'GET', f'/api/service-bridges/{bid}/proxy', key=key)
    assert status == 400 and "'echo', 'status', 'slow', 'find'" in json.loads(body)['message']


def test_a_ui_batch_hashes_the_first_forwarded_hop(server):
    base, key = server['base'], server['key']
    status, _, body = _call(base, 'POST', '/api/events/ui/batch',
                            {'events': [{'kind': 'ui.error', 'payload': {'ip': '1.2.3.4', 'message': 'm'}}]}, key,
                            headers={'X-Forwarded-For': '198.51.100.77, 127.0.0.1'})
    assert (status, json.loads(body)) == (200, {'accepted': 1, 'dropped': 0})
    status, _, page = _call(base, 'GET', "/api/events?filter=eventType=='ui.error'", key=key)
    (event,) = json.loads(page)['content']
    assert event['payload'] == {'message': 'm'}
    assert event['clientIpHash'] == hmac.new(HASH_KEY.encode(), b'198.51.100.77', hashlib.sha256).hexdigest()
