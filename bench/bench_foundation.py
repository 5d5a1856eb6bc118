"""Foundation figures: cold-start import time of app.py against a bare Chalice+boto3 app, and
DynamoDB calls and latency per operation against a raw get_item floor (same moto, same run).

    PYTHONPATH=. .venv/bin/python bench/bench_foundation.py
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

RUNS = int(os.environ.get('BENCH_IMPORT_RUNS', '15'))
OPS = int(os.environ.get('BENCH_OPS', '200'))

BARE = ("import time; t=time.perf_counter(); from chalice import Chalice; import boto3; "
        "Chalice(app_name='bare'); print(time.perf_counter()-t)")
OURS = "import time; t=time.perf_counter(); import app; print(time.perf_counter()-t)"
# The SQS worker's Lambda imports app.py (its handler is app.activity_start_worker) and then the
# handler module; what its first message loads (Powertools' batch utility, the work service) is
# the next row.
WORKER = ("import time; t=time.perf_counter(); import app; import chalicelib.front.handlers; "
          "print(time.perf_counter()-t)")
WORKER_FIRST = ("import time; t=time.perf_counter(); import app; import chalicelib.front.handlers; "
                "import aws_lambda_powertools.utilities.batch; import chalicelib.features.work.service; "
                "print(time.perf_counter()-t)")
FIRST_REQUEST = """
import os, time, json
os.environ.pop('AWS_ENDPOINT_URL', None)
os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='x', AWS_SECRET_ACCESS_KEY='x')
from moto import mock_aws
with mock_aws():
    from chalicelib.features.identity.bootstrap import bootstrap
    bootstrap(api_key='k')
    t = time.perf_counter()
    import app
    from chalice.test import Client
    with Client(app.app) as c:
        r = c.http.get('/api/organizations', headers={'x-api-key': 'k'})
    print(time.perf_counter() - t)
"""


def _timed(code: str) -> list[float]:
    out = []
    for _ in range(RUNS):
        res = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, 'PYTHONPATH': ROOT})
        out.append(float(res.stdout.strip().splitlines()[-1]) * 1000)
    return out


def import_times() -> None:
    bare, ours, worker, first = _timed(BARE), _timed(OURS), _timed(WORKER), _timed(WORKER_FIRST)
    floor = statistics.median(bare)
    print(f'\nCold start: import time over {RUNS} fresh interpreters (ms)')
    print(f'{"":44}{"median":>10}{"p90":>10}{"x floor":>10}')
    for name, xs in (('bare Chalice + boto3 (floor)', bare), ('app.py (API and every handler)', ours),
                     ('worker: app.py + front/handlers.py', worker),
                     ('worker before its 1st message (+batch, work)', first)):
        xs = sorted(xs)
        print(f'{name:44}{statistics.median(xs):10.1f}{xs[int(len(xs) * 0.9) - 1]:10.1f}'
              f'{statistics.median(xs) / floor:10.2f}')


def per_operation() -> None:
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
        from chalicelib.kernel.store import model
        bootstrap(api_key='bench-key')
        hdr = {'x-api-key': 'bench-key', 'content-type': 'application/json'}
        model = model.configure()
        client = model._get_connection().connection.client
        with Client(app) as c:
            project = json.loads(c.http.post('/api/projects', headers=hdr, body=json.dumps({'name': 'p'})).body)
            ids = [json.loads(c.http.post('/api/projects', headers=hdr, body=json.dumps({'name': f'n{i}'})).body)['id']
                   for i in range(20)]
            key = {'pk': {'S': f'projects#{project["id"]}'}, 'sk': {'S': '#'}}
            ops = {
                'raw get_item (floor)': lambda i: client.get_item(TableName=model.Meta.table_name, Key=key),
                'GET /api/projects/{id}': lambda i: c.http.get(f'/api/projects/{project["id"]}', headers=hdr),
                'POST /api/projects': lambda i: c.http.post('/api/projects', headers=hdr,
                                                            body=json.dumps({'name': f'x{i}'})),
                'PUT /api/projects/{id}': lambda i: c.http.put(f'/api/projects/{project["id"]}', headers=hdr,
                                                               body=json.dumps({'description': str(i)})),
                'GET /api/projects (page 0)': lambda i: c.http.get('/api/projects', headers=hdr),
                'DELETE /api/projects/{id}': lambda i: c.http.delete(f'/api/projects/{ids[i % len(ids)]}', headers=hdr),
            }
            print(f'\nPer operation, in-process moto ({OPS} calls each; DELETE {len(ids)}):')
            print(f'{"operation":30}{"AWS calls":>11}{"  breakdown":<48}{"ms/op":>8}{"x floor":>9}')
            floor = None
            for name, fn in ops.items():
                n = len(ids) if name.startswith('DELETE') else OPS
                with count_calls() as calls:
                    t = time.perf_counter()
                    for i in range(n):
                        fn(i)
                    ms = (time.perf_counter() - t) * 1000 / n
                floor = floor or ms
                per = {k: v / n for k, v in calls.items()}
                breakdown = ', '.join(f'{k} {v:g}' for k, v in sorted(per.items()))
                print(f'{name:30}{sum(per.values()):11.2f}  {breakdown:<46}{ms:8.2f}{ms / floor:9.1f}')


if __name__ == '__main__':
    import_times()
    per_operation()
