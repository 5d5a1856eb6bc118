"""How a document's date order is settled when its own dates do not settle it
(features/extraction/date_order.py, docs/api/extraction.md "How the date order is settled"):
each evidence source alone, strongest first, a weak one never over a strong one, a tier that
disagrees with itself asking no weaker one, and a document with no evidence still ambiguous;
and OCR's typical confusions (engine.ocr_suspect) asked, not stored as sure."""
from __future__ import annotations

import pytest

from chalicelib.features.extraction import date_order, engine
from chalicelib.features.extraction.document import Found, Word
from chalicelib.features.extraction.normalise import Conventions, detect

US = 'Stellar Cloud Inc.\n500 Market Street, San Francisco, CA 94105\nTotal $1,190.60'
AMBIGUOUS = 'Invoice\nDate: 08/05/2026\nDue Date: 09/04/2026\n'


def settled(text: str, taught: Conventions | None = None) -> tuple[str | None, str | None]:
    conv = date_order.settle(text, detect(text), taught)
    return conv.order, conv.order_from


# ----------------------------------------------------------------------------- each evidence alone

@pytest.mark.parametrize('text, want', [
    (AMBIGUOUS, (None, None)),                                                     # nothing settles it
    (AMBIGUOUS + 'Shipped 14/03/2026', ('DMY', 'dates')),                          # a part over 12
    (AMBIGUOUS + 'Shipped March 14, 2026', ('MDY', 'dates')),                      # a month name first
    # payment terms: the later date is the earlier plus the stated days under one reading only
    (AMBIGUOUS + 'Terms: Net 30', ('MDY', 'terms')),                               # Aug 5 + 30 = Sep 4
    ('Fecha de emisión: 04/07/2026\nVencimiento: 03/08/2026\nPago a 30 días', ('DMY', 'terms')),
    ('Datum 04/07/2026 fällig 03/08/2026, zahlbar in 30 Tagen', ('DMY', 'terms')),
    (AMBIGUOUS + 'Terms: 45 days', (None, None)),                                  # adds up under neither
    ('Date 02/02/2026 Due 03/03/2026 Net 29', (None, None)),                       # adds up under both
    # the issuer's country
    (US + '\n' + AMBIGUOUS, ('MDY', 'country')),                                   # a US address, in dollars
    (US.replace('$', '£') + '\n' + AMBIGUOUS, (None, None)),                       # a US address, not in dollars
    (AMBIGUOUS + 'USt-IdNr. DE123456789', ('DMY', 'country')),                     # an EU VAT number
    (AMBIGUOUS + 'TVA FR12345678901', ('DMY', 'country')),
    (AMBIGUOUS + 'VAT Reg No: GB 123 4567 89', ('DMY', 'country')),
    (AMBIGUOUS + 'Calle Mayor 10, 28013 Madrid · CIF B12345678', ('DMY', 'country')),
    (AMBIGUOUS + 'GSTIN: 24AAACT1234Q1Z5', ('DMY', 'country')),                    # India
    (AMBIGUOUS + 'ABN 51 824 753 556', ('DMY', 'country')),                        # Australia
    (AMBIGUOUS + 'UID CHE-123.456.789 MWST', ('DMY', 'country')),                  # Switzerland
    (AMBIGUOUS + 'Registered in England No. 01234567', ('DMY', 'country')),
    (AMBIGUOUS + 'IBAN DE89370400440532013000, Part SE1234', (None, None)),        # not a tax id
    # the document's language
    ('FACTURA\nFecha de emisión: 08/05/2026\nCliente: X\nImporte total', ('DMY', 'language')),
    ('Rechnung\nRechnungsdatum: 08/05/2026\nBetrag 10', ('DMY', 'language')),
    ('Factuur\nFactuurdatum 08/05/2026\nBedrag 10', ('DMY', 'language')),
    ('Fattura\nData 08/05/2026 Scadenza 09/06/2026\nImporto 10', ('DMY', 'language')),
    (AMBIGUOUS + 'Amount Due Total', (None, None)),                                # English settles nothing
    ('Factura / Invoice\nFecha / Date: 08/05/2026\nImporte / Amount / Price / Tax / Payment', (None, None)),
    ('Fecha: 08/05/2026 Importe 10', (None, None)),                                # two words are not a language
])
def test_each_evidence_settles_the_order_alone(text, want):
    assert settled(text) == want


def test_a_taught_order_fills_only_what_the_documents_dates_and_terms_leave_open():
    taught = Conventions(order='MDY')
    assert settled(AMBIGUOUS, taught) == ('MDY', 'taught')
    assert settled(AMBIGUOUS + 'Shipped 14/03/2026', taught) == ('DMY', 'dates')
    assert settled('Fecha 04/07/2026 Vence 03/08/2026 a 30 días', taught) == ('DMY', 'terms')
    # the reviewer's order for this kind of document over the weaker country and language hints
    assert settled(AMBIGUOUS + 'USt-IdNr. DE123456789', taught) == ('MDY', 'taught')


# ----------------------------------------------------------------------------- strong over weak

def test_a_weak_signal_never_overrides_a_strong_one():
    # the document's own unambiguous date wins over its country and its language
    assert settled(US + '\n' + AMBIGUOUS + 'Shipped 14/03/2026') == ('DMY', 'dates')
    assert settled('FACTURA Fecha 08/05/2026 Cliente Importe Shipped 03/14/2026') == ('MDY', 'dates')
    # the terms' arithmetic wins over the issuer's country
    assert settled('Factura 04/07/2026 vencimiento 03/08/2026 a 30 días\n' + US) == ('DMY', 'terms')
    # the issuer's country wins over the language (a Spanish-language invoice of a US issuer)
    assert settled(US + '\nFACTURA\nFecha de emisión: 08/05/2026\nCliente\nImporte') == ('MDY', 'country')


def test_evidence_that_disagrees_settles_nothing_and_asks_no_weaker_evidence():
    # a US address in dollars and a German VAT number (whose country is the customer's?): not the
    # German words either
    text = US + '\nRechnung\nRechnungsdatum: 08/05/2026\nBetrag\nKunde USt-IdNr. DE123456789'
    assert settled(text) == (None, None)
    # the document's dates contradict each other: neither its VAT number nor a taught order decides
    assert settled('14/03/2026 03/14/2026 08/05/2026 TVA FR12345678901', Conventions(order='DMY')) == (None, None)


def test_a_document_with_no_evidence_keeps_its_date_an_ambiguous_value():
    taxons = [{'name': 'doc', 'group': True, 'children': [
        {'name': 'date', 'type': 'date', 'rules': [{'type': 'label', 'label': 'Date'}]}]}]
    nodes = [{'id': 'r', 'nodeType': 'document', 'content': None},
             {'id': 'l1', 'parentId': 'r', 'nodeType': 'line', 'content': 'Date: 08/05/2026'},
             {'id': 'l2', 'parentId': 'r', 'nodeType': 'line', 'content': 'Total 1,190.60 Thank you'}]
    result = engine.extract(taxons, nodes, locale='auto')
    attr = result.objects[0].attributes[0]
    assert attr['typedValue'] is None and attr['normaliseErrorType'] == 'AMBIGUOUS_VALUE'
    assert result.conventions.order is None and 'dateOrder' not in result.conventions.evidence()


# ----------------------------------------------------------------------------- OCR's confusions

def _found(text: str, confidence: float | None = 0.95) -> Found:
    words = [Word(f'w{i}', t, 1, (0.0, 0.0, 1.0, 1.0), confidence, 0, 0) for i, t in enumerate(text.split())]
    return Found(text=text, words=words, confidence=0.9 * (confidence or 1.0))


@pytest.mark.parametrize('text, suspect', [
    ('Hydrauliköl HLP 46 (20 |)', "'|' in it"),       # an l read as a bar
    ('Invoice |NV-63416', "'|' in it"),
    ('2O26-05-08', "'O' between digits"),
    ('1l5,00', "'l' between digits"),
    ('Sechskantschraube M10x40', None),                # letters among digits that are the value's own
    ('Kugellager 6204-2RS', None),
    ('Oil 10W-40 (5 l)', None),
    ('F2026-36674', None),
])
def test_ocr_confusions_are_suspect_only_in_ocr_words(text, suspect):
    reason = engine.ocr_suspect(_found(text))
    assert (reason is None) if suspect is None else (suspect in reason)
    assert engine.ocr_suspect(_found(text, confidence=None)) is None   # a text layer's | is the document's


def test_a_suspect_value_is_a_low_confidence_exception_whatever_its_threshold():
    taxon = {'name': 'description', 'type': 'string'}   # no threshold: a line item's column
    attr = engine.attribute(taxon, 'item/description', _found('Hydrauliköl HLP 46 (20 |)'), None)
    assert attr['confidence'] == engine.OCR_SUSPECT_CONFIDENCE and "'|'" in attr['dataFeatures']['ocrSuspect']
    group = {'name': 'item', 'group': True, 'children': [taxon]}
    tree = [{'id': 'o1', 'path': 'item', 'attributes': [{**attr, 'id': 'a1'}]}]
    found = list(engine.assess(tree, {'item': group, 'item/description': taxon}).values())
    assert [(e['exceptionType'], e['severity']) for e in found] == [('LOW_CONFIDENCE', 'WARNING')]
    assert "read by OCR with '|' in it" in found[0]['message']
    tree[0]['attributes'][0]['confirmed'] = True   # a reviewer confirmed it: closed
    assert engine.assess(tree, {'item': group, 'item/description': taxon}) == {}
    clean = engine.attribute(taxon, 'item/description', _found('Hydrauliköl HLP 46 (20 l)'), None)
    assert 'ocrSuspect' not in clean['dataFeatures'] and clean['confidence'] > engine.OCR_SUSPECT_CONFIDENCE
