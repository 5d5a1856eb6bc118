"""The label rule and its fallback (features/extraction/labels.py, docs/api/extraction.md "Labels"):
label lists in several languages read by one definition over the invoice corpus
(tests/fixtures/invoices, parsed by the parse stage's readers), a value kept to its own line,
cell or box (never the next box's label), a value far right on its line, the box below, the
"label: value" fallback, and the list's bounds when a definition is written. The HTTP side is
tests/api/test_extraction_labels.py (this file's name differs: pytest collects test modules by
basename)."""
from __future__ import annotations

import copy
import io
import json
import time
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest

from chalicelib.features.extraction import engine, labels, taxons

CORPUS = Path(__file__).resolve().parents[1] / 'fixtures' / 'invoices'


@cache
def corpus_nodes(name: str) -> tuple:
    """A corpus file as the parse stage reads it (features/parsing/readers), once per run."""
    from chalicelib.features.parsing import readers
    data = (CORPUS / name).read_bytes()
    return tuple(readers.read(data, media_type=None, filename=name, deadline=time.monotonic() + 120).nodes)


def without(nodes, *texts: str) -> list[dict]:
    """The nodes with ``texts`` no longer printed: cut from every line holding one, with their words
    (``without(corpus_nodes('stellar-1.pdf'), ', CA 94105')``: a US supplier whose address gives
    no state or ZIP)."""
    cut = {n['id']: {w for t in texts for w in t.replace(',', ' ').split()} for n in nodes
           if isinstance(n.get('content'), str) and n['nodeType'] != 'word' and any(t in n['content'] for t in texts)}
    out = []
    for n in nodes:
        if n['nodeType'] == 'word' and n.get('parentId') in cut and n['content'].strip(',') in cut[n['parentId']]:
            continue
        if n['id'] in cut:
            content = n['content']
            for t in texts:
                content = content.replace(t, '')
            n = {**n, 'content': content}
        out.append(n)
    return out


def pdf_nodes(draw) -> list[dict]:
    """A one-page PDF drawn by ``draw(canvas, height)`` (reportlab), read by the parse stage."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    from chalicelib.features.parsing import readers
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    c.setFont('Helvetica', 10)
    draw(c, A4[1])
    c.save()
    return readers.read(buf.getvalue(), media_type='application/pdf', filename='doc.pdf',
                        deadline=time.monotonic() + 60).nodes


def general() -> dict:
    """The general definition's invoice header (its line items are the table rule's: tests of
    tables read them)."""
    body = json.loads((CORPUS / 'definitions' / 'general.json').read_text())
    header = copy.deepcopy(body['taxons'][0])
    header['children'] = [c for c in header['children'] if not c.get('group')]
    return {'taxons': [header], 'locale': body['metadata']['locale']}


def _header(nodes, definition=None) -> dict:
    definition = definition or general()
    result = engine.extract(definition['taxons'], list(nodes), locale=definition.get('locale'))
    return {a['tag']: a for a in result.objects[0].attributes}


def _exceptions(nodes, definition=None) -> dict[str, str]:
    definition = definition or general()
    result = engine.extract(definition['taxons'], list(nodes), locale=definition.get('locale'))
    tree = [{'id': o.key, 'parentId': o.parent, 'path': o.path, 'rowNum': o.row,
             'attributes': [{**a, 'id': f"{o.key}/{a['tag']}"} for a in o.attributes]} for o in result.objects]
    found = engine.assess(tree, dict(taxons.walk(definition['taxons'])))
    return {e['taxon']: e['exceptionType'] for e in found.values()}


def _truth(name: str) -> dict:
    manifest = json.loads((CORPUS / 'manifest.json').read_text())
    return next(d['truth'] for d in manifest['documents'] if d['file'] == name)


def _typed(attrs: dict, name: str):
    value = attrs[name]['typedValue']
    return Decimal(str(value)) if isinstance(value, float) else value


# ----------------------------------------------------------------------------- one definition, many layouts

@pytest.mark.parametrize('name', ['acme-1.pdf', 'mueller-1.pdf', 'mueller-1.docx', 'garcia-2.pdf', 'dupont-1.pdf',
                                  'alpen-1.xlsx', 'tata-1.pdf'])
def test_one_definition_reads_the_header_of_invoices_in_several_languages_and_layouts(name):
    """English, German (PDF by LibreOffice, DOCX, a sheet), Spanish, French (Chromium), Indian
    rupees: the labels of one list, the numbers and dates as each document writes them."""
    truth = _truth(name)
    attrs = _header(corpus_nodes(name))
    for field in ('invoiceNumber', 'invoiceDate', 'dueDate', 'customerName', 'currency'):
        assert str(attrs[field]['typedValue']) == truth[field], (field, attrs[field])
    for field in ('subtotal', 'tax', 'total'):
        assert _typed(attrs, field) == Decimal(truth[field]), (field, attrs[field])
    assert attrs['invoiceNumber']['dataFeatures']['rule'] == 'label'


def test_the_first_text_of_the_list_that_the_document_holds_wins_and_a_label_inside_a_longer_one_is_not_it():
    """``Date`` is in the list after ``Invoice Date``: on stellar (``Date: ...`` and
    ``Due Date: ...``) the invoice date is the one after ``Date:``, not the due date's."""
    attrs = _header(corpus_nodes('stellar-1.pdf'))
    assert attrs['invoiceDate']['value'] == '08/05/2026' and attrs['dueDate']['value'] == '09/04/2026'
    definition = general()
    rule = next(c for c in definition['taxons'][0]['children'] if c['name'] == 'total')['rules'][0]
    assert rule['label'][-1] == 'Total'    # "Total" last: "Total HT" (a subtotal label) is not read as it
    attrs = _header(corpus_nodes('dupont-1.pdf'), definition)
    assert _typed(attrs, 'total') == Decimal('25009.40') and _typed(attrs, 'subtotal') == Decimal('20841.17')


# ----------------------------------------------------------------------------- the value's own line, cell or box

def _boxes(c, h):
    """Two boxes side by side, their labels on one line ~58 pt apart, their values under them."""
    c.drawString(50, h - 100, 'INVOICE NO')
    c.drawString(170, h - 100, 'INVOICE DATE')
    c.drawString(50, h - 114, 'INV-7781')
    c.drawString(170, h - 114, '14.03.2026')
    c.drawString(50, h - 160, 'Subtotal')
    c.drawString(460, h - 160, '1,100.00')
    c.drawString(50, h - 176, 'Shipping')
    c.drawString(460, h - 176, '34.56')
    c.drawString(50, h - 192, 'Total ..................................................................')
    c.drawString(460, h - 192, '1,134.56')


def _leaf(name, kind, *labels, **extra):
    """A value taxon with one label rule (one text: the plain form, as before lists)."""
    label = labels[0] if len(labels) == 1 else list(labels)
    return {'name': name, 'type': kind, 'rules': [{'type': 'label', 'label': label, **extra}]}


def _definition(*children, locale='auto'):
    return {'taxons': [{'name': 'doc', 'group': True, 'children': list(children)}], 'locale': locale}


def _ocr_lines(*lines):
    """OCR-like nodes: ``lines`` of ``(text, [x0, y0, x1, y1])`` words, each list one line node."""
    nodes = [{'id': 'd', 'parentId': None, 'nodeType': 'document', 'content': '', 'index': 0},
             {'id': 'p1', 'parentId': 'd', 'nodeType': 'page', 'content': '', 'index': 1,
              'features': {'page': 1, 'width': 595.0, 'height': 842.0}}]
    for k, words in enumerate(lines):
        box = [min(b[0] for _, b in words), min(b[1] for _, b in words), max(b[2] for _, b in words),
               max(b[3] for _, b in words)]
        nodes.append({'id': f'l{k}', 'parentId': 'p1', 'nodeType': 'line', 'content': ' '.join(t for t, _ in words),
                      'index': k, 'features': {'page': 1, 'bbox': box}})
        nodes += [{'id': f'l{k}w{j}', 'parentId': f'l{k}', 'nodeType': 'word', 'content': t, 'index': j,
                   'features': {'page': 1, 'bbox': b, 'confidence': 0.95}} for j, (t, b) in enumerate(words)]
    return nodes


def test_on_a_skewed_scan_the_next_lines_last_word_is_not_the_labels_value():
    """A photo turned 2 degrees: `2026`, the last word of the line under `Date de facture :
    15/05/2026`, rises into the label's band; Tesseract's line says it is the next line's. The
    value was `15/05/2026 2026` (INVALID_VALUE)."""
    nodes = _ocr_lines(
        [('Date', [342.4, 76.7, 366.1, 84.6]), ('de', [370.4, 75.2, 382.0, 83.5]),
         ('facture', [385.9, 74.9, 421.6, 83.2]), (':', [426.2, 76.0, 427.7, 81.7]),
         ('15/05/2026', [433.4, 71.6, 491.0, 82.1])],
        [('Date', [342.7, 88.4, 366.4, 96.1]), ("d'échéance", [370.6, 86.9, 425.3, 95.8]),
         (':', [429.4, 87.8, 430.9, 93.5]), ('14', [436.7, 85.7, 447.4, 93.9]), ('juin', [451.0, 84.6, 470.4, 93.4]),
         ('2026', [478.3, 82.8, 502.9, 91.1])])
    attrs = _header(nodes, _definition(_leaf('date', 'date', 'Date de facture'),
                                       _leaf('due', 'date', "Date d'échéance")))
    assert attrs['date']['value'] == '15/05/2026' and attrs['date']['typedValue'] == '2026-05-15'
    assert attrs['due']['typedValue'] == '2026-06-14'


def test_a_label_whose_accent_ocr_misread_is_still_the_label():
    """A 150-dpi photo reads `Fecha de emisión` as `Fecha de emisiön`: the label `Fecha` (later in
    the list) matched instead and read `de` as the date (INVALID_VALUE)."""
    nodes = _ocr_lines([('Fecha', [60.0, 143.0, 88.8, 152.2]), ('de', [93.1, 144.0, 105.1, 152.6]),
                        ('emisiön:', [109.4, 145.0, 151.7, 154.1]), ('14/07/2026', [156.5, 145.9, 215.0, 156.0])])
    attrs = _header(nodes, _definition(_leaf('date', 'date', 'Fecha de emisión', 'Fecha')))
    assert attrs['date']['typedValue'] == '2026-07-14', attrs['date']
    assert labels.pattern('Total').search('Tötal') is None    # an unaccented letter of a label is only itself


def test_a_sign_of_a_label_that_ocr_misread_is_still_the_label():
    """A 200-dpi photo reads `Nº de factura:` as `N£ de factura:`: no label matched and the
    invoice number was missing. A label's sign matches any one sign in its place; the letters
    around it still have to match, and a ruling (`|`) is not a sign."""
    nodes = _ocr_lines([('N£', [60.0, 100.0, 75.0, 110.0]), ('de', [79.0, 100.0, 91.0, 110.0]),
                        ('factura:', [95.0, 100.0, 135.0, 110.0]), ('F2026-88807', [140.0, 100.0, 200.0, 110.0])])
    attrs = _header(nodes, _definition(_leaf('number', 'string', 'Nº de factura')))
    assert attrs['number']['value'] == 'F2026-88807', attrs['number']
    pattern = labels.pattern('Nº de factura')
    assert all(pattern.search(f'{text} de factura') for text in ('Nº', 'N°', 'N£', 'N#', 'N*'))
    assert not any(pattern.search(f'{text} de factura') for text in ('N|', 'N', 'Nr', 'N.'))
    assert labels.pattern('Invoice #').search('Invoice | Date') is None


def test_a_ruling_or_an_underline_ocr_reads_between_a_label_and_its_value_is_not_the_value():
    """A photo's `IGST 18% |. +2,487.68` and `Invoice No. _TT/26-27/28616`: the `|` of a
    ruling and the `_` of an underline made the tax unreadable and the number wrong."""
    nodes = _ocr_lines([('IGST', [361.0, 378.0, 385.0, 388.0]), ('18%', [389.0, 378.0, 408.0, 388.0]),
                        ('|.', [412.0, 377.0, 416.0, 390.0]), ('+2,487.68', [490.0, 378.0, 544.0, 388.0])],
                       [('Invoice', [300.0, 100.0, 335.0, 110.0]), ('No.', [338.0, 100.0, 352.0, 110.0]),
                        ('_TT/26-27/28616', [400.0, 100.0, 480.0, 110.0])])
    attrs = _header(nodes, _definition(_leaf('tax', 'currency', 'IGST'), _leaf('number', 'string', 'Invoice No')))
    assert attrs['tax']['typedValue'] == 2487.68, attrs['tax']
    assert attrs['number']['value'] == 'TT/26-27/28616'


def test_a_right_value_is_never_the_next_boxs_label_and_the_box_below_is_read_instead():
    """The issue's case: ``INVOICE DATE`` ~58 pt right of ``INVOICE NO`` on the same line is the
    next box's label; the value is under the label. The date's value is under its own label,
    not ``INVOICE NO``'s value to its left."""
    nodes = pdf_nodes(_boxes)
    attrs = _header(nodes, _definition(_leaf('number', 'string', 'Invoice No'),
                                       _leaf('date', 'date', 'Invoice Date')))
    assert attrs['number']['value'] == 'INV-7781', attrs['number']
    assert attrs['date']['typedValue'] == '2026-03-14', attrs['date']


def test_even_an_unknown_neighbour_label_is_not_a_value_when_the_box_below_holds_a_figure():
    """Only ``Invoice No`` is a label of the definition: ``INVOICE DATE`` far right has no figure,
    the line under the label has one: that is the value."""
    attrs = _header(pdf_nodes(_boxes), _definition(_leaf('number', 'string', 'Invoice No')))
    assert attrs['number']['value'] == 'INV-7781', attrs['number']


def test_a_value_far_right_on_the_labels_line_is_found_after_a_wide_gap_or_dot_leaders():
    nodes = pdf_nodes(_boxes)
    attrs = _header(nodes, _definition(_leaf('subtotal', 'currency', 'Subtotal'), _leaf('total', 'currency', 'Total'),
                                       _leaf('shipping', 'currency', 'Shipping')))
    assert attrs['subtotal']['typedValue'] == 1100.0, attrs['subtotal']     # 410 pt right, nothing between
    assert attrs['total']['typedValue'] == 1134.56, attrs['total']          # after dot leaders
    assert attrs['shipping']['typedValue'] == 34.56, attrs['shipping']      # not "Total" under it


def test_a_value_stops_at_the_next_label_on_its_line_and_at_a_gap_of_three_line_heights():
    def draw(c, h):
        c.drawString(50, h - 100, 'Order No: 5531 Date: 14.03.2026')
        c.drawString(50, h - 130, 'Customer:')
        c.drawString(110, h - 130, 'Globex Corporation')
        c.drawString(400, h - 130, 'Page 1 of 2')
    attrs = _header(pdf_nodes(draw), _definition(_leaf('order', 'string', 'Order No'), _leaf('date', 'date', 'Date'),
                                                 _leaf('customer', 'string', 'Customer')))
    assert attrs['order']['value'] == '5531' and attrs['date']['typedValue'] == '2026-03-14'
    assert attrs['customer']['value'] == 'Globex Corporation', attrs['customer']   # not "... Page 1 of 2"


def test_a_label_in_a_tables_header_row_is_that_columns_header_not_a_label():
    """``Total`` heads the amounts' column and, in a box under the table, labels the invoice's
    total written under it: the total is that box's, never the first row's amount under the
    column header."""
    def draw(c, h):
        for x, text in ((50, 'Item'), (250, 'Qty'), (330, 'Price'), (460, 'Total')):
            c.drawString(x, h - 100, text)
        for x, text in ((50, 'Gadget'), (250, '2'), (330, '10.00'), (460, '20.00')):
            c.drawString(x, h - 116, text)
        c.drawString(460, h - 160, 'Total')
        c.drawString(460, h - 174, '24.00')
    definition = _definition(_leaf('total', 'currency', 'Total'))
    definition['taxons'].append({'name': 'lines', 'group': True, 'cardinality': 'many', 'rules': [{'type': 'table'}],
                                 'children': [{'name': n, 'rules': [{'type': 'column', 'header': n}]}
                                              for n in ('Item', 'Qty', 'Price', 'Total')]})
    attrs = _header(pdf_nodes(draw), definition)
    assert attrs['total']['typedValue'] == 24.0, attrs['total']


def test_a_rate_or_a_bracketed_qualifier_between_a_label_and_its_amount_is_skipped():
    for name, field, want in (('acme-1.pdf', 'tax', '1606.32'), ('mueller-1.pdf', 'tax', '3468.49'),
                              ('stellar-1.pdf', 'total', '9665.69'), ('dupont-1.pdf', 'tax', '4168.23')):
        attrs = _header(corpus_nodes(name))
        assert _typed(attrs, field) == Decimal(want), (name, attrs[field])


# ----------------------------------------------------------------------------- the "label: value" fallback

def test_label_value_pairs_are_found_anywhere_when_the_rules_find_nothing_with_a_lower_confidence():
    def draw(c, h):
        c.drawString(50, h - 100, 'Thank you for your order. Ref 2231 / Invoice date: 14.03.2026')
    leaf = {'name': 'invoiceDate', 'label': 'Invoice date', 'type': 'date', 'threshold': 0.8,
            'rules': [{'type': 'regex', 'pattern': r'Datum (\S+)'}]}   # finds nothing here
    definition = _definition(leaf)
    nodes = pdf_nodes(draw)
    attrs = _header(nodes, definition)
    found = attrs['invoiceDate']
    assert found['typedValue'] == '2026-03-14' and found['dataFeatures']['rule'] == 'labelPair'
    assert found['confidence'] == pytest.approx(0.7)
    assert _exceptions(nodes, definition) == {'doc/invoiceDate': 'LOW_CONFIDENCE'}   # a reviewer checks it


def test_the_fallback_takes_no_pair_whose_value_is_the_next_label():
    def draw(c, h):
        c.drawString(50, h - 100, 'Due Date:')
        c.drawString(330, h - 100, 'Customer ID: C-1009')
    definition = _definition({'name': 'due', 'label': 'Due Date', 'type': 'date', 'required': True,
                              'rules': [{'type': 'label', 'label': ['Due Date']}]},
                             _leaf('customer', 'string', 'Customer ID'))
    nodes = pdf_nodes(draw)
    assert _header(nodes, definition)['due']['value'] is None
    assert _exceptions(nodes, definition) == {'doc/due': 'REQUIRED_MISSING'}


# ----------------------------------------------------------------------------- never a silent wrong value

def test_the_supplier_named_in_the_letterhead_needs_no_review_one_further_down_does():
    """A company name in the first three lines of the document (its letterhead: `Dupont
    Fournitures SARL`, `TAX INVOICE` then `Tata Textiles Pvt. Ltd.`) is the supplier at 0.85;
    the same name further down was a 0.75 guess, a LOW_CONFIDENCE warning on every invoice. When
    the top lines name no company, the first one further down (here the customer's) is still only
    a guess a reviewer checks, never a silent supplier."""
    for name in ('acme-1.pdf', 'dupont-1.pdf', 'garcia-2.pdf', 'tata-1.pdf', 'mueller-1.pdf'):
        attrs = _header(corpus_nodes(name))
        assert attrs['vendorName']['value'] == _truth(name)['vendorName'], name
        assert attrs['vendorName']['confidence'] >= 0.8, name
        assert 'invoice/vendorName' not in _exceptions(corpus_nodes(name)), name

    def draw(c, h):
        for k, text in enumerate(('INVOICE', 'Invoice No: 77', 'Date: 14.03.2026', 'Bill To', 'Initech GmbH')):
            c.drawString(50, h - 60 - 16 * k, text)
    nodes = pdf_nodes(draw)
    assert _header(nodes)['vendorName']['value'] == 'Initech GmbH'
    assert _exceptions(nodes)['invoice/vendorName'] == 'LOW_CONFIDENCE'


def test_the_general_definition_flags_a_line_whose_amount_is_not_quantity_times_price_or_has_none():
    """Its line items' validation (`amount is quantity x unit price`) and required columns: an
    OCR-misread figure in a row is an exception on that row, never a silent line item."""
    from tests.extraction_tables_corpus import parse, two_page_invoice
    doc = two_page_invoice(page1=4, page2=2, broken=1, blank=4)
    body = json.loads((CORPUS / 'definitions' / 'general.json').read_text())
    result = engine.extract(body['taxons'], parse(doc), locale=body['metadata']['locale'])
    tree = [{'id': o.key, 'parentId': o.parent, 'path': o.path, 'rowNum': o.row,
             'attributes': [{**a, 'id': f"{o.key}/{a['tag']}"} for a in o.attributes]} for o in result.objects]
    description = {o['id']: next(a['value'] for a in o['attributes'] if a['tag'] == 'description') for o in tree
                   if o['path'] == 'invoice/lineItems'}
    assert len(description) == 6
    raised = engine.assess(tree, dict(taxons.walk(body['taxons']))).values()
    found = {(description[e['dataObjectId']], e['exceptionType'], e['taxon'])
             for e in raised if e['dataObjectId'] in description}
    assert found == {(doc.items[1]['description'], 'VALIDATION_FAILED', 'invoice/lineItems'),
                     (doc.items[4]['description'], 'REQUIRED_MISSING', 'invoice/lineItems/amount')}


def test_the_general_definition_flags_lines_that_do_not_add_up_to_the_subtotal():
    """A photo dropped a row's decimal points in both its price and its amount (3 x 39455 =
    118365): the row checks itself, the invoice's totals too; only the sum of the lines tells."""
    body = json.loads((CORPUS / 'definitions' / 'general.json').read_text())

    def tree(amounts):
        head = {'id': 'i', 'parentId': None, 'path': 'invoice', 'rowNum': 0, 'attributes': [
            {'id': f'i/{k}', 'tag': k, 'taxon': f'invoice/{k}', 'value': str(v), 'typedValue': v, 'confidence': 0.9}
            for k, v in (('subtotal', 1500.0), ('tax', 300.0), ('total', 1800.0))]}
        rows = [{'id': f'r{n}', 'parentId': 'i', 'path': 'invoice/lineItems', 'rowNum': n, 'attributes': [
            {'id': f'r{n}/{k}', 'tag': k, 'taxon': f'invoice/lineItems/{k}', 'value': str(v), 'typedValue': v,
             'confidence': 0.9} for k, v in (('description', f'Part {n}'), ('quantity', q), ('unitPrice', p),
                                             ('amount', q * p))]} for n, (q, p) in enumerate(amounts)]
        return [head, *rows]
    walk = dict(taxons.walk(body['taxons']))
    assert engine.assess(tree([(2, 500.0), (1, 500.0)]), walk) == {}
    found = engine.assess(tree([(2, 500.0), (1, 50000.0)]), walk).values()
    assert [(e['exceptionType'], e['taxon'], e['validation']) for e in found] == [
        ('VALIDATION_FAILED', 'invoice', 'the lines add up to the subtotal')]


def test_dates_the_document_does_not_settle_are_exceptions_not_guesses():
    """stellar writes 08/05/2026 and 09/04/2026 and no date that says which part is the day; its
    address (San Francisco, CA 94105) and its dollars say month first (date_order.py "country").
    Without its state and ZIP nothing settles the order: ``AMBIGUOUS_VALUE``, no typed value."""
    attrs = _header(corpus_nodes('stellar-1.pdf'))
    assert attrs['invoiceDate']['typedValue'] == '2026-08-05' and attrs['dueDate']['typedValue'] == '2026-09-04'
    nodes = without(corpus_nodes('stellar-1.pdf'), ', CA 94105')
    attrs = _header(nodes)
    assert attrs['invoiceDate']['typedValue'] is None and attrs['dueDate']['typedValue'] is None
    found = _exceptions(nodes)
    assert found['invoice/invoiceDate'] == 'AMBIGUOUS_VALUE' and found['invoice/dueDate'] == 'AMBIGUOUS_VALUE'


def test_a_number_or_date_the_document_does_not_settle_is_an_exception_not_a_reading():
    """No other number or date in the document says which separator is the decimal one or which
    part is the day: ``1,500`` and ``01/02/2026`` are ``AMBIGUOUS_VALUE``, with no typed value."""
    def draw(c, h):
        c.drawString(50, h - 100, 'Shipping: 1,500 EUR')
        c.drawString(50, h - 116, 'Date: 01/02/2026')
    definition = _definition(_leaf('shipping', 'currency', 'Shipping'), _leaf('date', 'date', 'Date'))
    nodes = pdf_nodes(draw)
    attrs = _header(nodes, definition)
    assert attrs['shipping']['typedValue'] is None and attrs['date']['typedValue'] is None
    assert 'ambiguous' in attrs['shipping']['normaliseError'] and 'ambiguous' in attrs['date']['normaliseError']
    assert _exceptions(nodes, definition) == {'doc/shipping': 'AMBIGUOUS_VALUE', 'doc/date': 'AMBIGUOUS_VALUE'}


# ----------------------------------------------------------------------------- the list's bounds

@pytest.mark.parametrize('label, message', [
    ([], 'label must be a list of 1 to 20 texts'),
    ([f'L{i}' for i in range(21)], 'label must be a list of 1 to 20 texts, not 21 (limit maxLabelsPerRule)'),
    (['Invoice No', 'x' * 101], 'label[1] must be a text of 1 to 100 characters'),
    (['Invoice No', ' '], 'label[1] must be a text of 1 to 100 characters'),
    (['Invoice No', 7], 'label[1] must be a text of 1 to 100 characters'),
])
def test_a_label_list_is_bounded_when_the_definition_is_written(label, message):
    leaf = {'name': 'n', 'rules': [{'type': 'label', 'label': label}]}
    definition = [{'name': 'doc', 'group': True, 'children': [leaf]}]
    with pytest.raises(taxons.DefinitionError, match=message.replace('(', r'\(').replace(')', r'\)')
                       .replace('[', r'\[').replace(']', r'\]')):
        taxons.check(definition)


def test_the_general_definition_is_a_valid_definition_with_lists_of_up_to_twenty_labels():
    taxons.check(general()['taxons'])
    lists = [r['label'] for _, t in taxons.walk(general()['taxons']) for r in t.get('rules') or []
             if r.get('type') == 'label']
    assert lists and all(1 <= len(x) <= 20 for x in lists) and max(len(x) for x in lists) > 10


def test_an_amount_behind_a_sign_ocr_could_not_read_is_read_and_asked_never_sure():
    """A photo's `₹ 16,308.12` read `® 16,308.12`: not an amount (INVALID_VALUE, the total lost).
    The amount behind a lone unknown sign is read, its currency not taken from the sign, and a
    value read by OCR so is a LOW_CONFIDENCE warning whatever its threshold (engine.ocr_suspect);
    a known currency sign, a sign glued to the figure and a string's `#` are as before."""
    from chalicelib.features.extraction import normalise
    from chalicelib.features.extraction.document import Found, Word
    assert normalise.normalise('® 16,308.12', {'type': 'currency'}, 'en-GB') == (16308.12, {})
    assert normalise.normalise('€ 1.234,56', {'type': 'currency'}, 'de-DE') == (1234.56, {'currency': 'EUR'})
    with pytest.raises(normalise.NotNormalised):
        normalise.normalise('®16,308.12', {'type': 'currency'}, 'en-GB')
    assert [normalise.stray_sign(t) for t in ('® 16.00', '* 16.00', '£ 16.00', '- 16.00', '(1) 16.00', 'x 16.00',
                                              '> 16.00', '~ 16.00', '± 16.00')] \
        == ['®', '*', None, None, None, None, None, None, None]   # a maths sign says something of the amount

    def found(text, confidence=0.95):
        words = [Word(f'w{i}', t, 1, (0.0, 0.0, 1.0, 1.0), confidence, 0, 0) for i, t in enumerate(text.split())]
        return Found(text=text, words=words, confidence=0.9 * (confidence or 1.0))
    total = {'name': 'total', 'type': 'currency', 'threshold': 0.4}
    attr = engine.attribute(total, 'invoice/total', found('® 16,308.12'), 'en-GB')
    assert attr['typedValue'] == 16308.12 and attr['confidence'] == engine.OCR_SUSPECT_CONFIDENCE
    assert "'®' before the amount" in attr['dataFeatures']['ocrSuspect']
    group = {'name': 'invoice', 'group': True, 'children': [total]}
    tree = [{'id': 'o1', 'path': 'invoice', 'attributes': [{**attr, 'id': 'a1'}]}]
    assert [e['exceptionType'] for e in engine.assess(tree, {'invoice': group, 'invoice/total': total}).values()] \
        == ['LOW_CONFIDENCE']
    assert 'ocrSuspect' not in engine.attribute(total, 'invoice/total', found('® 16,308.12', None), 'en-GB')[
        'dataFeatures']   # a text layer's characters are the document's own
    number = {'name': 'number', 'type': 'string'}
    assert 'ocrSuspect' not in engine.attribute(number, 'invoice/number', found('# 12345'), 'en-GB')['dataFeatures']
