"""Extraction through the HTTP layer (docs/api/extraction.md): a 20-taxon definition with a
line-item group over generated invoices (their nodes written as the family's document, as the
parse stage writes them), exceptions and the review task of a broken invoice, a reviewer's
corrections closing them and resolving the family, the SDK's read paths, exports, tenancy."""
from __future__ import annotations

import csv
import io
from decimal import Decimal
from urllib.parse import urlencode

import pytest

from tests.api.test_parsing import mcp_on  # noqa: F401 - fixture
from tests.extraction_corpus import invoice_definition, invoice_pdf, invoice_values, pdf_nodes
from tests.support import create


@pytest.fixture
def setup(api, org_id, bucket):  # noqa: F811
    project = create(api, 'projects', org_id)
    pid = project['id']
    api.post('/api/task-statuses', {'organizationId': org_id, 'slug': 'to-review', 'label': 'To review',
                                    'statusType': 'OPEN'})
    api.post('/api/task-statuses', {'organizationId': org_id, 'slug': 'reviewed', 'label': 'Reviewed',
                                    'statusType': 'DONE'})
    r = api.post('/api/document-statuses', {'projectId': pid, 'status': 'Extracted', 'slug': 'extracted'})
    assert r.status == 201, r.json
    store = create(api, 'data-stores', org_id, projectId=pid, name='Invoices', slug='invoices')
    definition = api.post('/api/data-definitions', {'organizationId': org_id, 'name': 'Invoice', 'slug': 'invoice',
                                                    'taxons': invoice_definition(threshold=0.5)})
    assert definition.status == 201, definition.json
    org = api.get(f'/api/organizations/{org_id}').json
    return {'project': pid, 'store': store, 'definition': definition.json, 'org': org}


def family_with(api, setup, values) -> dict:
    fam = create(api, 'document-families', setup['org']['id'], projectId=setup['project'],
                 path=f"invoices/{values['invoiceNumber']}.pdf")
    r = api.put(f"/api/document-families/{fam['id']}/document", {'version': 0, 'nodes': pdf_nodes(invoice_pdf(values))})
    assert r.status == 200, r.json
    return fam


def _extract(api, setup, fam, **review):
    r = api.post(f"/api/document-families/{fam['id']}/extract",
                 {'dataDefinition': 'invoice', 'dataStore': 'invoices', 'statusSlug': 'to-review',
                  'resolvedDocumentStatus': 'extracted', **review})
    assert r.status == 200, r.json
    return r.json


def _base(setup):
    return f"/api/stores/{setup['org']['slug']}/invoices"


def test_an_invoice_is_extracted_with_typed_values_and_provenance(api, setup):
    values = invoice_values()
    fam = family_with(api, setup, values)
    summary = _extract(api, setup, fam)
    assert summary['objects'] == 5 and summary['openExceptions'] == 0 and summary['status'] == 'CLEAN', summary
    page = api.get(f"{_base(setup)}/dataObjects?path=invoice").json
    assert page['totalElements'] == 1
    invoice = page['content'][0]
    got = {a['tag']: a for a in invoice['attributes']}
    assert got['invoiceNumber']['typedValue'] == 'INV-2026-0042'
    assert got['invoiceDate']['typedValue'] == '2026-03-14' and got['dueDate']['typedValue'] == '2026-04-13'
    assert got['customerName']['typedValue'] == 'Globex Corporation'
    assert got['vendorName']['typedValue'] == 'Acme Supplies Ltd'
    assert got['currency']['typedValue'] == 'EUR'
    assert Decimal(str(got['total']['typedValue'])) == values['total']
    assert got['total']['currency'] == 'EUR'
    assert Decimal(str(got['subtotal']['decimalValue'])) == values['subtotal']
    prov = got['invoiceNumber']['dataFeatures']
    assert prov['page'] == 1 and prov['rule'] == 'label' and prov['nodeIds'] == ['p1.l3.w3']
    x0, y0, x1, y1 = prov['bbox']
    assert 130 < x0 < x1 < 260 and 95 < y0 < y1 < 115
    items = api.get(f"{_base(setup)}/dataObjects?path=invoice/lineItems&pageSize=50").json['content']
    assert [i['parentId'] for i in items] == [invoice['id']] * 4
    rows = [{a['tag']: a['typedValue'] for a in i['attributes']} for i in items]
    assert [(r['description'], r['quantity'], Decimal(str(r['unitPrice'])), Decimal(str(r['amount'])))
            for r in rows] == \
        [(li['description'], li['quantity'], li['unitPrice'], li['amount']) for li in values['lineItems']]
    amount = items[0]['attributes'][3]
    assert amount['dataFeatures']['rule'] == 'column' and amount['dataFeatures']['nodeIds'] == ['p1.l8.w5']
    # the SDK's shapes: one object, its attributes, the taxonomy of the store
    one = api.get(f"{_base(setup)}/dataObjects/{invoice['id']}").json
    assert one['storeRef'] == f"{setup['org']['slug']}/invoices" and one['taxonomyRef'] == 'invoice'
    attrs = api.get(f"{_base(setup)}/dataObjects/{invoice['id']}/attributes").json
    assert {a['tag'] for a in attrs} == set(got) and all(a['dataObjId'] == invoice['id'] for a in attrs)
    kids = api.get(f"{_base(setup)}/dataObjects/{invoice['id']}/children?pageSize=10").json
    assert [k['id'] for k in kids['content']] == [i['id'] for i in items]
    versioned = api.get(f"{_base(setup)}/None/dataObjects/{invoice['id']}/attributes").json
    assert versioned == attrs
    taxonomies = api.get(f"{_base(setup)}/taxonomies").json
    assert taxonomies[0]['taxons'][0]['name'] == 'invoice' and taxonomies[0]['taxons'][0]['taxonType'] == 'SECTION'
    # running the same step again replaces its objects
    again = _extract(api, setup, fam)
    assert again['objects'] == 5
    assert api.get(f"{_base(setup)}/dataObjects").json['totalElements'] == 5


def test_filters_and_exports(api, setup):
    family_with(api, setup, invoice_values())
    fam2 = family_with(api, setup, invoice_values(number='INV-2026-0043', items=[('Tiny', 1, Decimal('5.00'))]))
    for fam in api.get('/api/document-families?pageSize=10').json['content']:
        _extract(api, setup, fam)
    over = urlencode({'filter': "taxon == 'invoice/total' and typedValue > 1000"})
    big = api.get(f"{_base(setup)}/attributes?{over}")
    assert big.status == 200, big.json
    assert [a['value'] for a in big.json['content']] == ['EUR 3,973.38']
    bad = api.get(f"{_base(setup)}/attributes?" + urlencode({'filter': "taxon == "}))
    assert bad.status == 400 and bad.json['error']
    csv_text = api.get(f"{_base(setup)}/dataObjects?format=csv&path=invoice/lineItems").body.decode()
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert len(rows) == 5 and {r['description'] for r in rows} >= {'Tiny', 'Gadget'}
    data = api.get(f"{_base(setup)}/dataObjects?format=json&documentFamilyId={fam2['id']}").json
    assert [r['path'] for r in data['rows']] == ['invoice', 'invoice/lineItems']
    assert data['rows'][0]['invoiceNumber'] == 'INV-2026-0043'


def test_a_broken_invoice_is_reviewed_until_resolved(api, setup):
    fam = family_with(api, setup, invoice_values(number='INV-BROKEN-1', broken=True))
    summary = _extract(api, setup, fam)
    assert summary['status'] == 'REVIEW' and summary['taskId']
    store_id = setup['store']['id']
    open_ = api.get(f'/api/exceptions?dataStoreId={store_id}&state=OPEN&pageSize=50').json['content']
    kinds = sorted((e['exceptionType'], e['taxon']) for e in open_)
    assert kinds == [('INVALID_VALUE', 'invoice/invoiceDate'), ('REQUIRED_MISSING', 'invoice/dueDate'),
                     ('VALIDATION_FAILED', 'invoice')], kinds
    messages = {e['exceptionType']: e['message'] for e in open_}
    assert "'31/02/2026' is not a calendar date" in messages['INVALID_VALUE']
    assert 'was not found in the document' in messages['REQUIRED_MISSING']
    assert 'is not the subtotal plus tax' in messages['VALIDATION_FAILED']
    task = api.get(f"/api/tasks/{summary['taskId']}").json
    assert task['statusSlug'] == 'to-review' and task['metadata']['extractionReview']['documentFamilyId'] == fam['id']
    # take-next hands the review task out like any task
    taken = api.post('/api/tasks/take-next', {'projectId': setup['project']})
    assert taken.status == 200 and taken.json['id'] == summary['taskId'], taken.json
    invoice = api.get(f"{_base(setup)}/dataObjects?path=invoice").json['content'][0]
    assert invoice['exceptionCount'] == 3
    by_tag = {a['tag']: a for a in invoice['attributes']}
    # a reviewer corrects the date, enters the due date and the total
    r = api.put(f"{_base(setup)}/dataObjects/{invoice['id']}/attributes/{by_tag['invoiceDate']['id']}",
                {'value': '28/02/2026'})
    assert r.status == 200, r.json
    assert r.json['typedValue'] == '2026-02-28' and r.json['history'][-1]['before'] == '31/02/2026'
    r = api.put(f"/api/data-objects/{invoice['id']}/attributes/{by_tag['dueDate']['id']}", {'value': 'not a date'})
    assert r.status == 200 and r.json['dataObject']['exceptionCount'] == 2   # still invalid, now INVALID_VALUE
    left = api.get(f'/api/exceptions?documentFamilyId={fam["id"]}&state=OPEN').json['content']
    assert sorted(e['exceptionType'] for e in left) == ['INVALID_VALUE', 'VALIDATION_FAILED']
    api.put(f"/api/data-objects/{invoice['id']}/attributes/{by_tag['dueDate']['id']}", {'value': '30/03/2026'})
    values = invoice_values(number='INV-BROKEN-1')
    r = api.put(f"/api/data-objects/{invoice['id']}/attributes/{by_tag['total']['id']}",
                {'value': f"EUR {values['total']}"})
    assert r.status == 200 and r.json['dataObject']['exceptionCount'] == 0, r.json
    assert api.get(f'/api/exceptions?dataStoreId={store_id}&state=OPEN').json['totalElements'] == 0
    closed = api.get(f'/api/exceptions?dataStoreId={store_id}&state=CLOSED').json['content']
    assert len(closed) == 4 and all(e['closedBy'] for e in closed)
    assert api.get(f"/api/tasks/{summary['taskId']}").json['statusSlug'] == 'reviewed'
    family = api.get(f"/api/document-families/{fam['id']}").json
    assert family['documentStatus']['slug'] == 'extracted'
    run = next(iter(family['extraction']['runs'].values()))
    assert run['status'] == 'RESOLVED' and family['extraction']['openExceptions'] == 0


def test_definitions_are_checked_when_written(api, org_id):
    def post(taxons):
        return api.post('/api/data-definitions', {'organizationId': org_id, 'name': 'D', 'taxons': taxons})
    group = {'name': 'g', 'group': True, 'children': []}
    bad = post([{**group, 'children': [{'name': 'x', 'rules': [{'type': 'regex', 'pattern': r'(a)\1'}]}]}])
    assert bad.status == 400 and "taxon 'g/x' rule 1" in bad.json['message'] and 'RE2' in bad.json['message']
    bad = post([{**group, 'children': [{'name': 'x', 'rules': [{'type': 'regex', 'pattern': r'(a{1000}){1000}'}]}]}])
    assert bad.status == 400 and "taxon 'g/x' rule 1" in bad.json['message']
    bad = post([{**group, 'children': [{'name': 'x', 'type': 'money'}]}])
    assert bad.status == 400 and "taxon 'g/x': type must be one of" in bad.json['message']
    bad = post([{**group, 'children': [{'name': 'x', 'rules': [{'type': 'column', 'header': 'Qty'}]}]}])
    assert bad.status == 400 and 'a column rule belongs on a child of a many group' in bad.json['message']
    bad = post([{**group, 'children': [{'name': 'x', 'rules': [{'type': 'jsonata', 'expression': 'a +'}]}]}])
    assert bad.status == 400 and "taxon 'g/x' rule 1: the expression does not parse" in bad.json['message']
    bad = post([{**group, 'children': [{'name': 'x', 'rules': [{'type': 'label', 'label': 'a'}] * 6}]}])
    assert bad.status == 400 and 'maxRulesPerTaxon' in bad.json['message']
    many = [{'name': f't{i}'} for i in range(200)]
    bad = post([{**group, 'children': many}])
    assert bad.status == 400 and 'maxTaxons' in bad.json['message']
    assert post(invoice_definition()).status == 201


def test_another_orgs_objects_and_exceptions_are_404(api, setup, users):
    from tests.conftest import make_org, make_user
    fam = family_with(api, setup, invoice_values(number='INV-X', broken=True))
    _extract(api, setup, fam)
    invoice = api.get(f"{_base(setup)}/dataObjects?path=invoice").json['content'][0]
    exc = api.get(f'/api/exceptions?dataStoreId={setup["store"]["id"]}').json['content'][0]
    other = make_org(api)
    _, key = make_user(api, other['id'], 'MANAGE')
    them = api.as_key(key)
    assert them.get(f"{_base(setup)}/dataObjects").status == 404
    assert them.get(f"/api/data-objects/{invoice['id']}").status == 404
    assert them.put(f"/api/data-objects/{invoice['id']}/attributes/{invoice['attributes'][0]['id']}",
                    {'value': 'x'}).status == 404
    assert them.put(f"/api/exceptions/{exc['id']}", {'open': False, 'closingComment': 'x'}).status == 404
    assert them.get(f'/api/exceptions?dataStoreId={setup["store"]["id"]}').json['totalElements'] == 0
    assert them.get(f"/api/data-exceptions/{exc['id']}").status == 404


def _tool(api, name, arguments):
    body = {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call', 'params': {'name': name, 'arguments': arguments}}
    reply = api.post('/mcp', body, headers={'accept': 'application/json, text/event-stream'})
    assert reply.status == 200, reply.json
    assert reply.json['result']['isError'] is False, reply.json
    return reply.json['result']['structuredContent']


def test_the_mcp_task_tools_work_on_review_tasks(api, setup, mcp_on):  # noqa: F811
    fam = family_with(api, setup, invoice_values(number='INV-MCP', broken=True))
    summary = _extract(api, setup, fam)
    listed = _tool(api, 'list_tasks', {'projectId': setup['project'], 'statusSlug': 'to-review'})
    assert [t['id'] for t in listed['content']] == [summary['taskId']]
    task = _tool(api, 'get_task', {'taskId': summary['taskId']})
    assert task['metadata']['extractionReview']['documentFamilyId'] == fam['id']
    moved = _tool(api, 'update_task_status', {'taskId': summary['taskId'], 'statusSlug': 'reviewed'})
    assert moved['statusSlug'] == 'reviewed'


def test_an_activity_plans_extract_step_runs_on_the_engine_and_replaces_its_earlier_run(api, setup, work):
    fam = family_with(api, setup, invoice_values(number='INV-PLAN', broken=True))
    plan = api.post('/api/activity-plans', {'projectId': setup['project'], 'name': 'extract', 'steps': [
        {'name': 'extract', 'stepType': 'EXTRACT',
         'options': {'dataDefinition': 'invoice', 'dataStore': 'invoices', 'statusSlug': 'to-review'}}]})
    assert plan.status == 201, plan.json
    bad = api.post('/api/activity-plans', {'projectId': setup['project'], 'name': 'bad', 'steps': [
        {'name': 'extract', 'stepType': 'EXTRACT', 'options': {'dataStore': 'invoices'}}]})
    assert bad.status == 400 and 'options.dataDefinition is required' in bad.json['message']
    for _ in range(2):   # the same plan's step twice: the second run replaces the first
        started = api.post(f"/api/activity-plans/{plan.json['id']}/start",
                           {'projectId': setup['project'], 'inputs': {'documentFamilyId': fam['id']}})
        assert started.status == 202, started.json
        work.drain()
        (execution,) = api.get(f"/api/executions?filter=activityId=='{started.json['id']}'").json['content']
        assert execution['status'] == 'SUCCEEDED', execution['statusMessages']
        assert execution['output']['objects'] == 5 and execution['output']['openExceptions'] == 3
    assert api.get(f"{_base(setup)}/dataObjects?documentFamilyId={fam['id']}").json['totalElements'] == 5
    assert api.get(f"/api/exceptions?documentFamilyId={fam['id']}&state=ALL").json['totalElements'] == 3
    family = api.get(f"/api/document-families/{fam['id']}").json
    [run] = family['extraction']['runs'].values()
    assert run['status'] == 'REVIEW' and api.get(f"/api/tasks/{run['taskId']}").status == 200


def test_assignee_rules_pick_the_review_team(api, setup):
    team = api.post('/api/teams', {'organizationId': setup['org']['id'], 'name': 'Date fixers'}).json
    other = api.post('/api/teams', {'organizationId': setup['org']['id'], 'name': 'Others'}).json
    fam = family_with(api, setup, invoice_values(number='INV-RULES', broken=True))
    rules = [{'when': "'LOW_CONFIDENCE' in types", 'teamId': other['id']},
             {'when': "'REQUIRED_MISSING' in types", 'teamId': team['id']}]
    summary = _extract(api, setup, fam, assigneeRules=rules, teamId=other['id'])
    assert api.get(f"/api/tasks/{summary['taskId']}").json['teamId'] == team['id']
    bad = api.post(f"/api/document-families/{fam['id']}/extract",
                   {'dataDefinition': 'invoice', 'dataStore': 'invoices', 'assigneeRules': [{'teamId': team['id']}]})
    assert bad.status == 400 and 'assigneeRules[0]' in bad.json['message']


def test_the_store_by_slug_route_answers_a_data_store_as_the_sdk_reads_one(api, setup, users):
    """The SDK's get_object_by_ref('store', 'org/slug') reads GET /api/stores/{org}/{slug}: a data
    store comes back with storeType TABLE (its DataStoreEndpoint); a document store with the same
    slug wins; another organization's member gets a 404."""
    from tests.conftest import make_org, make_user
    r = api.get(_base(setup))
    assert r.status == 200, r.json
    assert (r.json['id'], r.json['type'], r.json['storeType'], r.json['slug'], r.json['orgSlug']) == \
        (setup['store']['id'], 'store', 'TABLE', 'invoices', setup['org']['slug'])
    missing = api.get(f"/api/stores/{setup['org']['slug']}/no-such-store")
    assert missing.status == 404 and 'No document or data store' in missing.json['message']
    _, key = make_user(api, make_org(api)['id'], 'MANAGE')
    assert api.as_key(key).get(_base(setup)).status == 404
    docs = create(api, 'document-stores', setup['org']['id'], projectId=setup['project'], name='Scans',
                  slug='invoices')
    r = api.get(_base(setup))
    assert (r.status, r.json['id'], r.json['storeType']) == (200, docs['id'], 'DOCUMENT')


def test_a_deleted_familys_extracted_objects_and_exceptions_go_with_it(api, setup):
    """Its data objects and exceptions declare deleted_with documentFamilyId (as its content objects
    and runs do): the family's delete leaves no record naming it, and the store lists the rest."""
    keep = family_with(api, setup, invoice_values(number='INV-KEEP'))
    gone = family_with(api, setup, invoice_values(number='INV-GONE', broken=True))
    _extract(api, setup, keep)
    _extract(api, setup, gone)
    objects = api.get(f"/api/data-objects?filter=documentFamilyId == '{gone['id']}'&pageSize=100").json['content']
    exceptions = api.get(f"/api/exceptions?documentFamilyId={gone['id']}&state=ALL").json['content']
    assert objects and exceptions
    assert api.delete(f"/api/document-families/{gone['id']}").status == 204
    for o in objects:
        assert api.get(f"/api/data-objects/{o['id']}").status == 404
    for e in exceptions:
        assert api.get(f"/api/data-exceptions/{e['id']}").status == 404
    left = api.get(f"{_base(setup)}/dataObjects?pageSize=100").json['content']
    assert left and {o['documentFamilyId'] for o in left} == {keep['id']}


def test_deleted_with_must_name_an_indexed_reference():
    import dataclasses

    from chalicelib.kernel.registry import BY_PATH, check_declaration
    objects = BY_PATH['data-objects']
    for field_name in ('path', 'dataDefinitionId'):   # not a reference; a reference without an index
        with pytest.raises(ValueError, match='deleted_with must name an indexed reference field'):
            check_declaration(dataclasses.replace(objects, deleted_with=field_name))


def test_a_family_deleted_while_it_is_extracted_keeps_nothing_of_the_run(api, setup, monkeypatch):
    """Its delete read its data objects before this run wrote them: the run finds the family gone
    when it summarises, deletes what it wrote and answers 404 (an EXTRACT step's execution goes
    with the family: engine.Vanished)."""
    from chalicelib.features.documents import service as documents
    from chalicelib.features.extraction import service, storage
    from chalicelib.features.identity.service_token import SERVICE
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family as family_of
    fam = family_with(api, setup, invoice_values(number='INV-RACE', broken=True))
    real_create = storage.create

    def create_then_family_deleted(family, rows, principal):
        real_create(family, rows, principal)
        if family is storage.EXCEPTIONS:   # the run's last write: the family's delete lands now
            stored = storage.family_record(fam['id'])
            documents.delete_dependents(stored, SERVICE)   # finds the objects just written, or not
            records.commit(records.delete_ops(family_of('document-families'), stored, SERVICE))
    monkeypatch.setattr(service.storage, 'create', create_then_family_deleted)
    monkeypatch.setattr(documents, 'delete_dependents', lambda *_: None)   # the delete read before the run wrote
    r = api.post(f"/api/document-families/{fam['id']}/extract",
                 {'dataDefinition': 'invoice', 'dataStore': 'invoices', 'statusSlug': 'to-review'})
    assert r.status == 404 and 'deleted while it was extracted' in r.json['message'], r.json
    left = api.get(f"/api/data-objects?filter=documentFamilyId == '{fam['id']}'").json['content']
    assert left == []
    assert api.get(f"/api/data-exceptions?filter=documentFamilyId == '{fam['id']}'").json['content'] == []
