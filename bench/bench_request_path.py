"""The request path, measured from outside on the real local server (`make run`: its own moto
server and the local front door, localdev/run.py), against floors measured in the same run:

* GET /api/projects/{id} over a keep-alive connection, median of OPS requests, against one raw
  ``get_item`` of the same item on the same moto server over a keep-alive connection (target:
  <= 1.5x), with the DynamoDB calls one GET makes (target: 2, issued concurrently);
* cold start of the first request: a fresh interpreter importing ``app`` and answering one
  authenticated GET by id (the handler called with an API Gateway proxy event, as Lambda does;
  same moto server), against a bare Chalice app whose one route does one ``get_item`` of the
  same item, called the same way (target: <= 1.15x), medians of RUNS. The app runs as the
  deployment package ships it: app.py and chalicelib/ copied and compiled to bytecode
  (infra/bytecode.py; a Lambda's read-only code directory cannot cache bytecode, so the package
  carries it), whatever PYTHONDONTWRITEBYTECODE says; one more row runs the same copy as
  sources only (a package without bytecode), alternating with the other two.

    PYTHONPATH=. .venv/bin/python bench/bench_request_path.py
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

OPS = int(os.environ.get('BENCH_OPS', '200'))
RUNS = int(os.environ.get('BENCH_COLD_RUNS', '15'))
ADMIN_KEY = 'bench-admin-key-0123456789abcdef'
TABLE = 'platform-bench-request-path'

# Both apps are invoked the way Lambda invokes them: the handler called with an API Gateway
# proxy event (no test client, whose own imports would dilute the ratio).
EVENT = r"""
def event(project_id, key):
    return {'resource': '/api/projects/{id}', 'path': '/api/projects/' + project_id, 'httpMethod': 'GET',
            'headers': {'x-api-key': key, 'Host': 'bench'}, 'multiValueHeaders': {'x-api-key': [key]},
            'queryStringParameters': None, 'multiValueQueryStringParameters': None,
            'pathParameters': {'id': project_id}, 'stageVariables': None, 'body': None, 'isBase64Encoded': False,
            'requestContext': {'resourcePath': '/api/projects/{id}', 'httpMethod': 'GET', 'requestId': 'cold',
                               'path': '/api/projects/' + project_id, 'stage': 'api',
                               'identity': {'sourceIp': '192.0.2.1'}}}
class Context:
    function_name = 'bench'; memory_limit_in_mb = 1024; aws_request_id = 'cold'
    invoked_function_arn = 'arn:aws:lambda:us-east-1:123456789012:function:bench'
    def get_remaining_time_in_millis(self):
        return 29000
"""

BARE = EVENT + r"""
import os, sys, time
t = time.perf_counter()
import boto3
from chalice import Chalice
app = Chalice(app_name='bare')
@app.route('/api/projects/{id}')
def get(id):
    ddb = boto3.client('dynamodb')
    item = ddb.get_item(TableName=os.environ['TABLE_NAME'], Key={'pk': {'S': 'projects#' + id}, 'sk': {'S': '#'}},
                        ConsistentRead=True)['Item']
    return {'id': id, 'name': item['data']['M']['name']['S']}
r = app(event(sys.argv[1], sys.argv[2]), Context())
assert r['statusCode'] == 200, r
print(time.perf_counter() - t)
"""

OURS = EVENT + r"""
import os, sys, time
t = time.perf_counter()
import app
assert app.__file__.startswith(os.getcwd()), app.__file__   # the staged copy, as packaged
r = app.app(event(sys.argv[1], sys.argv[2]), Context())
assert r['statusCode'] == 200, r
print(time.perf_counter() - t)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _env(port: int, state: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith('AWS_ENDPOINT')}
    env.update(PYTHONPATH=ROOT, PORT=str(port), PLATFORM_ADMIN_API_KEY=ADMIN_KEY, LOCAL_STATE_DIR=state,
               LOCAL_PERSIST='off',
               TABLE_NAME=TABLE, AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='local',
               AWS_SECRET_ACCESS_KEY='local', RATE_LIMIT_PER_MINUTE='100000000',
               RATE_LIMIT_BURST_PER_SECOND='100000000', RATE_LIMIT_USER_PER_MINUTE='100000000',
               RATE_LIMIT_USER_BURST_PER_SECOND='100000000', LOG_LEVEL='WARNING', CHAOS_RATE='0')
    return env


def _start(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.time() + 90
    for line in proc.stdout:
        if line.startswith('platform API on'):
            return proc, line.split('(storage: ')[1].rstrip(')\n')
        if time.time() > deadline:
            break
    proc.kill()
    raise SystemExit('make run did not start')


def _median_ms(fn, n: int) -> float:
    for _ in range(10):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return statistics.median(out)


def _run_once(code: str, env: dict[str, str], project_id: str, key: str) -> float:
    res = subprocess.run([sys.executable, '-c', code, project_id, key], cwd=env['PYTHONPATH'], env=env,
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(res.stderr[-2000:])
    return float(res.stdout.strip().splitlines()[-1]) * 1000


def _cold(env: dict[str, str], source_env: dict[str, str], project_id: str, key: str) -> tuple[float, float, float]:
    """Medians of RUNS fresh interpreters each, bare, ours and ours without bytecode
    alternating (the machine's load drifts; alternating exposes all to the same drift)."""
    bare, ours, source = [], [], []
    for _ in range(RUNS):
        bare.append(_run_once(BARE, env, project_id, key))
        ours.append(_run_once(OURS, env, project_id, key))
        source.append(_run_once(OURS, source_env, project_id, key))
    return statistics.median(bare), statistics.median(ours), statistics.median(source)


def _calls_per_get(project_id: str, key: str) -> tuple[list[str], int]:
    """The DynamoDB calls of one authenticated GET by id (in process, same server), and how
    many were in flight at once at most."""
    from chalice.test import Client

    from app import app
    from bench.counting import count_calls
    with Client(app) as c:
        c.http.get(f'/api/projects/{project_id}', headers={'x-api-key': key})   # warm the process
        with count_calls() as calls:
            r = c.http.get(f'/api/projects/{project_id}', headers={'x-api-key': key})
        assert r.status_code == 200, r.body
    return calls, getattr(calls, 'max_in_flight', 0)


def main() -> None:
    port = _free_port()
    with tempfile.TemporaryDirectory() as state:
        env = _env(port, state)
        proc, endpoint = _start(env)
        try:
            conn = http.client.HTTPConnection('127.0.0.1', port)

            def call(method, path, key, body=None):
                headers = {'x-api-key': key, 'content-type': 'application/json'}
                conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
                r = conn.getresponse()
                data = r.read()
                return r.status, json.loads(data) if data else None
            status, org = call('GET', '/api/account/me', ADMIN_KEY)
            org_id = org['memberships'][0]['organizationId']
            # an ordinary member with a key of their own (keys name their owner)
            status, user = call('POST', '/api/users', ADMIN_KEY, {'email': 'member@example.com', 'name': 'm'})
            status, _ = call('POST', '/api/memberships', ADMIN_KEY,
                             {'userId': user['id'], 'organizationId': org_id, 'role': 'MEMBER'})
            status, project = call('POST', '/api/projects', ADMIN_KEY, {'name': 'bench', 'organizationId': org_id})
            assert status == 201, project
            os.environ.update({k: v for k, v in env.items() if k != 'PORT'})
            os.environ['AWS_ENDPOINT_URL'] = endpoint
            member_key = _member_key(user['id'])

            import boto3
            ddb = boto3.client('dynamodb', endpoint_url=endpoint, region_name='us-east-1')
            raw_key = {'pk': {'S': f'projects#{project["id"]}'}, 'sk': {'S': '#'}}
            ddb.get_item(TableName=TABLE, Key=raw_key, ConsistentRead=True)['Item']
            # the design's own floor on this moto: the gate's UpdateItem and the BatchGetItem,
            # raw, in flight together (moto serves one request at a time, so they add up here)
            from concurrent.futures import ThreadPoolExecutor
            pool = ThreadPoolExecutor(2)
            gate_key = {'pk': {'S': 'bench#gate'}, 'sk': {'S': 'ACL'}}
            ddb.put_item(TableName=TABLE, Item={**gate_key, 'key_x': {'N': '9999999999'}, 'rm': {'N': '1'},
                                                f'acl_{org_id}': {'S': 'MEMBER'}})
            batch = {TABLE: {'Keys': [raw_key, {'pk': {'S': f'users#{user["id"]}'}, 'sk': {'S': '#'}},
                                      {'pk': {'S': f'organizations#{org_id}'}, 'sk': {'S': '#'}}],
                             'ConsistentRead': True}}

            def two_raw():
                read = pool.submit(ddb.batch_get_item, RequestItems=batch)
                ddb.update_item(TableName=TABLE, Key=gate_key,
                                UpdateExpression='ADD #u :one, #us :one, #k :one, #ks :one',
                                ConditionExpression='#g > :g AND #m = :m', ReturnValues='ALL_NEW',
                                ExpressionAttributeNames={'#u': 'ru', '#us': 'rs01', '#k': 'rk_x', '#ks': 'rk_x_01',
                                                          '#g': 'key_x', '#m': 'rm'},
                                ExpressionAttributeValues={':one': {'N': '1'}, ':g': {'N': '1'}, ':m': {'N': '1'}})
                read.result()
            rows = {}
            for _ in range(2):   # interleave: both figures see the same machine load
                rows.setdefault('raw', []).append(_median_ms(
                    lambda: ddb.get_item(TableName=TABLE, Key=raw_key, ConsistentRead=True), OPS // 2))
                rows.setdefault('two', []).append(_median_ms(two_raw, OPS // 2))
                rows.setdefault('member', []).append(_median_ms(
                    lambda: call('GET', f'/api/projects/{project["id"]}', member_key), OPS // 2))
                rows.setdefault('admin', []).append(_median_ms(
                    lambda: call('GET', f'/api/projects/{project["id"]}', ADMIN_KEY), OPS // 2))
            raw, two, member, admin = (statistics.mean(rows[k]) for k in ('raw', 'two', 'member', 'admin'))

            from infra.bytecode import stage_app
            staged = stage_app(Path(ROOT), Path(state) / 'task')
            sources = stage_app(Path(ROOT), Path(state) / 'sources', compiled=False)
            cold_env = {**env, 'AWS_ENDPOINT_URL': endpoint, 'PYTHONPATH': str(staged)}
            # a package without bytecode: compiled on every cold start (and never cached)
            source_env = {**cold_env, 'PYTHONPATH': str(sources), 'PYTHONDONTWRITEBYTECODE': '1'}
            bare_cold, ours_cold, source_cold = _cold(cold_env, source_env, project['id'], member_key)
            calls, in_flight = _calls_per_get(project['id'], member_key)
            admin_calls, admin_in_flight = _calls_per_get(project['id'], ADMIN_KEY)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    print(f'\nRequest path on `make run` (moto server + local front door, keep-alive, medians of {OPS}):')
    print(f'{"":44}{"ms":>8}{"x floor":>9}{"target":>8}')
    print(f'{"raw get_item, same moto (floor)":44}{raw:8.2f}{1:9.2f}')
    print(f'{"raw gate UpdateItem || BatchGetItem (2 calls)":44}{two:8.2f}{two / raw:9.2f}')
    print(f'{"GET /api/projects/{id}, member key":44}{member:8.2f}{member / raw:9.2f}{"<=1.5":>8}')
    print(f'{"GET /api/projects/{id}, bootstrap admin key":44}{admin:8.2f}{admin / raw:9.2f}')
    print(f'\nCold start of the first request (fresh interpreter: import + one GET by id; medians of {RUNS}):')
    print(f'{"bare Chalice + one get_item (floor)":44}{bare_cold:8.1f}{1:9.2f}')
    print(f'{"app.py, authenticated GET by id":44}{ours_cold:8.1f}{ours_cold / bare_cold:9.2f}{"<=1.15":>8}')
    print(f'{"  same, package without bytecode":44}{source_cold:8.1f}{source_cold / bare_cold:9.2f}')
    breakdown = ', '.join(f'{k} {v}' for k, v in sorted(calls.items()))
    print(f'\nDynamoDB calls per GET by id (member key, warm process): {sum(calls.values())} ({breakdown}); '
          f'at most {in_flight} in flight at once (target: 2, concurrently)')
    breakdown = ', '.join(f'{k} {v}' for k, v in sorted(admin_calls.items()))
    print(f'DynamoDB calls per GET by id (platform admin, warm process): {sum(admin_calls.values())} ({breakdown}); '
          f'at most {admin_in_flight} in flight at once (issue 27: <= 3 calls in <= 2 rounds)')


def _member_key(user_id: str) -> str:
    """A key of the member's own, minted as bootstrap does for the admin (the table directly)."""
    from chalicelib.features.identity.service import create_api_key
    return create_api_key(user_id, 'member@example.com', 'bench')['key']


if __name__ == '__main__':
    main()
