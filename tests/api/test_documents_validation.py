"""POST /api/content-objects/{id}/validate: JSONata rules per taxon group, ../ paths to
enclosing groups, errors as entries (never a 500), disabled rules skipped."""
from __future__ import annotations

import pytest

from tests.support import create

DATA = {'invoiceDate': '2026-01-02', 'invoice': {
    'total': 30, 'currency': 'EUR',
    'lineItems': [{'amount': 10, 'description': 'a'}, {'amount': 20, 'description': 'b'}]}}


def _rule(path, formula, name, **extra):
    return {'taxonPath': path, 'taxonomyRef': 'tax', 'validation': {'name': name, 'ruleFormula': formula, **extra}}


RULES = [
    _rule('invoice', 'total = $sum(lineItems.amount)', 'total adds up'),
    _rule('invoice/lineItems', 'amount <= ../total', 'line within total'),
    _rule('invoice/lineItems', "../../invoiceDate > '2025-12-31'", 'dated this year'),
    _rule('invoice/lineItems', 'amount > 15', 'big lines', messageFormula="'line ' & description & ' is small'"),
    _rule('invoice', '../../../nothing = 1', 'walks above the top'),
    _rule('invoice', 'total = (', 'syntax error'),
    _rule('invoice', '$error("custom")', 'raises'),
    _rule('invoice', 'false', 'disabled one', disabled=True),
    _rule('invoice', "currency = 'USD'", 'only for USD', conditional=True, conditionalFormula="currency = 'USD'"),
]


def test_rules_are_evaluated_per_group(api, org_id):
    made = create(api, 'content-objects', org_id, documentTaxonValidations=RULES,
                  metadata={'extractedData': DATA})
    r = api.post(f"/api/content-objects/{made['id']}/validate", {})
    assert r.status == 200, r.json
    by_name = {e['name']: e for e in r.json}
    assert set(by_name) == {'total adds up', 'line within total', 'dated this year', 'big lines',
                            'walks above the top', 'syntax error', 'raises'}
    assert by_name['total adds up'] == {'taxonPath': 'invoice', 'name': 'total adds up', 'passed': True}
    assert by_name['line within total']['passed'] is True
    assert by_name['dated this year']['passed'] is True
    assert by_name['big lines']['passed'] is False and by_name['big lines']['message'] == 'line a is small'
    for name in ('walks above the top', 'syntax error', 'raises'):
        assert by_name[name]['passed'] is False and by_name[name]['error'].startswith('evaluation error:'), name
    assert 'above the top' in by_name['walks above the top']['error']
    # data sent in the body replaces the stored extracted data
    r = api.post(f"/api/content-objects/{made['id']}/validate",
                 {'data': {'invoice': {'total': 5, 'lineItems': [{'amount': 10}]}, 'invoiceDate': '2020-01-01'}})
    by_name = {e['name']: e for e in r.json}
    assert by_name['total adds up']['passed'] is False and by_name['line within total']['passed'] is False
    assert by_name['dated this year']['passed'] is False


def test_a_content_object_without_rules_validates_to_nothing(api, org_id, users):
    made = create(api, 'content-objects', org_id)
    assert api.post(f"/api/content-objects/{made['id']}/validate", {}).json == []
    assert api.as_key(users['VIEWER']).post(f"/api/content-objects/{made['id']}/validate", {}).status == 200
    assert api.post('/api/content-objects/00000000-0000-0000-0000-000000000000/validate', {}).status == 404


@pytest.mark.slow
def test_a_validation_built_to_run_for_minutes_is_a_422_within_10_s(api, org_id, monkeypatch):
    """Issue 24, finding 2: every instance x rule counts against the request's time budget."""
    import functools
    import time

    from chalicelib.features.documents import validation
    # This test is about the request's budget: one evaluation (~30 ms) caught by a stall of the
    # loaded CI machine must not hit the cap of a single expression first (it did twice: a 200
    # naming that rule's timeout, with the 1 s cap and then with 5 s). A cap above API Gateway's
    # 29 s leaves the request's budget as the only limit here; the request's budget bounds every
    # evaluation (tests/unit/test_expressions.py covers which limit is named after a stall).
    monkeypatch.setattr(validation, 'evaluate', functools.partial(validation.evaluate, timeout_ms=30_000))
    slow = _rule('items', '$count([1..5000].($ * 2)) = 5000', 'slow but passing')   # ~0.2 s per instance
    made = create(api, 'content-objects', org_id, documentTaxonValidations=[slow])
    started = time.monotonic()
    r = api.post(f"/api/content-objects/{made['id']}/validate", {'data': {'items': [{'n': i} for i in range(600)]}})
    elapsed = time.monotonic() - started
    assert r.status == 422, r.json
    assert elapsed < 10, f'{elapsed:.1f} s'
    assert 'work budget' in r.json['message'] and 'validation of 600 instances x rules' in r.json['message']
    assert r.json['limit'] == 'workBudget'


def test_too_many_instances_x_rules_is_a_422_naming_the_cap(api, org_id):
    rules = [_rule('items', 'true', 'one'), _rule('items', 'true', 'two')]
    made = create(api, 'content-objects', org_id, documentTaxonValidations=rules)
    r = api.post(f"/api/content-objects/{made['id']}/validate", {'data': {'items': [{}] * 10_001}})
    assert r.status == 422, r.json
    assert r.json['limit'] == 'validationEvaluations' and '20,000' in r.json['message']
    # the same rules over fewer instances answer
    r = api.post(f"/api/content-objects/{made['id']}/validate", {'data': {'items': [{}] * 100}})
    assert r.status == 200 and [e['passed'] for e in r.json] == [True, True]


def test_an_allocating_builtin_is_refused_in_a_rule(api, org_id):
    """Issue 24, finding 3: $pad('', 30000000) allocated 30 MB inside one builtin."""
    rules = [_rule('', "$length($pad('', 30000000)) > 0", 'pads'), _rule('', '[1..100000000] ~> $count() > 0', 'range')]
    made = create(api, 'content-objects', org_id, documentTaxonValidations=rules)
    r = api.post(f"/api/content-objects/{made['id']}/validate", {'data': {}})
    assert r.status == 200, r.json
    by_name = {e['name']: e for e in r.json}
    assert by_name['pads']['passed'] is False
    assert '$pad would make a string of 30,000,000 characters (the limit is 1,000,000)' in by_name['pads']['error']
    assert by_name['range']['passed'] is False and 'the limit is 100,000' in by_name['range']['error']
