"""Issue 46, item 1: every regex a JSONata expression carries runs on RE2 (core/expression_regex.py,
docs/api/limits.md "Expressions"), wherever expressions run: a SCRIPT step, a content object's
validation, a data definition's ``jsonata`` rule, an EXTRACT step's assignee rule.

A backtracking pattern over a text built to defeat it (``(a+)+$`` over ``a`` x 25 and ``b``: ~6 s
on Python's ``re``, which holds the interpreter lock all along) answers at once and correctly; a
pattern RE2 refuses (a backreference) is a 400 where the expression is written, and an
evaluation error where it can only be seen at run (inside ``$eval``, a content object's rule).
tests/integration/test_expression_regex_local.py shows the other requests of the process going on
while 10,000 ``a`` are matched."""
from __future__ import annotations

import time

import pytest

from tests.conftest import make_user
from tests.extraction_corpus import invoice_pdf, invoice_values, pdf_nodes
from tests.support import create

HOSTILE = "$pad('', 25, 'a') & 'b'"                      # 2^25 paths for a backtracking engine
VERDICT = f"$contains({HOSTILE}, /(a+)+$/) ? 'hostile' : 'safe'"
REFUSED = r"$match('aa', /(a)\1/)"                        # a backreference: RE2 refuses it
QUICK = 1.0                                               # seconds: RE2 answers in milliseconds


@pytest.fixture
def project(api, org_id):
    return create(api, 'projects', org_id)


def _run_plan(api, work, project, steps):
    r = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'regex', 'steps': steps})
    assert r.status == 201, r.json
    activity = api.post(f"/api/activity-plans/{r.json['id']}/start", {'projectId': project['id']}).json
    work.drain()
    return {e['name']: e for e in api.get(f"/api/executions?filter=activityId=='{activity['id']}'").json['content']}


def test_a_script_step_with_a_backtracking_pattern_succeeds_at_once(api, work, project):
    started = time.monotonic()
    runs = _run_plan(api, work, project, [
        {'name': 'hostile', 'stepType': 'SCRIPT', 'options': {'expression': VERDICT},
         'executionPolicy': {'timeoutSeconds': 1, 'maxAttempts': 1, 'onExhausted': 'CONTINUE'}},
        {'name': 'groups', 'stepType': 'SCRIPT',
         'options': {'expression': r"$replace('John Smith', /(\w+)\s(\w+)/, '$2, $1')"}}])
    assert runs['hostile']['status'] == 'SUCCEEDED', runs['hostile']
    assert runs['hostile']['output'] == 'safe'
    assert runs['groups']['output'] == 'Smith, John'
    assert time.monotonic() - started < 10   # the drain and its bookkeeping; the match itself is ~0 s


def test_a_script_step_with_a_pattern_re2_refuses_is_a_400_when_written(api, project):
    for step in ({'name': 'bad', 'stepType': 'SCRIPT', 'options': {'expression': REFUSED}},
                 {'name': 'bad', 'stepType': 'SCRIPT', 'options': {'expression': '1'},
                  'conditional': "$contains(x, /(?=a)/)"}):
        r = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'refused', 'steps': [step]})
        assert r.status == 400, r.json
        assert set(r.json) >= {'error', 'message', 'status'}
        assert "step 'bad'" in r.json['message'] and 'RE2' in r.json['message'], r.json
        assert 'no backreferences or lookarounds' in r.json['message']


def test_a_refused_pattern_only_seen_at_run_fails_its_step_naming_re2(api, work, project):
    expression = r"""$eval('$match("aa", /(a)\\1/)')"""   # the pattern is only seen when $eval parses it
    runs = _run_plan(api, work, project, [
        {'name': 'late', 'stepType': 'SCRIPT', 'options': {'expression': expression},
         'executionPolicy': {'maxAttempts': 1, 'onExhausted': 'CONTINUE'}}])
    assert runs['late']['status'] == 'FAILED', runs['late']
    message = runs['late']['statusMessages'][-1]['message']
    assert 'is not one the linear-time engine (RE2) runs' in message and r'/(a)\1/' in message, message


def _rule(name, formula):
    return {'taxonPath': 'invoice', 'taxonomyRef': 'tax', 'validation': {'name': name, 'ruleFormula': formula}}


def test_a_content_validation_with_a_backtracking_pattern_answers_at_once(api, org_id):
    made = create(api, 'content-objects', org_id, metadata={'extractedData': {'invoice': {'ref': 'a' * 25 + 'b'}}},
                  documentTaxonValidations=[_rule('hostile', '$not($contains(ref, /(a+)+$/))'),
                                            _rule('refused', r'$contains(ref, /(a)\1/)'),
                                            _rule('flags', "$contains(ref, /^A+B$/i)")])
    started = time.monotonic()
    r = api.post(f"/api/content-objects/{made['id']}/validate", {})
    elapsed = time.monotonic() - started
    assert r.status == 200, r.json
    by_name = {e['name']: e for e in r.json}
    assert by_name['hostile'] == {'taxonPath': 'invoice', 'name': 'hostile', 'passed': True}
    assert by_name['flags']['passed'] is True
    assert by_name['refused']['passed'] is False
    assert 'is not one the linear-time engine (RE2) runs' in by_name['refused']['error']
    assert elapsed < QUICK, elapsed


@pytest.fixture
def extraction(api, org_id, bucket):
    project = create(api, 'projects', org_id)
    api.post('/api/task-statuses', {'organizationId': org_id, 'slug': 'to-review', 'label': 'To review',
                                    'statusType': 'OPEN'})
    create(api, 'data-stores', org_id, projectId=project['id'], name='Checks', slug='checks')
    fam = create(api, 'document-families', org_id, projectId=project['id'], path='checks/one.pdf')
    r = api.put(f"/api/document-families/{fam['id']}/document",
                {'version': 0, 'nodes': pdf_nodes(invoice_pdf(invoice_values()))})
    assert r.status == 200, r.json
    return {'org': api.get(f'/api/organizations/{org_id}').json, 'family': fam}


def _definition(api, org_id, expression, slug='checks'):
    return api.post('/api/data-definitions', {'organizationId': org_id, 'name': slug, 'slug': slug, 'taxons': [
        {'name': 'check', 'group': True, 'children': [
            {'name': 'verdict', 'type': 'string', 'rules': [{'type': 'jsonata', 'expression': expression}]},
            {'name': 'missing', 'type': 'string', 'required': True,
             'rules': [{'type': 'regex', 'pattern': 'NOWHERE-([0-9]+)'}]}]}]})


def test_an_extraction_jsonata_rule_and_an_assignee_rule_with_a_backtracking_pattern_run_at_once(
        api, org_id, extraction):
    assert _definition(api, org_id, VERDICT).status == 201
    reviewer = make_user(api, org_id, 'MEMBER')[0]['id']
    started = time.monotonic()
    r = api.post(f"/api/document-families/{extraction['family']['id']}/extract",
                 {'dataDefinition': 'checks', 'dataStore': 'checks', 'statusSlug': 'to-review',
                  'assigneeRules': [{'when': f"$contains({HOSTILE}, /(a+)+$/) = false", 'assigneeId': reviewer}]})
    elapsed = time.monotonic() - started
    assert r.status == 200, r.json
    page = api.get(f"/api/stores/{extraction['org']['slug']}/checks/dataObjects?path=check").json
    got = {a['tag']: a for a in page['content'][0]['attributes']}
    assert got['verdict']['typedValue'] == 'safe'
    # 'missing' finds nothing: an exception, so a review task, given to the rule's assignee
    assert r.json['openExceptions'] >= 1 and r.json.get('taskId'), r.json
    assert api.get(f"/api/tasks/{r.json['taskId']}").json.get('assigneeId') == reviewer
    assert elapsed < 10, elapsed   # the whole extraction; each evaluation of the hostile match is ~0 s


def test_an_extraction_jsonata_rule_with_a_pattern_re2_refuses_is_a_400_when_written(api, org_id):
    r = _definition(api, org_id, r"$match($string(lines), /(a)\1/).match")
    assert r.status == 400, r.json
    assert "taxon 'check/verdict' rule 1" in r.json['message'] and 'RE2' in r.json['message'], r.json


def test_an_assignee_rule_with_a_pattern_re2_refuses_is_a_400_when_written(api, org_id, project, extraction):
    rule = {'when': r"$contains(family.path, /(a)\1/)", 'assigneeId': '00000000-0000-4000-8000-000000000001'}
    r = api.post(f"/api/document-families/{extraction['family']['id']}/extract",
                 {'dataDefinition': 'checks', 'dataStore': 'checks', 'assigneeRules': [rule]})
    assert r.status == 400, r.json
    assert 'assigneeRules[0].when' in r.json['message'] and 'RE2' in r.json['message'], r.json
    plan = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'extract', 'steps': [
        {'name': 'extract', 'stepType': 'EXTRACT',
         'options': {'dataDefinition': 'checks', 'dataStore': 'checks', 'assigneeRules': [rule]}}]})
    assert plan.status == 400, plan.json
    assert 'assigneeRules[0].when' in plan.json['message'] and 'RE2' in plan.json['message'], plan.json
