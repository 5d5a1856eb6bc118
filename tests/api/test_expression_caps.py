"""Issue 24, finding 3: JSONata builtins that allocate are capped (core/expressions.py), in a
SCRIPT step as in a validation rule (tests/api/test_documents_validation.py): the step's attempt
fails naming the cap instead of taking the worker's memory, and the worker goes on."""
from __future__ import annotations

import pytest


@pytest.fixture
def project(api, org_id):
    return api.post('/api/projects', {'name': 'caps', 'organizationId': org_id}).json


def test_an_allocating_builtin_fails_its_script_step_naming_the_cap(api, work, project):
    r = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'plan', 'steps': [
        {'name': 'pad', 'stepType': 'SCRIPT', 'options': {'expression': "$length($pad('', 30000000))"},
         'executionPolicy': {'maxAttempts': 1, 'onExhausted': 'CONTINUE'}},
        {'name': 'fine', 'stepType': 'SCRIPT', 'options': {'expression': "$length($pad('', 300))"}}]})
    assert r.status == 201, r.json
    activity = api.post(f"/api/activity-plans/{r.json['id']}/start", {'projectId': project['id']}).json
    work.drain()
    runs = {e['name']: e for e in api.get(f"/api/executions?filter=activityId=='{activity['id']}'").json['content']}
    assert runs['pad']['status'] == 'FAILED', runs['pad']
    message = runs['pad']['statusMessages'][-1]['message']
    assert '$pad would make a string of 30,000,000 characters (the limit is 1,000,000)' in message, message
    assert runs['fine']['status'] == 'SUCCEEDED', runs['fine']
    assert api.get(f"/api/activities/{activity['id']}").json['status'] == 'COMPLETED'
