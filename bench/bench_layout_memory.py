"""The layout memory's cost (issue 48, docs/api/extraction.md "Layout memory"): what a correction
pointing at words and an extraction run cost in DynamoDB calls and write units, before (no
memory: the run reads no memory, the correction sends a value) and after (the run's one
BatchGetItem of its fingerprints; the correction's document read and memory write), and the
CPU time of the fingerprint and of reading a taught place.

    PYTHONPATH=. .venv/bin/python bench/bench_layout_memory.py            # ~20 s
    PYTHONPATH=. .venv/bin/python bench/bench_layout_memory.py --corpus   # the corpus target (~30 s)

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


def corpus() -> list[dict[str, Any]]:
    """Issue 48's target "after one correction per supplier, the next invoice of that supplier:
    1.00 of the corrected fields", over the corpus (tests/fixtures/invoices): per supplier with
    two well-formed text PDFs, the general definition reads the first; every header field it got
    wrong is taught where the truth's words stand (the words a reviewer would point at: the
    shortest run of a line's words whose typed value is the truth's); the second is read with
    that memory (in process: the engine, the pure memory, the fingerprints as a run computes them)."""
    from bench.bench_extraction_unseen import CORPUS, definition, manifest, parse
    from bench.extraction_scoring import HEADER_FIELDS, same
    from chalicelib.features.extraction import engine, layout_memory
    from chalicelib.features.extraction.document import Document
    from chalicelib.features.extraction.normalise import NotNormalised, normalise
    body = definition('general')
    taxons = body['taxons']
    locale = (body.get('metadata') or {}).get('locale')
    group = next(t for t in taxons if t['name'] == 'invoice')
    leaf = {c['name']: c for c in group['children'] if not c.get('group')}
    by_supplier: dict[str, list[dict[str, Any]]] = {}
    for d in manifest()['documents']:
        if d['kind'] == 'text-pdf' and d.get('wellFormed', True):
            by_supplier.setdefault(d['supplier'], []).append(d)

    def fields(nodes, recall=None):
        result = engine.extract(taxons, nodes, locale=locale, recall=recall)
        return {a['tag']: a for o in result.objects if o.path == 'invoice' for a in o.attributes}

    def words_of(doc, name, truth, written):
        """The words a reviewer points at: read with the definition's locale, else with the
        locale the document is written in (the words are there; whether the definition reads
        them is the run's business)."""
        for size in range(1, 9):
            for u in doc.units:
                for i in range(len(u.words) - size + 1):
                    run = u.words[i:i + size]
                    for loc in dict.fromkeys((locale, written)):
                        try:
                            typed, _ = normalise(' '.join(w.text for w in run), leaf[name], loc)
                        except NotNormalised:
                            continue
                        if same(name, truth, typed):
                            return run
        return None
    rows = []
    for supplier, docs in sorted(by_supplier.items()):
        if len(docs) < 2:
            continue
        first, second = sorted(docs, key=lambda d: d['file'])[:2]
        nodes1, _ = parse(CORPUS / first['file'])
        nodes2, _ = parse(CORPUS / second['file'])
        got1 = fields(nodes1)
        doc1 = Document(nodes1)
        pages1 = layout_memory.Pages(doc1)
        wrong = [f for f in HEADER_FIELDS if f in leaf and f in first['truth'] and
                 not same(f, first['truth'][f], got1.get(f, {}).get('typedValue'))]
        taught = {}
        for name in wrong:
            run = words_of(doc1, name, first['truth'][name], first.get('locale'))
            place = layout_memory.place_of(pages1, run[0].page, run) if run else None
            if place:
                taught[f'invoice/{name}'] = place
        prints1 = layout_memory.fingerprints(doc1)
        key = prints1[0].key if prints1 else None

        def recall(doc, key=key, taught=taught):
            keys = {f.key for f in layout_memory.fingerprints(doc)}
            return layout_memory.Recalled(doc, taught, ['m']) if key in keys and taught else None
        got2 = fields(nodes2, recall)
        right = [p for p in taught if p.split('/')[-1] in second['truth'] and
                 same(p.split('/')[-1], second['truth'][p.split('/')[-1]], got2[p.split('/')[-1]].get('typedValue'))]
        before2 = fields(nodes2)

        def read_right(p, second=second, got2=got2):   # the words read are the truth, in the document's locale
            name = p.split('/')[-1]
            a = got2[name]
            if (a.get('dataFeatures') or {}).get('rule') != 'memory' or a.get('value') is None:
                return False
            try:
                typed, _ = normalise(a['value'], leaf[name], second.get('locale'))
            except NotNormalised:
                return False
            return same(name, second['truth'].get(name), typed)
        if '--detail' in sys.argv:
            for p in taught:
                a = got2[p.split('/')[-1]]
                rule = (a.get('dataFeatures') or {}).get('rule')
                print(f"  {supplier} {p}: read {a.get('value')!r} ({rule}) -> {a.get('typedValue')!r} "
                      f"{a.get('normaliseError') or ''} truth {second['truth'].get(p.split('/')[-1])!r}")
        rows.append({'supplier': supplier, 'files': f"{first['file']} -> {second['file']}",
                     'fingerprint': prints1[0].kind if prints1 else None, 'wrong': len(wrong), 'taught': len(taught),
                     'right': len(right), 'wordsRight': sum(1 for p in taught if read_right(p)),
                     'wrongBefore': sum(
                         1 for f in taught if not same(f.split('/')[-1], second['truth'].get(f.split('/')[-1]),
                                                       before2.get(f.split('/')[-1], {}).get('typedValue')))})
    return rows


def main() -> None:
    if '--corpus' in sys.argv:
        print(f"{'supplier':<12}{'invoices':<32}{'fingerprint':<12}{'wrong':>6}{'taught':>7}{'right after':>12}"
              f"{'words right':>12}{'wrong without':>14}")
        for r in corpus():
            print(f"{r['supplier']:<12}{r['files']:<32}{str(r['fingerprint']):<12}{r['wrong']:>6}{r['taught']:>7}"
                  f"{r['right']:>12}{r['wordsRight']:>12}{r['wrongBefore']:>14}", flush=True)
        return
    print(f"{'':<58}{'calls (DynamoDB by op; S3)':<60}{'WCU':>5}")
    for label, calls, units in measure():
        shown = ', '.join(f'{k} {v}' for k, v in sorted(calls.items()) if v)
        print(f'{label:<58}{shown:<60}{units:>5}', flush=True)
    for label, ms in cpu():
        print(f'{label:<40}{ms:>8.2f} ms')


if __name__ == '__main__':
    main()
