"""The write path at scale, from the wire (issue 27): every DynamoDB call between the app and
the emulator, and what it would cost and hold on DynamoDB.

    PYTHONPATH=. .venv/bin/python bench/bench_scale.py [--creates 200] [--json out.json]

How it measures (all in one process, against moto under ``mock_aws``):

* **the wire**: ``botocore.client.BaseClient._make_api_call`` is wrapped for every client
  (pynamodb's, boto3's, the gate's, the stream reader's); each DynamoDB call is recorded with its
  low-level request (every write of this code base goes through the low-level API, only list
  queries use boto3's Table resource). The bench's own reads (item images) bypass the record.
* **write units**, by DynamoDB's published rules, since moto reports no consumed capacity for
  transactions: a write costs 1 WCU per started KB of the larger of the item before and after
  (2 in a transaction, a ConditionCheck included); each GSI whose entry appears, disappears,
  moves (two writes) or, for an ALL projection, changes, costs 1 WCU per KB of the entry
  (bench/bench_write_cost.py ``gsi_units``). The images come from consistent GetItems around
  each write call.
* **stream-fed writes**: the table stream is read after every batch of operations and handed to
  the app's stream handler (``app.outbox_publisher``, the same as ``make run``'s poller); what it
  writes counts for the workload.
* **workloads**: 200 task creates in one project by 8 member clients (round robin), all assigned
  to one member; 200 status changes over 20 of them; 100 description PUTs without
  changeSequence; one GET by id for a member and for the platform admin. Requests are sent one
  after another: the counts do not depend on interleaving, and the conflict figure comes from
  the model below, not from timing an emulator that serialises everything.

Per workload it prints: the hottest item held in transactions (touches per operation: every
item a TransactWriteItems names, ConditionChecks included; shards are separate items), the
hottest partition key written (writes per operation; the rate gate's own item is shown apart:
issue 27's gate part), the hottest index partition (WCU per operation), WCU per operation all
in, and the conflict model's rate: with ~15 ms per transaction an item held by one in N
operations conflicts on p = 1 - e^(-rate x 0.015 / N) of them, so 10 % conflicts at
rate = N x ln(1/0.9) / 0.015. For the GET: calls and sequential rounds (calls overlapping in
time are one round).
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.pop('AWS_ENDPOINT_URL', None)
os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',
                  TABLE_NAME='platform-bench-scale', LOG_LEVEL='WARNING', RATE_LIMIT_PER_MINUTE='100000000',
                  RATE_LIMIT_BURST_PER_SECOND='100000000')

from bench.bench_write_cost import _entry, item_size, kb  # noqa: E402

ADMIN_KEY = 'pk_bench-scale-admin'
TX_SECONDS = 0.015
CONFLICT_TARGET = 0.10
WRITES = ('PutItem', 'UpdateItem', 'DeleteItem', 'TransactWriteItems', 'BatchWriteItem')
GOALS = {'create': 20, 'status': 15, 'plain': 8}


def conflict_rate(share: float) -> float:
    """Operations per second at which an item held by ``share`` of them conflicts on 10 %."""
    if share <= 0:
        return math.inf
    return math.log(1 / (1 - CONFLICT_TARGET)) / (TX_SECONDS * share)


class Wire:
    """Records every DynamoDB call; computes units from images read around each write."""

    def __init__(self) -> None:
        import botocore.client
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.local = threading.local()
        self.original = botocore.client.BaseClient._make_api_call
        self.indexes: list[dict[str, Any]] = []
        self.raw = None
        self.table = None

    def install(self, raw_client, table: str) -> None:
        import botocore.client
        self.raw = raw_client
        self.table = table
        self.indexes = raw_client.describe_table(TableName=table)['Table']['GlobalSecondaryIndexes']
        wire = self

        def recorded(client, operation, params):
            if getattr(wire.local, 'bypass', False) or client.meta.service_model.service_name != 'dynamodb':
                return wire.original(client, operation, params)
            keys = wire._keys(operation, params)
            before = wire._images(keys) if keys else {}
            started = time.perf_counter()
            error = None
            try:
                return wire.original(client, operation, params)
            except Exception as exc:
                error = type(exc).__name__
                raise
            finally:
                ended = time.perf_counter()
                after = wire._images(keys) if keys else {}
                with wire.lock:
                    wire.calls.append({'op': operation, 'params': params, 'before': before, 'after': after,
                                       'start': started, 'end': ended, 'error': error})
        botocore.client.BaseClient._make_api_call = recorded

    def uninstall(self) -> None:
        import botocore.client
        botocore.client.BaseClient._make_api_call = self.original

    @staticmethod
    def _keys(operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
        def key(k):
            return (k['pk']['S'], k['sk']['S'])
        if operation in ('PutItem',):
            return [key(params['Item'])]
        if operation in ('UpdateItem', 'DeleteItem'):
            return [key(params['Key'])]
        if operation == 'TransactWriteItems':
            out = []
            for entry in params['TransactItems']:
                (_, spec), = entry.items()
                out.append(key(spec.get('Key') or spec.get('Item')))
            return out
        if operation == 'BatchWriteItem':
            return [key(r.get('PutRequest', {}).get('Item') or r['DeleteRequest']['Key'])
                    for rs in params['RequestItems'].values() for r in rs]
        return []

    def _images(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict | None]:
        self.local.bypass = True
        try:
            out = {}
            for pk, sk in dict.fromkeys(keys):
                got = self.raw.get_item(TableName=self.table, Key={'pk': {'S': pk}, 'sk': {'S': sk}},
                                        ConsistentRead=True)
                out[(pk, sk)] = got.get('Item')
            return out
        finally:
            self.local.bypass = False

    def mark(self) -> int:
        with self.lock:
            return len(self.calls)

    def since(self, mark: int) -> list[dict[str, Any]]:
        with self.lock:
            return self.calls[mark:]


def _gsi_writes(indexes, old: dict | None, new: dict | None) -> list[tuple[str, str, int]]:
    """(index, index partition key, WCU) of each index write one item write makes."""
    out = []
    for index in indexes:
        keys = [k['AttributeName'] for k in index['KeySchema']]
        hash_key = keys[0]
        had = old is not None and all(k in old for k in keys)
        has = new is not None and all(k in new for k in keys)
        keys_only = index['Projection']['ProjectionType'] == 'KEYS_ONLY'
        if had and has and all(old[k] == new[k] for k in keys):
            if not keys_only and old != new:
                out.append((index['IndexName'], new[hash_key]['S'], kb(item_size(_entry(new, keys, keys_only)))))
            continue
        if had:
            out.append((index['IndexName'], old[hash_key]['S'], kb(item_size(_entry(old, keys, keys_only)))))
        if has:
            out.append((index['IndexName'], new[hash_key]['S'], kb(item_size(_entry(new, keys, keys_only)))))
    return out


def is_gate(op: str, pk: str, sk: str) -> bool:
    """The rate gate's own writes (issue 27's gate part, measured by its engineer)."""
    return sk == 'ACL' and op == 'UpdateItem' or pk.startswith(('RATE#', 'GATE#'))


def _kind_of(pk: str, sk: str) -> str:
    """What a key names, without its ids: the first part of the partition key and the sort key's."""
    head = pk.split('#', 1)[0]
    return f"{'CNT' if head.startswith('CNT') else head}/{'n' if sk.isdigit() else sk.split('#', 1)[0]}"


def shard_set(pk: str, sk: str) -> tuple[str, int] | None:
    """(the set, its number of shards) when the item is one shard of a set: a counter's (any of
    its partitions) or a parent's guard shards; None for a single item."""
    from chalicelib.core.config import get_config
    from chalicelib.kernel import parents
    from chalicelib.kernel.store import table
    if pk.startswith('CNT') and sk.isdigit():
        return (table.counter_base_pk(pk), get_config().counter_shards)
    if pk.startswith(parents.GUARD_PREFIX):
        base, _, n = pk.rpartition('#')
        family = base.split('#')[1]
        if n.isdigit() and family in parents.GUARD_SHARDS:
            return (base + '#*', parents.GUARD_SHARDS[family])
    return None


def hottest_held(held: collections.Counter, n_ops: int) -> dict[str, Any]:
    """The item held by the largest share of operations (an item only one operation holds is
    its own, no item two could conflict on, and is not counted). A shard of a set counts as the set's
    touches spread over its shards (the expectation per shard: the issue's "for a set of shards,
    per shard"); the small-sample maximum over shards is shown beside it."""
    singles: collections.Counter = collections.Counter()
    sets: collections.Counter = collections.Counter()
    size: dict[str, int] = {}
    worst_shard: collections.Counter = collections.Counter()
    for (pk, sk), n in held.items():
        found = shard_set(pk, sk)
        if found is None:
            if n > 1:   # held by one operation only: its own item (the task it creates), shared with none
                singles['/'.join((pk, sk))] += n
        else:
            sets[found[0]] += n
            size[found[0]] = found[1]
            worst_shard[found[0]] = max(worst_shard[found[0]], n)
    rows = [(n / n_ops, name, None) for name, n in singles.items()]
    rows += [(n / n_ops / size[name], f'{name} (one of {size[name]} shards)', worst_shard[name] / n_ops)
             for name, n in sets.items()]
    if not rows:
        return {'item': '-', 'per_op': 0.0}
    per_op, name, sample_max = max(rows, key=lambda r: r[0])
    out = {'item': name, 'per_op': per_op}
    if sample_max is not None:
        out['sample_max_per_op'] = sample_max
    return out


def partition_set(pk: str) -> tuple[str, int] | None:
    """(the set, its number of keys) when ``pk`` is one of a set of partition keys spreading one
    thing: a counter's partitions, a parent's guard shards."""
    from chalicelib.kernel.store import table
    if pk.startswith('CNT'):
        return (table.counter_base_pk(pk), table.COUNTER_PARTITIONS)
    found = shard_set(pk, '0')
    return found


def hottest_partition(written: collections.Counter, n_ops: int) -> dict[str, Any]:
    """The partition key written by the largest share of operations; a key of a set counts as
    the set's writes spread over its keys (as ``hottest_held``)."""
    singles: collections.Counter = collections.Counter()
    sets: collections.Counter = collections.Counter()
    size: dict[str, int] = {}
    for pk, n in written.items():
        found = partition_set(pk)
        if found is None:
            singles[pk] += n
        else:
            sets[found[0]] += n
            size[found[0]] = found[1]
    rows = [(n / n_ops, pk) for pk, n in singles.items()]
    rows += [(n / n_ops / size[name], f'{name} (one of {size[name]} keys)') for name, n in sets.items()]
    per_op, pk = max(rows)
    return {'pk': pk, 'per_op': per_op}


def analyse(calls: list[dict[str, Any]], indexes, n_ops: int) -> dict[str, Any]:
    """Per-operation figures of one workload's calls (module docstring)."""
    held = collections.Counter()      # (pk, sk) -> transactions naming it
    written = collections.Counter()   # pk -> write requests touching it (not the gate's)
    gate_written = collections.Counter()
    index_units = collections.Counter()   # (index, key) -> WCU
    by_kind = collections.Counter()       # 'table <pk kind>' / 'index <name>' -> WCU
    table_units = gsi_units = 0
    ops = collections.Counter()
    for call in calls:
        op = call['op']
        ops[op] += 1
        if op not in WRITES or call['error']:
            continue
        params = call['params']
        if op == 'TransactWriteItems':
            entries = [next(iter(e.items())) for e in params['TransactItems']]
            factor = 2
        elif op == 'BatchWriteItem':
            entries = [('Put', r['PutRequest']) if 'PutRequest' in r else ('Delete', r['DeleteRequest'])
                       for rs in params['RequestItems'].values() for r in rs]
            factor = 1
        else:
            entries = [({'PutItem': 'Put', 'UpdateItem': 'Update', 'DeleteItem': 'Delete'}[op], params)]
            factor = 1
        for kind, spec in entries:
            k = spec.get('Key') or spec.get('Item')
            key = (k['pk']['S'], k['sk']['S'])
            old, new = call['before'].get(key), call['after'].get(key)
            if op == 'TransactWriteItems':
                held[key] += 1
            if kind == 'ConditionCheck':
                table_units += factor * kb(item_size(old))
                by_kind[f'check {_kind_of(*key)}'] += factor * kb(item_size(old))
                continue
            table_units += factor * kb(max(item_size(old), item_size(new)))
            by_kind[f'table {_kind_of(*key)}'] += factor * kb(max(item_size(old), item_size(new)))
            if is_gate(op, *key):
                gate_written[key[0]] += 1
            else:
                written[key[0]] += 1
            for index, ipk, units in _gsi_writes(indexes, old, new):
                gsi_units += units
                index_units[(index, ipk)] += units
                by_kind[f'index {index}'] += units
    out: dict[str, Any] = {'operations': n_ops, 'calls': dict(ops)}
    out['hottest_held'] = hottest_held(held, n_ops)
    if written:
        out['hottest_partition'] = hottest_partition(written, n_ops)
    if gate_written:
        (pk, n), = gate_written.most_common(1)
        out['gate_partition'] = {'pk': pk, 'per_op': n / n_ops}
    if index_units:
        ((index, ipk), units), = index_units.most_common(1)
        out['hottest_index'] = {'index': index, 'pk': ipk, 'wcu_per_op': units / n_ops}
    else:
        out['hottest_index'] = {'index': '-', 'pk': '-', 'wcu_per_op': 0.0}
    out['wcu_table_per_op'] = table_units / n_ops
    out['wcu_index_per_op'] = gsi_units / n_ops
    out['wcu_per_op'] = (table_units + gsi_units) / n_ops
    out['wcu_by_kind_per_op'] = {k: round(v / n_ops, 2) for k, v in by_kind.most_common()}
    out['rate_at_10pct'] = conflict_rate(out['hottest_held']['per_op'])
    return out


def rounds(calls: list[dict[str, Any]]) -> int:
    """Sequential rounds: a call that starts after every call of the current round ended opens a new one."""
    n, end = 0, -math.inf
    for call in sorted(calls, key=lambda c: c['start']):
        if call['start'] >= end:
            n += 1
            end = call['end']
        else:
            end = max(end, call['end'])
    return n


def measure(creates: int = 200, statuses: int = 200, plains: int = 100, clients: int = 8) -> dict[str, Any]:
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.core.config import reset_config
    from chalicelib.kernel.store import model
    reset_config()
    model.reset()
    results: dict[str, Any] = {}
    wire = Wire()
    with mock_aws():
        from tests import work_support
        work_support.create_resources()
        import app as app_module
        from chalicelib.core.config import get_config
        from chalicelib.features.identity.bootstrap import bootstrap
        from chalicelib.features.identity.service import create_api_key
        from localdev.pollers import StreamReader
        platform = bootstrap(api_key=ADMIN_KEY)
        table = model.configure()
        import boto3
        raw = boto3.client('dynamodb', region_name='us-east-1')
        stream = StreamReader(app_module.outbox_publisher, get_config().table_name, region='us-east-1',
                              endpoint_url=None)

        def drain() -> None:
            while stream.poll_once()['records']:
                pass

        with Client(app_module.app) as c:
            def call(method: str, path: str, body: Any = None, key: str = ADMIN_KEY) -> tuple[int, Any]:
                r = c.http.request(method, path, headers={'x-api-key': key, 'content-type': 'application/json'},
                                   body=json.dumps(body) if body is not None else None)
                return r.status_code, (json.loads(r.body) if r.body else None)

            org = platform['organizationId']

            def member() -> tuple[str, str]:
                email = f'bench-{uuid.uuid4().hex[:10]}@example.com'
                status, user = call('POST', '/api/users', {'email': email})
                assert status == 201, user
                status, m = call('POST', '/api/memberships', {'organizationId': org, 'userId': user['id'],
                                                              'role': 'MEMBER'})
                assert status == 201, m
                return user['id'], create_api_key(user['id'], email, 'bench')['key']

            status, project = call('POST', '/api/projects', {'organizationId': org, 'name': 'scale'})
            assert status == 201, project
            for slug, kind in (('doing', 'IN_PROGRESS'), ('done', 'DONE')):
                status, made = call('POST', '/api/task-statuses', {'organizationId': org, 'label': slug,
                                                                   'slug': slug, 'statusType': kind})
                assert status == 201, made
            keys = [member()[1] for _ in range(clients)]
            assignee, _ = member()
            drain()
            wire.install(raw, table.Meta.table_name)
            try:
                def run(name: str, n: int, one) -> list[Any]:
                    mark = wire.mark()
                    out = []
                    for i in range(n):
                        out.append(one(i))
                        if i % 50 == 49:
                            drain()
                    drain()
                    results[name] = analyse(wire.since(mark), wire.indexes, n)
                    return out

                def create(i: int) -> str:
                    status, task = call('POST', '/api/tasks', {
                        'projectId': project['id'], 'title': f'Task {i} of the scale bench',
                        'assigneeId': assignee, 'description': 'x' * 200, 'priority': 2},
                        key=keys[i % clients])
                    assert status == 201, task
                    return task['id']
                tasks = run('create', creates, create)

                def change(i: int) -> None:
                    slug = ('doing', 'done')[(i // 20) % 2]
                    status, body = call('PUT', f'/api/tasks/{tasks[i % 20]}/status', {'statusSlug': slug},
                                        key=keys[i % clients])
                    assert status == 200, body
                run('status', statuses, change)

                def plain(i: int) -> None:
                    status, body = call('PUT', f'/api/tasks/{tasks[i % 20]}',
                                        {'description': f'{i} ' + 'y' * 200}, key=keys[i % clients])
                    assert status == 200, body
                run('plain', plains, plain)

                for caller, key in (('member', keys[0]), ('platform admin', ADMIN_KEY)):
                    call('GET', f'/api/tasks/{tasks[1]}', key=key)   # warm: the caller's first request
                    mark = wire.mark()
                    status, _ = call('GET', f'/api/tasks/{tasks[0]}', key=key)
                    assert status == 200
                    got = wire.since(mark)
                    results[f'get ({caller})'] = {'calls': len(got), 'rounds': rounds(got),
                                                  'ops': [c['op'] for c in got]}
            finally:
                wire.uninstall()
    model.reset()
    return results


def report(results: dict[str, Any]) -> str:
    lines = ['', 'Write path at scale, from the wire (bench/bench_scale.py docstring)', '']
    head = (f"{'workload':<8}{'ops':>5}{'hottest held item /op':>24}{'hottest pk /op':>16}"
            f"{'hottest index WCU/op':>22}{'WCU/op (tbl+idx)':>20}{'goal':>6}{'creates/s @10%':>16}")
    lines.append(head)
    for name in ('create', 'status', 'plain'):
        r = results[name]
        part = r.get('hottest_partition', {'per_op': 0.0})
        lines.append(f"{name:<8}{r['operations']:>5}{r['hottest_held']['per_op']:>24.3f}{part['per_op']:>16.3f}"
                     f"{r['hottest_index']['wcu_per_op']:>22.2f}"
                     f"{r['wcu_per_op']:>9.1f} ({r['wcu_table_per_op']:.1f}+{r['wcu_index_per_op']:.1f})"
                     f"{'<=' + str(GOALS[name]):>6}{r['rate_at_10pct']:>16,.0f}")
    lines.append('')
    lines.append('goals: held item <= 1/128 = 0.008, partition <= 1/16 = 0.062, index <= 0.5 WCU, '
                 'creates/s >= 1,000')
    for name in ('create', 'status', 'plain'):
        r = results[name]
        lines.append(f"  {name}: held {r['hottest_held']['item']}; pk {r.get('hottest_partition', {}).get('pk')}; "
                     f"index {r['hottest_index']['index']} {r['hottest_index']['pk']}; "
                     f"gate item {r.get('gate_partition', {}).get('per_op', 0):.3f}/op; calls {r['calls']}")
        lines.append('    WCU/op by what is written: '
                     + ', '.join(f'{k} {v}' for k, v in r['wcu_by_kind_per_op'].items()))
    for caller in ('member', 'platform admin'):
        g = results[f'get ({caller})']
        lines.append(f"GET by id ({caller}): {g['calls']} calls in {g['rounds']} rounds: {', '.join(g['ops'])}")
    return '\n'.join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--creates', type=int, default=200)
    parser.add_argument('--statuses', type=int, default=200)
    parser.add_argument('--plains', type=int, default=100)
    parser.add_argument('--json')
    args = parser.parse_args()
    results = measure(args.creates, args.statuses, args.plains)
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))


if __name__ == '__main__':
    main()
