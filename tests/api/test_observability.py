"""Observability through HTTP: one JSON log line per request carrying the request id (the
X-Request-Id the client gets), route, method, status, duration, user and organization; every
line JSON; no credential in any line, even when an exception message carries one; metrics only
when enabled; tracing never loaded when off; the health route."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

from tests.conftest import ADMIN_KEY


def _lines(capsys) -> list[dict]:
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip()]
    parsed = []
    for line in lines:
        parsed.append(json.loads(line))   # every line is JSON, or this raises
    return parsed


def _requests(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line.get('message') == 'request']


def test_one_json_line_per_request_with_its_context(api, org_id, capsys):
    capsys.readouterr()
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id})
    got = api.get(f"/api/projects/{project.json['id']}")
    lines = _lines(capsys)
    requests = _requests(lines)
    assert len(requests) == 2
    create, read = requests
    assert create['method'] == 'POST' and create['route'] == '/api/projects' and create['status'] == 201
    assert read['route'] == '/api/projects/{id}' and read['status'] == 200
    assert read['request_id'] == got.headers['x-request-id'] and read['correlation_id'] == read['request_id']
    assert create['request_id'] != read['request_id']
    assert read['organization_id'] == org_id and read['user_id'] and read['duration_ms'] >= 0
    assert all(line['service'] == 'platform-api' and line['level'] for line in lines)


def test_a_failing_request_logs_json_with_its_id_and_no_secret(api, org_id, capsys, monkeypatch):
    from chalicelib.kernel import crud

    def broken(*args, **kwargs):
        raise RuntimeError(f'boom with {ADMIN_KEY} and Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln')
    monkeypatch.setattr(crud, 'get', broken)
    capsys.readouterr()
    r = api.get(f'/api/projects/{uuid.uuid4()}', headers={'authorization': 'Bearer eyJhbGciOi.eyJzdWIi.sig'})
    assert r.status == 500 and r.headers['x-request-id'] in r.json['message']
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert any('boom' in json.dumps(line) for line in lines), 'the traceback was not logged'
    assert all(line.get('request_id') == r.headers['x-request-id'] for line in lines)
    for secret in (ADMIN_KEY, 'eyJhbGciOiJSUzI1NiJ9', 'eyJzdWIiOiJ4In0'):
        assert secret not in out


def test_refused_and_public_requests_are_logged_too(api, capsys):
    capsys.readouterr()
    assert api.get('/api/projects', key='pk_wrong-key-1234567890').status == 401
    assert api.get('/api/health', key=None).status == 200
    requests = _requests(_lines(capsys))
    assert [r['status'] for r in requests] == [401, 200]
    assert 'user_id' not in requests[0]


def test_health(api, monkeypatch):
    ok = api.get('/api/health', key=None)
    assert ok.status == 200 and set(ok.json) == {'status', 'version'} and ok.json['status'] == 'ok'
    from chalicelib.kernel.store import table

    def down():
        raise ConnectionError('endpoint unreachable: 10.1.2.3')
    monkeypatch.setattr(table, 'ping', down)
    bad = api.get('/api/health', key=None)
    assert bad.status == 503 and bad.json['status'] == 503 and set(bad.json) == {'error', 'message', 'status'}
    assert '10.1.2.3' not in bad.body.decode() and bad.headers.get('retry-after')


def test_metrics_only_when_enabled(api, capsys, monkeypatch):
    from chalicelib.core.config import reset_config
    capsys.readouterr()
    api.get('/api/projects')
    assert not [line for line in _lines(capsys) if '_aws' in line]
    monkeypatch.setenv('METRICS_ENABLED', 'true')
    reset_config()
    try:
        api.get('/api/projects')
        emf = [line for line in _lines(capsys) if '_aws' in line]
    finally:
        monkeypatch.delenv('METRICS_ENABLED')
        reset_config()
    names = {m['Name'] for line in emf for d in line['_aws']['CloudWatchMetrics'] for m in d['Metrics']}
    assert 'Requests' in names
    request_metric = next(line for line in emf if 'Requests' in line)
    assert request_metric['route'] == '/api/projects' and request_metric['statusClass'] == '2xx'


def test_cold_start_loads_neither_powertools_nor_xray():
    code = ('import sys, app; print(sorted(m for m in ("aws_lambda_powertools", "aws_xray_sdk", "pynamodb", '
            '"pydantic") if m in sys.modules))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '[]'
