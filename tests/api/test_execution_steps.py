"""An execution's steps as clients read and write them (issue 46 item 2; docs/api/sdk-compatibility.md
"Executions: steps"): ``pipeline.steps[]`` answered in the platform SDK's form (``stepType``
ACTION, the step's own type in ``kind``), taken back on write so the stored steps keep their own
type (what the engine runs); the execution's ``step`` may be a stage's (PARSE)."""
from __future__ import annotations

from chalicelib.kernel.store import table

PARSE = {'name': 'parse', 'stepType': 'PARSE', 'executionPolicy': {'maxAttempts': 3}}
SCRIPT = {'name': 'score', 'stepType': 'SCRIPT', 'options': {'expression': '1'}}


def _project(api, org_id):
    r = api.post('/api/projects', {'name': 'steps', 'organizationId': org_id})
    assert r.status == 201, r.json
    return r.json


def test_pipeline_steps_are_answered_in_the_sdks_form_and_stored_with_their_own_type(api, org_id):
    project = _project(api, org_id)
    made = api.post('/api/executions', {'projectId': project['id'], 'name': 'e', 'step': PARSE,
                                        'pipeline': {'steps': [PARSE, SCRIPT], 'trigger': 'created'}})
    assert made.status == 201, made.json
    shown = [{**PARSE, 'stepType': 'ACTION', 'kind': 'PARSE'}, {**SCRIPT, 'stepType': 'ACTION', 'kind': 'SCRIPT'}]
    assert made.json['pipeline'] == {'steps': shown, 'trigger': 'created'} and made.json['step'] == PARSE
    stored = table.get('executions', made.json['id']).data
    assert stored['pipeline']['steps'] == [PARSE, SCRIPT] and stored['step'] == PARSE
    # a PUT of what the GET answered changes nothing; the list answers the same form
    got = api.get(f"/api/executions/{made.json['id']}").json
    assert got['pipeline']['steps'] == shown
    put = api.put(f"/api/executions/{made.json['id']}", {**got, 'description': 'again'})
    assert put.status == 200 and put.json['pipeline']['steps'] == shown, put.json
    assert table.get('executions', made.json['id']).data['pipeline']['steps'] == [PARSE, SCRIPT]
    page = api.get(f"/api/executions?filter=projectId == '{project['id']}'").json
    assert [e['pipeline']['steps'] for e in page['content']] == [shown]


def test_a_step_written_without_kind_is_kept_and_a_disagreeing_one_is_refused(api, org_id):
    project = _project(api, org_id)
    own = {'name': 'mine', 'stepType': 'ACTION', 'options': {}}
    made = api.post('/api/executions', {'projectId': project['id'], 'name': 'e', 'pipeline': {'steps': [own]}})
    assert made.status == 201 and made.json['pipeline']['steps'] == [own], made.json
    for bad in ({'steps': [{'name': 's', 'stepType': 'SCRIPT', 'kind': 'PARSE'}]},
                {'steps': [{'name': 's', 'kind': ''}]}, {'steps': ['x']}, {'steps': 'x'}):
        r = api.post('/api/executions', {'projectId': project['id'], 'name': 'e', 'pipeline': bad})
        assert r.status == 400 and r.json['status'] == 400 and 'pipeline' in r.json['message'], (bad, r.json)


def test_an_executions_step_may_be_a_stages_checked_by_the_fields_every_step_has(api, org_id):
    project = _project(api, org_id)
    made = api.post('/api/executions', {'projectId': project['id'], 'name': 'e', 'step': PARSE})
    assert made.status == 201 and made.json['step'] == PARSE, made.json
    put = api.put(f"/api/executions/{made.json['id']}", made.json)
    assert put.status == 200 and put.json['step'] == PARSE, put.json
    for bad in ({**PARSE, 'extra': 1}, {**PARSE, 'executionPolicy': {'maxAttempts': 1000}}, {'stepType': 'PARSE'},
                {**PARSE, 'options': 'x'}):
        r = api.post('/api/executions', {'projectId': project['id'], 'name': 'e', 'step': bad})
        assert r.status == 400 and r.json['status'] == 400, (bad, r.json)
    plan = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'p', 'steps': [PARSE]})
    assert plan.status == 400 and 'stepType' in plan.json['message'], plan.json   # no plan holds a stage's step
