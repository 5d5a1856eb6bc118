"""The extraction engine over node lists (the parsed-document contract): rules, normalisers,
exceptions, budgets. The HTTP side is tests/api/test_extraction.py."""
from __future__ import annotations

import time
from decimal import Decimal

import pytest

from chalicelib.core import budget
from chalicelib.features.extraction import engine, taxons
from chalicelib.features.extraction.normalise import NotNormalised, normalise
from chalicelib.features.extraction.rules import MAX_TABLE_ROWS, ExtractionLimit
from tests.extraction_corpus import (
    invoice_definition,
    invoice_pdf,
    invoice_values,
    long_table_pdf,
    ocr_nodes,
    pdf_nodes,
    scanned,
)


def _objects(result):
    return [(o.path, {a['tag']: a['typedValue'] for a in o.attributes}) for o in result.objects]


def _tree(result):
    """The engine's objects as stored records (ids, parents), for ``assess``."""
    out = []
    for o in result.objects:
        attrs = [{**a, 'id': f"{o.key}/{a['tag']}"} for a in o.attributes]
        out.append({'id': o.key, 'parentId': o.parent, 'path': o.path, 'rowNum': o.row, 'attributes': attrs})
    return out


def test_the_definition_has_twenty_taxons_and_checks():
    definition = invoice_definition()
    taxons.check(definition)
    assert len(list(taxons.walk(definition))) == 20


def test_a_text_pdf_invoice_extracts_header_and_every_line_item():
    values = invoice_values()
    result = engine.extract(invoice_definition(), pdf_nodes(invoice_pdf(values)))
    (path, header), *items = _objects(result)
    assert path == 'invoice'
    assert header['invoiceNumber'] == 'INV-2026-0042' and header['poNumber'] == 'PO-77812'
    assert header['vendorVat'] == 'GB123456789' and header['iban'] == 'DE89370400440532013000'
    assert header['paymentTerms'] == 'Net 30' and header['customerId'] == 'C-1009'
    assert Decimal(str(header['tax'])) == values['tax']
    assert [(p, i['description'], i['quantity']) for p, i in items] == \
        [('invoice/lineItems', li['description'], li['quantity']) for li in values['lineItems']]
    assert not engine.assess(_tree(result), dict(taxons.walk(invoice_definition())))


def test_a_broken_invoice_raises_the_expected_exceptions():
    definition = invoice_definition()
    result = engine.extract(definition, pdf_nodes(invoice_pdf(invoice_values(broken=True))))
    found = engine.assess(_tree(result), dict(taxons.walk(definition)))
    assert sorted((e['exceptionType'], e['taxon']) for e in found.values()) == [
        ('INVALID_VALUE', 'invoice/invoiceDate'), ('REQUIRED_MISSING', 'invoice/dueDate'),
        ('VALIDATION_FAILED', 'invoice')]


def test_a_scanned_invoice_is_read_through_ocr_with_confidences():
    values = invoice_values(number='INV-2026-0099')
    nodes = ocr_nodes(scanned(invoice_pdf(values)))
    assert all(n['features'].get('confidence') is not None for n in nodes if n['nodeType'] == 'word')
    definition = invoice_definition(threshold=0.3)
    result = engine.extract(definition, nodes)
    (_, header), *items = _objects(result)
    assert header['invoiceNumber'] == 'INV-2026-0099'
    assert header['invoiceDate'] == '2026-03-14'
    assert Decimal(str(header['total'])) == values['total']
    assert [i['quantity'] for _, i in items] == [li['quantity'] for li in values['lineItems']]
    assert [Decimal(str(i['amount'])) for _, i in items] == [li['amount'] for li in values['lineItems']]
    conf = result.objects[0].attributes[0]['confidence']
    assert 0 < conf < 0.9   # the rule's 0.85 times the OCR words' confidence


def test_structured_tables_and_labels_without_boxes():
    """DOCX/HTML shape: paragraphs, table -> row -> cell; labels read the rest of a paragraph
    or the next cell."""
    nodes = [{'id': 'd', 'parentId': None, 'nodeType': 'document', 'index': 0, 'content': ''},
             {'id': 'h', 'parentId': 'd', 'nodeType': 'paragraph', 'index': 0, 'content': 'Invoice No: A-17'},
             {'id': 't', 'parentId': 'd', 'nodeType': 'table', 'index': 1, 'content': ''}]
    grid = [['Description', 'Qty', 'Unit Price', 'Amount'], ['Pens', '3', '1,50', '4,50'],
            ['Ink', '1', '1.000,00', '1.000,00'], ['Total', '', '', '1.004,50']]
    for r, row in enumerate(grid):
        nodes.append({'id': f'r{r}', 'parentId': 't', 'nodeType': 'row', 'index': r, 'content': ''})
        for c, text in enumerate(row):
            nodes.append({'id': f'r{r}c{c}', 'parentId': f'r{r}', 'nodeType': 'cell', 'index': c, 'content': text,
                          'features': {'row': r, 'column': c}})
    definition = [{'name': 'doc', 'group': True, 'children': [
        {'name': 'number', 'rules': [{'type': 'label', 'label': 'Invoice No'}]},
        {'name': 'total', 'type': 'currency', 'locale': 'de-DE',
         'rules': [{'type': 'label', 'label': 'Total', 'direction': 'right'}]},
        {'name': 'lines', 'group': True, 'cardinality': 'many', 'rules': [{'type': 'table'}], 'children': [
            {'name': 'description', 'rules': [{'type': 'column', 'header': 'Description'}]},
            {'name': 'amount', 'type': 'decimal', 'locale': 'de-DE', 'rules': [{'type': 'column', 'header': 'Amount'}]},
        ]}]}]
    taxons.check(definition)
    result = engine.extract(definition, nodes)
    assert _objects(result) == [('doc', {'number': 'A-17', 'total': 1004.5}),
                                ('doc/lines', {'description': 'Pens', 'amount': 4.5}),
                                ('doc/lines', {'description': 'Ink', 'amount': 1000.0})]
    assert result.objects[2].attributes[1]['dataFeatures']['nodeIds'] == ['r2c3']


@pytest.mark.parametrize(('text', 'taxon', 'locale', 'want'), [
    ('1,234.50', {'type': 'decimal'}, 'en-US', 1234.5),
    ('1.234,50', {'type': 'decimal'}, 'de-DE', 1234.5),
    ('(12.00)', {'type': 'currency'}, 'en-GB', -12.0),
    ('€ 9,99', {'type': 'currency'}, 'fr-FR', 9.99),
    ('1 000', {'type': 'number'}, 'fr-FR', 1000),
    ('03/04/2026', {'type': 'date'}, 'en-US', '2026-03-04'),
    ('03/04/2026', {'type': 'date'}, 'en-GB', '2026-04-03'),
    ('14. März 2026', {'type': 'date'}, 'de-DE', '2026-03-14'),
    ('March 14, 2026', {'type': 'date'}, 'en-US', '2026-03-14'),
    ('Yes', {'type': 'boolean'}, None, True),
    ('gbp', {'type': 'selection', 'options': ['EUR', 'GBP']}, None, 'GBP'),
])
def test_normalisers(text, taxon, locale, want):
    assert normalise(text, taxon, locale)[0] == want


@pytest.mark.parametrize(('text', 'taxon', 'reason'), [
    ('12.5', {'type': 'number'}, 'not a whole number'),
    ('31/02/2026', {'type': 'date', 'locale': 'en-GB'}, 'not a calendar date'),
    ('maybe', {'type': 'boolean'}, 'not yes or no'),
    ('CHF', {'type': 'selection', 'options': ['EUR']}, 'not one of the options (EUR)'),
    ('12,50', {'type': 'decimal', 'locale': 'en-US'}, 'not an amount as en-US writes one'),
    ('4.50', {'type': 'decimal', 'locale': 'de-DE'}, 'not an amount as de-DE writes one'),
])
def test_values_that_do_not_normalise_say_why(text, taxon, reason):
    with pytest.raises(NotNormalised, match=reason.replace('(', r'\(').replace(')', r'\)')):
        normalise(text, taxon, taxon.get('locale'))


def test_a_pathological_regex_runs_in_linear_time():
    """(a+)+$ backtracks exponentially in a backtracking engine; RE2 reads 200,000 characters of
    'a' in a blink, under a one-second budget."""
    nodes = [{'id': 'd', 'parentId': None, 'nodeType': 'document', 'index': 0, 'content': ''},
             {'id': 'p', 'parentId': 'd', 'nodeType': 'paragraph', 'index': 0, 'content': 'a' * 200_000 + '!'}]
    definition = [{'name': 'g', 'group': True, 'children': [
        {'name': 'x', 'required': True, 'rules': [{'type': 'regex', 'pattern': r'((a+)+)$'}]},
        {'name': 'y', 'rules': [{'type': 'regex', 'pattern': r'(a|aa|a?a)*(b)', 'group': 2}]}]}]
    taxons.check(definition)
    token = budget.start(1.0)
    try:
        started = time.perf_counter()
        result = engine.extract(definition, nodes)
        assert time.perf_counter() - started < 1.0
    finally:
        budget.end(token)
    found = engine.assess(_tree(result), dict(taxons.walk(definition)))
    assert [e['message'] for e in found.values()] == [
        'x (g/x) was not found in the document: enter it from the document']


def test_a_pattern_re2_cannot_run_is_refused_with_a_clear_error():
    definition = [{'name': 'g', 'group': True, 'children': [
        {'name': 'x', 'rules': [{'type': 'regex', 'pattern': r'(?=a)(\w+)'}]}]}]
    with pytest.raises(taxons.DefinitionError, match=r"taxon 'g/x' rule 1: the pattern is not a regular expression "
                                                     r'the linear-time engine \(RE2\) runs'):
        taxons.check(definition)


def _lines_table(rows: int) -> list[dict]:
    """A laid-out table of ``rows`` lines (PDF shape: line -> word with boxes), one page each 60."""
    nodes = [{'id': 'd', 'parentId': None, 'nodeType': 'document', 'index': 0, 'content': ''}]
    header = [('Description', 50, 100), ('Qty', 300, 320), ('Amount', 470, 510)]
    page_no = 0
    for i in range(-1, rows):
        if (i + 1) % 60 == 0:
            page_no += 1
            nodes.append({'id': f'p{page_no}', 'parentId': 'd', 'nodeType': 'page', 'index': page_no,
                          'features': {'page': page_no, 'width': 595, 'height': 842}, 'content': ''})
        y = 40 + ((i + 1) % 60) * 12
        words = header if i < 0 else [(f'Item{i}', 50, 80), ('1', 315, 320), ('2.00', 490, 510)]
        lid = f'l{i + 1}'
        nodes.append({'id': lid, 'parentId': f'p{page_no}', 'nodeType': 'line', 'index': i + 1,
                      'content': ' '.join(w[0] for w in words),
                      'features': {'page': page_no, 'bbox': [50, y, 510, y + 9]}})
        for k, (text, x0, x1) in enumerate(words):
            nodes.append({'id': f'{lid}.w{k}', 'parentId': lid, 'nodeType': 'word', 'index': k, 'content': text,
                          'features': {'page': page_no, 'bbox': [x0, y, x1, y + 9]}})
    return nodes


LINES = [{'name': 'g', 'group': True, 'children': [
    {'name': 'rows', 'group': True, 'cardinality': 'many', 'rules': [{'type': 'table'}], 'children': [
        {'name': 'description', 'rules': [{'type': 'column', 'header': 'Description'}]},
        {'name': 'qty', 'type': 'number', 'rules': [{'type': 'column', 'header': 'Qty'}]},
        {'name': 'amount', 'type': 'decimal', 'rules': [{'type': 'column', 'header': 'Amount'}]}]}]}]


def test_a_ten_thousand_row_table_stops_at_its_cap_with_a_clear_error():
    nodes = _lines_table(10_000)
    token = budget.start(5.0)
    try:
        started = time.perf_counter()
        with pytest.raises(ExtractionLimit) as caught:
            engine.extract(LINES, nodes)
        assert time.perf_counter() - started < 5.0
    finally:
        budget.end(token)
    assert caught.value.status == 422 and caught.value.extra['limit'] == 'maxTableRows'
    assert f"the table of group 'g/rows' has more than {MAX_TABLE_ROWS:,} rows" in caught.value.message
    # a table within the cap reads every row, over its pages
    result = engine.extract(LINES, _lines_table(150))
    assert len(result.objects) == 151 and _objects(result)[-1] == ('g/rows', {'description': 'Item149', 'qty': 1,
                                                                               'amount': 2.0})


def test_a_real_multi_page_pdf_table():
    result = engine.extract(LINES, pdf_nodes(long_table_pdf(150)))
    assert [o['description'] for _, o in _objects(result)[1:]] == [f'Item {i}' for i in range(150)]


def test_the_objects_cap_is_named():
    token = budget.start(5.0)
    try:
        big = engine.MAX_OBJECTS
        engine.MAX_OBJECTS = 100
        with pytest.raises(ExtractionLimit, match='maxObjectsPerFamily'):
            engine.extract(LINES, _lines_table(150))
    finally:
        engine.MAX_OBJECTS = big
        budget.end(token)


def _read(pdf: bytes) -> list[dict]:
    """The parse stage's readers (features/parsing/readers), as the stage calls them."""
    from chalicelib.features.parsing import readers
    return readers.read(pdf, media_type='application/pdf', filename='invoice.pdf',
                        deadline=time.monotonic() + 120).nodes


def test_the_parse_stage_readers_nodes_extract_the_same():
    values = invoice_values(number='INV-2026-0500')
    result = engine.extract(invoice_definition(), _read(invoice_pdf(values)))
    (_, header), *items = _objects(result)
    assert header['invoiceNumber'] == 'INV-2026-0500' and Decimal(str(header['total'])) == values['total']
    assert [(i['description'], i['quantity'], Decimal(str(i['amount']))) for _, i in items] == \
        [(li['description'], li['quantity'], li['amount']) for li in values['lineItems']]


def test_a_scan_read_by_the_parse_stage_goes_to_review_where_ocr_lost_a_value():
    """The stage's OCR reads the scan in blocks (a table's columns come as separate lines): the
    table rule rebuilds visual rows. A value OCR did not read is never guessed: it is missing and
    the line's validation raises an exception for the reviewer."""
    values = invoice_values(number='INV-2026-0501')
    definition = invoice_definition()
    result = engine.extract(definition, _read(scanned(invoice_pdf(values))))
    (_, header), *items = _objects(result)
    assert header['invoiceNumber'] == 'INV-2026-0501' and header['invoiceDate'] == '2026-03-14'
    assert header['customerName'] == 'Globex Corporation' and header['poNumber'] == 'PO-77812'
    assert Decimal(str(header['total'])) == values['total'] and Decimal(str(header['tax'])) == values['tax']
    assert [(i['description'], Decimal(str(i['unitPrice'])), Decimal(str(i['amount']))) for _, i in items] == \
        [(li['description'], li['unitPrice'], li['amount']) for li in values['lineItems']]
    found = engine.assess(_tree(result), dict(taxons.walk(definition)))
    flagged = {e['dataObjectId'] for e in found.values() if e['exceptionType'] == 'VALIDATION_FAILED'}
    for obj, (_, item), want in zip(result.objects[1:], items, values['lineItems'], strict=True):
        assert item['quantity'] == want['quantity'] or (item['quantity'] is None and obj.key in flagged)
