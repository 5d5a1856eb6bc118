"""Extraction: its time against parsing the same document, its write units per extracted
object, and the exceptions list of a store at 100 / 1,000 / 10,000 objects.

    PYTHONPATH=. .venv/bin/python bench/bench_extraction.py            # ~2-4 min
    PYTHONPATH=. .venv/bin/python bench/bench_extraction.py --quick    # smaller store sizes

1. **Seconds per page** (medians of repeated runs, one process): the parse stage's reader
   (features/parsing/readers: the text layer; Tesseract for the scan) over a generated invoice, and extraction
   (features/extraction/engine.py ``extract`` + ``assess``) of the 20-taxon definition with its
   line-item table (tests/extraction_corpus.py) over the nodes the reader gave. Goal: extraction
   under 0.5x of parsing.
2. **Write units per extracted object**: ``POST /api/document-families/{id}/extract`` through the
   app (chalice's test client, moto), the TransactWriteItems it sends captured with botocore
   hooks and costed by DynamoDB's published rules (bench/bench_write_cost.py: 2 WCU per started KB
   of each item of a transaction, 1 WCU per KB of each GSI entry put or deleted). Reported for a
   clean first run and for a re-run (which deletes the earlier run's records first).
3. **Exceptions of a store, flat in its size**: a store seeded with N data objects (their
   entity items and counters written as the create service writes them, BatchWriteItem: moto
   is too slow to take 10,000 through transactions), 20 open and N/10 closed exceptions; then
   ``GET /api/exceptions?dataStoreId=&state=OPEN``: DynamoDB calls, items read, milliseconds
   (moto patched as make run's server is, localdev/moto_server.py ``patch_moto``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.pop('AWS_ENDPOINT_URL', None)
os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',
                  TABLE_NAME='platform-bench', LOG_LEVEL='WARNING', RATE_LIMIT_PER_MINUTE='100000000',
                  RATE_LIMIT_BURST_PER_SECOND='100000000')

from bench.bench_write_cost import gsi_units, item_size, kb  # noqa: E402
from tests.extraction_corpus import invoice_definition, invoice_pdf, invoice_values, many_items  # noqa: E402

ADMIN_KEY = 'pk_bench-admin-key'


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


# ----------------------------------------------------------------------------- 1. time per page

def time_per_page(repeat: int) -> list[tuple[str, int, float, float]]:
    from chalicelib.features.extraction import engine, taxons
    from chalicelib.features.parsing import readers
    definition = invoice_definition()
    index = dict(taxons.walk(definition))
    from tests.extraction_corpus import scanned
    rows = []
    for name, items, scan in (('1-page invoice, 4 line items', None, False),
                              ('5-page invoice, 200 line items', many_items(200), False),
                              ('1-page scanned invoice (OCR)', None, True)):
        values = invoice_values(items=items) if items else invoice_values()
        pdf = scanned(invoice_pdf(values)) if scan else invoice_pdf(values)

        def parse(pdf=pdf):
            return readers.read(pdf, media_type='application/pdf', filename='invoice.pdf',
                                deadline=time.monotonic() + 60)
        result = parse()
        nodes = result.nodes

        def extract(nodes=nodes):
            out = engine.extract(definition, nodes)
            tree = [{'id': o.key, 'parentId': o.parent, 'path': o.path, 'rowNum': o.row,
                     'attributes': [{**a, 'id': f"{o.key}/{a['tag']}"} for a in o.attributes]} for o in out.objects]
            engine.assess(tree, index)
            return out
        objects = len(extract().objects)
        times = min(repeat, 3) if scan else repeat   # an OCR read takes seconds
        rows.append((f'{name} ({objects} objects)', result.page_count, _median(parse, times) / result.page_count,
                     _median(extract, repeat) / result.page_count))
    return rows


# ----------------------------------------------------------------------------- 2. write units

def write_units() -> list[tuple[str, int, int, int]]:
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.kernel.store import model
    model.reset()
    rows = []
    with mock_aws():
        import boto3

        from app import app
        from chalicelib.core.config import get_config
        from chalicelib.features.identity.bootstrap import bootstrap
        platform = bootstrap(api_key=ADMIN_KEY)
        boto3.client('s3').create_bucket(Bucket=get_config().bucket_name)
        table = model.configure()
        client = model.client()
        indexes = client.describe_table(TableName=table.Meta.table_name)['Table']['GlobalSecondaryIndexes']
        captured: list[tuple[str, dict]] = []

        def capture(params, model, **_):
            captured.append((model.name, params))
        client.meta.events.register('before-parameter-build.dynamodb.TransactWriteItems', capture)
        client.meta.events.register('before-parameter-build.dynamodb.PutItem', capture)
        client.meta.events.register('before-parameter-build.dynamodb.UpdateItem', capture)

        def image(key):
            return client.get_item(TableName=table.Meta.table_name, Key=key, ConsistentRead=True).get('Item')

        def cost(write) -> tuple[int, Any]:
            captured.clear()
            result = write()
            units = 0
            for op, params in captured:
                if op == 'UpdateItem':   # side writes (the family's summary): 1 WCU per KB of the item
                    units += kb(item_size(image(params['Key'])))
                    continue
                entries = params['TransactItems'] if op == 'TransactWriteItems' else [{'Put': params}]
                factor = 2 if op == 'TransactWriteItems' else 1
                for entry in entries:
                    (kind, spec), = entry.items()
                    key = spec.get('Key') or {'pk': spec['Item']['pk'], 'sk': spec['Item']['sk']}
                    after = spec['Item'] if kind == 'Put' else None
                    units += factor * kb(max(item_size(after), 1))
                    if kind in ('Put', 'Delete') and not key['pk']['S'].startswith(('CNT', 'UQ#', 'G')):
                        units += gsi_units(indexes, None if kind == 'Put' else {'pk': key['pk']}, after)
            return units, result

        with Client(app) as c:
            headers = {'x-api-key': ADMIN_KEY, 'content-type': 'application/json'}
            org = platform['organizationId']

            def call(method, path, body=None):
                r = c.http.request(method, path, headers=headers, body=json.dumps(body) if body is not None else None)
                assert r.status_code < 300, (path, r.status_code, r.body[:300])
                return json.loads(r.body) if r.body else None
            project = call('POST', '/api/projects', {'organizationId': org, 'name': 'bench'})['id']
            call('POST', '/api/data-stores', {'projectId': project, 'name': 'Invoices', 'slug': 'invoices'})
            call('POST', '/api/data-definitions', {'organizationId': org, 'name': 'Invoice', 'slug': 'invoice',
                                                   'taxons': invoice_definition()})
            from chalicelib.features.parsing import readers
            for name, items in (('invoice, 4 line items', None), ('invoice, 200 line items', many_items(200))):
                values = invoice_values(items=items) if items else invoice_values()
                nodes = readers.read(invoice_pdf(values), media_type='application/pdf', filename='i.pdf',
                                     deadline=time.monotonic() + 60).nodes
                fam = call('POST', '/api/document-families', {'projectId': project, 'path': f'{uuid.uuid4()}.pdf'})
                call('PUT', f"/api/document-families/{fam['id']}/document", {'version': 0, 'nodes': nodes})
                body = {'dataDefinition': 'invoice', 'dataStore': 'invoices'}
                path = f"/api/document-families/{fam['id']}/extract"
                units, summary = cost(lambda path=path, body=body: call('POST', path, body))
                rows.append((f'{name}: first run', summary['objects'], units, len(captured)))
                units, summary = cost(lambda path=path, body=body: call('POST', path, body))
                rows.append((f'{name}: run again (replaces)', summary['objects'], units, len(captured)))
    model.reset()
    return rows


# ----------------------------------------------------------------------------- 3. exceptions list

def seed_store(org: str, project: str, store: str, user: str, n: int) -> None:
    from chalicelib.core.clock import now_iso
    from chalicelib.core.config import get_config
    from chalicelib.features.extraction import storage
    from chalicelib.kernel import records
    from chalicelib.kernel.store import model as store_model
    from chalicelib.kernel.store import table
    model = store_model.configure()
    counters: dict[str, int] = {}

    def count(family, data):
        key = table.counter_pk(family.path, org)
        counters[key] = counters.get(key, 0) + 1
        for name, value in records.indexed_values(family, data).values():
            vk = table.value_counter_pk(family.path, org, name, value)
            counters[vk] = counters.get(vk, 0) + 1

    now = now_iso()
    base = {'createdOn': now, 'updatedOn': now, 'changeSequence': 1, 'createdByUserId': user,
            'organizationId': org, 'projectId': project, 'dataStoreId': store}
    with model.batch_write() as batch:
        for i in range(n):
            oid = str(uuid.uuid4())
            data = {**base, 'id': oid, 'uuid': oid, 'path': 'invoice', 'sourceKey': f'f{i // 5}:k',
                    'documentFamilyId': f'fam-{i // 5}', 'attributes': [
                        {'id': str(uuid.uuid4()), 'tag': 'total', 'taxon': 'invoice/total', 'value': str(i),
                         'typedValue': i}]}
            batch.save(records.entity(storage.OBJECTS, data, seq=1, org=org))
            count(storage.OBJECTS, data)
            closed = i % 10 == 0
            if closed or i < 20:
                eid = str(uuid.uuid4())
                state = 'OPEN' if i < 20 and not closed else 'CLOSED'
                exc = {**base, 'id': eid, 'uuid': eid, 'dataObjectId': oid, 'taxon': 'invoice/total',
                       'message': f'Total (invoice/total): check object {i}', 'exceptionType': 'LOW_CONFIDENCE',
                       'open': state == 'OPEN', 'state': state, 'storeState': storage.store_state(store, state),
                       'sourceKey': data['sourceKey'], 'documentFamilyId': data['documentFamilyId']}
                batch.save(records.entity(storage.EXCEPTIONS, exc, seq=1, org=org))
                count(storage.EXCEPTIONS, exc)
        shards = get_config().counter_shards
        for key, total in counters.items():
            for shard in range(shards):
                batch.save(model(key, str(shard), cnt=total // shards + (1 if shard < total % shards else 0)))


def exceptions_flat(sizes: list[int], repeat: int) -> list[tuple[int, int, int, int, float]]:
    from chalice.test import Client
    from moto import mock_aws

    from bench.counting import count_calls
    from chalicelib.kernel.store import model
    rows = []
    for n in sizes:
        model.reset()
        with mock_aws():
            from app import app
            from chalicelib.features.identity.bootstrap import bootstrap
            platform = bootstrap(api_key=ADMIN_KEY)
            client = model.client()
            read_items = [0]

            def after(parsed, model, read_items=read_items, **_):
                if model.name == 'Query':
                    read_items[0] += parsed.get('ScannedCount', 0)
                elif model.name == 'BatchGetItem':
                    read_items[0] += sum(len(v) for v in parsed.get('Responses', {}).values())
            client.meta.events.register('after-call.dynamodb', after)
            with Client(app) as c:
                headers = {'x-api-key': ADMIN_KEY, 'content-type': 'application/json'}
                org = platform['organizationId']
                project = json.loads(c.http.post('/api/projects', headers=headers, body=json.dumps(
                    {'organizationId': org, 'name': 'bench'})).body)['id']
                store = json.loads(c.http.post('/api/data-stores', headers=headers, body=json.dumps(
                    {'projectId': project, 'name': 'S', 'slug': 's'})).body)['id']
                seed_store(org, project, store, platform['userId'], n)
                path = f'/api/exceptions?dataStoreId={store}&state=OPEN&pageSize=50'

                def get(path=path, headers=headers):
                    r = c.http.get(path, headers=headers)
                    assert r.status_code == 200, r.body
                    return json.loads(r.body)
                read_items[0] = 0
                with count_calls() as calls:
                    page = get()
                assert page['totalElements'] == 18, page['totalElements']   # 20 first, less the 2 closed (0, 10)
                ms = _median(get, repeat) * 1000
                rows.append((n, page['totalElements'], sum(calls.values()), read_items[0], ms))
        model.reset()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--parts', default='123', help='which measurements: 1, 2 and/or 3')
    args = parser.parse_args()
    from localdev.moto_server import patch_moto
    patch_moto()   # moto as make run's server runs it (a Query reads its partition, not the whole table)
    if '1' in args.parts:
        print('1. seconds per page (medians), the parse stage\'s reader vs extraction of the 20-taxon definition')
        print(f"{'document':<50}{'pages':>6}{'parse s/page':>14}{'extract s/page':>16}{'ratio':>8}")
        for name, pages, parse, extract in time_per_page(5 if args.quick else 15):
            print(f'{name:<50}{pages:>6}{parse:>14.4f}{extract:>16.4f}{extract / parse:>7.2f}x', flush=True)
    if '2' in args.parts:
        _print_write_units()
    if '3' in args.parts:
        _print_exceptions([100, 1000] if args.quick else [100, 1000, 10_000])


def _print_write_units() -> None:
    print('\n2. write units of POST /api/document-families/{id}/extract (DynamoDB\'s rules, from the requests sent)')
    print(f"{'run':<46}{'objects':>8}{'WCU':>7}{'WCU/object':>12}{'writes':>8}")
    for name, objects, units, writes in write_units():
        print(f'{name:<46}{objects:>8}{units:>7}{units / objects:>12.1f}{writes:>8}', flush=True)


def _print_exceptions(sizes: list[int]) -> None:
    print('\n3. GET /api/exceptions?dataStoreId=&state=OPEN (18 open; N/10 closed) by store size')
    print(f"{'objects in store':>17}{'open':>6}{'calls':>7}{'items read':>12}{'ms':>9}")
    for n, total, calls, items, ms in exceptions_flat(sizes, 5):
        print(f'{n:>17,}{total:>6}{calls:>7}{items:>12}{ms:>9.1f}', flush=True)


if __name__ == '__main__':
    main()
