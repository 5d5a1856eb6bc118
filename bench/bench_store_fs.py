"""The store file API of the SDK and CLI (features/documents/store_fs.py): AWS calls and latency per request,
against the id routes doing the same work (the floor, measured in the same run; in-process moto).
The org/slug routes add the organization's unique-slug GetItem and the slug index Query (plus the
BatchGetItem of the store); a read by path adds the path index Query and the BatchGetItem of the
organization's families at that path (the second row group: 20 other stores holding the path).

    PYTHONPATH=. .venv/bin/python bench/bench_store_fs.py
"""
from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

OPS = int(os.environ.get('BENCH_OPS', '30'))


def main() -> None:
    os.environ.pop('AWS_ENDPOINT_URL', None)
    os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='x', AWS_SECRET_ACCESS_KEY='x',
                      RATE_LIMIT_PER_MINUTE='100000000', RATE_LIMIT_BURST_PER_SECOND='100000000',
                      LOG_LEVEL='WARNING')
    from moto import mock_aws

    from bench.counting import count_calls
    with mock_aws():
        from chalice.test import Client

        from app import app
        from chalicelib.core.config import get_config
        from chalicelib.features.documents import blobs
        from chalicelib.features.identity.bootstrap import bootstrap
        bootstrap(api_key='bench-key')
        blobs.reset()
        blobs.client().create_bucket(Bucket=get_config().bucket_name)
        hdr = {'x-api-key': 'bench-key', 'content-type': 'application/json'}
        raw = {'x-api-key': 'bench-key', 'content-type': 'application/octet-stream'}

        with Client(app) as c:
            def post(path, body):
                return json.loads(c.http.post(path, headers=hdr, body=json.dumps(body)).body)
            project = post('/api/projects', {'name': 'p'})
            store = post('/api/document-stores', {'projectId': project['id'], 'name': 's', 'slug': 'bench'})
            base = '/api/stores/default/bench/None'
            c.http.post(f'{base}/fs?path=a.pdf', headers=raw, body=b'x' * 1000)
            family = json.loads(c.http.post(f"/api/document-stores/{store['id']}/upload?path=b.pdf", headers=raw,
                                            body=b'x' * 1000).body)
            counter = {'n': 0}

            def upload_fs():
                counter['n'] += 1
                c.http.post(f"{base}/fs?path=u{counter['n']}.pdf", headers=raw, body=b'x' * 1000)

            def upload_id():
                counter['n'] += 1
                c.http.post(f"/api/document-stores/{store['id']}/upload?path=v{counter['n']}.pdf", headers=raw,
                            body=b'x' * 1000)
            ops = {
                'GET /api/document-stores/{id} (floor)': lambda: c.http.get(
                    f"/api/document-stores/{store['id']}", headers=hdr),
                'GET /api/stores/{org}/{slug}': lambda: c.http.get('/api/stores/default/bench', headers=hdr),
                'POST .../upload (id route)': upload_id,
                'POST .../fs': upload_fs,
                'GET /document-families/{id}/content': lambda: c.http.get(
                    f"/api/document-families/{family['id']}/content", headers=hdr),
                'GET .../fs?path= (307)': lambda: c.http.get(f'{base}/fs?path=a.pdf', headers=hdr),
                'GET .../fs?path=&meta=true': lambda: c.http.get(f'{base}/fs?path=a.pdf&meta=true', headers=hdr),
            }
            print(f'\nStore file API, in-process moto ({OPS} calls each; 1,000-byte files)')
            print(f'{"operation":40}{"AWS calls":>10}  {"breakdown":<66}{"ms/op":>8}{"x floor":>9}')

            def run(rows):
                floor = None
                for name, fn in rows.items():
                    fn()   # warm
                    with count_calls() as calls:
                        t = time.perf_counter()
                        for _ in range(OPS):
                            fn()
                        ms = (time.perf_counter() - t) * 1000 / OPS
                    floor = floor or ms
                    per = {k: v / OPS for k, v in calls.items()}
                    breakdown = ', '.join(f'{k} {v:g}' for k, v in sorted(per.items()))
                    print(f'{name:40}{sum(per.values()):10.2f}  {breakdown:<66}{ms:8.2f}{ms / floor:9.1f}')
            run(ops)
            for i in range(20):   # the same path in 20 other stores of the organization
                other = post('/api/document-stores', {'projectId': project['id'], 'name': 's', 'slug': f'o{i}'})
                c.http.post(f"/api/document-stores/{other['id']}/upload?path=a.pdf", headers=raw, body=b'y')
            print('\nthe same path held by 20 other stores of the organization:')
            run({'GET /api/document-stores/{id} (floor)': ops['GET /api/document-stores/{id} (floor)'],
                 'GET .../fs?path= (307)': ops['GET .../fs?path= (307)']})


if __name__ == '__main__':
    main()
