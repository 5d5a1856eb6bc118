"""Embedded references (kernel/embedding.py): AWS calls and latency per GET by id and per
list page, before (embedding switched off in the same process) and after, against a raw
get_item floor measured in the same run (in-process moto).

    PYTHONPATH=. .venv/bin/python bench/bench_embedding.py
"""
from __future__ import annotations

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

OPS = int(os.environ.get('BENCH_OPS', '100'))


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
        from chalicelib.features.identity.bootstrap import bootstrap
        from chalicelib.kernel import embedding
        from chalicelib.kernel.store import model
        boot = bootstrap(api_key='bench-key')
        hdr = {'x-api-key': 'bench-key', 'content-type': 'application/json'}
        tbl = model.configure()
        client = tbl._get_connection().connection.client

        with Client(app) as c:
            def post(path, body):
                return json.loads(c.http.post(path, headers=hdr, body=json.dumps(body)).body)
            status = post('/api/project-statuses', {'status': 'Live'})
            project = post('/api/projects', {'name': 'p', 'ownerId': boot['userId'], 'statusId': status['id']})
            for i in range(30):
                post('/api/projects', {'name': f'p{i}', 'ownerId': boot['userId'], 'statusId': status['id']})
                post('/api/tasks', {'title': f't{i}', 'projectId': project['id'], 'assigneeId': boot['userId']})
            group = post('/api/product-groups', {'name': 'g'})
            product = post('/api/products', {'name': 'pr', 'productGroupId': group['id']})
            key = {'pk': {'S': f'projects#{project["id"]}'}, 'sk': {'S': '#'}}
            ops = {
                'raw get_item (floor)': lambda: client.get_item(TableName=tbl.Meta.table_name, Key=key),
                'GET /api/projects/{id} (3 refs)': lambda: c.http.get(f'/api/projects/{project["id"]}', headers=hdr),
                'GET /api/products/{id} (1 ref)': lambda: c.http.get(f'/api/products/{product["id"]}', headers=hdr),
                'GET /api/projects?pageSize=30': lambda: c.http.get('/api/projects?pageSize=30', headers=hdr),
                'GET /api/tasks?pageSize=30': lambda: c.http.get(
                    f"/api/tasks?pageSize=30&filter=projectId=='{project['id']}'", headers=hdr),
            }
            real = embedding.embeds_of
            print(f'\nEmbedded references, in-process moto ({OPS} calls each; 30 records a page, every '
                  'record naming the same owner/status/project: the ids deduplicate to 1-3 keys)')
            print(f'{"operation":34}{"embedding":>10}{"AWS calls":>11}  {"breakdown":<52}{"ms/op":>8}{"x floor":>9}')
            floor = None
            for name, fn in ops.items():
                for mode in (('off', 'on') if 'floor' not in name else ('-',)):
                    embedding.embeds_of = (lambda path: {}) if mode == 'off' else real
                    fn()   # warm
                    with count_calls() as calls:
                        t = time.perf_counter()
                        for _ in range(OPS):
                            fn()
                        ms = (time.perf_counter() - t) * 1000 / OPS
                    embedding.embeds_of = real
                    floor = floor or ms
                    per = {k: v / OPS for k, v in calls.items()}
                    breakdown = ', '.join(f'{k} {v:g}' for k, v in sorted(per.items()))
                    print(f'{name:34}{mode:>10}{sum(per.values()):11.2f}  {breakdown:<52}{ms:8.2f}{ms / floor:9.1f}')


if __name__ == '__main__':
    main()
