"""Scheduled jobs (issue 12): expressions validated on write, nextRunOn computed, due jobs read
through their index and claimed with a conditional write: concurrent ticks start a job once."""
from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from tests.api.test_list_concurrency import SerialDynamo


@pytest.fixture
def plan(api, org_id):
    project = api.post('/api/projects', {'name': 'sched', 'organizationId': org_id}).json
    plan = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'nightly', 'steps': [
        {'name': 'check', 'stepType': 'TASK', 'options': {'title': 'Check the night run'}}]}).json
    return plan


def job_body(org_id, plan, expression='rate(5 minutes)', **extra):
    return {'organizationId': org_id, 'name': 'job', 'scheduleExpression': expression,
            'targetType': 'ACTIVITY_PLAN', 'targetId': plan['id'], **extra}


@pytest.mark.parametrize('expression, reason', [
    ('every 5 minutes', 'expected rate'),
    ('rate(0 minutes)', 'at least 1'),
    ('rate(5 minute)', 'rate(5 minutes)'),
    ('rate(1 hours)', 'rate(1 hour)'),
    ('cron(0 8 * * * *)', 'exactly one of day-of-month and day-of-week'),
    ('cron(0 8 * *)', 'six fields'),
    ('cron(61 8 ? * * *)', 'minute'),
    ('cron(0 8 ? * 9 *)', 'day-of-week 9'),
])
def test_bad_expressions_are_400_with_the_reason(api, org_id, plan, expression, reason):
    r = api.post('/api/scheduled-jobs', job_body(org_id, plan, expression))
    assert r.status == 400, r.json
    assert 'scheduleExpression' in r.json['message'] and reason.lower() in r.json['message'].lower(), r.json


def test_next_run_is_computed_on_write(api, org_id, plan):
    from chalicelib.features.work import schedule_shapes
    r = api.post('/api/scheduled-jobs', job_body(org_id, plan, 'cron(0 8 ? * MON-FRI *)',
                                                 nextRunOn='2020-01-01T00:00:00.000000Z'))
    assert r.status == 201, r.json
    upcoming = datetime.strptime(r.json['nextRunOn'], '%Y-%m-%dT%H:%M:%S.%fZ')
    assert upcoming > datetime.utcnow() and upcoming.hour == 8 and upcoming.weekday() < 5
    # EventBridge's day-of-week: 1 = Sunday
    sunday = schedule_shapes.next_run('cron(30 6 ? * 1 *)', datetime(2026, 11, 24, tzinfo=UTC))
    assert sunday == datetime(2026, 11, 29, 6, 30, tzinfo=UTC)
    assert schedule_shapes.next_run('cron(0 0 1 1 ? 2020)', datetime(2026, 1, 1, tzinfo=UTC)) is None
    off = api.put(f"/api/scheduled-jobs/{r.json['id']}", {'active': False})
    assert off.status == 200 and 'nextRunOn' not in off.json
    bad_target = api.post('/api/scheduled-jobs', {**job_body(org_id, plan), 'targetId': r.json['id']})
    assert bad_target.status == 400 and 'targetId' in bad_target.json['message']


def make_due(job_id):
    """Move a job's nextRunOn (and its index entry) into the past, as time passing would."""
    from chalicelib.features.identity.service_token import SERVICE
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family
    from chalicelib.kernel.store import table
    stored = table.get('scheduled-jobs', job_id)
    new = {**stored.data, 'nextRunOn': '2026-01-01T00:00:00.000000Z', 'changeSequence': stored.seq + 1}
    records.commit(records.update_ops(family('scheduled-jobs'), new, stored, principal=SERVICE))


@pytest.mark.slow
def test_twenty_concurrent_ticks_start_a_due_job_exactly_once(api, org_id, plan, work, monkeypatch):
    job = api.post('/api/scheduled-jobs', job_body(org_id, plan, options={'inputs': {'k': 1}})).json
    make_due(job['id'])
    SerialDynamo().install(monkeypatch)   # moto applies one request at a time, as DynamoDB does per item
    results, barrier = [], threading.Barrier(20)

    def tick():
        barrier.wait()
        results.append(work.tick())
    threads = [threading.Thread(target=tick) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r['started'] for r in results) == 1, results
    assert sum(r['failed'] for r in results) == 0, results
    activities = api.get(f"/api/activities?filter=activityPlanId=='{plan['id']}'").json
    assert activities['totalElements'] == 1
    assert activities['content'][0]['inputs'] == {'k': 1}
    after = api.get(f"/api/scheduled-jobs/{job['id']}").json
    assert after['lastRunOn'] == '2026-01-01T00:00:00.000000Z' and after['nextRunOn'] > after['lastRunOn']
    assert work.tick()['due'] == 0                 # nothing due any more
    work.drain()
    assert api.get(f"/api/activities/{activities['content'][0]['id']}").json['status'] == 'COMPLETED'


def test_inactive_and_deleted_jobs_are_not_due(api, org_id, plan, work):
    job = api.post('/api/scheduled-jobs', job_body(org_id, plan)).json
    make_due(job['id'])
    api.put(f"/api/scheduled-jobs/{job['id']}", {'active': False})
    other = api.post('/api/scheduled-jobs', job_body(org_id, plan)).json
    make_due(other['id'])
    assert api.delete(f"/api/scheduled-jobs/{other['id']}").status == 204
    assert work.tick() == {'due': 0, 'started': 0, 'lost': 0, 'failed': 0}
