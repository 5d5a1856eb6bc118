"""What a write costs in DynamoDB write units, with and without the equality indexes (same run).

    PYTHONPATH=. .venv/bin/python bench/bench_write_cost.py

moto reports no consumed capacity for transactions, so the figures are computed from the real
requests the service sends (captured with botocore hooks) and the item images before and after,
by DynamoDB's published rules:

* a transactional write of an item costs 2 WCU per started KB of the item (Put, Update,
  Delete and ConditionCheck alike); a plain PutItem/UpdateItem 1 WCU per KB;
* each GSI the write touches costs 1 WCU per KB of the index entry: a new entry (put), a removed
  one (delete), both when an index key changes; a KEYS_ONLY index is touched only when its keys
  change, an ALL index whenever the item changes (its projection changes).

"without indexes" is the same write minus what the equality indexes add: the per-value
counter updates and the x{n} GSI entries.
"""
from __future__ import annotations

import base64
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.pop('AWS_ENDPOINT_URL', None)
os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',
                  TABLE_NAME='platform-bench', LOG_LEVEL='WARNING', RATE_LIMIT_PER_MINUTE='100000000',
                  RATE_LIMIT_BURST_PER_SECOND='100000000')

ADMIN_KEY = 'pk_bench-admin-key'


def attribute_size(value: dict[str, Any]) -> int:
    """Bytes DynamoDB counts for one attribute value (its documented item-size rules)."""
    (kind, v), = value.items()
    if kind == 'S':
        return len(v.encode('utf-8'))
    if kind == 'N':
        digits = len(v.lstrip('-').replace('.', '').lstrip('0')) or 1
        return math.ceil(digits / 2) + 1
    if kind in ('BOOL', 'NULL'):
        return 1
    if kind == 'B':   # raw bytes (base64 text once serialized for the wire)
        return len(v) if isinstance(v, bytes | bytearray) else len(base64.b64decode(v))
    if kind == 'M':
        return 3 + sum(len(k.encode('utf-8')) + attribute_size(x) + 1 for k, x in v.items())
    if kind == 'L':
        return 3 + sum(attribute_size(x) + 1 for x in v)
    return len(json.dumps(v))


def item_size(item: dict[str, Any] | None) -> int:
    if not item:
        return 0
    return sum(len(k.encode('utf-8')) + attribute_size(v) for k, v in item.items())


def kb(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def _entry(item: dict[str, Any], keys: list[str], keys_only: bool) -> dict[str, Any]:
    """What an index stores of an item: its keys and the table's, or everything."""
    return {k: item[k] for k in [*keys, 'pk', 'sk'] if k in item} if keys_only else item


def gsi_units(indexes: list[dict[str, Any]], old: dict | None, new: dict | None, keep=lambda name: True) -> int:
    units = 0
    for index in indexes:
        if not keep(index['IndexName']):
            continue
        keys = [k['AttributeName'] for k in index['KeySchema']]
        had = old is not None and all(k in old for k in keys)
        has = new is not None and all(k in new for k in keys)
        keys_only = index['Projection']['ProjectionType'] == 'KEYS_ONLY'
        if had and has and all(old[k] == new[k] for k in keys):
            if not keys_only and old != new:
                units += kb(item_size(_entry(new, keys, keys_only)))   # projection changed in place
            continue
        if had:
            units += kb(item_size(_entry(old, keys, keys_only)))       # old entry removed
        if has:
            units += kb(item_size(_entry(new, keys, keys_only)))       # new entry written
    return units


def measure() -> list[tuple[str, int, int]]:
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.kernel.store import model
    model.reset()
    rows = []
    with mock_aws():
        from app import app
        from chalicelib.features.identity.bootstrap import bootstrap
        platform = bootstrap(api_key=ADMIN_KEY)
        table = model.configure()
        client = model.client()
        indexes = client.describe_table(TableName=table.Meta.table_name)['Table']['GlobalSecondaryIndexes']
        captured: list[tuple[str, dict]] = []

        def capture(params, model, **_):
            captured.append((model.name, params))
        client.meta.events.register('before-parameter-build.dynamodb.TransactWriteItems', capture)
        client.meta.events.register('before-parameter-build.dynamodb.PutItem', capture)

        def image(key: dict[str, Any]) -> dict | None:
            return client.get_item(TableName=table.Meta.table_name, Key=key, ConsistentRead=True).get('Item')

        def cost(write) -> tuple[int, int]:
            """(with indexes, without) for the writes ``write()`` makes."""
            captured.clear()
            before_images: dict[str, dict | None] = {}
            result = write(before_images)
            with_ix = without_ix = 0
            for op, params in captured:
                entries = params['TransactItems'] if op == 'TransactWriteItems' else [{'Put': params}]
                factor = 2 if op == 'TransactWriteItems' else 1
                for entry in entries:
                    (kind, spec), = entry.items()
                    key = spec.get('Key') or {'pk': spec['Item']['pk'], 'sk': spec['Item']['sk']}
                    counter = key['pk']['S'].startswith('CNT#') and '=' in key['pk']['S']
                    after = spec['Item'] if kind == 'Put' else (None if kind == 'Delete' else image(key))
                    old = before_images.get(key['pk']['S'])
                    units = factor * kb(max(item_size(after), item_size(old)))
                    with_ix += units
                    without_ix += 0 if counter else units
                    if kind in ('Put', 'Delete') and not key['pk']['S'].startswith(('CNT#', 'UQ#')):
                        with_ix += gsi_units(indexes, old, after)
                        without_ix += gsi_units(indexes, old, after, keep=lambda name: not name.startswith('x'))
            return with_ix, without_ix, result

        with Client(app) as c:
            headers = {'x-api-key': ADMIN_KEY, 'content-type': 'application/json'}
            org = platform['organizationId']
            project = json.loads(c.http.post('/api/projects', headers=headers, body=json.dumps(
                {'organizationId': org, 'name': 'bench'})).body)['id']
            c.http.post('/api/task-statuses', headers=headers, body=json.dumps(   # statusSlug names one
                {'organizationId': org, 'label': 'Open', 'slug': 'open', 'statusType': 'OPEN'}))
            body = {'projectId': project, 'title': 'A task of the bench', 'statusSlug': 'open',
                    'assigneeId': platform['userId'], 'description': 'x' * 200, 'priority': 2}

            def create(images):
                return json.loads(c.http.post('/api/tasks', headers=headers, body=json.dumps(body)).body)
            w, wo, task = cost(create)
            rows.append(('task create', w, wo))

            def status_change(images):
                key = {'pk': {'S': f"tasks#{task['id']}"}, 'sk': {'S': '#'}}
                images[key['pk']['S']] = image(key)
                r = c.http.put(f"/api/tasks/{task['id']}/status", headers=headers,
                               body=json.dumps({'statusSlug': 'done'}))
                return r.status_code
            c.http.post('/api/task-statuses', headers=headers, body=json.dumps(
                {'organizationId': org, 'label': 'Done', 'slug': 'done', 'statusType': 'DONE'}))
            w, wo, status = cost(status_change)
            assert status == 200, status
            rows.append(('task status change', w, wo))

            def plain_update(images):
                key = {'pk': {'S': f"tasks#{task['id']}"}, 'sk': {'S': '#'}}
                images[key['pk']['S']] = image(key)
                return c.http.put(f"/api/tasks/{task['id']}", headers=headers,
                                  body=json.dumps({'description': 'y' * 200})).status_code
            w, wo, _ = cost(plain_update)
            rows.append(('task description change', w, wo))
    model.reset()
    return rows


def main() -> None:
    rows = measure()
    print('\nWrite units (WCU) per write, computed from the requests sent (see the module docstring)')
    print(f"{'write':<28}{'without indexes':>17}{'with indexes':>14}{'added':>8}")
    for name, with_ix, without_ix in rows:
        print(f'{name:<28}{without_ix:>17}{with_ix:>14}{with_ix - without_ix:>8}')


if __name__ == '__main__':
    main()


WRITE_OPS = ('TransactWriteItems', 'PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem')


class WriteMeter:
    """The write units of the requests a DynamoDB client sends while it is armed, by the rules in
    the module docstring (bench_processing.py, bench_parse_stage.py): ``clear()``, run, ``units()``.
    Update, Delete and ConditionCheck entries are counted at the size of the item they touch,
    read back after the run; a side UpdateItem also costs 1 WCU per KB per ALL index holding it."""

    def __init__(self, client, table_name: str) -> None:
        self.client, self.table_name = client, table_name
        self.indexes = client.describe_table(TableName=table_name)['Table']['GlobalSecondaryIndexes']
        self.captured: list[tuple[str, dict]] = []
        for op in WRITE_OPS:
            client.meta.events.register(f'before-parameter-build.dynamodb.{op}', self._capture)

    def _capture(self, params, model, **_) -> None:
        self.captured.append((model.name, params))

    def clear(self) -> None:
        self.captured.clear()

    def _image(self, key):
        return self.client.get_item(TableName=self.table_name, Key=key, ConsistentRead=True).get('Item')

    def units(self) -> int:
        total = 0
        for op, params in self.captured:
            if op == 'TransactWriteItems':
                for entry in params['TransactItems']:
                    (kind, spec), = entry.items()
                    if kind == 'Put':
                        total += 2 * kb(item_size(spec['Item'])) + gsi_units(self.indexes, None, spec['Item'])
                    else:
                        total += 2 * kb(item_size(self._image(spec['Key']) or {}))
            elif op == 'PutItem':
                total += kb(item_size(params['Item'])) + gsi_units(self.indexes, None, params['Item'])
            elif op == 'UpdateItem':
                after = self._image(params['Key']) or {}
                total += kb(item_size(after))
                total += sum(kb(item_size(after)) for ix in self.indexes
                             if ix['Projection']['ProjectionType'] == 'ALL'
                             and all(k['AttributeName'] in after for k in ix['KeySchema']))
            else:
                total += 1
        return total
