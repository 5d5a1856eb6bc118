"""A reviewer's changes through the HTTP layer (docs/api/extraction.md "Review"): a committed
change is answered as committed and reports what could not follow it; the family's summary
agrees with the exception records even when two changes race; a correction is read with the
run's locale and rewrites the messages of the exceptions it leaves open; an extraction run's
options are one shape, checked once (POST .../extract and an EXTRACT step alike)."""
from __future__ import annotations

from tests.api.test_extraction import _base, _extract, family_with, setup  # noqa: F401 - fixture
from tests.extraction_corpus import invoice_definition, invoice_values


def _invoice(api, setup):  # noqa: F811
    invoice = api.get(f"{_base(setup)}/dataObjects?path=invoice").json['content'][0]
    return invoice, {a['tag']: a for a in invoice['attributes']}


def _run(api, fam):
    family = api.get(f"/api/document-families/{fam['id']}").json
    [run] = family['extraction']['runs'].values()
    return family, run


def _open(api, fam):
    return api.get(f"/api/exceptions?documentFamilyId={fam['id']}&state=OPEN").json['content']


def _fix_dates(api, invoice, by_tag):
    for tag, value in (('invoiceDate', '28/02/2026'), ('dueDate', '30/03/2026')):
        r = api.put(f"/api/data-objects/{invoice['id']}/attributes/{by_tag[tag]['id']}", {'value': value})
        assert r.status == 200, r.json


def test_the_correction_closing_the_last_exception_is_saved_when_the_task_cannot_close(api, setup):  # noqa: F811
    """No task status of type DONE: the correction that closes the last open exception is
    committed, so it answers 200 with reviewTask {closed: false, reason}; the family's summary
    says RESOLVED with no open exception, as /api/exceptions does; the next change, once a DONE
    status exists, closes the task."""
    done = api.get("/api/task-statuses?filter=slug == 'reviewed'").json['content']
    assert len(done) == 1 and api.delete(f"/api/task-statuses/{done[0]['id']}").status == 204
    fam = family_with(api, setup, invoice_values(number='INV-NO-DONE', broken=True))
    summary = _extract(api, setup, fam)
    invoice, by_tag = _invoice(api, setup)
    _fix_dates(api, invoice, by_tag)
    total = invoice_values(number='INV-NO-DONE')['total']
    r = api.put(f"/api/data-objects/{invoice['id']}/attributes/{by_tag['total']['id']}", {'value': f'EUR {total}'})
    assert r.status == 200, r.json
    assert r.json['dataObject']['exceptionCount'] == 0 and r.json['history'][-1]['after'] == f'EUR {total}'
    assert r.json['reviewTask']['id'] == summary['taskId'] and r.json['reviewTask']['closed'] is False
    assert 'no task status of type DONE' in r.json['reviewTask']['reason'], r.json
    assert r.json['documentStatus'] == {'slug': 'extracted', 'set': True}
    assert _open(api, fam) == []
    family, run = _run(api, fam)
    assert (run['status'], run['openExceptions'], family['extraction']['openExceptions']) == ('RESOLVED', 0, 0)
    assert family['documentStatus']['slug'] == 'extracted'
    assert api.get(f"/api/tasks/{summary['taskId']}").json['statusSlug'] == 'to-review'
    # once the organization has a DONE status, the run's next change closes the task
    api.post('/api/task-statuses', {'organizationId': setup['org']['id'], 'slug': 'done', 'label': 'Done',
                                    'statusType': 'DONE'})
    r = api.put(f"/api/data-objects/{invoice['id']}/attributes/{by_tag['invoiceNumber']['id']}", {'confirmed': True})
    assert r.status == 200 and r.json['reviewTask'] == {'id': summary['taskId'], 'closed': True}, r.json
    assert api.get(f"/api/tasks/{summary['taskId']}").json['statusSlug'] == 'done'
    _, run = _run(api, fam)
    assert run['status'] == 'RESOLVED' and run['reviewTaskClosed'] is True


def test_two_corrections_racing_leave_the_summary_agreeing_with_the_exceptions(api, setup, monkeypatch):  # noqa: F811
    """A confirmation commits while one exception is open and reads the exception records; the
    correction that closes that exception commits and summarises before the confirmation writes
    its summary: the summary must end as the records are (RESOLVED, no open exception)."""
    from chalicelib.features.extraction import storage
    fam = family_with(api, setup, invoice_values(number='INV-RACE-2', broken=True))
    summary = _extract(api, setup, fam)
    invoice, by_tag = _invoice(api, setup)
    _fix_dates(api, invoice, by_tag)
    assert [e['exceptionType'] for e in _open(api, fam)] == ['VALIDATION_FAILED']
    total = invoice_values(number='INV-RACE-2')['total']
    state = {'first': False, 'armed': False, 'fired': False}
    real_commit, real_keyed = storage.commit, storage.keyed

    def commit(ops):
        real_commit(ops)
        if state['first'] and not state['fired']:
            state['armed'] = True   # the confirmation is committed: what follows it reads next

    def keyed(family, *args, **kwargs):
        found = real_keyed(family, *args, **kwargs)
        if state['armed'] and family is storage.EXCEPTIONS:
            state['armed'], state['fired'] = False, True   # the racing correction, between its read and write
            r = api.put(f"/api/data-objects/{invoice['id']}/attributes/{by_tag['total']['id']}",
                        {'value': f'EUR {total}'})
            assert r.status == 200 and r.json['dataObject']['exceptionCount'] == 0, r.json
        return found
    monkeypatch.setattr(storage, 'commit', commit)
    monkeypatch.setattr(storage, 'keyed', keyed)
    state['first'] = True
    r = api.put(f"/api/data-objects/{invoice['id']}/attributes/{by_tag['invoiceNumber']['id']}", {'confirmed': True})
    assert r.status == 200, r.json
    assert state['fired']
    assert _open(api, fam) == []
    family, run = _run(api, fam)
    assert (run['status'], run['openExceptions'], family['extraction']['openExceptions']) == ('RESOLVED', 0, 0), run
    assert api.get(f"/api/tasks/{summary['taskId']}").json['statusSlug'] == 'reviewed'


def test_a_correction_is_read_with_the_runs_locale_and_rewrites_the_messages(api, setup):  # noqa: F811
    """metadata.locale en-GB on the definition (no taxon names a locale): the run reads day-first
    dates, keeps its locale in its options, and a reviewer's 28/02/2026 is read the same way; a
    correction that is still wrong names its new value in the exception's message."""
    def no_locale(taxon):
        return {**{k: v for k, v in taxon.items() if k != 'locale'},
                **({'children': [no_locale(c) for c in taxon['children']]} if taxon.get('children') else {})}
    r = api.post('/api/data-definitions', {'organizationId': setup['org']['id'], 'name': 'UK invoice',
                                           'slug': 'uk-invoice', 'metadata': {'locale': 'en-GB'},
                                           'taxons': [no_locale(t) for t in invoice_definition(threshold=0.5)]})
    assert r.status == 201, r.json
    clean = family_with(api, setup, invoice_values(number='INV-UK-1'))
    body = {'dataDefinition': 'uk-invoice', 'dataStore': 'invoices', 'statusSlug': 'to-review'}
    r = api.post(f"/api/document-families/{clean['id']}/extract", body)
    assert r.status == 200 and r.json['options']['locale'] == 'en-GB', r.json
    got = {a['tag']: a for a in api.get(f"{_base(setup)}/dataObjects?path=invoice&documentFamilyId={clean['id']}")
           .json['content'][0]['attributes']}
    assert got['dueDate']['typedValue'] == '2026-04-13'   # 13/04/2026, day first
    fam = family_with(api, setup, invoice_values(number='INV-UK-2', broken=True))
    assert api.post(f"/api/document-families/{fam['id']}/extract", body).status == 200
    invoice = api.get(f"{_base(setup)}/dataObjects?path=invoice&documentFamilyId={fam['id']}").json['content'][0]
    by_tag = {a['tag']: a for a in invoice['attributes']}
    url = f"/api/data-objects/{invoice['id']}/attributes/{by_tag['invoiceDate']['id']}"
    r = api.put(url, {'value': '30/02/2026'})
    assert r.status == 200, r.json
    [invalid] = [e for e in _open(api, fam) if e['exceptionType'] == 'INVALID_VALUE']
    assert "'30/02/2026' is not a calendar date" in invalid['message'] and '31/02' not in invalid['message']
    on_object = [x for x in r.json['dataObject']['dataExceptions'] if x['exceptionType'] == 'INVALID_VALUE']
    assert [x['message'] for x in on_object] == [invalid['message']]
    r = api.put(url, {'value': '28/02/2026'})
    assert r.status == 200, r.json
    assert r.json['typedValue'] == '2026-02-28' and 'normaliseError' not in r.json, r.json
    assert 'INVALID_VALUE' not in [e['exceptionType'] for e in _open(api, fam)]


def test_an_extraction_runs_options_are_checked_once_whoever_sends_them(api, setup):  # noqa: F811
    """One shape (ExtractOptions): a locale the normalisers do not know is a 400 naming it, from
    POST .../extract as from an EXTRACT step of a plan; the shape is published."""
    fam = family_with(api, setup, invoice_values(number='INV-OPTS'))
    base = {'dataDefinition': 'invoice', 'dataStore': 'invoices'}
    r = api.post(f"/api/document-families/{fam['id']}/extract", {**base, 'locale': 'xx'})
    assert r.status == 400 and 'options.locale must be one of' in r.json['message'] and 'en-GB' in r.json['message']
    assert api.get(f"/api/document-families/{fam['id']}").json.get('extraction') is None
    plan = api.post('/api/activity-plans', {'projectId': setup['project'], 'name': 'bad locale', 'steps': [
        {'name': 'extract', 'stepType': 'EXTRACT', 'options': {**base, 'locale': 'xx'}}]})
    assert plan.status == 400 and "step 'extract': options.locale must be one of" in plan.json['message'], plan.json
    for bad, field in (({'reviewTitle': ''}, 'options.reviewTitle'), ({'teamId': 'nope'}, 'options.teamId'),
                       ({'assigneeRules': [{'when': 'true', 'team': 'x'}]}, 'options.assigneeRules[0]')):
        r = api.post(f"/api/document-families/{fam['id']}/extract", {**base, **bad})
        plan = api.post('/api/activity-plans', {'projectId': setup['project'], 'name': 'bad', 'steps': [
            {'name': 'extract', 'stepType': 'EXTRACT', 'options': {**base, **bad}}]})
        assert r.status == 400 and field in r.json['message'], (bad, r.json)
        assert plan.status == 400 and field in plan.json['message'], (bad, plan.json)
        assert r.json['message'].split(field, 1)[1] == plan.json['message'].split(field, 1)[1]   # one check
    assert api.post(f"/api/document-families/{fam['id']}/extract", {**base, 'locale': 'en-GB'}).status == 200
    schema = api.get('/v3/api-docs').json['components']['schemas']['ExtractOptions']
    assert 'en-GB' in schema['properties']['locale']['enum'] and 'xx' not in schema['properties']['locale']['enum']


def test_a_definitions_locale_is_checked_when_written(api, setup):  # noqa: F811
    """metadata.locale is the locale a definition's runs read with: one the normalisers do not know
    is a 400 when the definition is written (as a taxon's locale is), on create and on update, and
    nothing is stored."""
    org = setup['org']['id']
    body = {'organizationId': org, 'name': 'Bad locale', 'slug': 'bad-locale', 'metadata': {'locale': 'xx'},
            'taxons': invoice_definition(threshold=0.5)}
    r = api.post('/api/data-definitions', body)
    assert r.status == 400 and 'metadata.locale must be one of' in r.json['message'], r.json
    assert api.get("/api/data-definitions?filter=slug=='bad-locale'").json['content'] == []
    made = api.post('/api/data-definitions', {**body, 'metadata': {'locale': 'de-DE'}})
    assert made.status == 201, made.json
    r = api.put(f"/api/data-definitions/{made.json['id']}", {'metadata': {'locale': 'xx'}})
    assert r.status == 400 and 'metadata.locale must be one of' in r.json['message'], r.json
    assert api.get(f"/api/data-definitions/{made.json['id']}").json['metadata'] == {'locale': 'de-DE'}
