"""What a document family's PUT costs: DynamoDB calls and write units, per request.

    PYTHONPATH=. .venv/bin/python bench/bench_family_put.py

In-process moto, the real app through chalice's test client (the admission's reads included).
Calls are counted on every botocore client (bench/counting.py); write units computed from the
requests sent by bench/bench_write_cost.py ``WriteMeter`` (DynamoDB's published rules). Rows:

* a plain change (``metadata``) of an unlocked family: the write the lock must not make dearer;
* the same PUT on a locked family (409);
* unlocking alone (``{"locked": false}``).

Two write-unit figures: ``WriteMeter``'s (the team's meter: a PutItem's GSI entries all counted
as new, an UpdateItem's ALL indexes only), and the family item's own by DynamoDB's rule with
its images before and after the PUT (``kb(max(old, new))``, x2 in a transaction, plus
``gsi_units(old, new)``: index entries whose keys or projection changed), whatever API wrote it.

Each row is the mean of ``ROUNDS`` PUTs on ``ROUNDS`` families. Then ``WRITERS`` concurrent
plain PUTs of ONE family (threads through the same test client): the calls they cost in all,
and the statuses (a read-modify-write loser re-reads and re-applies: kernel/writes.py).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_write_cost import ADMIN_KEY, WriteMeter, gsi_units, item_size, kb  # noqa: E402 - sets the env first
from bench.counting import count_calls  # noqa: E402

ROUNDS = 20
WRITERS = 10


def measure() -> list[tuple[str, list[int], dict[str, float], float, float]]:
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
        meter = WriteMeter(model.client(), table.Meta.table_name)
        with Client(app) as c:
            headers = {'x-api-key': ADMIN_KEY, 'content-type': 'application/json'}
            project = json.loads(c.http.post('/api/projects', headers=headers, body=json.dumps(
                {'organizationId': platform['organizationId'], 'name': 'bench'})).body)['id']
            families = [json.loads(c.http.post('/api/document-families', headers=headers, body=json.dumps(
                {'projectId': project, 'path': f'f{i}.pdf', 'metadata': {'n': i}})).body)['id']
                for i in range(ROUNDS)]

            def image(id_: str) -> dict | None:
                key = {'pk': {'S': f'document-families#{id_}'}, 'sk': {'S': '#'}}
                return meter.client.get_item(TableName=meter.table_name, Key=key, ConsistentRead=True).get('Item')

            def row(name: str, body: dict, before=None) -> None:
                status, calls, units, own = set(), {}, 0, 0
                for i, id_ in enumerate(families):
                    if before is not None:
                        c.http.put(f'/api/document-families/{id_}', headers=headers, body=json.dumps(before))
                    old = image(id_)
                    meter.clear()
                    with count_calls() as counted:
                        r = c.http.put(f'/api/document-families/{id_}', headers=headers,
                                       body=json.dumps({k: (v if v != 'i' else {'n': i, 'row': name, 'x': 'y' * 100})
                                                        for k, v in body.items()}))
                    status.add(r.status_code)
                    units += meter.units()
                    new = image(id_)
                    family_writes = [op for op, params in meter.captured
                                     if f'document-families#{id_}' in json.dumps(params, default=str)]
                    if new != old:
                        factor = 2 if 'TransactWriteItems' in family_writes else 1
                        own += factor * kb(max(item_size(old), item_size(new))) + gsi_units(meter.indexes, old, new)
                    for op, n in counted.items():
                        calls[op] = calls.get(op, 0) + n
                rows.append((name, sorted(status), {op: n / ROUNDS for op, n in sorted(calls.items())},
                             units / ROUNDS, own / ROUNDS))
            row('plain change, unlocked family', {'metadata': 'i'})
            row('plain change, locked family', {'metadata': 'i'}, before={'locked': True})
            row('unlocking alone', {'locked': False})

            from concurrent.futures import ThreadPoolExecutor
            id_ = families[0]
            seq = json.loads(c.http.get(f'/api/document-families/{id_}', headers=headers).body)['changeSequence']
            barrier = __import__('threading').Barrier(WRITERS)

            def put(i: int) -> int:
                barrier.wait()
                return c.http.put(f'/api/document-families/{id_}', headers=headers,
                                  body=json.dumps({'metadata': {'writer': i}})).status_code
            with count_calls() as counted, ThreadPoolExecutor(WRITERS) as pool:
                statuses = list(pool.map(put, range(WRITERS)))
            after = json.loads(c.http.get(f'/api/document-families/{id_}', headers=headers).body)['changeSequence']
            rows.append((f'{WRITERS} concurrent PUTs, one family (totals; sequence +{after - seq})',
                         sorted(set(statuses)), dict(sorted(counted.items())), 0.0, 0.0))
    model.reset()
    return rows


def main() -> None:
    print(f'Per document family PUT (mean of {ROUNDS}); calls by operation, WCU by bench_write_cost rules')
    for name, status, calls, units, own in measure():
        total = sum(calls.values())
        ops = ', '.join(f'{op} {n:g}' for op, n in calls.items())
        print(f'{name:<32} status {status}  calls {total:g} ({ops})  WCU: meter {units:g}, family item {own:g}')


if __name__ == '__main__':
    main()
