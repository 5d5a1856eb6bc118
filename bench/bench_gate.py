"""The request gate (issue 27, docs/scale.md "Rate gate"): calls and rounds of a GET by id per
caller kind, the size of the gate and ACL items after 40 keys x 2 minutes of traffic, and the
cold start of the first request.

    PYTHONPATH=. .venv/bin/python bench/bench_gate.py            # BENCH_COLD=0 skips the cold start

* GET /api/tasks/{id} of a task with an assignee (it embeds its project and its assignee, whose
  visibility depends on the assignee's ACL item), in process under moto, for a member, a
  manager and the platform admin, warm (the credential passed before in this process) and with
  the caller's organizations not yet known to the process: DynamoDB calls (botocore hooks) and
  rounds (the longest chain of calls each starting after the previous one ended; every call is
  held 30 ms so that concurrent calls surely overlap). Goal: <= 3 calls, <= 2 rounds.
* 40 keys of one user, 2 requests a second round-robin over them, for two minutes (a fake clock
  for the limiter's windows): the attributes and bytes of each minute's gate item, and of the
  user's ACL item before and after (goal: the ACL item unchanged; before this layout it held the
  counters, ~700 attributes).
* the cold start ratio: bench/bench_request_path.py's measurement (a fresh interpreter importing
  app and answering one authenticated GET by id, against a bare Chalice app doing one get_item,
  same moto server; goal <= 1.15).
"""
from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ADMIN_KEY = 'pk_bench-gate-admin-key'
HOLD = 0.03
T0 = 1_800_000_000


class Rounds:
    """DynamoDB calls of the store's clients with their spans (each held HOLD seconds)."""

    def __init__(self, clients) -> None:
        self.clients = clients
        self.calls: list[str] = []
        self.spans: list[list[float]] = []
        self.open: dict[int, list[float]] = {}
        self.lock = threading.Lock()

    def _before(self, event_name, **_):
        with self.lock:
            self.calls.append(event_name.rsplit('.', 1)[1])
            span = [time.perf_counter(), float('inf')]
            self.spans.append(span)
            self.open[threading.get_ident()] = span
        time.sleep(HOLD)

    def _after(self, event_name, **_):
        with self.lock:
            span = self.open.pop(threading.get_ident(), None)
            if span is not None:
                span[1] = time.perf_counter()

    @property
    def rounds(self) -> int:
        spans = sorted(self.spans)
        depth = [1] * len(spans)
        for i, (start, _) in enumerate(spans):
            depth[i] = 1 + max((depth[j] for j in range(i) if spans[j][1] <= start), default=0)
        return max(depth, default=0)

    def __enter__(self):
        for c in self.clients:
            c.meta.events.register('before-call.dynamodb.*', self._before)
            c.meta.events.register('after-call.dynamodb.*', self._after)
        return self

    def __exit__(self, *exc):
        for c in self.clients:
            c.meta.events.unregister('before-call.dynamodb.*', self._before)
            c.meta.events.unregister('after-call.dynamodb.*', self._after)


def _size(item: dict) -> int:
    from bench.bench_write_cost import item_size
    return item_size(item)


def in_process() -> tuple[list[tuple[str, str, int, int]], list[tuple[str, int, int]], tuple[int, int, int, int]]:
    os.environ.pop('AWS_ENDPOINT_URL', None)
    os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',
                      TABLE_NAME='platform-bench-gate', LOG_LEVEL='WARNING', RATE_LIMIT_PER_MINUTE='100',
                      RATE_LIMIT_BURST_PER_SECOND='20', RATE_LIMIT_USER_PER_MINUTE='100000',
                      RATE_LIMIT_USER_BURST_PER_SECOND='100000')
    import boto3
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.core.config import reset_config
    reset_config()
    with mock_aws():
        from chalicelib.features.identity import admission, ratelimit
        from chalicelib.features.identity.bootstrap import bootstrap
        from chalicelib.features.identity.service import create_api_key
        from chalicelib.kernel.store import model
        now = {'t': T0 + 0.25}
        ratelimit.clock = lambda: now['t']
        platform = bootstrap(api_key=ADMIN_KEY)
        org = platform['organizationId']
        from app import app
        ddb = boto3.client('dynamodb', region_name='us-east-1')
        with Client(app) as c:
            def call(method, path, key, body=None):
                now['t'] += 0.05
                import json
                r = getattr(c.http, method)(path, headers={'x-api-key': key, 'content-type': 'application/json'},
                                            **({'body': json.dumps(body)} if body is not None else {}))
                return r.status_code, json.loads(r.body) if r.body else None

            def user(role):
                _, u = call('post', '/api/users', ADMIN_KEY, {'email': f'{role.lower()}-{time.time_ns()}@example.com'})
                call('post', '/api/memberships', ADMIN_KEY, {'organizationId': org, 'userId': u['id'], 'role': role})
                return u, create_api_key(u['id'], u['email'], 'bench')['key']
            _, project = call('post', '/api/projects', ADMIN_KEY, {'name': 'p', 'organizationId': org})
            assignee, _ = user('MEMBER')
            _, task = call('post', '/api/tasks', ADMIN_KEY, {'title': 't', 'projectId': project['id'],
                                                              'assigneeId': assignee['id']})
            callers = {'member': user('MEMBER')[1], 'manager': user('MANAGE')[1], 'platform admin': ADMIN_KEY}
            clients = list({id(x): x for x in (model.client(), model.boto3_table().meta.client)}.values())
            rows = []
            for kind, key in callers.items():
                for state in ('warm', 'organizations unknown'):
                    call('get', '/api/account/me', key)
                    if state != 'warm':
                        admission._org_hint.clear()
                    with Rounds(clients) as rec:
                        status, body = call('get', f"/api/tasks/{task['id']}", key)
                    assert status == 200 and body['assignee']['id'] == assignee['id'], body
                    rows.append((kind, state, len(rec.calls), rec.rounds))

            # 40 keys of one user, 2 requests a second for two minutes
            owner, first = user('MEMBER')
            keys = [first] + [create_api_key(owner['id'], owner['email'], f'k{i}')['key'] for i in range(39)]

            def raw(pk, sk):
                return ddb.get_item(TableName='platform-bench-gate', ConsistentRead=True,
                                    Key={'pk': {'S': pk}, 'sk': {'S': sk}}).get('Item') or {}
            acl_before = raw(f"users#{owner['id']}", 'ACL')
            now['t'] = T0 + 300 + 30.25
            statuses = []
            for step in range(240):
                now['t'] += 0.5 - 0.05
                statuses.append(call('get', '/api/account/me', keys[step % 40])[0])
            acl_after = raw(f"users#{owner['id']}", 'ACL')
            minutes = []
            for m in range((T0 + 300) // 60, (T0 + 300) // 60 + 3):
                item = raw(f"RATE#{owner['id']}", f'M#{m}')
                minutes.append((f'M#{m}', len(item), _size(item)))
            assert statuses == [200] * 240, sorted(set(statuses))
            acl = (len(acl_before), _size(acl_before), len(acl_after), _size(acl_after))
    return rows, minutes, acl


def cold(runs: int) -> tuple[float, float]:
    """bench/bench_request_path.py's cold start, alone: (bare ms, ours ms), medians of ``runs``."""
    import tempfile

    from bench import bench_request_path as rp
    from infra.bytecode import stage_app
    port = rp._free_port()
    with tempfile.TemporaryDirectory() as state:
        env = rp._env(port, state)
        proc, endpoint = rp._start(env)
        try:
            import http.client
            import json
            conn = http.client.HTTPConnection('127.0.0.1', port)

            def call(method, path, body=None):
                conn.request(method, path, body=json.dumps(body) if body is not None else None,
                             headers={'x-api-key': rp.ADMIN_KEY, 'content-type': 'application/json'})
                r = conn.getresponse()
                return json.loads(r.read() or b'null')
            org_id = call('GET', '/api/account/me')['memberships'][0]['organizationId']
            user = call('POST', '/api/users', {'email': 'member@example.com', 'name': 'm'})
            call('POST', '/api/memberships', {'userId': user['id'], 'organizationId': org_id, 'role': 'MEMBER'})
            project = call('POST', '/api/projects', {'name': 'bench', 'organizationId': org_id})
            os.environ.update({k: v for k, v in env.items() if k != 'PORT'})
            os.environ['AWS_ENDPOINT_URL'] = endpoint
            member_key = rp._member_key(user['id'])
            staged = stage_app(ROOT, Path(state) / 'task')
            cold_env = {**env, 'AWS_ENDPOINT_URL': endpoint, 'PYTHONPATH': str(staged)}
            bare, ours = [], []
            for _ in range(runs):
                bare.append(rp._run_once(rp.BARE, cold_env, project['id'], member_key))
                ours.append(rp._run_once(rp.OURS, cold_env, project['id'], member_key))
        finally:
            proc.send_signal(rp.signal.SIGTERM)
            proc.wait(timeout=10)
    return statistics.median(bare), statistics.median(ours)


def main() -> None:
    rows, minutes, acl = in_process()
    print('\nGET /api/tasks/{id} (embeds project and assignee), DynamoDB calls and rounds (goal <= 3, <= 2):')
    print(f'{"caller":16}{"process state":24}{"calls":>6}{"rounds":>8}')
    for kind, state, calls, rounds in rows:
        print(f'{kind:16}{state:24}{calls:6}{rounds:8}')
    print('\n40 keys of one user, 2 requests a second for two minutes (240 requests):')
    for sk, attrs, size in minutes:
        print(f'  gate item {sk}: {attrs} attributes, {size} bytes')
    print(f'  ACL item: {acl[0]} attributes / {acl[1]} bytes before, {acl[2]} / {acl[3]} after')
    if os.environ.get('BENCH_COLD', '1') != '0':
        bare, ours = cold(int(os.environ.get('BENCH_COLD_RUNS', '9')))
        print(f'\nCold start (import + one authenticated GET /api/projects/{{id}}, medians): bare {bare:.1f} ms, '
              f'ours {ours:.1f} ms, ratio {ours / bare:.2f} (goal <= 1.15)')


if __name__ == '__main__':
    main()
