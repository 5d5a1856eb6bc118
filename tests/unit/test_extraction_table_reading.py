"""The table reading (features/extraction/tables.py, docs/api/extraction.md "Tables") on node
lists built here: skew estimated and taken out (a header 500 pt wide turned by 1 degree, each
column an OCR line of its own, "Unit" and "Price" separate words), page furniture, the totals
words of several languages, the columns a header must hold, section headings against wrapped
cells, a vertically centred row, header columns no child reads, structured tables; and every
text PDF, DOCX and XLSX of the issue-48 corpus (tests/fixtures/invoices) read whole."""
from __future__ import annotations

import math
from decimal import Decimal

import pytest

from chalicelib.features.extraction import rules, tables
from chalicelib.features.extraction.document import Document
from chalicelib.features.extraction.taxons import compile_regex
from tests.extraction_tables_corpus import CORPUS, corpus_definition, corpus_doc, parse

STOP = compile_regex(tables.DEFAULT_STOP, True)
COLUMNS = {'description': ['Description'], 'quantity': ['Qty'], 'unitPrice': ['Unit Price'], 'amount': ['Amount']}
X = {'description': 50, 'quantity': 300, 'unitPrice': 360, 'amount': 520}


class Page:
    """Words placed on pages, turned by ``degrees`` about the page centre (595 x 842), each word
    its own line node or the words of one call one line (as OCR or a text layer gives them)."""

    def __init__(self, degrees: float = 0.0, ocr: bool = False) -> None:
        self.angle = math.radians(degrees)
        self.ocr = ocr
        self.nodes = [{'id': 'd', 'parentId': None, 'nodeType': 'document', 'content': '', 'index': 0}]
        self.pages = 0
        self.lines = 0

    def page(self) -> Page:
        self.pages += 1
        self.nodes.append({'id': f'p{self.pages}', 'parentId': 'd', 'nodeType': 'page', 'content': '',
                           'index': self.pages, 'features': {'page': self.pages, 'width': 595.0, 'height': 842.0}})
        return self

    def _box(self, x: float, y: float, width: float, height: float = 10.0) -> list[float]:
        cx, cy = 297.5, 421.0
        mx, my = x + width / 2 - cx, y + height / 2 - cy   # the word's centre, turned (text rising to the right)
        rx = cx + mx * math.cos(self.angle) + my * math.sin(self.angle)
        ry = cy - mx * math.sin(self.angle) + my * math.cos(self.angle)
        w = width * math.cos(self.angle) + height * abs(math.sin(self.angle))
        h = height * math.cos(self.angle) + width * abs(math.sin(self.angle))
        return [round(rx - w / 2, 2), round(ry - h / 2, 2), round(rx + w / 2, 2), round(ry + h / 2, 2)]

    def line(self, y: float, *cells: tuple[float, str]) -> Page:
        """Cells ``(x, text)`` on one visual line at ``y``: one line node, or one per cell (OCR)."""
        groups = [[c] for c in cells] if self.ocr else [list(cells)]
        for group in groups:
            self.lines += 1
            lid = f'p{self.pages}.l{self.lines}'
            words = []
            for x, text in group:
                at = x
                for word in text.split():
                    words.append((word, self._box(at, y, 5.5 * len(word))))
                    at += 5.5 * len(word) + 3
            self.nodes.append({'id': lid, 'parentId': f'p{self.pages}', 'nodeType': 'line',
                               'content': ' '.join(w for w, _ in words), 'index': self.lines,
                               'features': {'page': self.pages}})
            for k, (word, box) in enumerate(words):
                self.nodes.append({'id': f'{lid}.w{k}', 'parentId': lid, 'nodeType': 'word', 'content': word,
                                   'index': k, 'features': {'page': self.pages, 'bbox': box,
                                                            **({'confidence': 0.9} if self.ocr else {})}})
        return self

    def header(self, y: float, texts=('Description', 'Qty', 'Unit Price', 'Amount')) -> Page:
        return self.line(y, *zip((50, 300, 360, 470), texts, strict=True))

    def item(self, y: float, description: str, qty: str, price: str, amount: str) -> Page:
        return self.line(y, (50, description), (305, qty), (370, price), (480, amount))

    def doc(self) -> Document:
        return Document(self.nodes)


def read(doc: Document, columns=None, required=frozenset(), stop=STOP):
    rows = tables.read(doc, columns or COLUMNS, set(required), stop, "group 'g'")
    return None if rows is None else [{k: v.text for k, v in r.items()} for r in rows]


def invoice(page: Page, n: int = 4, y: float = 200) -> Page:
    page.header(y)
    for i in range(n):
        page.item(y + 18 + 16 * i, f'Part {i} bracket', str(i + 2), f'{i + 1}.50', f'{(i + 1) * 3}.00')
    return page


# ----------------------------------------------------------------------------- skew

@pytest.mark.parametrize('degrees', [1.0, -1.0, 1.5, 2.0, -2.0])
def test_the_skew_is_estimated_from_the_lines_baselines(degrees):
    page = Page(degrees).page()
    for i in range(6):
        page.line(100 + 20 * i, (50, f'Invoice line number {i} with several words'))
    doc = page.doc()
    assert tables.page_skew(doc.units) == pytest.approx(-math.radians(degrees), abs=math.radians(0.15))


def test_a_straight_page_has_no_skew_and_few_lines_give_none():
    assert tables.page_skew(invoice(Page().page()).doc().units) == 0.0
    one = Page(1.5).page().line(100, (50, 'only one long line of words here'))
    assert tables.page_skew(one.doc().units) == 0.0


def test_header_words_9pt_apart_at_1_degree_over_500pt_form_one_row_with_ocr_words():
    page = Page(1.0, ocr=True).page()
    page.line(100, (50, 'Invoice No: INV-1'), (300, 'Bill To Acme Industries'))
    page.line(120, (50, 'Invoice Date: 14/03/2026'), (300, 'Customer ID: C-1'))
    page.header(200, ('Description', 'Qty', 'Unit Price', 'Amount'))
    page.line(160, (50, 'Payment terms are thirty days net'))
    for i in range(4):
        page.item(218 + 16 * i, f'Part {i} bracket', str(i + 2), f'{i + 1}.50', f'{(i + 1) * 3}.00')
    doc = page.doc()
    header = [u for u in doc.units if u.text in ('Description', 'Amount')]
    assert header[1].bbox[1] < header[0].bbox[1] - 6.5   # 7 pt apart over 420 pt (9 pt over 500) as OCR gives them
    got = read(doc)
    assert got == [{'description': f'Part {i} bracket', 'quantity': str(i + 2), 'unitPrice': f'{i + 1}.50',
                    'amount': f'{(i + 1) * 3}.00'} for i in range(4)]
    with pytest.MonkeyPatch.context() as m:   # without the deskew no row holds every header
        m.setattr(tables, 'page_skew', lambda units: 0.0)
        assert read(doc) is None


# ----------------------------------------------------------------------------- furniture and pages

@pytest.mark.parametrize('text', ['Page 1 of 2', '1/2', 'Seite 1 von 2', 'Página 2 de 3', 'Page 3', '- 2 -',
                                  'Continued on next page', '(continued)', 'Fortsetzung auf Seite 2',
                                  'Suite page suivante', 'INVOICE INV-7 (continued)', 'FACTURE (suite)', 'Übertrag',
                                  'Acme Ltd · Registered in England · Page 1 of 2'])
def test_page_furniture_is_recognised(text):
    page = Page().page().line(820, (50, text)).page().line(30, (50, 'x'))
    rows, heights = tables._rows_of(page.doc())
    assert 0 in tables._furniture(rows, heights)


@pytest.mark.parametrize('text', ['Continued support contract', 'Page layout service 2 hours', 'Part 12 bracket 3',
                                  'Room type: Suite', 'Hotel - Suite', 'Suite', 'Seite'])
def test_a_line_item_is_not_furniture(text):
    page = Page().page().line(400, (50, text))
    rows, heights = tables._rows_of(page.doc())
    assert tables._furniture(rows, heights) == set()


def test_a_table_resumes_under_its_repeated_header_and_skips_the_furniture():
    page = Page().page()
    for p in (1, 2):
        if p == 2:
            page.page()
        page.line(30, (50, 'Acme Supplies Ltd - Invoice INV-7'))
        page.line(60, (380, 'INVOICE' if p == 1 else 'INVOICE (continued)'))
        page.header(200)
        for i in range(3):
            page.item(218 + 16 * i, f'Part {p}{i}', '1', '2.00', '2.00')
        if p == 1:
            page.line(272, (50, 'Continued on next page'))
        page.line(815, (50, 'Acme Supplies Ltd, registered in England'), (480, f'Page {p} of 2'))
    page.line(280, (360, 'Total'), (480, '12.00'))
    got = read(page.doc())
    assert [r['description'] for r in got] == ['Part 10', 'Part 11', 'Part 12', 'Part 20', 'Part 21', 'Part 22']


def test_a_table_resumes_without_a_header_when_the_columns_line_up_and_not_otherwise():
    def two(second_x: float):
        page = invoice(Page().page(), 3)
        page.line(815, (480, 'Page 1 of 2')).page().line(60, (380, 'INVOICE (continued)'))
        page.line(100, (50, 'Part 9 bracket'), (second_x, '4'), (370, '1.00'), (480, '4.00'))
        return read(page.doc())
    assert [r['description'] for r in two(305)][-1] == 'Part 9 bracket'
    assert len(two(305)) == 4
    assert len(two(200)) == 3     # a word between the columns: not this table's row


@pytest.mark.parametrize('text', ['Subtotal', 'Zwischensumme', 'Summe netto', 'Gesamtbetrag', 'MwSt. 19%',
                                  'USt 19%', 'Total HT', 'TVA 20 %', 'Sous-total', 'IVA 21%', 'Importe total',
                                  'Base imponible', 'Totale', 'BTW 21%', 'Totaal', 'GST 18%', 'Amount due',
                                  'Taxable Value', 'IGST 18%', 'CGST 9%', 'Grand Total'])
def test_totals_words_of_several_languages_end_the_table(text):
    page = invoice(Page().page(), 2)
    page.line(252, (360, text), (480, '9.00')).item(268, 'Part 9', '1', '1.00', '1.00')
    assert len(read(page.doc())) == 2


def test_stop_at_replaces_the_totals_words():
    page = invoice(Page().page(), 2)
    page.line(252, (50, 'Freight'), (480, '9.00')).line(268, (50, 'Summary'), (480, '1.00'))
    got = read(page.doc(), stop=compile_regex(r'^Summary', True))
    assert [r['description'] for r in got][-1] == 'Freight'


# ----------------------------------------------------------------------------- headings, wraps, rows

def test_a_section_heading_first_row_and_one_half_way_are_skipped_but_wrapped_cells_join():
    page = Page().page().header(200)
    page.line(218, (50, 'Hardware'))
    page.item(236, 'Bolt M8', '2', '1.00', '2.00')
    page.line(248, (50, 'zinc plated'))                        # a wrapped description, tighter than a row
    page.item(266, 'Nut M8', '2', '1.00', '2.00')
    page.item(284, 'Washer', '2', '1.00', '2.00')
    page.line(302, (50, 'Services'))                           # a heading: a row's pitch below the row above
    page.item(320, 'Fitting', '1', '9.00', '9.00')
    got = read(page.doc())
    assert [r['description'] for r in got] == ['Bolt M8 zinc plated', 'Nut M8', 'Washer', 'Fitting']


def test_a_row_centred_against_a_two_line_description_takes_both_lines():
    page = Page().page().header(200)
    page.line(218, (50, 'Cable tie'))
    page.line(224, (305, '3'), (370, '1.00'), (480, '3.00'))
    page.line(230, (50, '300 mm black'))
    page.item(250, 'Glue', '1', '2.00', '2.00')
    got = read(page.doc())
    assert got[0] == {'description': 'Cable tie 300 mm black', 'quantity': '3', 'unitPrice': '1.00', 'amount': '3.00'}
    assert got[1]['description'] == 'Glue'


def test_a_header_column_no_child_reads_keeps_its_words_out():
    page = Page().page().line(200, (20, 'Pos.'), (50, 'Description'), (300, 'Qty'), (360, 'Unit Price'),
                                   (470, 'Amount'))
    page.line(218, (22, '1'), (50, 'Bolt'), (305, '2'), (370, '1.00'), (480, '2.00'))
    assert read(page.doc()) == [{'description': 'Bolt', 'quantity': '2', 'unitPrice': '1.00', 'amount': '2.00'}]


def test_a_ruling_ocr_reads_as_a_bar_is_no_column_and_no_part_of_a_value():
    """A 150-dpi scan's header `Pos. | Bezeichnung _ Menge ...`: the `_` (or `|`) after the description's
    header was a column of its own, which cut `Kugellager 6204-2RS` to `Kugellager`; a `|` in a
    row was part of the description (`| Informe final`, `[Auditoría de seguridad`)."""
    columns = {'description': ['Bezeichnung'], 'quantity': ['Menge'], 'unitPrice': ['Einzelpreis'],
               'amount': ['Betrag']}
    page = Page(ocr=True).page().line(200, (20, 'Pos.'), (44, '|'), (50, 'Bezeichnung'), (112, '_'),
                                      (300, 'Menge'), (360, 'Einzelpreis'), (470, 'Betrag'))
    page.line(218, (22, '1'), (50, 'Kugellager 6204-2RS'), (305, '6'), (370, '273,49'), (480, '1.640,94'))
    page.line(234, (22, '2'), (44, '|'), (50, 'Keilriemen'), (305, '9'), (370, '485,13'), (480, '4.366,17'))
    page.line(250, (22, '3'), (50, '[Dichtungsring [32mm]'), (305, '1'), (370, '5,00|'), (480, '5,00'))
    got = read(page.doc(), columns)
    assert [r['description'] for r in got] == ['Kugellager 6204-2RS', 'Keilriemen', 'Dichtungsring [32mm]'], got
    assert got[2]['unitPrice'] == '5,00'    # a ruling stuck to a word's edge is cut too
    assert got[1] == {'description': 'Keilriemen', 'quantity': '9', 'unitPrice': '485,13', 'amount': '4.366,17'}


def test_a_row_missing_a_column_is_kept_for_its_exception_not_dropped():
    page = invoice(Page().page(), 2)
    page.line(252, (50, 'Part 9 bracket'), (305, '3'))        # no price, no amount: still a row of the table
    page.item(268, 'Part 10', '1', '1.00', '1.00')
    got = read(page.doc())
    assert got[2] == {'description': 'Part 9 bracket', 'quantity': '3'} and len(got) == 4


# ----------------------------------------------------------------------------- header texts

def test_several_header_texts_per_column_and_which_columns_a_header_must_hold():
    columns = {'description': ['Description', 'Beschreibung'], 'quantity': ['Qty', 'Menge'],
               'unitPrice': ['Unit Price', 'Einzelpreis'], 'amount': ['Amount', 'Betrag']}
    german = Page().page().header(200, ('Beschreibung', 'Menge', 'Einzelpreis', 'Betrag'))
    german.item(218, 'Schraube', '2', '1.00', '2.00')
    assert read(german.doc(), columns)[0]['amount'] == '2.00'
    short = Page().page().line(200, (50, 'Description'), (470, 'Amount')).line(218, (50, 'Fee'), (480, '5.00'))
    assert read(short.doc(), columns) is None                                  # none required: every column
    assert read(short.doc(), columns, {'description', 'amount'}) == [{'description': 'Fee', 'amount': '5.00'}]
    assert read(short.doc(), columns, {'quantity'}) is None
    assert tables.must_hold(columns, set()) == set(columns)
    assert tables.must_hold(columns, {'amount', 'other'}) == {'amount'}


def test_header_texts_match_ignoring_case_spaces_punctuation_and_one_ocr_letter():
    page = Page(ocr=True).page().header(200, ('DESCRIPTION', 'Qty.', 'Unit  Price', 'Amourt'))
    page.item(218, 'Bolt', '2', '1.00', '2.00')
    assert read(page.doc())[0]['amount'] == '2.00'
    text_pdf = Page().page().header(200, ('DESCRIPTION', 'Qty.', 'Unit  Price', 'Amourt'))
    assert read(text_pdf.item(218, 'Bolt', '2', '1.00', '2.00').doc()) is None   # exact on a text layer


def test_the_rules_entry_point_takes_a_text_or_a_list_and_sets_the_confidence():
    doc = invoice(Page().page(), 1).doc()
    rows = rules.table(doc, {'type': 'table', 'confidence': 0.7},
                       {'description': 'Description', 'amount': ['Amount']}, "group 'g'")
    amount = rows[0]['amount']
    assert amount.text == '3.00' and amount.confidence == 0.7 and amount.rule == 'column'


# ----------------------------------------------------------------------------- structured

def _sheet(rows: list[list[str]]) -> Document:
    nodes = [{'id': 'd', 'parentId': None, 'nodeType': 'document', 'content': ''},
             {'id': 't', 'parentId': 'd', 'nodeType': 'table', 'content': ''}]
    for r, row in enumerate(rows):
        nodes.append({'id': f'r{r}', 'parentId': 't', 'nodeType': 'row', 'index': r, 'content': ''})
        for c, text in enumerate(row):
            nodes.append({'id': f'r{r}c{c}', 'parentId': f'r{r}', 'nodeType': 'cell', 'content': text, 'index': c,
                          'features': {'row': r, 'column': c}})
    return Document(nodes)


def test_structured_tables_take_header_lists_and_skip_a_section_heading():
    columns = {'description': ['Description', 'Concepto'], 'amount': ['Amount', 'Importe']}
    doc = _sheet([['Concepto', 'Importe'], ['Servicios', ''], ['Consultoría', '10,00'], ['Materiales', ''],
                  ['Informe', '5,00'], ['Base imponible', '15,00']])
    assert read(doc, columns) == [{'description': 'Consultoría', 'amount': '10,00'},
                                  {'description': 'Informe', 'amount': '5,00'}]


# ----------------------------------------------------------------------------- the corpus (issue 48)

def _corpus_files() -> list[str]:
    import json
    with open(f'{CORPUS}/manifest.json', encoding='utf-8') as f:
        documents = json.load(f)['documents']
    return [d['file'] for d in documents if d['kind'] in ('text-pdf', 'docx', 'xlsx') and d['truth'].get('lineItems')]


@pytest.mark.parametrize('file', _corpus_files())
def test_every_text_document_of_the_corpus_has_its_line_items_read_exactly(file):
    """One definition listing every layout's header texts (tests/extraction_tables_corpus.py),
    the document's locale, the platform's readers: each row's four values as printed, nothing
    more (furniture, headings, page 2, the 'Pos.' column of mueller, tata's drawing order)."""
    from chalicelib.features.extraction import engine
    doc, locale = corpus_doc(file)
    objects = engine.extract(corpus_definition(locale), parse(doc)).objects
    rows = [{a['tag']: a for a in o.attributes} for o in objects if o.path == 'invoice/lineItems']
    assert [(r['description']['typedValue'], r['quantity']['typedValue'], Decimal(str(r['unitPrice']['typedValue'])),
             Decimal(str(r['amount']['typedValue']))) for r in rows] == \
        [(li['description'], li['quantity'], li['unitPrice'], li['amount']) for li in doc.items]
