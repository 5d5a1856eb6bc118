"""The layout memory's cost (issue 48, docs/api/extraction.md "Layout memory"): what a correction
pointing at words and an extraction run cost in DynamoDB calls and write units, before (no
memory: the run reads no memory, the correction sends a value) and after (the run's one
BatchGetItem of its fingerprints; the correction's document read and memory write), and the
CPU time of the fingerprint and of reading a taught place.

    PYTHONPATH=. .venv/bin/python bench/bench_layout_memory.py     # ~20 s

Through the app (chalice's test client, moto), calls counted with bench/counting.py and writes
costed as bench/bench_extraction.py does (bench/bench_write_cost.py: 2 WCU per started KB of
each item of a transaction, 1 WCU per KB of each GSI entry put or deleted; an UpdateItem 1 WCU
per KB). Figures: bench/README.md "Extraction on unseen layouts (issue 48)" -> "Layout memory".
"""
from __future__ import annotations

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
from tests.extraction_corpus import invoice_definition, invoice_pdf, invoice_values, pdf_nodes  # noqa: E402

ADMIN_KEY = 'pk_bench-admin-key'


def _invoice(number: str, po: str) -> dict[str, Any]:
    values = invoice_values(number=number)
    values['poNumber'] = po
    return values


def measure() -> list[tuple[str, dict[str, int], int]]:
    from chalice.test import Client
    from moto import mock_aws

    from bench.counting import count_calls
    from chalicelib.kernel.store import model
    model.reset()
    rows: list[tuple[str, dict[str, int], int]] = []
    with mock_aws():
        import boto3

        from app import app
        from chalicelib.core.config import get_config
        from chalicelib.features.extraction import memories
        from chalicelib.features.identity.bootstrap import bootstrap
        platform = bootstrap(api_key=ADMIN_KEY)
        boto3.client('s3').create_bucket(Bucket=get_config().bucket_name)
        table = model.configure()
        client = model.client()
        indexes = client.describe_table(TableName=table.Meta.table_name)['Table']['GlobalSecondaryIndexes']
        captured: list[tuple[str, dict]] = []

        def capture(params, model, **_):
            captured.append((model.name, params))
        for op in ('TransactWriteItems', 'PutItem', 'UpdateItem'):
            client.meta.events.register(f'before-parameter-build.dynamodb.{op}', capture)

        def image(key):
            return client.get_item(TableName=table.Meta.table_name, Key=key, ConsistentRead=True).get('Item')

        def cost(label: str, write) -> Any:
            captured.clear()
            with count_calls() as calls:
                result = write()
            units = 0
            for op, params in list(captured):
                if op == 'UpdateItem':
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
            dynamo = {k: v for k, v in calls.items() if k not in ('GetObject', 'PutObject', 'HeadObject')}
            dynamo['S3'] = sum(v for k, v in calls.items() if k in ('GetObject', 'PutObject', 'HeadObject'))
            rows.append((label, dynamo, units))
            return result

        with Client(app) as c:
            headers = {'x-api-key': ADMIN_KEY, 'content-type': 'application/json'}
            org = platform['organizationId']

            def call(method, path, body=None):
                r = c.http.request(method, path, headers=headers, body=json.dumps(body) if body is not None else None)
                assert r.status_code < 300, (path, r.status_code, r.body[:300])
                return json.loads(r.body) if r.body else None
            project = call('POST', '/api/projects', {'organizationId': org, 'name': 'bench'})['id']
            call('POST', '/api/data-stores', {'projectId': project, 'name': 'Invoices', 'slug': 'invoices'})
            taxons = invoice_definition()
            po = next(t for t in taxons[0]['children'] if t['name'] == 'poNumber')
            po['rules'] = [{'type': 'label', 'label': 'Order Ref'}]   # the rules miss it: a reviewer teaches
            call('POST', '/api/data-definitions', {'organizationId': org, 'name': 'Invoice', 'slug': 'invoice',
                                                   'taxons': taxons})

            def family(values):
                nodes = pdf_nodes(invoice_pdf(values))
                fam = call('POST', '/api/document-families', {'projectId': project, 'path': f'{uuid.uuid4()}.pdf'})
                call('PUT', f"/api/document-families/{fam['id']}/document", {'version': 0, 'nodes': nodes})
                return fam, nodes

            def extract(fam):
                return call('POST', f"/api/document-families/{fam['id']}/extract",
                            {'dataDefinition': 'invoice', 'dataStore': 'invoices'})

            def po_attr(fam):
                page = call('GET', f"/api/data-objects?filter=documentFamilyId == '{fam['id']}'&pageSize=50")
                obj = next(o for o in page['content'] if o['path'] == 'invoice')
                return obj, next(a for a in obj['attributes'] if a['tag'] == 'poNumber')

            # before: a run that reads no memory (the engine's recall left out), a correction by value
            fam, nodes = family(_invoice('INV-B-1', 'PO-1001'))
            real = memories.recall_for
            memories.recall_for = lambda org, definition: None
            try:
                cost('extraction run, before (no memory read)', lambda: extract(fam))
            finally:
                memories.recall_for = real
            obj, attr = po_attr(fam)
            cost('correction by value (before)',
                 lambda: call('PUT', f"/api/data-objects/{obj['id']}/attributes/{attr['id']}", {'value': 'PO-1001'}))
            # after: a run with no memory for its fingerprints, then the corrections that teach
            fam, nodes = family(_invoice('INV-B-2', 'PO-1002'))
            cost('extraction run, after, no memory yet (+1 BatchGetItem)', lambda: extract(fam))
            obj, attr = po_attr(fam)
            word = next(n['id'] for n in nodes if n['nodeType'] == 'word' and n['content'] == 'PO-1002')
            cost('correction by nodeIds, new memory (created)',
                 lambda: call('PUT', f"/api/data-objects/{obj['id']}/attributes/{attr['id']}", {'nodeIds': [word]}))
            cid = next(a for a in obj['attributes'] if a['tag'] == 'customerId')
            cword = next(n['id'] for n in nodes if n['nodeType'] == 'word' and n['content'] == 'C-1009')
            obj = call('GET', f"/api/data-objects/{obj['id']}")
            cost('correction by nodeIds, memory updated (2nd field)',
                 lambda: call('PUT', f"/api/data-objects/{obj['id']}/attributes/{cid['id']}", {'nodeIds': [cword]}))
            fam, nodes = family(_invoice('INV-B-3', 'PO-1003'))
            summary = cost('extraction run, after, memory matched', lambda: extract(fam))
            assert summary['layoutMemory']['applied'] == ['invoice/poNumber', 'invoice/customerId'] or \
                set(summary['layoutMemory']['applied']) == {'invoice/poNumber', 'invoice/customerId'}, summary
    model.reset()
    return rows


def cpu() -> list[tuple[str, float]]:
    """Milliseconds (median of 20) of the fingerprint and of reading one taught place, in process."""
    from chalicelib.features.extraction import layout_memory
    from chalicelib.features.extraction.document import Document
    nodes = pdf_nodes(invoice_pdf(_invoice('INV-C-1', 'PO-77812')))
    doc = Document(nodes)
    pages = layout_memory.Pages(doc)
    word = [w for u in doc.units for w in u.words if w.text == 'PO-77812']
    place = layout_memory.place_of(pages, 1, word)
    out = []
    for label, fn in (('fingerprints of a 1-page invoice', lambda: layout_memory.fingerprints(doc)),
                      ('words by page (once per run)', lambda: layout_memory.Pages(doc)),
                      ('read one taught place', lambda: layout_memory.read(pages, place))):
        times = []
        for _ in range(20):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
        out.append((label, statistics.median(times) * 1000))
    return out


def main() -> None:
    print(f"{'':<58}{'calls (DynamoDB by op; S3)':<60}{'WCU':>5}")
    for label, calls, units in measure():
        shown = ', '.join(f'{k} {v}' for k, v in sorted(calls.items()) if v)
        print(f'{label:<58}{shown:<60}{units:>5}', flush=True)
    for label, ms in cpu():
        print(f'{label:<40}{ms:>8.2f} ms')


if __name__ == '__main__':
    main()
