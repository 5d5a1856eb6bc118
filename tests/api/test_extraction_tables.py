"""The table rule through the HTTP layer (docs/api/extraction.md "Tables"): documents made by
reportlab and read by the platform's readers (tests/extraction_tables_corpus.py), written as a
family's document, extracted with ``POST .../extract``: a table over two pages with page
furniture and its header not repeated; a broken row on page 2; two column rules on one taxon;
the header list checked when written; on the issue-48 corpus (tests/fixtures/invoices): its
two-page tables (reportlab, LibreOffice, Chromium), a table opening with a section heading, the
1.5-degree 200-dpi scan, and one definition with several header texts per column reading three
layouts."""
from __future__ import annotations

from decimal import Decimal

import pytest

from tests.extraction_tables_corpus import (
    GERMAN,
    ONE_HEADER,
    Doc,
    corpus_definition,
    corpus_doc,
    line_item_definition,
    parse,
    two_page_invoice,
)
from tests.support import create


@pytest.fixture
def lines(api, org_id, bucket):
    project = create(api, 'projects', org_id)
    api.post('/api/task-statuses', {'organizationId': org_id, 'slug': 'to-review', 'label': 'To review',
                                    'statusType': 'OPEN'})
    create(api, 'data-stores', org_id, projectId=project['id'], name='Lines', slug='lines')
    org = api.get(f'/api/organizations/{org_id}').json
    return {'project': project['id'], 'org': org}


def _definition(api, lines, slug: str, taxons: list[dict]) -> None:
    r = api.post('/api/data-definitions', {'organizationId': lines['org']['id'], 'name': slug, 'slug': slug,
                                           'taxons': taxons})
    assert r.status == 201, r.json


def _extract(api, lines, doc: Doc, definition: str = 'lines') -> dict:
    fam = create(api, 'document-families', lines['org']['id'], projectId=lines['project'], path='invoices/x.pdf')
    r = api.put(f"/api/document-families/{fam['id']}/document", {'version': 0, 'nodes': parse(doc)})
    assert r.status == 200, r.json
    r = api.post(f"/api/document-families/{fam['id']}/extract",
                 {'dataDefinition': definition, 'dataStore': 'lines', 'statusSlug': 'to-review'})
    assert r.status == 200, r.json
    base = f"/api/stores/{lines['org']['slug']}/lines"
    objects = api.get(f"{base}/dataObjects?path=invoice/lineItems&documentFamilyId={fam['id']}&pageSize=100").json
    rows = [{a['tag']: a for a in o['attributes']} for o in sorted(objects['content'], key=lambda o: o['rowNum'])]
    open_ = api.get(f"/api/exceptions?documentFamilyId={fam['id']}&state=OPEN&pageSize=100").json['content']
    return {'summary': r.json, 'rows': rows, 'objects': objects['content'], 'exceptions': open_}


def _typed(rows: list[dict]) -> list[tuple]:
    return [(r['description']['typedValue'], r['quantity']['typedValue'], Decimal(str(r['unitPrice']['typedValue'])),
             Decimal(str(r['amount']['typedValue']))) for r in rows]


def _written(doc: Doc) -> list[tuple]:
    return [(li['description'], li['quantity'], li['unitPrice'], li['amount']) for li in doc.items]


def test_a_two_page_table_without_its_header_repeated_and_with_furniture_reads_every_row_and_no_junk(api, lines):
    _definition(api, lines, 'lines', line_item_definition(headers=ONE_HEADER))
    doc = two_page_invoice(header_again=False)   # page 2's rows line up under page 1's columns
    got = _extract(api, lines, doc)
    assert _typed(got['rows']) == _written(doc)      # the 6 rows of page 2, nothing from the furniture
    assert {r['amount']['dataFeatures']['page'] for r in got['rows'][14:]} == {2}
    assert got['exceptions'] == [] and got['summary']['status'] == 'CLEAN', got['exceptions']


def test_a_broken_row_and_a_row_missing_its_amount_on_page_two_raise_their_exceptions(api, lines):
    _definition(api, lines, 'lines', line_item_definition(headers=ONE_HEADER))
    doc = two_page_invoice(broken=17, blank=18)
    got = _extract(api, lines, doc)
    assert len(got['rows']) == 20      # the row without its amount is kept, not lost nor joined to another
    row_of = {o['id']: o['rowNum'] for o in got['objects']}
    assert sorted((row_of[e['dataObjectId']], e['exceptionType'], e['taxon']) for e in got['exceptions']) == \
        [(17, 'VALIDATION_FAILED', 'invoice/lineItems'), (18, 'REQUIRED_MISSING', 'invoice/lineItems/amount'),
         (18, 'VALIDATION_FAILED', 'invoice/lineItems')]
    broken = next(r for r in got['rows'] if r['description']['typedValue'] == doc.items[17]['description'])
    assert Decimal(str(broken['amount']['typedValue'])) == doc.items[17]['amount']
    assert broken['amount']['dataFeatures']['page'] == 2
    blank = next(r for r in got['rows'] if r['description']['typedValue'] == doc.items[18]['description'])
    assert blank['amount']['value'] is None and blank['quantity']['typedValue'] == doc.items[18]['quantity']


def test_one_general_definition_reads_the_corpus_layouts(api, lines):
    """Every layout's header texts in one definition: reportlab (en-GB), LibreOffice from DOCX
    (de-DE, a 'Pos.' column no child reads) and Chromium (fr-FR) invoices of the corpus."""
    for file in ('acme-1.pdf', 'mueller-1.pdf', 'dupont-1.pdf'):
        doc, locale = corpus_doc(file)
        _definition(api, lines, f'general-{locale.lower()}', corpus_definition(locale))
        got = _extract(api, lines, doc, f'general-{locale.lower()}')
        assert _typed(got['rows']) == _written(doc), file


def test_two_column_rules_on_one_taxon_are_both_tried(api, lines):
    taxons = line_item_definition(headers={'description': ['Description', 'Beschreibung'], 'quantity': ['Qty', 'Menge'],
                                           'unitPrice': ['Unit Price', 'Einzelpreis'], 'amount': ['Amount']})
    amount = taxons[0]['children'][1]['children'][3]
    amount['rules'] = [{'type': 'column', 'header': 'Amount'}, {'type': 'column', 'header': 'Betrag'}]
    _definition(api, lines, 'two-rules', taxons)
    for doc in (two_page_invoice(page1=3, page2=2), two_page_invoice(language=GERMAN, page1=3, page2=2)):
        got = _extract(api, lines, doc, 'two-rules')
        assert _typed(got['rows']) == _written(doc)


def test_a_header_list_is_checked_when_written(api, org_id):
    def post(header):
        taxons = line_item_definition()
        taxons[0]['children'][1]['children'][0]['rules'] = [{'type': 'column', 'header': header}]
        return api.post('/api/data-definitions', {'organizationId': org_id, 'name': 'D', 'taxons': taxons})
    eleven = [f'h{i}' for i in range(11)]
    for header, says in (([], 'header must list 1 to 10 texts, not 0'),
                         (eleven, 'header must list 1 to 10 texts, not 11 (limit maxHeaderTexts)'),
                         (['Description', ''], 'header 2 must be a text of 1 to 200 characters'),
                         (['Description', 7], 'header 2 must be a text'),
                         (['x' * 201], 'header 1 must be a text of 1 to 200 characters'),
                         ({'text': 'Description'}, 'header must be a text of 1 to 200 characters or a list')):
        bad = post(header)
        assert bad.status == 400 and bad.json['status'] == 400 and bad.json['error'], bad.json
        assert "taxon 'invoice/lineItems/description' rule 1: " + says in bad.json['message'], bad.json['message']
    assert post(['Description', 'Beschreibung', 'Désignation']).status == 201


_LAYOUT_HEADERS = {  # each layout's own header texts, one per column (as a definition for that layout has them)
    'acme-3.pdf': ONE_HEADER, 'scan-acme-1-200dpi-1.5deg.pdf': ONE_HEADER,
    'mueller-2.pdf': {'description': 'Bezeichnung', 'quantity': 'Menge', 'unitPrice': 'Einzelpreis',
                      'amount': 'Betrag'},
    'garcia-1.pdf': {'description': 'Concepto', 'quantity': 'Cantidad', 'unitPrice': 'Precio unitario',
                     'amount': 'Importe'}}


@pytest.mark.parametrize('file', list(_LAYOUT_HEADERS))
def test_corpus_tables_over_pages_with_headings_and_skew_are_read_whole(api, lines, file):
    """Two-page tables from reportlab (acme-3) and LibreOffice (mueller-2, from DOCX), a table
    opening with a section heading (garcia-1, LibreOffice from HTML), a
    200-dpi scan turned by 1.5 degrees (OCR): every row, each value as printed, no exception.
    Every other text document of the corpus: tests/unit/test_extraction_table_reading.py."""
    doc, locale = corpus_doc(file)
    _definition(api, lines, 'corpus', corpus_definition(locale, _LAYOUT_HEADERS[file]))
    got = _extract(api, lines, doc, 'corpus')
    typed, written = _typed(got['rows']), _written(doc)
    if file.startswith('scan-'):   # OCR may misread a letter of a description; the numbers must hold
        typed, written = [t[1:] for t in typed], [w[1:] for w in written]
    assert typed == written
    assert [e for e in got['exceptions'] if e['taxon'].startswith('invoice/lineItems')] == []


def test_an_ocr_confusion_in_a_line_item_is_asked_not_stored_as_sure(api, lines):
    """The corpus's 150-dpi scan (mueller-1, 0.8 degrees): Tesseract reads ``Hydrauliköl HLP 46
    (20 l)`` as ``(20 |)``; its columns have no threshold (a description's correct OCR is often
    at 0.5-0.9), so it was stored as sure, a wrong value with no exception. A ``|`` in an OCR'd
    value is a typical confusion (docs/api/extraction.md "OCR's confusions"): the value is at most
    0.5 confident and a LOW_CONFIDENCE warning on its row; the other rows, OCR'd too, none."""
    doc, locale = corpus_doc('scan-mueller-1-150dpi-0.8deg.pdf')
    _definition(api, lines, 'corpus', corpus_definition(locale))
    got = _extract(api, lines, doc, 'corpus')
    suspect = [r for r in got['rows'] if '|' in (r['description']['value'] or '')]
    assert [r['description']['value'] for r in suspect] == ['Hydrauliköl HLP 46 (20 |)'], got['rows']
    attr = suspect[0]['description']
    assert attr['confidence'] <= 0.5 and "'|'" in attr['dataFeatures']['ocrSuspect'], attr
    on_items = [(e['exceptionType'], e['taxon'], e['dataObjectId']) for e in got['exceptions']
                if e['taxon'].startswith('invoice/lineItems')]
    row = next(o for o in got['objects'] if any(a['id'] == attr['id'] for a in o['attributes']))
    assert on_items == [('LOW_CONFIDENCE', 'invoice/lineItems/description', row['id'])], on_items
    assert "read by OCR with '|' in it" in next(e['message'] for e in got['exceptions']
                                                 if e['dataObjectId'] == row['id'])
    # the reviewer's value is no OCR reading: the warning closes
    url = f"/api/stores/{lines['org']['slug']}/lines/dataObjects/{row['id']}/attributes/{attr['id']}"
    r = api.put(url, {'value': 'Hydrauliköl HLP 46 (20 l)'})
    assert r.status == 200 and 'ocrSuspect' not in r.json['dataFeatures'], r.json
    still = api.get(f"/api/exceptions?dataObjectId={row['id']}&state=OPEN").json['content']
    assert still == [], still
