"""Big documents in parallel page ranges (issue 50; features/parsing/fanout.py; figures in
bench/README.md "Big documents (issue 50)", the model in docs/scale.md "The document path").

1. **Wall time with 1, 2 and 4 local workers**: a scan PDF of ``--pages`` pages (default 40: the
   one scanned page of the corpus, ``scanned-page.pdf``, repeated with pypdfium2's
   ``import_pages``, as bench_parsing.py repeats lppl.pdf for its big PDFs) uploaded to a local
   stack (the moto server of `make run`, localdev/moto_server.py) whose queues are worked by N
   worker processes (localdev/workers.py, what `LOCAL_WORKERS=N` starts), with the default
   ``FanOut`` (10 pages a scan range, 8 in flight). Measured: upload to the parse run's end,
   and the critical path: the slowest range's read time (each range's item records it) plus
   the assembly (part 2's time, in-process).
2. **What the fan-out costs** (in-process moto, calls counted on every botocore client): a text
   PDF of 100 pages (lppl.pdf repeated) with 10-page ranges, the same number of ranges as a
   100-page scan (OCR changes the time, not the calls): per range message, per look, the
   assembly (the look that stores the version), and the whole run; DynamoDB calls and write
   units (bench/bench_write_cost.py's rules), S3 GET/PUT, SQS sends.

    PYTHONPATH=. .venv/bin/python bench/bench_parse_fanout.py [--pages 40] [--workers 1,2,4] [--costs-only]

On the shared 2-core test machine, 4 workers cannot run more than 2 ranges at once: the figures
say how many cores there were (``os.cpu_count()``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / 'tests' / 'fixtures' / 'documents'
ADMIN = 'bench-fanout-admin-key-0123456789abcdef'


def repeated(name: str, pages: int) -> bytes:
    import pypdfium2 as pdfium
    source = pdfium.PdfDocument((CORPUS / name).read_bytes())
    out = pdfium.PdfDocument.new()
    count = len(source)
    for start in range(0, pages, count):
        out.import_pages(source, list(range(min(count, pages - start))))
    with tempfile.NamedTemporaryFile(suffix='.pdf') as handle:
        out.save(handle.name)
        return Path(handle.name).read_bytes()


# ----------------------------------------------------------------------------- 1. local workers

def _env(local: Path) -> dict[str, str]:
    return {'AWS_DEFAULT_REGION': 'us-east-1', 'AWS_ACCESS_KEY_ID': 'local', 'AWS_SECRET_ACCESS_KEY': 'local',
            'LOCAL_PERSIST': 'off', 'LOCAL_STATE_DIR': str(local), 'LOG_LEVEL': 'WARNING',
            'RATE_LIMIT_PER_MINUTE': '100000000', 'RATE_LIMIT_BURST_PER_SECOND': '100000000'}


def wall(pages: int, workers: int) -> dict[str, Any]:
    """One fresh local stack, ``workers`` worker processes, one scan of ``pages`` pages."""
    local = Path(tempfile.mkdtemp(prefix='fanout-bench-'))
    os.environ.update(_env(local))
    os.environ.pop('AWS_ENDPOINT_URL', None)
    from localdev import run as localrun
    moto = localrun.prepare_environment()
    spawned: list[subprocess.Popen] = []
    try:
        localrun.create_resources()
        from chalice.test import Client

        import app as handlers
        from chalicelib.core.config import get_config
        from chalicelib.features.identity.bootstrap import bootstrap
        from chalicelib.features.parsing import ranges_store
        from localdev import workers as local_workers
        from localdev.pollers import StreamReader
        cfg = get_config()
        # loopback only: the moto server this run started, never AWS
        assert str(cfg.endpoint_url).startswith('http://127.0.0.1:'), cfg.endpoint_url
        platform = bootstrap(api_key=ADMIN)
        stream = StreamReader(handlers.outbox_publisher, cfg.table_name, region=cfg.region,
                              endpoint_url=cfg.endpoint_url)
        spawned = [local_workers.spawn(cfg.activity_queue_name, cfg.ocr_queue_name or None) for _ in range(workers)]
        data = repeated('scanned-page.pdf', pages)
        headers = {'x-api-key': ADMIN, 'content-type': 'application/json'}
        with Client(handlers.app) as c:
            def post(path, body):
                r = c.http.post(path, headers=headers, body=json.dumps(body))
                assert r.status_code == 201, r.body
                return json.loads(r.body)
            project = post('/api/projects', {'organizationId': platform['organizationId'], 'name': 'fan-out'})
            store = post('/api/document-stores', {'projectId': project['id'], 'name': 'inbox', 'slug': 'inbox'})
            time.sleep(3)   # the workers' cold start (import app) is not the parse's
            started = time.monotonic()
            r = c.http.post(f"/api/document-stores/{store['id']}/upload?path=scan.pdf", body=data,
                            headers={'x-api-key': ADMIN, 'content-type': 'application/pdf'})
            assert r.status_code == 201, r.body
            family = json.loads(r.body)
            run = None
            while time.monotonic() - started < 1800:
                stream.poll_once()
                listed = json.loads(c.http.get(f"/api/executions?filter=documentFamilyId == '{family['id']}'",
                                               headers=headers).body)['content']
                run = next((e for e in listed if (e.get('metadata') or {}).get('stage') == 'parse'), None)
                if run and run['status'] in ('SUCCEEDED', 'FAILED'):
                    break
                time.sleep(0.2)
            seconds = time.monotonic() - started
        assert run and run['status'] == 'SUCCEEDED', run and run['statusMessages']
        recorded = ranges_store.ranges(run['id'])
        reads = [sum(p[6] for p in r['parts']) for r in recorded.values()]
        return {'workers': workers, 'pages': pages, 'ranges': len(recorded), 'seconds': round(seconds, 1),
                'slowest': round(max(reads), 2), 'sumOfReads': round(sum(reads), 1),
                'output': run['output']['parse']}
    finally:
        for process in spawned:
            process.terminate()
        for process in spawned:   # a worker inside a range's OCR stops when it ends: not waited for
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        if moto is not None:
            moto.terminate()
            moto.wait(timeout=60)
        os.environ.pop('AWS_ENDPOINT_URL', None)


# ----------------------------------------------------------------------------- 2. costs

DYNAMO_WRITES = ('PutItem', 'UpdateItem', 'DeleteItem', 'TransactWriteItems', 'BatchWriteItem')
DYNAMO = ('GetItem', 'BatchGetItem', 'Query', 'Scan', *DYNAMO_WRITES)


def costs(pages: int = 100, size: int = 10) -> dict[str, Any]:
    os.environ.pop('AWS_ENDPOINT_URL', None)
    os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',
                      TABLE_NAME='platform-bench-fanout', LOG_LEVEL='WARNING', RATE_LIMIT_PER_MINUTE='100000000',
                      RATE_LIMIT_BURST_PER_SECOND='100000000')
    from chalice.test import Client
    from moto import mock_aws

    from bench.bench_write_cost import WriteMeter
    from bench.counting import count_calls
    from chalicelib.features.documents import blobs
    from chalicelib.kernel.store import model
    model.reset()
    blobs.reset()
    data = repeated('lppl.pdf', pages)
    phases: dict[str, list[tuple[Counter, int, float]]] = {'range': [], 'look': [], 'assembly': [], 'plan': []}
    with mock_aws():
        import app
        from chalicelib.core.config import get_config
        from chalicelib.features.identity.bootstrap import bootstrap
        from chalicelib.features.parsing import stage
        from chalicelib.features.parsing.readers import limits
        from chalicelib.features.work import parse_stage
        from tests import work_support
        from tests.work_support import Work
        platform = bootstrap(api_key=ADMIN)
        work_support.create_resources()
        blobs.client().create_bucket(Bucket=get_config().bucket_name)
        meter = WriteMeter(model.client(), model.configure().Meta.table_name)
        limits.FANOUT = limits.FanOut(text_range_pages=size, check_seconds=0)

        def counted(name, fn, pick=None):
            def wrapper(*args, **kwargs):
                meter.clear()
                started = time.perf_counter()
                with count_calls() as calls:
                    out = fn(*args, **kwargs)
                which = pick(out) if pick else name
                phases[which].append((Counter(dict(calls)), meter.units(), time.perf_counter() - started))
                return out
            return wrapper
        parse_stage.run_range = counted('range', parse_stage.run_range)
        stage._look = counted('look', stage._look, lambda out: 'look' if out.kind == 'continue' else 'assembly')
        stage._plan = counted('plan', stage._plan)
        with Client(app.app) as c:
            work = Work()
            headers = {'x-api-key': ADMIN, 'content-type': 'application/json'}

            def post(path, body):
                r = c.http.post(path, headers=headers, body=json.dumps(body))
                assert r.status_code == 201, r.body
                return json.loads(r.body)
            project = post('/api/projects', {'organizationId': platform['organizationId'], 'name': 'fan-out'})
            store = post('/api/document-stores', {'projectId': project['id'], 'name': 'inbox', 'slug': 'inbox'})
            work.publish_outbox()
            work.drain(seconds=5)
            r = c.http.post(f"/api/document-stores/{store['id']}/upload?path=big.pdf", body=data,
                            headers={'x-api-key': ADMIN, 'content-type': 'application/pdf'})
            assert r.status_code == 201, r.body
            meter.clear()
            with count_calls() as total:
                for _ in range(200):
                    if not work.publish_outbox() + work.drain(seconds=5):
                        break
            total_wcu = meter.units()
    model.reset()
    blobs.reset()
    return {'pages': pages, 'size': size, 'phases': phases, 'total': (Counter(dict(total)), total_wcu)}


def _line(calls: Counter, wcu: int, n: int = 1) -> str:
    def per(keys) -> float:
        return sum(v for k, v in calls.items() if k in keys) / n
    return (f"ddb {per(DYNAMO):5.1f} (writes {per(DYNAMO_WRITES):4.1f}, {wcu / n:5.1f} WCU)  "
            f"S3 GET {per(('GetObject',)):4.1f} PUT {per(('PutObject',)):4.1f} HEAD {per(('HeadObject',)):4.1f}  "
            f"SQS sends {per(('SendMessage', 'SendMessageBatch')):4.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--pages', type=int, default=40)
    parser.add_argument('--workers', default='1,2,4')
    parser.add_argument('--costs-only', action='store_true')
    parser.add_argument('--wall', type=int, help='one wall-time run with this many workers (JSON out)')
    args = parser.parse_args()
    if args.wall:
        print('WALL ' + json.dumps(wall(args.pages, args.wall)), flush=True)
        return
    print(f'cores: {os.cpu_count()}', flush=True)
    result = costs()
    print(f"\n2. costs: {result['pages']}-page text PDF, ranges of {result['size']} pages (in-process moto)")
    for name, rows in result['phases'].items():
        if not rows:
            continue
        calls = sum((r[0] for r in rows), Counter())
        wcu = sum(r[1] for r in rows)
        secs = sum(r[2] for r in rows) / len(rows)
        print(f'  {name:<9} x{len(rows):<3} per call: {_line(calls, wcu, len(rows))}  {secs * 1000:7.1f} ms')
    calls, wcu = result['total']
    print(f"  whole run (engine, stream, events included): {_line(calls, wcu)}", flush=True)
    if args.costs_only:
        return
    print(f'\n1. wall time: a {args.pages}-page scan, default FanOut (10 pages a range, 8 in flight)')
    for workers in (int(w) for w in args.workers.split(',')):
        # a process of its own per stack: a fresh config and clients (part 2's point at in-process moto)
        out = subprocess.run([sys.executable, __file__, '--pages', str(args.pages), '--wall', str(workers)],
                             capture_output=True, text=True, env={**os.environ, 'PYTHONPATH': str(ROOT)}, check=False)
        line = next((x for x in out.stdout.splitlines() if x.startswith('WALL ')), None)
        if line is None:
            print(out.stdout[-2000:], out.stderr[-3000:])
            raise SystemExit(f'the run with {workers} worker(s) failed')
        row = json.loads(line[5:])
        print(f"  {workers} worker(s): {row['seconds']:6.1f} s upload->parsed; {row['ranges']} ranges, slowest range "
              f"{row['slowest']:5.1f} s, sum of range reads {row['sumOfReads']:6.1f} s; "
              f"{row['output']['nodeCount']} nodes", flush=True)


if __name__ == '__main__':
    main()
