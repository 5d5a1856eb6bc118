"""One general definition for invoices of unknown suppliers, through the HTTP layer
(docs/api/extraction.md "Reading invoices of unknown suppliers"): label lists in several
languages, numbers and dates as each document writes them (``metadata.locale: "auto"``), an
ambiguous date an ``AMBIGUOUS_VALUE`` exception that a reviewer's correction settles, and the
definition's bounds checked when it is written. Documents are the invoice corpus
(tests/fixtures/invoices), parsed by the parse stage's readers."""
from __future__ import annotations

import pytest

from tests.support import create
from tests.unit.test_label_rules import corpus_nodes, general, without


@pytest.fixture
def setup(api, org_id, bucket):
    project = create(api, 'projects', org_id)
    store = create(api, 'data-stores', org_id, projectId=project['id'], name='Invoices', slug='invoices')
    header = general()
    r = api.post('/api/data-definitions', {'organizationId': org_id, 'name': 'Invoice (general)', 'slug': 'general',
                                           'metadata': {'locale': 'auto'}, 'taxons': header['taxons']})
    assert r.status == 201, r.json
    org = api.get(f'/api/organizations/{org_id}').json
    return {'project': project['id'], 'store': store, 'org': org, 'definition': r.json}


def _extract(api, setup, name: str, nodes=None, **options) -> tuple[dict, dict, dict]:
    fam = create(api, 'document-families', setup['org']['id'], projectId=setup['project'], path=f'in/{name}')
    nodes = list(corpus_nodes(name)) if nodes is None else nodes
    r = api.put(f"/api/document-families/{fam['id']}/document", {'version': 0, 'nodes': nodes})
    assert r.status == 200, r.json
    r = api.post(f"/api/document-families/{fam['id']}/extract",
                 {'dataDefinition': 'general', 'dataStore': 'invoices', **options})
    assert r.status == 200, r.json
    objects = api.get(f"/api/stores/{setup['org']['slug']}/invoices/dataObjects?path=invoice"
                      f"&documentFamilyId={fam['id']}").json['content']
    return fam, r.json, objects[0]


def _values(invoice: dict) -> dict:
    return {a['tag']: a.get('typedValue') for a in invoice['attributes']}


def test_one_definition_reads_a_german_and_an_english_invoice_each_as_it_writes_numbers_and_dates(api, setup):
    _, summary, invoice = _extract(api, setup, 'mueller-1.pdf')
    values = _values(invoice)
    assert values['invoiceNumber'] == 'RE-2026-05945' and values['invoiceDate'] == '2026-06-06'
    assert values['subtotal'] == 18255.23 and values['total'] == 21723.72 and values['currency'] == 'EUR'
    assert summary['options']['locale'] == 'auto'
    assert summary['options']['conventions'] == {'decimal': ',', 'dateOrder': 'DMY'}
    fam, summary, invoice = _extract(api, setup, 'acme-1.pdf')
    values = _values(invoice)
    assert values['invoiceNumber'] == 'INV-63416' and values['invoiceDate'] == '2026-06-27'
    assert values['subtotal'] == 8031.61 and values['total'] == 9637.93 and values['currency'] == 'GBP'
    assert summary['options']['conventions'] == {'decimal': '.', 'dateOrder': 'DMY'}
    open_ = api.get(f"/api/exceptions?documentFamilyId={fam['id']}&state=OPEN").json['content']
    # the supplier's name is in the letterhead (the definition's top-lines regex): a well-formed invoice, no exception
    assert open_ == []
    _, _, invoice = _extract(api, setup, 'tata-1.pdf')   # rupees, Indian grouping
    values = _values(invoice)
    assert values['total'] == 16308.12 and values['invoiceNumber'] == 'TT/26-27/28616'
    assert next(a for a in invoice['attributes'] if a['tag'] == 'total')['currency'] == 'INR'


def test_an_explicit_locale_still_wins_over_the_documents_conventions(api, setup):
    _, summary, invoice = _extract(api, setup, 'mueller-1.pdf', locale='en-US')
    assert summary['options'] == {'locale': 'en-US'}
    attrs = {a['tag']: a for a in invoice['attributes']}
    assert attrs['subtotal'].get('typedValue') is None and 'as en-US writes one' in attrs['subtotal']['normaliseError']


def test_dates_are_settled_by_what_the_document_says_beyond_its_dates(api, setup):
    """stellar-1 (08/05/2026, 09/04/2026) and garcia-1 (04/07/2026, 03/08/2026) have no date that
    settles the order; a careful reader still knows it (docs/api/extraction.md "How the date order
    is settled"): stellar's supplier is at "San Francisco, CA 94105" and bills in dollars (month
    first); garcia's due date is its issue date plus the "30 días" it states under one reading
    only (day first). Both read right, with no exception; the run says which evidence settled it."""
    fam, summary, invoice = _extract(api, setup, 'stellar-1.pdf')
    values = _values(invoice)
    assert values['invoiceDate'] == '2026-08-05' and values['dueDate'] == '2026-09-04', values
    assert summary['options']['conventions'] == {'decimal': '.', 'dateOrder': 'MDY'}
    assert summary['options']['conventionsFrom'] == {'decimal': 'numbers', 'dateOrder': 'country'}
    assert api.get(f"/api/exceptions?documentFamilyId={fam['id']}&state=OPEN").json['content'] == []
    fam, summary, invoice = _extract(api, setup, 'garcia-1.pdf')
    values = _values(invoice)
    assert values['invoiceDate'] == '2026-07-04' and values['dueDate'] == '2026-08-03', values
    assert summary['options']['conventions'] == {'decimal': ',', 'dateOrder': 'DMY'}
    assert summary['options']['conventionsFrom']['dateOrder'] == 'terms'
    assert api.get(f"/api/exceptions?documentFamilyId={fam['id']}&state=OPEN").json['content'] == []
    # the document's own unambiguous dates still win: mueller's dotted dates
    _, summary, _ = _extract(api, setup, 'mueller-1.pdf')
    assert summary['options']['conventionsFrom']['dateOrder'] == 'dates'


def test_a_date_the_document_does_not_settle_is_an_ambiguous_value_a_reviewer_settles(api, setup):
    """stellar writes 08/05/2026 and 09/04/2026; without its state and ZIP (``San Francisco``
    alone) nothing says which part is the day: no value is guessed; the exceptions say why; a
    correction is read with the run's conventions (still ambiguous when written the same way), an
    ISO date closes it."""
    fam, summary, invoice = _extract(api, setup, 'stellar-1.pdf', without(corpus_nodes('stellar-1.pdf'), ', CA 94105'))
    assert summary['options']['conventions'] == {'decimal': '.', 'dateOrder': None}
    assert summary['options']['conventionsFrom'] == {'decimal': 'numbers'}
    open_ = api.get(f"/api/exceptions?documentFamilyId={fam['id']}&state=OPEN").json['content']
    kinds = {e['taxon']: e for e in open_}
    assert kinds['invoice/invoiceDate']['exceptionType'] == 'AMBIGUOUS_VALUE'
    assert "'08/05/2026' is ambiguous" in kinds['invoice/invoiceDate']['message']
    assert kinds['invoice/dueDate']['exceptionType'] == 'AMBIGUOUS_VALUE'
    assert api.get(f"/api/exceptions?documentFamilyId={fam['id']}&exceptionType=AMBIGUOUS_VALUE").json[
        'totalElements'] == 2
    values = _values(invoice)
    assert values['invoiceDate'] is None and values['total'] == 9665.69
    attr = next(a for a in invoice['attributes'] if a['tag'] == 'invoiceDate')
    url = f"/api/stores/{setup['org']['slug']}/invoices/dataObjects/{invoice['id']}/attributes/{attr['id']}"
    r = api.put(url, {'value': '05/08/2026'})
    assert r.status == 200 and r.json.get('typedValue') is None and r.json['normaliseErrorType'] == 'AMBIGUOUS_VALUE'
    r = api.put(url, {'value': '2026-08-05'})
    assert r.status == 200 and r.json['typedValue'] == '2026-08-05'
    left = api.get(f"/api/exceptions?documentFamilyId={fam['id']}&state=OPEN").json['content']
    assert sorted((e['exceptionType'], e['taxon']) for e in left) == [('AMBIGUOUS_VALUE', 'invoice/dueDate')]


def test_label_lists_and_the_auto_locale_are_checked_when_written(api, org_id):
    def post(children, **body):
        return api.post('/api/data-definitions', {'organizationId': org_id, 'name': 'D', **body,
                                                  'taxons': [{'name': 'g', 'group': True, 'children': children}]})
    leaf = {'name': 'n', 'rules': [{'type': 'label', 'label': [f'Label {i}' for i in range(21)]}]}
    bad = post([leaf])
    assert bad.status == 400 and "taxon 'g/n' rule 1: label must be a list of 1 to 20 texts, not 21" in \
        bad.json['message'] and 'maxLabelsPerRule' in bad.json['message'], bad.json
    bad = post([{'name': 'n', 'rules': [{'type': 'label', 'label': ['Invoice No', 'x' * 101]}]}])
    assert bad.status == 400 and 'label[1] must be a text of 1 to 100 characters' in bad.json['message']
    bad = post([{'name': 'n', 'rules': [{'type': 'label', 'label': []}]}])
    assert bad.status == 400 and bad.json['error'] and bad.json['status'] == 400
    bad = post([{'name': 'n'}], metadata={'locale': 'xx'})
    assert bad.status == 400 and 'auto' in bad.json['message']
    ok = post([{'name': 'n', 'rules': [{'type': 'label', 'label': ['Invoice No', 'Rechnungsnummer']}]}],
              metadata={'locale': 'auto'})
    assert ok.status == 201, ok.json
