"""The invoice corpus of tests/fixtures/invoices/ (README.md there) and the scoring of
bench/extraction_scoring.py that bench/bench_extraction_unseen.py reports with.

The manifest says what each file is: the file exists, is sniffed as its kind, has the pages it
states (a text PDF has a text layer, a scan none), and its truth is consistent (ISO dates, decimals
that add up, a broken invoice's expected exceptions). The corpus holds what issue 48 needs (three
suppliers or more with two invoices each, a 200 dpi 1.5 degree scan, two-page tables, several
languages, a broken invoice per kind), and every definition beside it is one the engine accepts.
No OCR, no extraction: fast.
"""
from __future__ import annotations

import json
from collections import Counter
from datetime import date
from decimal import Decimal
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from bench.extraction_scoring import Totals, extraction_of, same, score
from chalicelib.features.extraction import taxons
from chalicelib.features.parsing import readers

CORPUS = Path(__file__).resolve().parents[1] / 'fixtures' / 'invoices'
MANIFEST = json.loads((CORPUS / 'manifest.json').read_text(encoding='utf-8'))
DOCS = MANIFEST['documents']
SNIFFED = {'text-pdf': 'application/pdf', 'scan': 'application/pdf', 'image': 'image/png',
           'docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
           'xlsx': 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'}


@pytest.mark.parametrize('doc', DOCS, ids=[d['file'] for d in DOCS])
def test_each_file_is_what_the_manifest_says(doc):
    path = CORPUS / doc['file']
    assert path.is_file()
    data = path.read_bytes()
    assert readers.sniff(data, filename=doc['file']) == SNIFFED[doc['kind']]
    if path.suffix == '.pdf':
        pdf = pdfium.PdfDocument(data)
        try:
            assert len(pdf) == doc['pages']
            chars = sum(pdf[i].get_textpage().count_chars() for i in range(len(pdf)))
        finally:
            pdf.close()
        assert (chars > 100) if doc['kind'] == 'text-pdf' else chars == 0, 'a text PDF has a text layer, a scan none'
    else:
        assert doc['pages'] == 1
    if doc['kind'] in ('scan', 'image'):
        assert doc['dpi'] in (150, 200, 300) and 0.5 <= doc['skewDegrees'] <= 2
        assert (CORPUS / doc['source']).is_file()


@pytest.mark.parametrize('doc', DOCS, ids=[d['file'] for d in DOCS])
def test_each_truth_is_consistent(doc):
    truth = doc['truth']
    for name in ('invoiceDate', 'dueDate'):
        if name in truth:
            date.fromisoformat(truth[name])
    assert truth['currency'] in ('EUR', 'USD', 'GBP', 'CHF', 'INR')
    items = truth['lineItems']
    assert items
    for li in items:
        assert Decimal(li['quantity']) * Decimal(li['unitPrice']) == Decimal(li['amount'])
        assert li['description'].strip()
    assert sum(Decimal(li['amount']) for li in items) == Decimal(truth['subtotal'])
    adds_up = Decimal(truth['subtotal']) + Decimal(truth['tax']) == Decimal(truth['total'])
    if doc['wellFormed']:
        assert adds_up and 'invoiceDate' in truth and 'expectedExceptions' not in doc
    else:
        assert not adds_up and 'invoiceDate' not in truth
        assert {(e['exceptionType'], e['taxon']) for e in doc['expectedExceptions']} == {
            ('INVALID_VALUE', 'invoice/invoiceDate'), ('VALIDATION_FAILED', 'invoice')}


def test_the_corpus_holds_what_issue_48_needs():
    by_layout = Counter((d['supplier'], d['layout']) for d in DOCS if d['kind'] in ('text-pdf', 'docx', 'xlsx'))
    assert sum(1 for n in by_layout.values() if n >= 2) >= 3, 'three suppliers with a next invoice'
    assert any(d['kind'] == 'scan' and d['dpi'] == 200 and d['skewDegrees'] == 1.5 for d in DOCS)
    assert sum(1 for d in DOCS if d['kind'] == 'text-pdf' and d['pages'] == 2) >= 3, 'two-page tables'
    assert len({d['locale'] for d in DOCS}) >= 5
    assert {d['truth']['currency'] for d in DOCS} >= {'EUR', 'USD', 'GBP', 'CHF', 'INR'}
    assert {d['kind'] for d in DOCS if not d['wellFormed']} == set(SNIFFED), 'a broken invoice per kind'
    assert len({d['generator'].split('-')[0] for d in DOCS if d['kind'] != 'scan' and d['kind'] != 'image'}) >= 5
    assert 25 <= len(DOCS) <= 40
    assert sum(p.stat().st_size for p in CORPUS.rglob('*') if p.is_file()) < 6_000_000


@pytest.mark.parametrize('path', sorted((CORPUS / 'definitions').rglob('*.json')), ids=lambda p: p.name)
def test_each_definition_is_one_the_engine_takes(path):
    body = json.loads(path.read_text(encoding='utf-8'))
    taxons.check(body['taxons'])
    assert body['metadata']['locale']


# ----------------------------------------------------------------------------- scoring

TRUTH = {'invoiceNumber': 'INV-1', 'invoiceDate': '2026-03-14', 'vendorName': 'Acme  Supplies Ltd',
         'currency': 'GBP', 'subtotal': '40.00', 'tax': '8.00', 'total': '48.00',
         'lineItems': [{'description': 'Gadget', 'quantity': '2', 'unitPrice': '10.00', 'amount': '20.00'},
                       {'description': 'Widget', 'quantity': '1', 'unitPrice': '20.00', 'amount': '20.00'}]}


def _found(**changes):
    fields = {'invoiceNumber': 'INV-1', 'invoiceDate': '2026-03-14', 'vendorName': 'ACME supplies ltd',
              'currency': 'GBP', 'subtotal': 40.0, 'tax': 8, 'total': 48.0, 'dueDate': None}
    fields.update(changes)
    return fields


def test_a_perfect_extraction_scores_one():
    extraction = {'fields': _found(), 'lineItems': [{'description': 'widget', 'amount': 20.0, 'row': 1},
                                                    {'description': 'Gadget ', 'amount': '20', 'row': 0}],
                  'exceptions': []}
    s = score(TRUTH, extraction)
    assert (s.header_right, s.header_total, s.items_tp, s.items_fp, s.items_fn, s.silent_errors,
            s.false_exceptions) == (7, 7, 2, 0, 0, 0, 0)
    totals = Totals()
    totals.add(s, well_formed=True)
    assert totals.header_accuracy == 1.0 and totals.items_f1 == 1.0


def test_an_imperfect_extraction_is_scored_and_its_silent_errors_counted():
    extraction = {'fields': _found(invoiceDate='2026-14-03', total=49.0, invoiceNumber=None),
                  'lineItems': [{'description': 'Gadget', 'amount': 20.0, 'row': 0},
                                {'description': 'Continued on next page', 'amount': None, 'row': 1}],
                  'exceptions': [{'exceptionType': 'INVALID_VALUE', 'taxon': 'invoice/lineItems/amount', 'row': 1}]}
    s = score(TRUTH, extraction)
    assert (s.header_right, s.header_wrong, s.header_missing) == (4, 2, 1)
    assert (s.items_tp, s.items_fp, s.items_fn) == (1, 1, 1)
    assert s.silent_errors == 2, 'the wrong date and total had no exception; the junk row had one'
    assert s.false_exceptions == 1
    totals = Totals()
    totals.add(s, well_formed=True)
    assert totals.items_f1 == pytest.approx(0.5)
    assert totals.header_accuracy == pytest.approx(4 / 7)
    # a failed validation on the invoice points at the money fields and the rows, not at the date
    extraction['exceptions'].append({'exceptionType': 'VALIDATION_FAILED', 'taxon': 'invoice', 'row': None})
    assert score(TRUTH, extraction).silent_errors == 1


def test_a_broken_document_is_caught_only_with_every_expected_exception():
    expected = [{'exceptionType': 'INVALID_VALUE', 'taxon': 'invoice/invoiceDate'},
                {'exceptionType': 'VALIDATION_FAILED', 'taxon': 'invoice'}]
    raised = [{'exceptionType': 'VALIDATION_FAILED', 'taxon': 'invoice', 'row': None}]
    extraction = {'fields': _found(), 'lineItems': [], 'exceptions': raised}
    assert score(TRUTH, extraction, well_formed=False, expected_exceptions=expected).expected_caught is False
    raised.append({'exceptionType': 'INVALID_VALUE', 'taxon': 'invoice/invoiceDate', 'row': None})
    s = score(TRUTH, extraction, well_formed=False, expected_exceptions=expected)
    assert s.expected_caught is True and s.false_exceptions == 0


def test_values_compare_by_type():
    assert same('total', '1234.50', 1234.5) and not same('total', '1234.50', 1234.05)
    assert same('invoiceDate', '2026-03-14', '2026-03-14T00:00:00Z')
    assert not same('invoiceDate', '2026-03-14', '2026-14-03')
    assert same('customerName', 'Globex  Corporation', 'globex corporation') and not same('currency', 'EUR', None)


def test_an_engine_tree_becomes_the_plain_extraction():
    tree = [{'id': '0', 'parentId': None, 'path': 'invoice', 'rowNum': 0,
             'attributes': [{'tag': 'total', 'typedValue': 48.0}]},
            {'id': '0.lineItems.0', 'parentId': '0', 'path': 'invoice/lineItems', 'rowNum': 0,
             'attributes': [{'tag': 'description', 'typedValue': 'Gadget'}, {'tag': 'amount', 'typedValue': 20.0}]}]
    out = extraction_of(tree, [{'exceptionType': 'REQUIRED_MISSING', 'taxon': 'invoice/lineItems/amount',
                                'dataObjectId': '0.lineItems.0'}])
    assert out == {'fields': {'total': 48.0},
                   'lineItems': [{'description': 'Gadget', 'amount': 20.0, 'row': 0}],
                   'exceptions': [{'exceptionType': 'REQUIRED_MISSING', 'taxon': 'invoice/lineItems/amount', 'row': 0}]}
