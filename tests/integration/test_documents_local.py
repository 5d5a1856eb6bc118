"""Documents through `make run` for real: the local server and its own moto server on loopback.
The parts go to the presigned URLs with plain HTTP PUTs (no SDK), the content comes back by
following the 307 with a plain HTTP client, byte for byte. Every address here is 127.0.0.1."""
from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MIB = 2 ** 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _call(base, method, path, body=None, key=None, raw=None, headers=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header('content-type', 'application/json')
    if key:
        req.add_header('x-api-key', key)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            payload = resp.read()
            return resp.status, dict(resp.headers), json.loads(payload) if payload else None
    except urllib.error.HTTPError as err:
        payload = err.read()
        return err.code, dict(err.headers), json.loads(payload) if payload else None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    port, moto_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith('AWS_')}
    env.update(PORT=str(port), MOTO_PORT=str(moto_port), PYTHONPATH=str(ROOT),
               LOCAL_STATE_DIR=str(tmp_path_factory.mktemp('state')),
               RATE_LIMIT_PER_MINUTE='100000', RATE_LIMIT_BURST_PER_SECOND='100000',
               # 20 deltas racing on one document retry each other in turn: on 2 cores shared with
               # the in-process group (make test) the last of them can wait past the 8 s default
               # for CPU, not for work of its own; the budget itself is tested in test_work_budget.py
               REQUEST_BUDGET_SECONDS='20')
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    key = None
    for line in proc.stdout:
        if 'admin API key' in line:
            key = line.rsplit(' ', 1)[-1].strip()
        if 'platform API on' in line:
            break
    assert proc.poll() is None, 'server exited during start-up'
    output: list[str] = []
    threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True).start()
    base = f'http://127.0.0.1:{port}'
    status, _, org = _call(base, 'POST', '/api/organizations', {'name': 'Docs', 'slug': 'docs-local'}, key)
    assert status == 201
    status, _, project = _call(base, 'POST', '/api/projects', {'name': 'P', 'organizationId': org['id']}, key)
    status, _, store = _call(base, 'POST', '/api/document-stores', {'projectId': project['id'], 'name': 'S'}, key)
    assert status == 201, store
    yield {'base': base, 'key': key, 'store': store, 'moto': f'http://127.0.0.1:{moto_port}'}
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def _put(url: str, data: bytes) -> str:
    assert url.startswith('http://127.0.0.1:')
    # urllib would label the body application/x-www-form-urlencoded, which moto then parses as a form
    req = urllib.request.Request(url, data=data, method='PUT', headers={'Content-Type': 'application/octet-stream'})
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 200
        return resp.headers['ETag']


def _follow(server, family_id) -> bytes:
    opener = urllib.request.build_opener(_NoRedirect)
    req = urllib.request.Request(f"{server['base']}/api/document-families/{family_id}/content")
    req.add_header('x-api-key', server['key'])
    try:
        opener.open(req, timeout=30)
        raise AssertionError('expected a redirect')
    except urllib.error.HTTPError as err:
        assert err.code == 307
        location = err.headers['Location']
    assert location.startswith(server['moto'] + '/')
    with urllib.request.urlopen(location, timeout=60) as resp:   # a plain client, no credential
        return resp.read()


def test_several_5_mib_parts_through_presigned_urls_read_back_byte_identical(server):
    base, key, store = server['base'], server['key'], server['store']
    rng = random.Random(11)
    chunks = [rng.randbytes(5 * MIB) for _ in range(3)] + [rng.randbytes(123_457)]
    total = b''.join(chunks)
    query = urllib.parse.urlencode({'path': 'scans/big file.bin', 'contentType': 'application/octet-stream',
                                    'contentLength': len(total)})
    status, _, session = _call(base, 'POST', f"/api/document-stores/{store['id']}/multipart-upload-request?{query}",
                               key=key)
    assert status == 200, session
    status, _, urls = _call(base, 'POST', f"/api/document-stores/{store['id']}/multipart-upload-part-urls",
                            {**session, 'partNumbers': [1, 2, 3, 4]}, key)
    assert status == 200, urls
    parts = [{'partNumber': p['partNumber'], 'etag': _put(p['url'], chunks[p['partNumber'] - 1])}
             for p in reversed(urls['parts'])]   # any order: complete sorts them
    status, _, family = _call(base, 'POST', f"/api/document-stores/{store['id']}/multipart-upload-complete",
                              {**session, 'parts': parts}, key)
    assert status == 201, family
    assert family['size'] == len(total) and family['path'] == 'scans/big file.bin'
    back = _follow(server, family['id'])
    assert len(back) == len(total) and hashlib.sha256(back).digest() == hashlib.sha256(total).digest()
    status, _, again = _call(base, 'POST', f"/api/document-stores/{store['id']}/multipart-upload-complete",
                             {**session, 'parts': parts}, key)
    assert status == 201 and again['id'] == family['id']


def test_a_small_file_round_trips_byte_identical(server):
    base, key, store = server['base'], server['key'], server['store']
    payload = bytes(range(256)) * 4096 + b'\x00\xff\r\n'
    status, _, family = _call(base, 'POST', f"/api/document-stores/{store['id']}/upload?path=a/b.bin", key=key,
                              raw=payload, headers={'content-type': 'application/octet-stream'})
    assert status == 201, family
    assert _follow(server, family['id']) == payload


def test_twenty_deltas_in_parallel_all_land(server):
    """20 deltas saved at once on one document (the local server is threaded, moto applies one
    request at a time): each is APPLIED on its own version, or retried until it is; the final
    document holds every operation."""
    from concurrent.futures import ThreadPoolExecutor
    base, key = server['base'], server['key']
    status, _, project = _call(base, 'GET', f"/api/projects/{server['store']['projectId']}", key=key)
    status, _, family = _call(base, 'POST', '/api/document-families',
                              {'projectId': project['id'], 'path': 'shared.doc'}, key)
    assert status == 201
    doc = f"/api/document-families/{family['id']}/document"
    assert _call(base, 'PUT', doc, {'version': 0, 'nodes': [{'id': 'root'}]}, key)[0] == 200

    def save(i):
        return _call(base, 'POST', '/api/linked-deltas', {'documentFamilyId': family['id'], 'operations': [
            {'op': 'add', 'node': {'id': f'n{i}', 'parentId': 'root', 'index': i, 'content': f'line {i}'}}]}, key)
    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(save, range(20)))
    assert [r[0] for r in results] == [201] * 20, [r[2] for r in results if r[0] != 201]
    assert {r[2]['state'] for r in results} == {'APPLIED'}
    assert sorted(r[2]['appliedVersion'] for r in results) == list(range(2, 22))
    status, _, final = _call(base, 'GET', doc, key=key)
    assert final['version'] == 21
    assert [n['id'] for n in final['nodes']] == ['root'] + [f'n{i}' for i in range(20)]
