"""An execution whose last attempt ran out of its time (issue 46 item 2; docs/api/work.md "Steps and
executions", docs/api/sdk-compatibility.md "Executions: statuses"): it ends ``FAILED`` with
``endReason: TIMED_OUT`` (the platform SDK's ``Execution.status`` has no TIMED_OUT, so one such
execution failed the SDK's list of a whole organization). The engine's rules are unchanged: it
counts as a failure under ``onExhausted``; the retired status is a 400 naming its replacement,
written or filtered on; a record stored with it before is answered in the new form."""
from __future__ import annotations

from urllib.parse import quote

import pytest

# ~9 million JSONata steps: far past a 1 s time box in any process (tests/integration/test_bounded_work_local.py)
SLOW = '$sum($map([1..3000], function($x){ $sum($map([1..3000], function($y){ $x * $y })) }))'


@pytest.fixture
def project(api, org_id):
    return api.post('/api/projects', {'name': 'timeouts', 'organizationId': org_id}).json


def _run(api, work, project, steps):
    plan = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'plan', 'steps': steps})
    assert plan.status == 201, plan.json
    activity = api.post(f"/api/activity-plans/{plan.json['id']}/start", {'projectId': project['id']}).json
    work.drain(seconds=60)
    runs = api.get(f"/api/executions?filter=activityId=='{activity['id']}'").json['content']
    return api.get(f"/api/activities/{activity['id']}").json, {e['name']: e for e in runs}


def _slow(name, on_exhausted='FAIL', attempts=1):
    return {'name': name, 'stepType': 'SCRIPT', 'options': {'expression': SLOW},
            'executionPolicy': {'timeoutSeconds': 1, 'maxAttempts': attempts, 'onExhausted': on_exhausted}}


def _listed(api, query):
    return api.get('/api/executions?pageSize=100&filter=' + quote(query))


def test_a_step_out_of_time_fails_its_execution_saying_it_timed_out(api, work, project):
    activity, runs = _run(api, work, project, [
        _slow('slow', attempts=2),
        {'name': 'broken', 'stepType': 'SCRIPT', 'options': {'expression': "$error('no')"},
         'executionPolicy': {'onExhausted': 'CONTINUE'}}])
    slow, broken = runs['slow'], runs['broken']
    assert (slow['status'], slow.get('endReason'), slow['attempts']) == ('FAILED', 'TIMED_OUT', 2), slow
    assert '(timed out)' in slow['statusMessages'][-1]['message'], slow['statusMessages']
    assert slow['endDate']
    # a failure of another kind says nothing more: endReason is absent
    assert broken['status'] == 'FAILED' and 'endReason' not in broken, broken
    # onExhausted: FAIL counts it as before: the activity fails
    assert activity['status'] == 'FAILED', activity
    got = api.get(f"/api/executions/{slow['id']}").json
    assert (got['status'], got['endReason']) == ('FAILED', 'TIMED_OUT')


def test_on_exhausted_continue_still_goes_on_after_a_timeout(api, work, project):
    activity, runs = _run(api, work, project, [
        _slow('slow', on_exhausted='CONTINUE'),
        {'name': 'after', 'stepType': 'SCRIPT', 'options': {'expression': '1 + 1'}}])
    assert (runs['slow']['status'], runs['slow'].get('endReason')) == ('FAILED', 'TIMED_OUT'), runs['slow']
    assert runs['after']['status'] == 'SUCCEEDED'
    assert activity['status'] == 'COMPLETED', activity


def test_timed_out_executions_are_found_by_end_reason_and_the_old_status_is_a_clear_400(api, work, project):
    _, runs = _run(api, work, project, [_slow('slow', on_exhausted='CONTINUE')])
    slow = runs['slow']
    scoped = f" and projectId == '{project['id']}'"
    found = _listed(api, "endReason == 'TIMED_OUT'" + scoped)
    assert found.status == 200 and [e['id'] for e in found.json['content']] == [slow['id']], found.json
    failed = _listed(api, "status == 'FAILED'" + scoped)
    assert [e['id'] for e in failed.json['content']] == [slow['id']], failed.json
    for query in ("status == 'TIMED_OUT'", "status =in= ('FAILED', 'TIMED_OUT')", "not (status == 'TIMED_OUT')",
                  "status != 'SUCCEEDED' or status == 'TIMED_OUT'"):
        refused = _listed(api, query + scoped)
        assert refused.status == 400, (query, refused.json)
        assert set(refused.json) == {'error', 'message', 'status'}
        message = refused.json['message']
        assert "endReason == 'TIMED_OUT'" in message and 'FAILED' in message, refused.json


def test_the_old_status_and_a_misplaced_end_reason_are_refused_on_write(api, project):
    execution = api.post('/api/executions', {'projectId': project['id'], 'name': 'e'}).json
    assert api.put(f"/api/executions/{execution['id']}", {'status': 'RUNNING'}).status == 200
    old = api.put(f"/api/executions/{execution['id']}", {'status': 'TIMED_OUT'})
    assert old.status == 400 and 'endReason TIMED_OUT' in old.json['message'], old.json
    misplaced = api.put(f"/api/executions/{execution['id']}", {'status': 'SUCCEEDED', 'endReason': 'TIMED_OUT'})
    assert misplaced.status == 400 and 'FAILED' in misplaced.json['message'], misplaced.json
    unknown = api.put(f"/api/executions/{execution['id']}", {'status': 'FAILED', 'endReason': 'BORED'})
    assert unknown.status == 400, unknown.json
    made = api.post('/api/executions', {'projectId': project['id'], 'name': 'f', 'endReason': 'TIMED_OUT'})
    assert made.status == 400, made.json   # a new execution is PENDING
    assert api.get(f"/api/executions/{execution['id']}").json['status'] == 'RUNNING'   # nothing half-written
    done = api.put(f"/api/executions/{execution['id']}", {'status': 'FAILED', 'endReason': 'TIMED_OUT'})
    assert done.status == 200 and (done.json['status'], done.json['endReason']) == ('FAILED', 'TIMED_OUT')


def test_an_execution_stored_timed_out_before_is_answered_in_the_new_form(api, project):
    """Records written before the change hold status TIMED_OUT: they read as FAILED with endReason
    TIMED_OUT (list and get) until rewritten (docs/api/sdk-compatibility.md "Executions: statuses")."""
    from chalicelib.features.identity.service_token import SERVICE
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family
    from chalicelib.kernel.store import table
    execution = api.post('/api/executions', {'projectId': project['id'], 'name': 'old'}).json
    stored = table.get('executions', execution['id'])
    old = {**stored.data, 'status': 'TIMED_OUT', 'changeSequence': stored.seq + 1}
    records.commit(records.update_ops(family('executions'), old, stored, principal=SERVICE))
    assert table.get('executions', execution['id']).data['status'] == 'TIMED_OUT'
    got = api.get(f"/api/executions/{execution['id']}").json
    assert (got['status'], got['endReason']) == ('FAILED', 'TIMED_OUT'), got
    [listed] = _listed(api, f"name == 'old' and projectId == '{project['id']}'").json['content']
    assert (listed['status'], listed['endReason']) == ('FAILED', 'TIMED_OUT'), listed


def test_the_openapi_document_lists_the_sdks_statuses_and_the_end_reason(api):
    doc = api.get('/v3/api-docs').json
    schemas = doc['components']['schemas']
    assert schemas['ExecutionStatus']['enum'] == ['PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED']
    assert schemas['ExecutionEndReason']['enum'] == ['TIMED_OUT']
    assert 'endReason' in schemas['Execution']['properties']
