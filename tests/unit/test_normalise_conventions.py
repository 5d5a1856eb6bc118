"""Numbers and dates as each document writes them (features/extraction/normalise.py, docs/api/extraction.md
"A document's own conventions"): detection of a document's decimal separator and date order,
values that settle themselves, ambiguous values as exceptions, the world's common currencies,
OCR's ``GBP.`` and ``02-J ul-2026``; an explicit locale still wins."""
from __future__ import annotations

from decimal import Decimal

import pytest

from chalicelib.features.extraction import engine
from chalicelib.features.extraction.normalise import Ambiguous, Conventions, NotNormalised, detect, normalise
from tests.unit.test_label_rules import corpus_nodes

AUTO = Conventions()
MONEY = {'type': 'currency'}
DATE = {'type': 'date'}


def _money(text, conventions=AUTO):
    value, extra = normalise(text, MONEY, conventions)
    return Decimal(str(value)), extra.get('currency')


# ----------------------------------------------------------------------------- detection

@pytest.mark.parametrize('text, decimal, order', [
    ('Rechnungsdatum: 14.03.2026  Summe 1.234,56 EUR  MwSt 19,00', ',', 'DMY'),
    ('Date: 03/14/2026  Total $1,234.56  Qty 1,000', '.', 'MDY'),
    ('Date: 27/06/2026  Total £8,031.61', '.', 'DMY'),
    ('Total HT : 20 841,17 EUR  Date : 15/05/2026', ',', 'DMY'),
    ('Grand Total ₹ 1,23,456.00  Dated 06-Oct-2026', '.', None),
    ('Invoice date March 14, 2026  Total 12.50', '.', 'MDY'),
    ('Invoice date 14 March 2026  Total 3,40', ',', 'DMY'),
    ('Datum 01.02.2026', None, 'DMY'),                         # a dotted numeric date is day first
    ('Total 1,234  Date 01/02/2026', None, None),               # nothing settles either
    ('Total 1.234,56 and 12.50', None, None),                   # the document contradicts itself: unsettled
    ('Dates 14/03/2026 and 03/14/2026', None, None),
    ('Version 1.2.3, 10:30, IBAN DE89 3704 0044, 14.03.2026', None, 'DMY'),
])
def test_a_documents_conventions_are_settled_only_when_all_its_evidence_agrees(text, decimal, order):
    assert detect(text) == Conventions(decimal, order)


@pytest.mark.parametrize('name, decimal, order', [('mueller-1.pdf', ',', 'DMY'), ('acme-1.pdf', '.', 'DMY'),
                                                  ('dupont-1.pdf', ',', 'DMY'), ('stellar-1.pdf', '.', None),
                                                  ('alpen-1.xlsx', '.', 'DMY')])
def test_corpus_documents_conventions(name, decimal, order):
    from chalicelib.features.extraction.document import Document
    assert detect(Document(list(corpus_nodes(name))).text) == Conventions(decimal, order)


# ----------------------------------------------------------------------------- numbers

@pytest.mark.parametrize('text, want', [
    ('1.234,56', '1234.56'), ('1,234.56', '1234.56'), ('12,50', '12.5'), ('1234.5', '1234.5'),
    ('1 234,56', '1234.56'), ("1'234.50", '1234.5'), ('1.234.567', '1234567'), ('1,234,567', '1234567'),
    ('0,125', '0.125'), ('(1.234,56)', '-1234.56'), ('1.234,56-', '-1234.56'),
])
def test_an_amount_that_settles_itself_is_read_whatever_the_document(text, want):
    assert _money(text)[0] == Decimal(want)


@pytest.mark.parametrize('text, conventions, want', [
    ('1,234', Conventions(','), '1.234'), ('1,234', Conventions('.'), '1234'),
    ('1.234', Conventions(','), '1234'), ('1.234', Conventions('.'), '1.234'),
])
def test_a_three_digit_group_is_read_with_the_documents_decimal_separator(text, conventions, want):
    assert _money(text, conventions)[0] == Decimal(want)


@pytest.mark.parametrize('text', ['1,234', '1.234', '€ 5.000'])
def test_a_three_digit_group_without_the_documents_evidence_is_ambiguous(text):
    with pytest.raises(Ambiguous, match='ambiguous'):
        normalise(text, MONEY, AUTO)
    with pytest.raises(Ambiguous):
        normalise(text.strip('€ '), {'type': 'number'}, AUTO)


def test_an_amount_against_the_documents_decimal_separator_is_invalid_not_read():
    with pytest.raises(NotNormalised, match="its decimal separator is ','") as caught:
        normalise('12.50', MONEY, Conventions(','))
    assert not isinstance(caught.value, Ambiguous)


@pytest.mark.parametrize('text, amount, code', [
    ('₹ 16,308.12', '16308.12', 'INR'), ('Rs. 1,23,456.50', '123456.50', 'INR'), ('INR 2,500.00', '2500', 'INR'),
    ('Rs 500', '500', 'INR'), ('₹1,00,000', '100000', 'INR'),
    ('¥ 12,000', '12000', 'JPY'), ('CNY 88.00', '88', 'CNY'), ('¥ 88.00 CNY', '88', 'CNY'),
    ('₩ 15,000', '15000', 'KRW'),
    ('R$ 1.234,56', '1234.56', 'BRL'), ('1 234,56 zł', '1234.56', 'PLN'), ('250,00 kr', '250', 'SEK'),
    ('NOK 250,00', '250', 'NOK'), ('CHF 1\'234.50', '1234.5', 'CHF'), ('Fr. 12.50', '12.5', 'CHF'),
    ('A$ 99.95', '99.95', 'AUD'), ('C$99.95', '99.95', 'CAD'), ('HK$ 1,000.50', '1000.5', 'HKD'),
    ('S$ 12.00', '12', 'SGD'), ('€1.234,56', '1234.56', 'EUR'), ('1.234,56 €', '1234.56', 'EUR'),
    ('EUR1.234,56', '1234.56', 'EUR'), ('£ 8,031.61', '8031.61', 'GBP'), ('$ 9,665.69', '9665.69', 'USD'),
    ('- $ 5.00', '-5', 'USD'), ('€ 1.640,94 €', '1640.94', 'EUR'),   # a table cell holding its neighbour's sign too
])
def test_the_worlds_common_currencies_before_or_after_with_or_without_a_space(text, amount, code):
    assert _money(text) == (Decimal(amount), code)


@pytest.mark.parametrize('text', ['GBP. 1,234.00', 'GBP.1,234.00', '1,234.00 GBP.'])
def test_a_trailing_dot_after_a_currency_code_is_not_part_of_the_amount(text):
    assert _money(text) == (Decimal('1234.00'), 'GBP')
    assert _money(text, 'en-GB') == (Decimal('1234.00'), 'GBP')


def test_an_amount_naming_two_currencies_is_not_read():
    with pytest.raises(NotNormalised, match='names two currencies'):
        normalise('€ 5.00 $', MONEY, AUTO)


def test_indian_grouping_reads_under_en_in_too():
    assert normalise('₹ 1,23,456.00', MONEY, 'en-IN')[0] == 123456.0


# ----------------------------------------------------------------------------- dates

@pytest.mark.parametrize('text, conventions, want', [
    ('14/03/2026', AUTO, '2026-03-14'), ('03/14/2026', AUTO, '2026-03-14'), ('2026-03-14', AUTO, '2026-03-14'),
    ('01/02/2026', Conventions(order='DMY'), '2026-02-01'), ('01/02/2026', Conventions(order='MDY'), '2026-01-02'),
    ('01.02.2026', AUTO, '2026-02-01'), ('05/05/2026', AUTO, '2026-05-05'), ('14 juin 2026', AUTO, '2026-06-14'),
    ('06-Oct-2026', AUTO, '2026-10-06'),
])
def test_a_date_is_read_as_the_document_or_the_value_itself_settles_it(text, conventions, want):
    assert normalise(text, DATE, conventions)[0] == want


@pytest.mark.parametrize('text', ['01/02/2026', '03-04-26', '12/11/2026'])
def test_a_date_the_document_does_not_settle_is_ambiguous_never_a_guess(text):
    with pytest.raises(Ambiguous, match='ambiguous'):
        normalise(text, DATE, AUTO)


def test_a_taxons_or_the_runs_explicit_locale_still_wins():
    assert normalise('01/02/2026', {'type': 'date', 'locale': 'en-US'}, AUTO)[0] == '2026-01-02'
    assert normalise('01/02/2026', DATE, 'en-GB')[0] == '2026-02-01'
    assert normalise('1,234', {'type': 'currency', 'locale': 'de-DE'}, AUTO)[0] == 1.234
    assert normalise('1,234', MONEY, 'en-US')[0] == 1234.0


@pytest.mark.parametrize('text, want', [('02-J ul-2026', '2026-07-02'), ('14 Ma rch 2026', '2026-03-14'),
                                        ('02-Ju l-2026', '2026-07-02'), ('1 Dec ember 2026', '2026-12-01')])
def test_ocrs_space_inside_a_month_name_is_closed(text, want):
    assert normalise(text, DATE, AUTO)[0] == want
    assert normalise(text, DATE, 'en-GB')[0] == want


@pytest.mark.parametrize('text', ['02-J ux-2026', '02-Ju n-Jul-2026', '14 Mar Jun 2026'])
def test_a_join_that_is_no_month_name_or_another_month_stays_a_wrong_value(text):
    with pytest.raises(NotNormalised):
        normalise(text, DATE, AUTO)


# ----------------------------------------------------------------------------- the engine's exceptions

def test_an_ambiguous_value_is_an_ambiguous_value_exception_and_a_wrong_one_invalid_value():
    attr = engine.renormalise({'value': '01/02/2026'}, DATE, AUTO)
    assert attr['typedValue'] is None and attr['normaliseErrorType'] == 'AMBIGUOUS_VALUE'
    tree = [{'id': 'o', 'path': 'g', 'attributes': [{'id': 'a', 'tag': 'd', 'taxon': 'g/d', **attr}]}]
    taxon_of = {'g': {'name': 'g', 'group': True, 'children': [{'name': 'd', **DATE}]}, 'g/d': {'name': 'd', **DATE}}
    (found,) = engine.assess(tree, taxon_of).values()
    assert found['exceptionType'] == 'AMBIGUOUS_VALUE' and "'01/02/2026' is ambiguous" in found['message']
    attr = engine.renormalise({'value': '31/02/2026'}, DATE, AUTO)
    assert 'normaliseErrorType' not in attr
    tree[0]['attributes'][0] = {'id': 'a', 'tag': 'd', 'taxon': 'g/d', **attr}
    (found,) = engine.assess(tree, taxon_of).values()
    assert found['exceptionType'] == 'INVALID_VALUE'
    assert 'AMBIGUOUS_VALUE' in engine.EXCEPTION_TYPES


def test_the_same_definition_reads_a_german_and_an_english_invoice_with_locale_auto():
    from tests.unit.test_label_rules import general
    definition = general()
    for name, subtotal in (('mueller-1.pdf', '18255.23'), ('acme-1.pdf', '8031.61')):
        result = engine.extract(definition['taxons'], list(corpus_nodes(name)), locale='auto')
        attrs = {a['tag']: a for a in result.objects[0].attributes}
        assert Decimal(str(attrs['subtotal']['typedValue'])) == Decimal(subtotal), (name, attrs['subtotal'])
        assert result.conventions is not None
