"""`make run` for real: moto server + bootstrap + HTTP server in a child process, driven over
loopback like a user with curl would, then stopped with Ctrl-C (SIGINT)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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
        with urllib.request.urlopen(req, timeout=30) as resp:
            payload = resp.read()
            return resp.status, dict(resp.headers), json.loads(payload) if payload else None
    except urllib.error.HTTPError as err:
        payload = err.read()
        return err.code, dict(err.headers), json.loads(payload) if payload else None


def _start(state_dir) -> tuple[subprocess.Popen, int, int, str | None]:
    """`make run`'s process on free ports, read up to its ready line: (process, port, moto port,
    the generated admin key)."""
    port, moto_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith('AWS_')}
    env.update(PORT=str(port), MOTO_PORT=str(moto_port), PYTHONPATH=str(ROOT), LOCAL_STATE_DIR=str(state_dir),
               RATE_LIMIT_PER_MINUTE='100000', RATE_LIMIT_BURST_PER_SECOND='100000')
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    key = None
    for line in proc.stdout:
        if 'admin API key' in line:
            key = line.rsplit(' ', 1)[-1].strip()
        if 'platform API on' in line:
            break
    assert proc.poll() is None, 'server exited during start-up'
    return proc, port, moto_port, key


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    started = time.time()
    state = tmp_path_factory.mktemp('state')
    proc, port, moto_port, key = _start(state)
    ready = time.time() - started
    output: list[str] = []   # keep reading: a full pipe would block the server's log writes
    drain = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
    drain.start()
    yield {'base': f'http://127.0.0.1:{port}', 'key': key, 'proc': proc, 'ready': ready,
           'moto_port': moto_port, 'state': str(state), 'output': output}
    if proc.poll() is None:
        proc.kill()


def test_ready_quickly_with_a_generated_key_written_once(server):
    assert server['ready'] < 60
    assert server['key'] and server['key'].startswith('pk_')
    assert (Path(server['state']) / 'admin-api-key').read_text().strip() == server['key']


def test_the_curl_walkthrough(server):
    base, key = server['base'], server['key']
    status, _, org = _call(base, 'POST', '/api/organizations', {'name': 'Acme', 'slug': 'acme'}, key)
    assert status == 201
    status, _, project = _call(base, 'POST', '/api/projects',
                               {'name': 'P', 'organizationId': org['id'], 'options': {'x': 1}}, key)
    assert status == 201
    path = f'/api/projects/{project["id"]}'
    status, _, page = _call(base, 'GET', f"/api/projects?filter=organizationId=='{org['id']}'", key=key)
    assert status == 200 and [p['id'] for p in page['content']] == [project['id']]
    status, _, updated = _call(base, 'PUT', path, {'description': '', 'color': '#000000', 'name': None}, key)
    assert status == 400  # name is required: null cannot clear it
    status, _, updated = _call(base, 'PUT', path, {'description': '', 'changeSequence': 1}, key)
    assert status == 200 and updated['description'] == '' and updated['changeSequence'] == 2
    status, _, stale = _call(base, 'PUT', path, {'description': 'x', 'changeSequence': 1}, key)
    assert status == 409 and stale['changeSequence'] == 2
    status, _, seq = _call(base, 'GET', f'{path}/sequence', key=key)
    assert status == 200 and seq == 2
    assert _call(base, 'DELETE', path, key=key)[0] == 204
    assert _call(base, 'GET', path, key=key)[0] == 404


def test_make_run_serves_the_mcp_connector_at_its_local_url(server):
    base, key = server['base'], server['key']
    status, _, doc = _call(base, 'GET', '/.well-known/oauth-protected-resource/mcp')
    assert status == 200 and doc['resource'] == base + '/mcp'
    status, headers, _ = _call(base, 'POST', '/mcp', {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'})
    challenge = {k.lower(): v for k, v in headers.items()}['www-authenticate']
    assert status == 401 and f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge
    status, _, listed = _call(base, 'POST', '/mcp', {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'}, key,
                              headers={'mcp-protocol-version': '2025-11-25'})
    assert status == 200 and len(listed['result']['tools']) == 20


def test_errors_are_json_everywhere(server):
    base, key = server['base'], server['key']
    for method, path, expected in (('GET', '/api/nope', 404), ('GET', '/nothing/here', 404),
                                   ('PATCH', '/api/projects', 405), ('GET', '/api/projects', 401)):
        status, headers, body = _call(base, method, path, key=key if expected != 401 else None)
        assert status == expected, (method, path)
        assert set(body) >= {'error', 'message', 'status'} and body['status'] == expected
        assert headers['Content-Type'].startswith('application/json')
    status, _, body = _call(base, 'POST', '/api/projects', raw=b'{"name": ', key=key)
    assert status == 400 and body['status'] == 400
    status, _, body = _call(base, 'POST', '/api/projects', {'name': 'x'}, key=key,
                            headers={'content-type': 'text/plain'})
    assert status == 415 and body['status'] == 415
    long_filter = "name == '" + 'a' * 70_000 + "'"
    status, _, body = _call(base, 'GET', '/api/projects?filter=' + urllib.request.quote(long_filter), key=key)
    assert status == 400 and 'filter' in body['message']


def test_the_server_logs_one_json_line_per_request_and_no_key(server):
    base, key = server['base'], server['key']
    status, headers, _ = _call(base, 'GET', '/api/organizations', key=key)
    assert status == 200
    request_id = headers['X-Request-Id']
    deadline = time.time() + 10
    while time.time() < deadline and not any(request_id in line for line in server['output']):
        time.sleep(0.1)
    logged = [json.loads(line) for line in server['output'] if request_id in line]
    assert [(r['message'], r['route'], r['status']) for r in logged] == [('request', '/api/organizations', 200)]
    assert not [line for line in server['output'] if key in line]


def test_ctrl_c_stops_the_server_and_moto(server):
    proc = server['proc']
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) is not None
    with socket.socket() as s:
        assert s.connect_ex(('127.0.0.1', server['moto_port'])) != 0


def _closed(port: int, seconds: float) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(('127.0.0.1', port)) != 0:
                return True
        time.sleep(0.1)
    return False


def test_a_killed_server_leaves_no_moto_server_behind(tmp_path):
    """kill -9 of `make run` (a test's teardown, an OOM kill) gives it no chance to stop its moto
    server: the kernel does (PR_SET_PDEATHSIG, localdev/run.py start_moto)."""
    proc, _, moto_port, _ = _start(tmp_path)
    try:
        proc.kill()
        proc.wait(timeout=10)
        assert _closed(moto_port, 10), 'the moto server outlived its make run'
    finally:
        if proc.poll() is None:
            proc.kill()
