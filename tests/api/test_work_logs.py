"""Logs across a request, a worker message and a failing request (issue 15): every line is one
JSON object with a request id and a correlation id; the worker's lines carry the correlation
id of the request that queued the work; no credential or token appears anywhere."""
from __future__ import annotations

import json

from tests.conftest import ADMIN_KEY


def test_every_line_is_json_with_ids_and_no_secret(api, org_id, work, capsys, monkeypatch):
    from chalicelib.kernel import listing
    project = api.post('/api/projects', {'name': 'logs', 'organizationId': org_id}).json
    plan = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'p', 'steps': [
        {'name': 'boom', 'stepType': 'SCRIPT', 'options': {'expression': '$error("bad ' + ADMIN_KEY + '")'}}]}).json
    capsys.readouterr()
    start = api.post(f"/api/activity-plans/{plan['id']}/start", {'projectId': project['id']},
                     headers={'authorization': 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl'})
    assert start.status == 202
    request_id = start.headers['x-request-id']
    work.drain()
    work.send('{poison')
    work.queue.poll_once(wait_seconds=0)

    def broken(*args, **kwargs):
        raise RuntimeError(f'lost the table while holding {ADMIN_KEY}')
    monkeypatch.setattr(listing, 'list_resources', broken)
    failed = api.get('/api/projects')
    assert failed.status == 500 and ADMIN_KEY not in failed.body.decode()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]                 # every line is JSON
    assert all(r.get('request_id') and r.get('correlation_id') for r in records), records
    requests = [r for r in records if r['message'] == 'request']
    assert {r['status'] for r in requests} >= {202, 500}
    worker = [r for r in records if r['message'] in ('message processed', 'message failed')]
    assert len(worker) >= 3                                        # start, attempt, poison
    from_start = [r for r in worker if r['correlation_id'] == request_id]
    assert len(from_start) == 2 and all(r['request_id'] != request_id for r in from_start)
    assert any(r['message'] == 'message failed' and 'PoisonMessage' in r['reason'] for r in worker)
    text = '\n'.join(lines)
    assert ADMIN_KEY not in text and 'eyJhbGciOiJIUzI1NiJ9' not in text
