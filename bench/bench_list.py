"""Benchmark of the generic list endpoint: DynamoDB calls and items read per request as a
tenant grows (100, 1,000, 10,000 tasks), with latencies next to a floor measured in the same
run.

    PYTHONPATH=. .venv/bin/python bench/bench_list.py [--sizes 100,1000,10000] [--repeat 15]

Runs in-process under moto (mock_aws), one fresh platform per tenant size. The tenant is
seeded directly with BatchWriteItem, in exactly the shape the create service writes
(repository.entity_item: entity + tenant/project/created/updated/name index keys, plus the
counter shards): seeding 10,000 tasks through the API would take very long, because moto
deep-copies the whole table on every TransactWriteItems.

Requests go through the HTTP layer (chalice's test client). "calls" and "items" count only
the DynamoDB calls made inside the list service (botocore before-call/after-call hooks on both
clients the code uses); authentication and rate limiting add a constant few calls per request,
shown once at the end. "items" is what DynamoDB read: Query ScannedCount (index keys or
full items), BatchGetItem items, GetItem items. Latencies are medians; under moto they measure
moto more than our code (moto's JSON serialisation costs ~3 ms per item returned), so read
them against the floor rows, never as AWS figures. The benchmark never passes or fails.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.pop('AWS_ENDPOINT_URL', None)
os.environ.pop('AWS_ENDPOINT_URL_DYNAMODB', None)
os.environ.pop('AWS_PROFILE', None)
os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',
                  TABLE_NAME='platform-bench', RATE_LIMIT_PER_MINUTE='100000000',
                  RATE_LIMIT_BURST_PER_SECOND='100000000', LOG_LEVEL='WARNING')

ADMIN_KEY = 'pk_bench-admin-key'
WORDS = ['alpha', 'Bravo', 'charlie', 'Delta', 'echo', 'Foxtrot', 'golf', 'Hotel']
_NS = uuid.UUID('0b9c5a55-3f5e-4d0a-9a52-7f0b7a1e2c11')
ASSIGNEES = [str(uuid.uuid5(_NS, f'assignee {i}')) for i in range(5)]   # >= 20 tasks each at N=100
GROUPS = [str(uuid.uuid5(_NS, f'group {i}')) for i in range(4)]


# ----------------------------------------------------------------------------- counting calls

class Recorder:
    """DynamoDB calls made inside the list service (botocore event hooks)."""

    def __init__(self) -> None:
        self.inside = False
        self.calls: list[tuple[str, int]] = []   # (operation, items read)
        self.all_calls = 0

    def attach(self, events) -> None:
        events.register('before-call.dynamodb', self._before)
        events.register('after-call.dynamodb', self._after)

    def _before(self, context, **_):
        self.all_calls += 1
        context['_bench_inside'] = self.inside

    def _after(self, parsed, model, context, **_):
        if not context.get('_bench_inside'):
            return
        if model.name == 'Query':
            read = parsed.get('ScannedCount', parsed.get('Count', 0))
        elif model.name == 'BatchGetItem':
            read = sum(len(v) for v in parsed.get('Responses', {}).values())
        elif model.name == 'GetItem':
            read = int('Item' in parsed)
        else:
            read = 0
        self.calls.append((model.name, read))

    def wrap(self, function: Callable) -> Callable:
        def inside(*args, **kwargs):
            self.inside = True
            try:
                return function(*args, **kwargs)
            finally:
                self.inside = False
        return inside


# ----------------------------------------------------------------------------- seeding

def seed(org_id: str, project_id: str, user_id: str, n: int) -> list[str]:
    """n tasks in one project, written as the create service writes them (the same entity item,
    index keys included, and the same counters); returns their ids."""
    from chalicelib.core.clock import iso
    from chalicelib.core.config import get_config
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family
    from chalicelib.kernel.store import model as store_model
    from chalicelib.kernel.store import table
    model = store_model.configure()
    tasks = family('tasks')
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids: list[str] = []
    counters: dict[str, int] = {table.counter_pk('tasks', org_id): n}
    with model.batch_write() as batch:
        for i in range(n):
            created = iso(start + timedelta(seconds=i))
            data = {'id': str(uuid.uuid4()), 'uuid': str(uuid.uuid4()), 'createdOn': created,
                    'updatedOn': iso(start + timedelta(seconds=(i * 7919) % n)), 'changeSequence': 1,
                    'createdByUserId': user_id, 'organizationId': org_id, 'projectId': project_id,
                    'title': f'{WORDS[i % len(WORDS)]} task {i}', 'description': f'seeded task number {i}',
                    'statusSlug': ('open', 'done', 'blocked')[i % 3], 'priority': i % 5,
                    'assigneeId': ASSIGNEES[i % len(ASSIGNEES)], 'taskGroupId': GROUPS[i % len(GROUPS)]}
            batch.save(records.entity(tasks, data, seq=1, org=org_id))
            for name, value in records.indexed_values(tasks, data).values():
                key = table.value_counter_pk('tasks', org_id, name, value)
                counters[key] = counters.get(key, 0) + 1
            ids.append(data['id'])
        shards = get_config().counter_shards
        for key, count in counters.items():  # the create service spreads +1s over random shards
            for shard in range(shards):
                batch.save(model(key, str(shard), cnt=count // shards + (1 if shard < count % shards else 0)))
    return ids


# ----------------------------------------------------------------------------- measuring

def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


REQUESTS = [  # (label, query parameters, exists when)
    ('page 0, unfiltered', {'pageSize': 10}, lambda n: True),
    ('page 50, unfiltered', {'pageSize': 10, 'page': 50}, lambda n: n > 500),
    ("indexed statusSlug == 'done'", {'pageSize': 10, 'filter': "statusSlug == 'done'"}, lambda n: True),
    ('indexed assigneeId == <a>', {'pageSize': 10, 'filter': f"assigneeId == '{ASSIGNEES[1]}'"}, lambda n: True),
    ('indexed taskGroupId == <g>', {'pageSize': 10, 'filter': f"taskGroupId == '{GROUPS[2]}'"}, lambda n: True),
    ("indexed status, page 20", {'pageSize': 10, 'page': 20, 'filter': "statusSlug == 'done'"}, lambda n: n > 700),
    ("indexed status, by updatedOn", {'pageSize': 10, 'sort': 'updatedOn:desc', 'filter': "statusSlug == 'open'"},
     lambda n: True),
    ("indexed =in= (2 values)", {'pageSize': 10, 'filter': "statusSlug =in= ('open', 'done')"}, lambda n: True),
    ("indexed and priority >= 3", {'pageSize': 10, 'filter': "statusSlug == 'done' and priority >= 3"},
     lambda n: True),
    ('priority == 3 (not indexed)', {'pageSize': 10, 'filter': 'priority == 3'}, lambda n: True),
    ("filter title ~~ 'alpha'", {'pageSize': 10, 'filter': "title ~~ 'alpha'"}, lambda n: True),
    ('sort=title (name), page 0', {'pageSize': 10, 'sort': 'title'}, lambda n: True),
]


def run_size(n: int, repeat: int) -> dict[str, Any]:
    import urllib.parse

    import boto3
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.core.config import get_config, reset_config
    from chalicelib.kernel import listing
    from chalicelib.kernel.store import model

    reset_config()
    model.reset()
    out: dict[str, Any] = {'n': n, 'rows': {}, 'floor': {}}
    with mock_aws():
        from app import app
        from chalicelib.features.identity.bootstrap import bootstrap
        platform = bootstrap(api_key=ADMIN_KEY)
        org_id = platform['organizationId']
        recorder = Recorder()
        recorder.attach(model.configure()._get_connection().connection.client.meta.events)
        recorder.attach(model.boto3_table().meta.client.meta.events)
        real_list = listing.list_resources
        listing.list_resources = recorder.wrap(real_list)
        try:
            with Client(app) as client:
                headers = {'x-api-key': ADMIN_KEY, 'content-type': 'application/json'}

                def get(path: str) -> Any:
                    r = client.http.get(path, headers=headers)
                    assert r.status_code == 200, (path, r.status_code, r.body[:300])
                    return json.loads(r.body)

                project = client.http.post('/api/projects', headers=headers,
                                           body=json.dumps({'organizationId': org_id, 'name': 'bench'}))
                project_id = json.loads(project.body)['id']
                started = time.perf_counter()
                ids = seed(org_id, project_id, platform['userId'], n)
                out['seed_s'] = time.perf_counter() - started

                for label, params, exists in REQUESTS:
                    if not exists(n):
                        out['rows'][label] = None
                        continue
                    path = '/api/tasks?' + urllib.parse.urlencode(params)
                    recorder.calls = []
                    started = time.perf_counter()
                    r = client.http.get(path, headers=headers)
                    first_ms = (time.perf_counter() - started) * 1000
                    calls = list(recorder.calls)
                    if r.status_code == 422 and b'workBudget' in r.body:   # moto too slow for the budget: shown
                        out['rows'][label] = {'calls': len(calls), 'items': sum(read for _, read in calls),
                                              'ms': first_ms, 'total': '422 (work budget)', 'ops': calls}
                        continue
                    assert r.status_code == 200, (path, r.status_code, r.body[:300])
                    body = json.loads(r.body)
                    assert not [op for op, _ in calls if op == 'Scan']
                    heavy = sum(read for _, read in calls) > 2000  # timed once: the counted call
                    ms = first_ms if heavy else median_ms(lambda p=path: get(p), repeat)
                    out['rows'][label] = {'calls': len(calls), 'items': sum(read for _, read in calls), 'ms': ms,
                                          'total': body['totalElements'], 'ops': calls}

                raw = boto3.client('dynamodb', region_name=get_config().region)
                key = {'pk': {'S': f'tasks#{ids[n // 2]}'}, 'sk': {'S': '#'}}
                before = recorder.all_calls
                get(f'/api/tasks/{ids[n // 2]}')
                out['auth_calls'] = recorder.all_calls - before - 1   # minus the GetItem of the task
                name = get_config().table_name
                out['floor']['raw boto3 get_item'] = median_ms(lambda: raw.get_item(TableName=name, Key=key),
                                                               repeat * 3)
                out['floor']['raw boto3 Query GSI, Limit 10'] = median_ms(lambda: raw.query(
                    TableName=name, IndexName='by_created', Limit=10, KeyConditionExpression='tpk = :t',
                    ExpressionAttributeValues={':t': {'S': f'tasks#{org_id}'}}), repeat)
                out['floor']['GET /api/tasks/{id}'] = median_ms(lambda: get(f'/api/tasks/{ids[n // 2]}'), repeat)
                out['floor']['GET /api/tasks (page 0)'] = median_ms(lambda: get('/api/tasks?pageSize=10'), repeat)
        finally:
            listing.list_resources = real_list
    model.reset()
    return out


# ----------------------------------------------------------------------------- report

def _fmt(row: dict | None) -> str:
    if row is None:
        return f"{'-':>5} {'-':>6} {'-':>9}"
    return f"{row['calls']:>5} {row['items']:>6} {row['ms']:>9.1f}"


def _ratio(a: float, b: float) -> str:
    return f'{b / a:.1f}x' if a else '-'


def report(results: list[dict[str, Any]]) -> str:
    small, large = results[0], results[-1]
    lines = []
    head = f"{'request':<30}" + ''.join(f"| {'N=' + format(r['n'], ','):<22}" for r in results)
    head += f"| ratio {large['n']:,}/{small['n']:,}"
    sub = f"{'':<30}" + ''.join(f"| {'calls':>5} {'items':>6} {'ms':>9} " for _ in results)
    sub += f"| {'calls':>6} {'items':>7} {'ms':>7}"
    lines += [head, sub, '-' * len(sub)]
    for label, _, _ in REQUESTS:
        cells = ''.join(f'| {_fmt(r["rows"][label])} ' for r in results)
        a, b = small['rows'][label], large['rows'][label]
        if a and b:
            ratio = (f"| {_ratio(a['calls'], b['calls']):>6} {_ratio(a['items'], b['items']):>7} "
                     f"{_ratio(a['ms'], b['ms']):>7}")
        else:
            ratio = f"| {'-':>6} {'-':>7} {'-':>7}  (not on every size)"
        lines.append(f'{label:<30}' + cells + ratio)
    lines.append('')
    lines.append(f"{'floor (same run), median ms':<30}" + ''.join(f"| {'':>12}{'':>10} " for _ in results))
    for name in results[0]['floor']:
        cells = ''.join(f"| {r['floor'][name]:>22.2f} " for r in results)
        lines.append(f'{name:<30}' + cells + f"| {_ratio(small['floor'][name], large['floor'][name]):>22}")
    lines.append('')
    lines.append('calls per request outside the list service (authentication, rate limit): '
                 + ', '.join(f"N={r['n']:,}: {r['auth_calls']}" for r in results))
    lines.append('seeding (BatchWriteItem): ' + ', '.join(f"N={r['n']:,}: {r['seed_s']:.1f} s" for r in results))
    lines.append('')
    lines.append('operations per request at the largest size:')
    for label, _, _ in REQUESTS:
        row = large['rows'][label]
        if row:
            ops = ', '.join(f'{op}({read})' for op, read in row['ops'])
            lines.append(f'  {label:<30} {ops}   totalElements={row["total"]}')
    return '\n'.join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='100,1000,10000')
    parser.add_argument('--repeat', type=int, default=15, help='timed repetitions of the cheap requests')
    parser.add_argument('--local-moto', action='store_true',
                        help="moto as make run's server patches it (localdev/moto_server.py patch_moto)")
    args = parser.parse_args(argv)
    if args.local_moto:
        from localdev.moto_server import patch_moto
        patch_moto()
    sizes = [int(s) for s in args.sizes.split(',')]
    import logging
    logging.getLogger('werkzeug').setLevel(logging.ERROR)
    results = []
    started = time.perf_counter()
    for n in sizes:
        t0 = time.perf_counter()
        # moto's GSI Query walks the whole table: fewer repetitions on the large tenant
        results.append(run_size(n, args.repeat if n <= 1000 else max(3, args.repeat // 3)))
        print(f'# N={n:,} measured in {time.perf_counter() - t0:.0f} s', file=sys.stderr, flush=True)
    print(report(results))
    flavour = "moto in-process, patched as make run's" if args.local_moto else 'moto in-process'
    print(f'\n(total {time.perf_counter() - started:.0f} s, {flavour}, Python {sys.version.split()[0]})')


if __name__ == '__main__':
    main()
