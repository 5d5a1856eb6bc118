"""What the parse stage costs per parsed document (issue 39, docs/api/processing.md "The parse
stage"): DynamoDB calls, write units and S3 calls of the stage's messages through the queue
worker (the parse execution's writes, the parts, the manifest, the family's version write and
the derived content object, and the events the stream records for them), per corpus file,
next to the upload of the same file (same run).

    PYTHONPATH=. .venv/bin/python bench/bench_parse_stage.py

In-process moto (no network), no assistant in the project (what the pipelines cost on top:
bench/bench_processing.py). Write units are computed from the requests sent with
bench/bench_processing.py's rules (bench/bench_write_cost.py): a transactional write 2 WCU per
started KB of each item, a plain PutItem/UpdateItem 1 WCU per KB, GSI entries 1 WCU per KB.
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

from bench.bench_write_cost import ADMIN_KEY, WRITE_OPS, WriteMeter  # noqa: E402
from bench.counting import count_calls  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / 'tests' / 'fixtures' / 'documents'
FILES = ('ltnews11.pdf', 'upref.pdf', 'lppl.pdf', 'memo.docx', 'ledger.xlsx', 'apache-2.0.txt', 'scanned-page.png')
WRITES = WRITE_OPS
DYNAMO = ('GetItem', 'BatchGetItem', 'Query', 'Scan', *WRITES)
S3 = ('GetObject', 'PutObject', 'HeadObject', 'DeleteObjects', 'ListObjectsV2')


def measure() -> list[dict[str, Any]]:
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.features.documents import blobs
    from chalicelib.kernel.store import model
    model.reset()
    blobs.reset()
    rows: list[dict[str, Any]] = []
    manifest = json.loads((CORPUS / 'manifest.json').read_text())['real']
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
        meter = WriteMeter(client, name)

        with Client(app) as c:
            work = Work()
            headers = {'x-api-key': ADMIN_KEY, 'content-type': 'application/json'}

            def post(path, body):
                r = c.http.post(path, headers=headers, body=json.dumps(body))
                assert r.status_code == 201, r.body
                return json.loads(r.body)
            project = post('/api/projects', {'organizationId': platform['organizationId'], 'name': 'bench parse'})
            store = post('/api/document-stores', {'projectId': project['id'], 'name': 'inbox', 'slug': 'inbox'})
            work.publish_outbox()
            work.drain(seconds=5)

            def phase(fn) -> tuple[Counter, int]:
                meter.clear()
                with count_calls() as calls:
                    fn()
                return Counter(dict(calls)), meter.units()
            for file in FILES:
                data = (CORPUS / file).read_bytes()

                def upload(file=file, data=data):
                    r = c.http.post(f"/api/document-stores/{store['id']}/upload?path=bench/{file}", body=data,
                                    headers={'x-api-key': ADMIN_KEY, 'content-type': manifest[file]['mediaType']})
                    assert r.status_code == 201, r.body
                    return json.loads(r.body)
                holder: dict[str, Any] = {}
                up_calls, up_wcu = phase(lambda holder=holder, upload=upload: holder.update(upload()))

                def parse():
                    for _ in range(50):
                        got = work.publish_outbox() + work.drain(seconds=5)
                        if not got:
                            break
                run_calls, run_wcu = phase(parse)
                family = json.loads(c.http.get(f"/api/document-families/{holder['id']}",
                                               headers=headers).body)
                doc = json.loads(c.http.get(f"/api/document-families/{holder['id']}/document", headers=headers).body)
                rows.append({'file': file, 'pages': doc.get('pageCount'), 'nodes': len(doc['nodes']),
                             'version': family.get('documentVersion'), 'upload': (up_calls, up_wcu),
                             'parse': (run_calls, run_wcu)})
    model.reset()
    blobs.reset()
    return rows


def _figures(calls: Counter, wcu: int) -> str:
    dynamo = sum(v for k, v in calls.items() if k in DYNAMO)
    writes = sum(v for k, v in calls.items() if k in WRITES)
    s3 = sum(v for k, v in calls.items() if k in S3)
    sqs = sum(v for k, v in calls.items() if k in ('SendMessage', 'SendMessageBatch'))
    return f'{dynamo:>6}{writes:>7}{wcu:>6}{s3:>5}{sqs:>5}'


def main() -> None:
    rows = measure()
    print('\nPer parsed document (in-process moto): DynamoDB calls / writes / WCU, S3 calls, SQS sends')
    head = f"{'file':<18}{'pages':>6}{'nodes':>7}  {'upload: ddb  wr  WCU  s3  sqs':<32}"
    print(head + 'parse stage: ddb  wr  WCU  s3  sqs')
    for row in rows:
        print(f"{row['file']:<18}{row['pages'] or '-':>6}{row['nodes']:>7}  {_figures(*row['upload']):<32}"
              f"{_figures(*row['parse'])}")
        detail = ', '.join(f'{k} {v}' for k, v in sorted(row['parse'][0].items()))
        print(f"{'':<33}parse: {detail}")


if __name__ == '__main__':
    main()
