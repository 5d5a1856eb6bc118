"""What document processing costs per uploaded document (issue 26, docs/api/processing.md):
DynamoDB calls and write units of an upload through the store file API, of its trigger (the
outbox stream) and of the run of one subscribed assistant's pipeline (the queue worker), next
to the same uploads with no assistant (same run).

    PYTHONPATH=. .venv/bin/python bench/bench_processing.py [documents]

In-process moto (no network). The assistant's pipeline is two SCRIPT steps (the second sets the
documentStatus and a label): a BRIDGE_CALL step costs the same execution writes, plus the
bridge's GetItem (and, with ``${secrets.*}``, Secrets Manager), plus its upstream.

Write units are computed from the requests sent (bench/bench_write_cost.py's rules): a
transactional write 2 WCU per started KB of each item (Update, ConditionCheck and Delete
entries counted at the size of the item they touch, read back after the phase: counters
1 KB); a plain PutItem/UpdateItem 1 WCU per KB; each GSI entry a Put writes 1 WCU per KB
(counted as a new entry: an upper bound for a Put that replaces an item without moving its
KEYS_ONLY keys), and a side UpdateItem 1 WCU per KB per ALL-projection index holding the item.
"""
from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.pop('AWS_ENDPOINT_URL', None)
os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',
                  TABLE_NAME='platform-bench', LOG_LEVEL='WARNING', RATE_LIMIT_PER_MINUTE='100000000',
                  RATE_LIMIT_BURST_PER_SECOND='100000000')

from bench.bench_write_cost import ADMIN_KEY, gsi_units, item_size, kb  # noqa: E402
from bench.counting import count_calls  # noqa: E402

PDF = b'%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n'
WRITES = ('TransactWriteItems', 'PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem')


def measure(documents: int) -> dict[str, dict[str, Any]]:
    from chalice.test import Client
    from moto import mock_aws
    from urllib3 import encode_multipart_formdata

    from chalicelib.features.documents import blobs
    from chalicelib.kernel.store import model
    model.reset()
    blobs.reset()
    out: dict[str, dict[str, Any]] = {}
    with mock_aws():
        from app import app
        from chalicelib.core.config import get_config
        from chalicelib.features.identity.bootstrap import bootstrap
        from tests import work_support
        from tests.work_support import Work
        platform = bootstrap(api_key=ADMIN_KEY)
        work_support.create_resources()
        blobs.client().create_bucket(Bucket=get_config().bucket_name)
        table = model.configure()
        client = model.client()
        name = table.Meta.table_name
        indexes = client.describe_table(TableName=name)['Table']['GlobalSecondaryIndexes']
        captured: list[tuple[str, dict]] = []

        def capture(params, model, **_):
            captured.append((model.name, params))
        for op in WRITES:
            client.meta.events.register(f'before-parameter-build.dynamodb.{op}', capture)

        def image(key):
            return client.get_item(TableName=name, Key=key, ConsistentRead=True).get('Item')

        def units() -> int:
            total = 0
            for op, params in captured:
                if op == 'TransactWriteItems':
                    for entry in params['TransactItems']:
                        (kind, spec), = entry.items()
                        if kind == 'Put':
                            total += 2 * kb(item_size(spec['Item'])) + gsi_units(indexes, None, spec['Item'])
                        else:
                            total += 2 * kb(item_size(image(spec['Key']) or {}))
                elif op == 'PutItem':
                    total += kb(item_size(params['Item'])) + gsi_units(indexes, None, params['Item'])
                elif op == 'UpdateItem':
                    after = image(params['Key']) or {}
                    total += kb(item_size(after))
                    total += sum(kb(item_size(after)) for ix in indexes if ix['Projection']['ProjectionType'] == 'ALL'
                                 and all(k['AttributeName'] in after for k in ix['KeySchema']))
                else:
                    total += 1
            return total

        with Client(app) as c:
            work = Work()
            headers = {'x-api-key': ADMIN_KEY, 'content-type': 'application/json'}

            def post(path, body):
                r = c.http.post(path, headers=headers, body=json.dumps(body))
                assert r.status_code == 201, r.body
                return json.loads(r.body)
            org = platform['organizationId']
            for label, with_assistant in (('no assistant', False), ('one subscribed assistant', True)):
                project = post('/api/projects', {'organizationId': org, 'name': f'bench {label}'})['id']
                for slug, kind in (('received', 'UNRESOLVED'), ('processed', 'RESOLVED')):
                    post('/api/document-statuses', {'projectId': project, 'status': slug, 'slug': slug,
                                                    'statusType': kind})
                store = post('/api/document-stores', {'projectId': project, 'name': 'inbox',
                                                      'slug': f"inbox-{'a' if with_assistant else 'n'}"})
                if with_assistant:
                    post('/api/labels', {'organizationId': org, 'name': 'invoice'})   # a SCRIPT adds existing labels
                    post('/api/assistants', {'projectId': project, 'name': 'reader', 'slug': 'reader',
                                             'subscription': "path =like= '*.pdf'",
                                             'options': {'pipeline': {'steps': [
                                                 {'name': 'read', 'stepType': 'SCRIPT',
                                                  'options': {'expression': "{'pages': 1}"}},
                                                 {'name': 'classify', 'stepType': 'SCRIPT',
                                                  'options': {'expression': "{'documentStatus': 'processed', "
                                                                            "'labels': ['invoice']}"}}]}}})
                work.publish_outbox()
                phases: dict[str, tuple[Counter, int]] = {}

                def phase(key, fn, phases=phases):
                    captured.clear()
                    with count_calls() as calls:
                        fn()
                    calls = Counter({k: v for k, v in calls.items()})
                    wcu = units()
                    prior = phases.get(key, (Counter(), 0))
                    phases[key] = (prior[0] + calls, prior[1] + wcu)

                def upload(n, store=store):
                    body, content_type = encode_multipart_formdata({'file': (f'{n}.pdf', PDF, 'application/pdf')})
                    r = c.http.post(f"/api/stores/default/{store['slug']}/fs?path=in/{n}.pdf", body=body,
                                    headers={'x-api-key': ADMIN_KEY, 'content-type': content_type})
                    assert r.status_code == 201, r.body
                for n in range(documents):
                    phase('upload (request)', lambda n=n: upload(n))
                phase('trigger (stream)', work.publish_outbox)
                for _ in range(10):
                    before = phases.get('run (worker + its events)', (Counter(), 0))[0].total()
                    phase('run (worker + its events)', lambda: (work.drain(seconds=5), work.publish_outbox()))
                    if phases['run (worker + its events)'][0].total() - before <= 2:
                        break
                out[label] = phases
    model.reset()
    blobs.reset()
    return out


def main() -> None:
    documents = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    result = measure(documents)
    print(f'\nPer uploaded document ({documents} documents), DynamoDB only (SQS, S3, EventBridge calls apart)')
    print(f"{'':<28}{'phase':<28}{'DynamoDB calls':>15}{'writes':>8}{'WCU':>6}")
    for label, phases in result.items():
        for key, (calls, wcu) in phases.items():
            dynamo = {k: v for k, v in calls.items() if k in (
                'GetItem', 'BatchGetItem', 'Query', 'Scan', *WRITES)}
            writes = sum(v for k, v in dynamo.items() if k in WRITES)
            print(f'{label:<28}{key:<28}{sum(dynamo.values()) / documents:>15.1f}{writes / documents:>8.1f}'
                  f'{wcu / documents:>6.1f}')
            detail = ', '.join(f'{k} {v / documents:.1f}' for k, v in sorted(calls.items()))
            print(f"{'':<56}{detail}")


if __name__ == '__main__':
    main()
