"""The layout memory through the HTTP layer (docs/api/extraction.md "Layout memory"): a
reviewer's correction by nodeIds on supplier A's invoice teaches the definition where the field
stands; supplier A's next invoice (same layout, other values) is read there with no exception and
no review task; supplier B's is not affected; a memory whose anchor is gone falls back to the
rules; memories are listed and removed per definition, bounded, and another organization's are a 404."""
from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from tests.api.test_extraction import _base, setup  # noqa: F401 - fixture
from tests.extraction_corpus import invoice_definition, invoice_pdf, invoice_values, pdf_nodes
from tests.support import create
from tests.unit.test_label_rules import without

IBAN_A, IBAN_B = 'DE89370400440532013000', 'GB82WEST12345698765432'


def _definition():
    """The corpus definition, its PO number required and looked for under a label these invoices
    do not print ("Order Ref", its label too: the label: value fallback looks for a taxon's own
    label, docs/api/extraction.md "Labels"): a field the rules miss until a reviewer points at it."""
    taxons = copy.deepcopy(invoice_definition(threshold=0.5))
    po = next(c for c in taxons[0]['children'] if c['name'] == 'poNumber')
    po.update(required=True, label='Order Ref', rules=[{'type': 'label', 'label': 'Order Ref'}])
    return taxons


@pytest.fixture
def memo(api, setup):  # noqa: F811
    r = api.post('/api/data-definitions', {'organizationId': setup['org']['id'], 'name': 'Invoice PO',
                                           'slug': 'invoice-po', 'taxons': _definition()})
    assert r.status == 201, r.json
    return {**setup, 'memo': r.json}


def _supplier(which: str, number: str, po: str, **kw):
    values = invoice_values(number=number, **kw)
    values['poNumber'] = po
    if which == 'B':
        values.update(vendorName='Initech Components GmbH', vendorVat='DE987654321', iban=IBAN_B)
    else:
        values['iban'] = IBAN_A
    return values


def _family(api, memo, values, *, edit=None):
    nodes = pdf_nodes(invoice_pdf(values))
    if edit:
        nodes = edit(nodes)
    fam = create(api, 'document-families', memo['org']['id'], projectId=memo['project'],
                 path=f"invoices/{values['invoiceNumber']}.pdf")
    r = api.put(f"/api/document-families/{fam['id']}/document", {'version': 0, 'nodes': nodes})
    assert r.status == 200, r.json
    return fam, nodes


def _extract(api, fam):
    r = api.post(f"/api/document-families/{fam['id']}/extract",
                 {'dataDefinition': 'invoice-po', 'dataStore': 'invoices', 'statusSlug': 'to-review'})
    assert r.status == 200, r.json
    return r.json


def _invoice(api, memo, fam):
    obj = api.get(f"{_base(memo)}/dataObjects?path=invoice&documentFamilyId={fam['id']}").json['content'][0]
    return obj, {a['tag']: a for a in obj['attributes']}


def _word(nodes, text):
    return next(n for n in nodes if n['nodeType'] == 'word' and n['content'] == text)


def _point(api, obj, attr, ids):
    r = api.put(f"/api/data-objects/{obj['id']}/attributes/{attr['id']}", {'nodeIds': ids})
    assert r.status == 200, r.json
    return r.json


def _teach_a(api, memo):
    values = _supplier('A', 'INV-A-1', 'PO-77812')
    fam, nodes = _family(api, memo, values)
    summary = _extract(api, fam)
    assert summary['status'] == 'REVIEW' and 'layoutMemory' not in summary
    obj, by_tag = _invoice(api, memo, fam)
    assert by_tag['poNumber']['value'] is None
    fixed = _point(api, obj, by_tag['poNumber'], [_word(nodes, 'PO-77812')['id']])
    assert fixed['value'] == 'PO-77812' and fixed['dataObject']['exceptionCount'] == 0, fixed
    assert fixed['layoutMemory']['kept'] is True, fixed['layoutMemory']
    assert fixed['layoutMemory']['fingerprint'] == {'kind': 'supplier', 'hint': 'IBAN ...3000'}
    return fixed['layoutMemory']['memoryId']


def test_the_next_invoice_of_the_supplier_is_read_where_the_reviewer_pointed(api, memo):
    memory_id = _teach_a(api, memo)
    # supplier A's next invoice: another number, PO number and items, the same layout
    values = _supplier('A', 'INV-A-2', 'PO-2026-99001', items=[('Bolt', 5, Decimal('0.35'))])
    fam, _ = _family(api, memo, values)
    summary = _extract(api, fam)
    obj, by_tag = _invoice(api, memo, fam)
    po = by_tag['poNumber']
    assert po['value'] == 'PO-2026-99001' and po['typedValue'] == 'PO-2026-99001', po
    assert po['dataFeatures']['rule'] == 'memory' and po['confidence'] >= 0.9
    assert summary['openExceptions'] == 0 and summary['status'] == 'CLEAN' and not summary.get('taskId'), summary
    assert summary['layoutMemory'] == {'memoryIds': [memory_id], 'applied': ['invoice/poNumber'], 'fellBack': []}
    # the rest is read by the rules as before
    assert by_tag['invoiceNumber']['value'] == 'INV-A-2' and by_tag['invoiceNumber']['dataFeatures']['rule'] == 'label'
    # supplier B (another IBAN, VAT id and issuer): not affected, the rules miss it as before
    fam_b, _ = _family(api, memo, _supplier('B', 'INV-B-1', 'PO-B-555'))
    summary_b = _extract(api, fam_b)
    _, by_tag_b = _invoice(api, memo, fam_b)
    assert by_tag_b['poNumber']['value'] is None and 'layoutMemory' not in summary_b
    assert summary_b['status'] == 'REVIEW'


def test_a_memory_that_stops_matching_falls_back_to_the_rules(api, memo):
    memory_id = _teach_a(api, memo)

    def relabel(nodes):   # the invoice prints "Order Ref:" where the taught "PO Number:" stood
        out = []
        for n in nodes:
            n = dict(n)
            if n['nodeType'] == 'word' and n['content'] in ('PO', 'Number:'):
                n['content'] = {'PO': 'Order', 'Number:': 'Ref:'}[n['content']]
            if n['nodeType'] == 'line' and n['content'].startswith('PO Number:'):
                n['content'] = n['content'].replace('PO Number:', 'Order Ref:', 1)
            out.append(n)
        return out
    fam, _ = _family(api, memo, _supplier('A', 'INV-A-3', 'PO-31337'), edit=relabel)
    summary = _extract(api, fam)
    _, by_tag = _invoice(api, memo, fam)
    assert by_tag['poNumber']['value'] == 'PO-31337' and by_tag['poNumber']['dataFeatures']['rule'] == 'label'
    assert summary['layoutMemory'] == {'memoryIds': [memory_id], 'applied': [], 'fellBack': ['invoice/poNumber']}


def test_memories_are_listed_removed_bounded_and_tenant_scoped(api, memo, users, monkeypatch):
    from chalicelib.features.extraction import memories
    from tests.conftest import make_org, make_user
    memory_id = _teach_a(api, memo)
    definition = memo['memo']['id']
    url = f'/api/data-definitions/{definition}/layout-memories'
    page = api.as_key(users['VIEWER']).get(url)
    assert page.status == 200 and page.json['totalElements'] == 1, page.json
    [memory] = page.json['content']
    assert memory['id'] == memory_id and memory['kind'] == 'supplier' and memory['hint'] == 'IBAN ...3000'
    place = memory['fields']['invoice/poNumber']
    assert place['page'] == 1 and place['anchor']['text'] == 'po number' and len(place['box']) == 4
    assert IBAN_A not in str(memory)   # the token is kept as a hash
    # another organization's member: the definition and its memories are a 404
    other = make_org(api)
    _, key = make_user(api, other['id'], 'MANAGE')
    them = api.as_key(key)
    assert them.get(url).status == 404 and them.delete(f'{url}/{memory_id}').status == 404
    assert them.get(f'/api/layout-memories/{memory_id}').status == 404
    # the memory under another definition of the organization is not found there
    other_def = api.post('/api/data-definitions', {'organizationId': memo['org']['id'], 'name': 'x', 'slug': 'x',
                                                   'taxons': _definition()}).json
    assert api.delete(f"/api/data-definitions/{other_def['id']}/layout-memories/{memory_id}").status == 404
    # a viewer may not remove it; a member (who may correct) may
    assert api.as_key(users['VIEWER']).delete(f'{url}/{memory_id}').status == 403
    assert api.as_key(users['MEMBER']).delete(f'{url}/{memory_id}').status == 204
    assert api.get(url).json['totalElements'] == 0
    fam, _ = _family(api, memo, _supplier('A', 'INV-A-4', 'PO-4'))
    assert 'layoutMemory' not in _extract(api, fam)
    # bounds: past MAX_MEMORIES a new kind of document is not kept (the correction stands)
    monkeypatch.setattr(memories, 'MAX_MEMORIES', 1)
    _teach_a(api, memo)
    values = _supplier('B', 'INV-B-2', 'PO-B-2')
    fam_b, nodes_b = _family(api, memo, values)
    _extract(api, fam_b)
    obj, by_tag = _invoice(api, memo, fam_b)
    r = _point(api, obj, by_tag['poNumber'], [_word(nodes_b, 'PO-B-2')['id']])
    assert r['value'] == 'PO-B-2' and r['layoutMemory']['kept'] is False
    assert 'maxLayoutMemories' in r['layoutMemory']['reason']
    # past MAX_FIELDS the field taught longest ago gives way
    monkeypatch.setattr(memories, 'MAX_FIELDS', 1)
    fam_a, nodes_a = _family(api, memo, _supplier('A', 'INV-A-5', 'PO-5'))
    _extract(api, fam_a)
    obj, by_tag = _invoice(api, memo, fam_a)
    r = _point(api, obj, by_tag['customerId'], [_word(nodes_a, 'C-1009')['id']])
    assert r['layoutMemory']['kept'] is True
    [memory] = api.get(url).json['content']
    assert list(memory['fields']) == ['invoice/customerId']
    # a line item's value is not learned (its place changes with its row)
    items = api.get(f"{_base(memo)}/dataObjects?path=invoice/lineItems&documentFamilyId={fam_a['id']}").json['content']
    desc = next(a for a in items[0]['attributes'] if a['tag'] == 'description')
    r = _point(api, items[0], desc, [_word(nodes_a, 'Gadget')['id']])
    assert r['layoutMemory']['kept'] is False and 'line items' in r['layoutMemory']['reason']
    # a deleted definition takes its memories with it
    assert api.delete(f"/api/data-definitions/{definition}").status == 204
    assert api.get(f'/api/layout-memories/{memory_id}').status == 404


def _corpus_nodes(name: str) -> list[dict]:
    """A corpus invoice (tests/fixtures/invoices) parsed by the parse stage's readers."""
    import time
    from pathlib import Path

    from chalicelib.features.parsing import readers
    path = Path(__file__).resolve().parents[1] / 'fixtures' / 'invoices' / name
    return readers.read(path.read_bytes(), media_type='application/pdf', filename=name,
                        deadline=time.monotonic() + 60).nodes


def test_a_corpus_suppliers_next_invoice_is_read_where_the_reviewer_pointed(api, setup):  # noqa: F811
    """tata-1 and tata-2 of the corpus (one supplier, its GSTIN; the second's table longer, its
    totals lower): the general definition with its tax looked for under a label tata does not
    print (the general definition reads it right since its label lists); the reviewer points at
    the tax's words; tata-2's tax is read there, right."""
    import json
    from pathlib import Path
    general = json.loads((Path(__file__).resolve().parents[1] / 'fixtures' / 'invoices' / 'definitions' /
                          'general.json').read_text(encoding='utf-8'))
    tax_taxon = next(t for t in general['taxons'][0]['children'] if t['name'] == 'tax')
    tax_taxon.update(label='Levy', rules=[{'type': 'label', 'label': 'Levy'}])
    r = api.post('/api/data-definitions', {'organizationId': setup['org']['id'], **general})
    assert r.status == 201, r.json
    families = {}
    for name in ('tata-1.pdf', 'tata-2.pdf'):
        fam = create(api, 'document-families', setup['org']['id'], projectId=setup['project'], path=f'corpus/{name}')
        nodes = _corpus_nodes(name)
        assert api.put(f"/api/document-families/{fam['id']}/document", {'version': 0, 'nodes': nodes}).status == 200
        families[name] = (fam, nodes)
    body = {'dataDefinition': general['slug'], 'dataStore': 'invoices', 'statusSlug': 'to-review'}
    fam1, nodes1 = families['tata-1.pdf']
    assert api.post(f"/api/document-families/{fam1['id']}/extract", body).status == 200
    obj, by_tag = _invoice(api, setup, fam1)
    assert by_tag['tax'].get('typedValue') != 2487.68   # what the rules read is not the tax
    fixed = _point(api, obj, by_tag['tax'], [_word(nodes1, '2,487.68')['id']])
    assert fixed['typedValue'] == 2487.68 and fixed['layoutMemory']['kept'] is True, fixed
    assert fixed['layoutMemory']['fingerprint']['kind'] == 'supplier'
    fam2, _ = families['tata-2.pdf']
    summary = api.post(f"/api/document-families/{fam2['id']}/extract", body).json
    _, by_tag2 = _invoice(api, setup, fam2)
    tax = by_tag2['tax']
    assert tax['typedValue'] == 4410.34 and tax['dataFeatures']['rule'] == 'memory', tax
    assert not tax.get('dataExceptions') and summary['layoutMemory']['applied'] == ['invoice/tax']


def test_a_taught_date_order_reads_the_suppliers_next_ambiguous_dates(api, setup):  # noqa: F811
    """stellar-1 and stellar-2 of the corpus without their state and ZIP (a supplier's month-first
    dates, nothing in either document settles the order: with ``CA 94105`` and its dollars, the
    supplier's country would, date_order.py): the general definition (locale "auto") leaves stellar-1's
    ``08/05/2026`` ambiguous; the reviewer points at it with its value 2026-08-05: the memory
    learns month first, and stellar-2's ``04/01/2026`` and ``05/01/2026`` read month first with no
    AMBIGUOUS_VALUE. Another supplier (other labels: another layout fingerprint) still gets its
    ambiguous date as an exception."""
    import json
    from pathlib import Path
    general = json.loads((Path(__file__).resolve().parents[1] / 'fixtures' / 'invoices' / 'definitions' /
                          'general.json').read_text(encoding='utf-8'))
    assert general['metadata']['locale'] == 'auto'
    assert api.post('/api/data-definitions', {'organizationId': setup['org']['id'], **general}).status == 201
    body = {'dataDefinition': general['slug'], 'dataStore': 'invoices', 'statusSlug': 'to-review'}

    def run(name, nodes):
        fam = create(api, 'document-families', setup['org']['id'], projectId=setup['project'], path=f'corpus/{name}')
        assert api.put(f"/api/document-families/{fam['id']}/document", {'version': 0, 'nodes': nodes}).status == 200
        summary = api.post(f"/api/document-families/{fam['id']}/extract", body).json
        return (summary, *_invoice(api, setup, fam))

    nodes1 = without(_corpus_nodes('stellar-1.pdf'), ', CA 94105')
    _, obj, by_tag = run('stellar-1.pdf', nodes1)
    assert by_tag['invoiceDate']['normaliseErrorType'] == 'AMBIGUOUS_VALUE', by_tag['invoiceDate']
    r = api.put(f"/api/data-objects/{obj['id']}/attributes/{by_tag['invoiceDate']['id']}",
                {'value': '2026-08-05', 'nodeIds': [_word(nodes1, '08/05/2026')['id']]})
    assert r.status == 200 and r.json['typedValue'] == '2026-08-05', r.json
    assert r.json['layoutMemory']['kept'] is True and r.json['layoutMemory']['conventions'] == {'dateOrder': 'MDY'}
    memory = api.get(f"/api/layout-memories/{r.json['layoutMemory']['memoryId']}").json
    assert memory['conventions'] == {'dateOrder': 'MDY'}

    nodes2 = without(_corpus_nodes('stellar-2.pdf'), ', CA 94105')
    summary, _, by_tag2 = run('stellar-2.pdf', nodes2)
    assert by_tag2['invoiceDate']['typedValue'] == '2026-04-01', by_tag2['invoiceDate']
    assert by_tag2['dueDate']['typedValue'] == '2026-05-01', by_tag2['dueDate']   # not taught: the order is
    assert not any(x['exceptionType'] == 'AMBIGUOUS_VALUE'
                   for a in (by_tag2['invoiceDate'], by_tag2['dueDate']) for x in a.get('dataExceptions') or [])
    assert summary['layoutMemory']['conventions'] == {'dateOrder': 'MDY'}, summary

    def other_supplier(nodes):   # another issuer's labels: "Bill To:" -> "Sold To:", "Due Date:" -> "Payable:"
        out = []
        for n in nodes:
            n = dict(n)
            if n['nodeType'] == 'word' and n['content'] in ('Bill', 'Due'):
                n['content'] = {'Bill': 'Sold', 'Due': 'Payable'}[n['content']]
            if n['nodeType'] == 'line':
                n['content'] = n['content'].replace('Bill To:', 'Sold To:').replace('Due Date:', 'Payable Date:')
            out.append(n)
        return out
    summary3, _, by_tag3 = run('other.pdf', other_supplier(nodes2))
    assert by_tag3['invoiceDate'].get('typedValue') is None
    assert by_tag3['invoiceDate']['normaliseErrorType'] == 'AMBIGUOUS_VALUE', by_tag3['invoiceDate']
    assert 'conventions' not in (summary3.get('layoutMemory') or {})
