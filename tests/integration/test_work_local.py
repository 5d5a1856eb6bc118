"""`make run` drives the work handlers itself (issue 12): a start through the internal route is
RUNNING or finished within 10 s with its tasks, the outbox reaches GET /api/events, the
scheduler ticks, and every line the worker logs is JSON carrying the start's correlation id."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from tests.integration.test_local_run import ROOT, _call, _free_port

TOKEN = 'svc-' + uuid.uuid4().hex


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    port, moto_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith('AWS_')}
    env.update(PORT=str(port), MOTO_PORT=str(moto_port), PYTHONPATH=str(ROOT), INTERNAL_SERVICE_TOKEN=TOKEN,
               LOCAL_STATE_DIR=str(tmp_path_factory.mktemp('state')), SCHEDULER_TICK_SECONDS='1',
               RATE_LIMIT_PER_MINUTE='100000', RATE_LIMIT_BURST_PER_SECOND='100000')
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    key, banner = None, []
    for line in proc.stdout:
        banner.append(line)
        if 'admin API key' in line:
            key = line.rsplit(' ', 1)[-1].strip()
        if 'platform API on' in line:
            break
    assert proc.poll() is None, ''.join(banner)
    output: list[str] = []
    threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True).start()
    yield {'base': f'http://127.0.0.1:{port}', 'key': key, 'output': output, 'banner': banner}
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _wait(check, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    return check()


def test_a_start_runs_within_ten_seconds_and_its_writes_reach_the_events(server):
    base, key = server['base'], server['key']
    assert any('work (on): queue poller' in line for line in server['banner'])
    _, _, me = _call(base, 'GET', '/api/account/me', key=key)
    org_id = me.get('organizationId') or me['memberships'][0]['organizationId'] if 'memberships' in me else None
    if org_id is None:
        org_id = _call(base, 'GET', '/api/organizations', key=key)[2]['content'][0]['id']
    status, _, project = _call(base, 'POST', '/api/projects', {'name': 'work', 'organizationId': org_id}, key)
    assert status == 201, project
    status, _, plan = _call(base, 'POST', '/api/activity-plans', {'projectId': project['id'], 'name': 'p', 'steps': [
        {'name': 'review', 'stepType': 'TASK', 'options': {'title': 'Review'}},
        {'name': 'score', 'stepType': 'SCRIPT', 'options': {'expression': '$inputs.n + 1'}}]}, key)
    assert status == 201, plan
    started = time.monotonic()
    status, headers, activity = _call(base, 'POST', '/api/v2/internal/activities',
                                      {'projectId': project['id'], 'activityPlanId': plan['id'], 'inputs': {'n': 1}},
                                      headers={'x-service-token': TOKEN})
    assert status == 202, activity
    request_id = headers['X-Request-Id']

    def running():
        got = _call(base, 'GET', f"/api/activities/{activity['id']}", key=key)[2]
        return got if got['status'] in ('RUNNING', 'COMPLETED') else None
    assert _wait(running), 'not RUNNING within 10 s'
    assert time.monotonic() - started < 10
    tasks = _call(base, 'GET', f"/api/tasks?filter=createdByActivityId=='{activity['id']}'", key=key)[2]
    assert [t['title'] for t in tasks['content']] == ['Review']
    done = _wait(lambda: _call(base, 'GET', f"/api/activities/{activity['id']}", key=key)[2]['status'] == 'COMPLETED')
    assert done
    execution = _call(base, 'GET', f"/api/executions?filter=activityId=='{activity['id']}'", key=key)[2]['content'][0]
    assert execution['status'] == 'SUCCEEDED' and execution['output'] == 2

    def events(kind):
        return _call(base, 'GET', f"/api/events?filter=eventType=='{kind}'", key=key)[2]['totalElements']
    for kind in ('activities.created', 'tasks.created', 'executions.created', 'activities.updated',
                 'executions.updated'):
        assert _wait(lambda kind=kind: events(kind) > 0), kind

    # the worker's lines: JSON, carrying the correlation id of the request that queued the start
    worker = _wait(lambda: [json.loads(line) for line in server['output']
                            if '"message processed"' in line and request_id in line])
    assert worker and all(w['correlation_id'] == request_id and w['request_id'] != request_id for w in worker)
    assert not [line for line in server['output'] if TOKEN in line or key in line]


def test_a_scheduled_job_gets_its_next_run_and_is_not_started_before_it(server):
    base, key = server['base'], server['key']
    org_id = _call(base, 'GET', '/api/organizations', key=key)[2]['content'][0]['id']
    project = _call(base, 'POST', '/api/projects', {'name': 'sched', 'organizationId': org_id}, key)[2]
    plan = _call(base, 'POST', '/api/activity-plans', {'projectId': project['id'], 'name': 'tick', 'steps': [
        {'name': 't', 'stepType': 'TASK'}]}, key)[2]
    status, _, job = _call(base, 'POST', '/api/scheduled-jobs', {
        'organizationId': org_id, 'name': 'every minute', 'scheduleExpression': 'rate(1 minute)',
        'targetId': plan['id']}, key)
    assert status == 201 and job['targetType'] == 'ACTIVITY_PLAN' and job['nextRunOn'], job
    assert not _call(base, 'GET', f"/api/activities?filter=activityPlanId=='{plan['id']}'", key=key)[2]['content']
