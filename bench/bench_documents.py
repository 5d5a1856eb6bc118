"""Documents: upload throughput through presigned part URLs against a raw boto3 upload_part loop
on the same moto server (same run, same part sizes), and the AWS calls one complete, one delta
save and one batch save of 10 families make.

    PYTHONPATH=. .venv/bin/python bench/bench_documents.py [--parts 6] [--rounds 3]

The API runs in process (chalice's test client) against the local stack's moto server on a
loopback port (localdev/moto_server.py), so its S3 and DynamoDB calls are real HTTP calls; the
parts are PUT with plain HTTP (urllib), one after the other like the boto3 loop. Calls are
counted per operation name with botocore hooks (bench/counting.py); each request's
authentication and rate-limit calls are included and shown apart.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MIB = 2 ** 20
KEY = 'pk_bench-documents-key'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _start_moto() -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.moto_server', '-H', '127.0.0.1', '-p', str(port)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f'http://127.0.0.1:{port}'
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(f'{url}/moto-api/', timeout=1)
            return proc, url
        except Exception:  # noqa: BLE001 - not up yet
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit('moto server did not start') from None
            time.sleep(0.1)


def _put(url: str, data: bytes, conn: http.client.HTTPConnection | None = None) -> str:
    """PUT ``data`` to a presigned URL with plain HTTP (http.client; a kept-alive connection when
    given, as any HTTP client library keeps one, like boto3's pool)."""
    parts = urllib.parse.urlsplit(url)
    own = conn is None
    conn = conn or http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    conn.request('PUT', f'{parts.path}?{parts.query}', body=data, headers={'Content-Type': 'application/octet-stream'})
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200, resp.status
    if own:
        conn.close()
    return resp.headers['ETag']


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--parts', type=int, default=6)
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args()
    moto, url = _start_moto()
    os.environ.update(AWS_ENDPOINT_URL=url, AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench',
                      AWS_SECRET_ACCESS_KEY='bench', TABLE_NAME='platform-bench-docs', LOG_LEVEL='WARNING',
                      RATE_LIMIT_PER_MINUTE='100000000', RATE_LIMIT_BURST_PER_SECOND='100000000')
    try:
        run(args, url)
    finally:
        moto.terminate()
        moto.wait(timeout=10)


def run(args, url: str) -> None:
    from chalice.test import Client

    from app import app
    from bench.counting import count_calls
    from chalicelib.core.config import get_config
    from chalicelib.features.documents import blobs
    from chalicelib.features.identity.bootstrap import bootstrap
    from localdev.run import create_resources
    create_resources()
    boot = bootstrap(api_key=KEY)
    s3 = blobs.client()
    bucket = get_config().bucket_name
    chunk = os.urandom(5 * MIB)
    with Client(app) as client:
        def call(method, path, body=None, raw=None, ctype='application/json'):
            payload = raw if raw is not None else (json.dumps(body) if body is not None else None)
            r = client.http.request(method, path, headers={'x-api-key': KEY, 'content-type': ctype}, body=payload)
            assert r.status_code < 300, (path, r.status_code, r.body[:300])
            return json.loads(r.body) if r.body else None
        project = call('POST', '/api/projects', {'name': 'bench', 'organizationId': boot['organizationId']})
        store = call('POST', '/api/document-stores', {'projectId': project['id'], 'name': 's'})
        base = f"/api/document-stores/{store['id']}"

        # --- throughput: presigned part PUTs vs boto3 upload_part, alternating rounds
        presigned, raw = [], []
        total = args.parts * len(chunk)
        for _ in range(args.rounds):
            session = call('POST', f'{base}/multipart-upload-request')
            urls = call('POST', f'{base}/multipart-upload-part-urls',
                        {**session, 'partNumbers': list(range(1, args.parts + 1))})
            target = urllib.parse.urlsplit(urls['parts'][0]['url'])
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
            began = time.perf_counter()
            parts = [{'partNumber': p['partNumber'], 'etag': _put(p['url'], chunk, conn)} for p in urls['parts']]
            presigned.append(time.perf_counter() - began)
            conn.close()
            call('POST', f'{base}/multipart-upload-complete', {**session, 'parts': parts})
            key = f'bench/raw-{time.time_ns()}'
            upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)['UploadId']
            began = time.perf_counter()
            done = [{'PartNumber': n, 'ETag': s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                                             PartNumber=n, Body=chunk)['ETag']}
                    for n in range(1, args.parts + 1)]
            raw.append(time.perf_counter() - began)
            s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={'Parts': done})
        p_rate, r_rate = total / MIB / min(presigned), total / MIB / min(raw)
        print(f'\nupload of {args.parts} x 5 MiB parts, best of {args.rounds} (moto on loopback)')
        print(f"{'path':<42}{'MiB/s':>10}")
        print(f"{'presigned part URLs, plain HTTP PUT':<42}{p_rate:>10.1f}")
        print(f"{'boto3 upload_part loop (floor)':<42}{r_rate:>10.1f}")
        print(f"{'ratio (target >= 0.8)':<42}{p_rate / r_rate:>10.2f}")

        # --- AWS calls per operation
        def counted(label, fn):
            with count_calls() as calls:
                fn()
            return label, calls

        rows = []
        session = call('POST', f'{base}/multipart-upload-request')
        urls = call('POST', f'{base}/multipart-upload-part-urls', {**session, 'partNumbers': [1]})
        parts = [{'partNumber': 1, 'etag': _put(urls['parts'][0]['url'], b'small file')}]
        rows.append(counted('multipart-upload-complete', lambda: call(
            'POST', f'{base}/multipart-upload-complete', {**session, 'parts': parts})))
        rows.append(counted('upload (small file, 10 KB)', lambda: call(
            'POST', f'{base}/upload', raw=b'x' * 10_000, ctype='application/octet-stream')))
        family = call('POST', '/api/document-families', {'projectId': project['id'], 'path': 'd'})
        call('PUT', f"/api/document-families/{family['id']}/document", {'version': 0, 'nodes': [{'id': 'root'}]})
        op = {'op': 'add', 'node': {'id': 'n1', 'parentId': 'root'}}
        rows.append(counted('linked delta save (1 add)', lambda: call(
            'POST', '/api/linked-deltas', {'documentFamilyId': family['id'], 'operations': [op]})))
        fams = [call('POST', '/api/document-families', {'projectId': project['id'], 'path': f'b{i}'})['id']
                for i in range(10)]
        label = call('POST', '/api/labels', {'organizationId': boot['organizationId'], 'name': 'L'})
        rows.append(counted('batch save, 10 families (a label each)', lambda: call(
            'POST', '/api/batch-update', {'projectId': project['id'], 'documentFamilyIds': fams,
                                          'labelUpdates': {'newLabels': [label['id']]}})))
        # a family's DELETE: its dependents read before the family's delete and, since the chaos
        # run of 1235cd8, once more after it (documents/service.py sweep_dependents); "before"
        # is the same request with that second read switched off, in the same run
        from chalicelib.features.documents import service as documents
        sweep = documents.sweep_dependents
        for label_, second in (('DELETE family (upload): one read of dependents', False),
                               ('DELETE family (upload): read again after', True)):
            doomed = call('POST', f'{base}/upload', raw=b'y' * 1_000, ctype='application/octet-stream')
            documents.sweep_dependents = sweep if second else (lambda family, principal: None)
            try:
                rows.append(counted(label_, lambda d=doomed: call('DELETE', f"/api/document-families/{d['id']}")))
            finally:
                documents.sweep_dependents = sweep
        rows.append(counted('GET /api/projects/{id} (auth + rate limit only)', lambda: call(
            'GET', f"/api/projects/{project['id']}")))
        print('\nAWS calls per request (whole request: authentication and rate limit included)')
        print(f"{'request':<50}{'DynamoDB':>9}{'S3':>5}  by operation")
        s3_ops = {'CreateMultipartUpload', 'CompleteMultipartUpload', 'HeadObject', 'PutObject', 'GetObject',
                  'DeleteObjects', 'ListObjectsV2', 'AbortMultipartUpload', 'UploadPart'}
        for name, calls in rows:
            c = Counter(calls)
            s3n = sum(v for k, v in c.items() if k in s3_ops)
            print(f"{name:<50}{sum(c.values()) - s3n:>9}{s3n:>5}  {dict(sorted(c.items()))}")


if __name__ == '__main__':
    main()
