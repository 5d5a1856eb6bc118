"""Executions of every kind through the unmodified SDK and against /v3/api-docs (issue 46 item 2;
docs/api/sdk-compatibility.md "Executions: steps"), on the real local server.

One organization holds the three kinds of execution: the parse stage's run of an uploaded invoice
(a PARSE step), the run of an assistant's pipeline over it (BRIDGE_CALL to an upstream on
127.0.0.1, SCRIPT, EXTRACT) and an activity plan's SCRIPT executions, one of which runs out of its
time (FAILED, endReason TIMED_OUT: docs/api/sdk-compatibility.md "Executions: statuses"), one fails
and one is cancelled. Then:

* the SDK (.venv-sdk, tests/integration/sdk_executions_session.py) lists them and reads each;
* every answer of the execution routes (list, get, create, the PUT of what GET answered, cancel)
  and of ``POST /api/document-families/{id}/reprocess`` is checked against the response schema
  /v3/api-docs gives for that operation and status (OpenAPI 3.0 semantics:
  openapi-schema-validator's OAS30Validator, ``nullable`` included): the response-conformance
  check of `make fuzz` (schemathesis), run over these operations with data present.

Every target is 127.0.0.1."""
from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from urllib3 import encode_multipart_formdata

from tests.extraction_corpus import invoice_definition, invoice_pdf, invoice_values
from tests.integration.test_parsing_local import _wait
from tests.integration.test_sdk_client import _env, _untripped, sdk_bin  # noqa: F401 - the fixture
from tests.live import LiveStack
from tests.netguard import Upstream

WITHIN_SECONDS = 120   # parse + bridge call + extraction on a loaded 2-core machine
STEPS = ('pipeline', 'step')   # an execution's steps: as answered, whatever was written back
# ~9 million JSONata steps: far past a 1 s time box (tests/integration/test_bounded_work_local.py)
SLOW = '$sum($map([1..3000], function($x){ $sum($map([1..3000], function($y){ $x * $y })) }))'


@pytest.fixture(scope='module')
def upstream():
    server = Upstream()
    yield server
    server.close()


@pytest.fixture(scope='module')
def live(tmp_path_factory):
    stack = LiveStack(tmp_path_factory.mktemp('sdk-executions'), BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST='127.0.0.1')
    yield stack
    stack.stop()


def _ended(live, query: str) -> list[dict] | None:
    page = live.get('/api/executions?pageSize=100&filter=' + quote(query)).body
    ended = [e for e in page['content'] if e['status'] not in ('PENDING', 'RUNNING')]
    return ended or None


@pytest.fixture(scope='module')
def place(live, upstream):
    """An organization of its own with the three kinds of execution, ended, and executions in every
    end state: succeeded, failed, timed out (FAILED with endReason TIMED_OUT), cancelled."""
    tag = uuid.uuid4().hex[:6]
    org = live.created('/api/organizations', {'name': f'Executions {tag}', 'slug': f'executions-{tag}'})
    project = live.created('/api/projects', {'name': f'executions-{tag}', 'organizationId': org['id']})
    for slug, kind in ((f'to-review-{tag}', 'OPEN'), (f'reviewed-{tag}', 'DONE')):
        live.created('/api/task-statuses', {'organizationId': org['id'], 'slug': slug, 'label': slug,
                                            'statusType': kind})
    live.created('/api/document-statuses', {'projectId': project['id'], 'status': 'Extracted', 'slug': 'extracted',
                                            'statusType': 'RESOLVED'})
    inbox = live.created('/api/document-stores', {'projectId': project['id'], 'name': 'inbox', 'slug': f'inbox-{tag}'})
    live.created('/api/data-stores', {'projectId': project['id'], 'name': 'Invoices', 'slug': f'invoices-{tag}'})
    live.created('/api/data-definitions', {'organizationId': org['id'], 'name': 'Invoice', 'slug': f'invoice-{tag}',
                                           'taxons': invoice_definition()})
    live.created('/api/service-bridges', {
        'projectId': project['id'], 'name': 'ocr', 'slug': 'ocr', 'agentCallable': True,
        'baseUrl': f'http://127.0.0.1:{upstream.port}',
        'endpoints': [{'name': 'echo', 'method': 'GET', 'path': '/echo', 'defaultHeaders': {}}]})
    assistant = live.created('/api/assistants', {
        'projectId': project['id'], 'name': 'Invoice pipeline', 'slug': f'pipeline-{tag}',
        'subscription': f"documentStoreId == '{inbox['id']}'",
        'options': {'pipeline': {'steps': [
            {'name': 'ocr', 'stepType': 'BRIDGE_CALL',
             'options': {'bridge': 'ocr', 'endpointName': 'echo', 'query': {'path': '=family.path'}}},
            {'name': 'score', 'stepType': 'SCRIPT', 'options': {'expression': "{'score': 0.5}"}},
            {'name': 'extract', 'stepType': 'EXTRACT', 'options': {
                'dataDefinition': f'invoice-{tag}', 'dataStore': f'invoices-{tag}', 'statusSlug': f'to-review-{tag}',
                'closedStatusSlug': f'reviewed-{tag}', 'resolvedDocumentStatus': 'extracted'}}]}}})
    body, content_type = encode_multipart_formdata(
        {'file': ('invoice.pdf', invoice_pdf(invoice_values(number='INV-SDK-1')), 'application/pdf')})
    family = live.call('POST', f"/api/stores/{org['slug']}/{inbox['slug']}/fs?path=invoice.pdf", raw=body,
                       content_type=content_type)
    assert family.status == 201, family
    family = family.body
    of_family = f"documentFamilyId == '{family['id']}'"
    runs = _wait(lambda: [e for e in _ended(live, of_family) or [] if e.get('assistantId')], WITHIN_SECONDS)
    assert runs, ''.join(live.output[-30:])
    [pipeline] = runs
    assert pipeline['status'] == 'SUCCEEDED', pipeline['statusMessages']
    [stage] = [e for e in _ended(live, of_family) if (e.get('metadata') or {}).get('stages')]
    plan = live.created('/api/activity-plans', {'projectId': project['id'], 'name': 'score', 'steps': [
        {'name': 'score', 'stepType': 'SCRIPT', 'options': {'expression': '$inputs.n + 1'}},
        # its attempt runs out of its 1 s: FAILED, endReason TIMED_OUT (the SDK has no TIMED_OUT status)
        {'name': 'slow', 'stepType': 'SCRIPT', 'options': {'expression': SLOW},
         'executionPolicy': {'timeoutSeconds': 1, 'maxAttempts': 1, 'onExhausted': 'CONTINUE'}},
        {'name': 'broken', 'stepType': 'SCRIPT', 'options': {'expression': "$error('no')"},
         'executionPolicy': {'onExhausted': 'CONTINUE'}}]})
    started = live.post(f"/api/activity-plans/{plan['id']}/start", {'projectId': project['id'], 'inputs': {'n': 1}})
    assert started.status == 202, started
    of_activity = f"activityId == '{started.body['id']}'"
    ended = _wait(lambda: (lambda e: e if e and len(e) == 3 else None)(_ended(live, of_activity)), 60)
    assert ended, ''.join(live.output[-30:])
    runs = {e['name']: e for e in ended}
    assert runs['score']['status'] == 'SUCCEEDED', runs['score']['statusMessages']
    assert (runs['slow']['status'], runs['slow'].get('endReason')) == ('FAILED', 'TIMED_OUT'), runs['slow']
    assert runs['broken']['status'] == 'FAILED' and 'endReason' not in runs['broken'], runs['broken']
    cancelled = live.created('/api/executions', {'projectId': project['id'], 'name': 'never run'})
    assert live.post(f"/api/executions/{cancelled['id']}/cancel").body['status'] == 'CANCELLED'
    return {'org': org, 'project': project, 'family': family, 'assistant': assistant,
            'kinds': {'parse stage': stage['id'], 'pipeline': pipeline['id'], 'activity plan': runs['score']['id'],
                      'timed out': runs['slow']['id'], 'failed': runs['broken']['id'], 'cancelled': cancelled['id']}}


def test_the_unmodified_sdk_lists_and_reads_executions_of_every_kind(live, place, sdk_bin, tmp_path):  # noqa: F811
    kinds = place['kinds']
    run = subprocess.run([str(sdk_bin / 'python'), str(Path(__file__).with_name('sdk_executions_session.py')),
                          f'http://127.0.0.1:{live.port}', live.key, place['project']['id'], json.dumps(kinds)],
                         capture_output=True, text=True, timeout=300, env=_env(tmp_path), cwd=tmp_path)
    _untripped(run)
    assert run.returncode == 0, run.stdout + run.stderr
    gets = [line for line in run.stdout.splitlines() if line.startswith('ok get ')]
    assert len(gets) == len(kinds) and any("('parse', 'ACTION')" in line for line in gets), run.stdout
    assert any(line.startswith('ok get timed out FAILED') for line in gets), run.stdout
    assert run.stdout.rstrip().endswith('{"done": true}')
    stage = live.get(f"/api/executions/{kinds['parse stage']}").body
    pipeline = live.get(f"/api/executions/{kinds['pipeline']}").body
    # what the SDK reads (ExecutionStep.stepType: ACTION or MODEL) and ours beside it (kind)
    assert [(s['name'], s['stepType'], s['kind']) for s in stage['pipeline']['steps']] == [('parse', 'ACTION', 'PARSE')]
    assert [(s['stepType'], s['kind']) for s in pipeline['pipeline']['steps']] == [
        ('ACTION', 'BRIDGE_CALL'), ('ACTION', 'SCRIPT'), ('ACTION', 'EXTRACT')]


# ----------------------------------------------------------------------------- response conformance

@pytest.fixture(scope='module')
def conforms(live):
    """``conforms(path, method, answer)``: the answer's status is documented for the operation and
    its body matches the documented schema (OpenAPI 3.0: OAS30Validator)."""
    from openapi_schema_validator import OAS30Validator
    doc = live.get('/v3/api-docs', key=None).body

    def check(path: str, method: str, answer) -> None:
        responses = doc['paths'][path][method]['responses']
        assert str(answer.status) in responses, (method, path, answer)
        content = responses[str(answer.status)].get('content') or {}
        schema = (content.get('application/json') or {}).get('schema')
        assert schema is not None, (method, path, answer.status)
        errors = sorted(OAS30Validator({**schema, 'components': doc['components']}).iter_errors(answer.body),
                        key=lambda e: list(e.absolute_path))
        assert not errors, (method, path, [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
                                           for e in errors[:5]])
    return check


def test_every_execution_answer_matches_the_served_openapi_document(live, place, conforms):
    project_id = place['project']['id']
    for query in ('', f"&filter={quote(f'projectId == {chr(39)}{project_id}{chr(39)}')}"):
        page = live.get(f'/api/executions?pageSize=100{query}')
        assert page.status == 200 and len(page.body['content']) >= 3, page
        conforms('/api/executions', 'get', page)
    one = '/api/executions/{executionId}'
    for kind, execution_id in place['kinds'].items():
        got = live.get(f'/api/executions/{execution_id}')
        assert got.status == 200, (kind, got)
        conforms(one, 'get', got)
        # a write accepts what a read answered, and changes nothing it did not name
        put = live.put(f'/api/executions/{execution_id}', {**got.body, 'description': f'read back ({kind})'})
        assert put.status == 200, (kind, put)
        conforms(one, 'put', put)
        again = live.get(f'/api/executions/{execution_id}').body
        for answer in (put.body, again):
            assert [answer.get(k) for k in STEPS] == [got.body.get(k) for k in STEPS], kind
        # a new execution written from a read one: stored as the engine runs it, answered as read
        copy = {k: got.body[k] for k in ('name', 'pipeline', 'step') if k in got.body}
        made = live.post('/api/executions', {'projectId': project_id, **copy})
        assert made.status == 201, (kind, made)
        conforms('/api/executions', 'post', made)
        assert [made.body.get(k) for k in STEPS] == [got.body.get(k) for k in STEPS], kind
        cancelled = live.post(f"/api/executions/{made.body['id']}/cancel")
        assert cancelled.status == 200, (kind, cancelled)
        conforms('/api/executions/{executionId}/cancel', 'post', cancelled)
    again = live.post(f"/api/document-families/{place['family']['id']}/reprocess", {})
    assert again.status == 202, again
    conforms('/api/document-families/{id}/reprocess', 'post', again)
    assert [(s['stepType'], s['kind']) for s in again.body['pipeline']['steps']] == [('ACTION', 'PARSE')]
