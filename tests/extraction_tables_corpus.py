"""Documents for the table rule (docs/api/extraction.md "Tables"), made by reportlab and read by
the platform's own readers (chalicelib/features/parsing/readers): a two-page invoice with page
furniture (a running header, a repeated title, "Continued on next page", "Page 1 of 2"), with or
without its header repeated on page 2; the same layout in German; a table whose first row is a
section heading.

Every value written into a document is returned beside it (``Doc.items``), so a test compares
what extraction found with what the generator wrote. ``corpus_doc`` reads a document of the
issue-48 corpus (tests/fixtures/invoices/, made by LibreOffice, Chromium, reportlab, ...) with its
truth the same way.
"""
from __future__ import annotations

import io
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

ENGLISH = {'cols': ('Description', 'Qty', 'Unit Price', 'Amount'),
           'totals': ('Subtotal', 'Tax (20%)', 'Total'), 'title': 'INVOICE', 'page': 'Page {n} of {of}',
           'continued': 'Continued on next page', 'again': 'INVOICE (continued)', 'money': '{:,.2f}'}
GERMAN = {'cols': ('Beschreibung', 'Menge', 'Einzelpreis', 'Betrag'),
          'totals': ('Zwischensumme', 'MwSt 19%', 'Gesamtbetrag'), 'title': 'RECHNUNG', 'page': 'Seite {n} von {of}',
          'continued': 'Fortsetzung auf Seite 2', 'again': 'RECHNUNG - Fortsetzung', 'money': '{:,.2f}'}


@dataclass
class Doc:
    data: bytes
    media_type: str
    items: list[dict[str, Any]]        # the line items written: description, quantity, unitPrice, amount


def items(n: int, *, start: int = 0) -> list[dict[str, Any]]:
    out = []
    for i in range(start, start + n):
        q, p = 1 + i % 7, Decimal(f'{5 + i % 30}.{(i * 7) % 100:02d}')
        out.append({'description': f'Bracket model {chr(65 + i % 26)}{i:03d}', 'quantity': q, 'unitPrice': p,
                    'amount': p * q})
    return out


def _money(language: dict, value: Decimal) -> str:
    return language['money'].format(value)


def two_page_invoice(*, page1: int = 14, page2: int = 6, header_again: bool = True, language: dict = ENGLISH,
                     broken: int | None = None, blank: int | None = None, heading: str | None = None,
                     pages: int = 2) -> Doc:
    """An invoice whose line-item table runs over ``pages`` pages (``page1`` rows on the first,
    ``page2`` on each next one), with page furniture on every page. ``broken``: the index of a
    row whose amount is not its quantity times its price; ``blank``: the index of a row printed
    without its amount (written as None in ``items``). ``heading``: a section heading row
    right under the header (filling only the description column)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas
    rows = items(page1 + page2 * (pages - 1))
    if broken is not None:
        rows[broken] = {**rows[broken], 'amount': rows[broken]['amount'] + Decimal('10.00')}
    if blank is not None:
        rows[blank] = {**rows[blank], 'amount': None}
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    w, h = A4
    xs = (50, 300, 360, 470)

    def furniture(n: int) -> None:
        c.setFont('Helvetica', 8)
        c.drawString(50, h - 30, 'Acme Supplies Ltd  ·  12 Harbour Road, Bristol BS1 4XX  ·  Invoice INV-7731')
        c.drawString(50, 30, 'Acme Supplies Ltd, registered in England no. 0123456, VAT GB123456789')
        c.drawRightString(545, 30, language['page'].format(n=n, of=pages))
        c.setFont('Helvetica-Bold', 16)
        c.drawString(380, h - 70, language['title'] if n == 1 else language['again'])

    def header(y: float) -> None:
        c.setFont('Helvetica-Bold', 10)
        for x, text in zip(xs, language['cols'], strict=True):
            c.drawString(x, y, text)
        c.setFont('Helvetica', 10)

    def row(y: float, li: dict[str, Any]) -> None:
        c.drawString(50, y, li['description'])
        c.drawRightString(320, y, str(li['quantity']))
        c.drawRightString(420, y, _money(language, li['unitPrice']))
        if li['amount'] is not None:
            c.drawRightString(520, y, _money(language, li['amount']))

    furniture(1)
    c.setFont('Helvetica', 10)
    c.drawString(50, h - 110, 'Invoice No: INV-7731')
    c.drawString(50, h - 126, 'Invoice Date: 14/03/2026')
    y = h - 180
    header(y)
    y -= 18
    if heading:
        c.setFont('Helvetica-Bold', 10)
        c.drawString(50, y, heading)
        c.setFont('Helvetica', 10)
        y -= 16
    at = 0
    for page in range(1, pages + 1):
        count = page1 if page == 1 else page2
        if page > 1:
            c.setFont('Helvetica', 9)
            c.drawString(50, y - 10, language['continued'])
            c.showPage()
            furniture(page)
            y = h - 110
            if header_again:
                header(y)
                y -= 18
            c.setFont('Helvetica', 10)
        for li in rows[at:at + count]:
            row(y, li)
            y -= 16
        at += count
    y -= 14
    subtotal = sum((li['amount'] or Decimal('0') for li in rows), Decimal('0'))
    for label, value in zip(language['totals'], (subtotal, subtotal / 5, subtotal * 6 / 5), strict=True):
        c.drawString(360, y, label)
        c.drawRightString(520, y, _money(language, value.quantize(Decimal('0.01'))))
        y -= 16
    c.showPage()
    c.save()
    return Doc(buf.getvalue(), 'application/pdf', rows)


def parse(doc: Doc) -> list[dict[str, Any]]:
    """The document's nodes as the parse stage writes them: the platform's readers, every chunk."""
    from chalicelib.features.parsing import readers
    name = 'x.' + next(ext for ext, media in _MEDIA.items() if media == doc.media_type)
    nodes: list[dict[str, Any]] = []
    first = 1
    while True:
        result = readers.read(doc.data, media_type=doc.media_type, filename=name, first_page=first,
                              deadline=time.monotonic() + 120)
        nodes += result.nodes
        if result.next_page is None:
            return nodes
        first = result.next_page


ONE_HEADER = {'description': 'Description', 'quantity': 'Qty', 'unitPrice': 'Unit Price', 'amount': 'Amount'}


def line_item_definition(*, headers: dict[str, str | list[str]] | None = None, required: bool = True) -> list[dict]:
    """An invoice group holding a line-item group of four columns (each header a list of texts:
    English, German, French; ``ONE_HEADER``: one English text each, as before header lists),
    amounts read as en-US numbers, ``amount = quantity x unitPrice``."""
    headers = headers or {'description': ['Description', 'Beschreibung', 'Désignation'],
                          'quantity': ['Qty', 'Quantity', 'Menge', 'Qté'],
                          'unitPrice': ['Unit Price', 'Einzelpreis', 'Prix unitaire'],
                          'amount': ['Amount', 'Betrag', 'Montant']}
    kinds = {'description': 'string', 'quantity': 'number', 'unitPrice': 'decimal', 'amount': 'currency'}
    return [{'name': 'invoice', 'group': True, 'cardinality': 'one', 'children': [
        {'name': 'invoiceNumber', 'rules': [{'type': 'regex', 'pattern': r'(?:Invoice No|Facture n°):\s*(\S+)'}]},
        {'name': 'lineItems', 'group': True, 'cardinality': 'many', 'rules': [{'type': 'table'}],
         'validations': [{'name': 'amount is quantity x price',
                          'ruleFormula': '$round(quantity * unitPrice, 2) = amount'}],
         'children': [{'name': name, 'type': kinds[name], 'locale': 'en-US', 'required': required,
                       'rules': [{'type': 'column', 'header': texts}]} for name, texts in headers.items()]}]}]


# ----------------------------------------------------------------------------- the corpus (issue 48)

CORPUS = 'tests/fixtures/invoices'
CORPUS_HEADERS = {'description': ['Description', 'Particulars', 'Bezeichnung', 'Concepto', 'Désignation', 'Item',
                                  'Artikel'],
                  'quantity': ['Qty', 'Quantity', 'Menge', 'Cantidad', 'Qté'],
                  'unitPrice': ['Unit Price', 'Rate', 'Einzelpreis', 'Precio unitario', 'Prix unitaire', 'Preis'],
                  'amount': ['Amount', 'Betrag', 'Importe', 'Montant']}
_MEDIA = {'pdf': 'application/pdf', 'png': 'image/png', 'html': 'text/html',
          'docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
          'xlsx': 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'}


def corpus_doc(file: str) -> tuple[Doc, str]:
    """A corpus document (tests/fixtures/invoices/manifest.json) with its line items' truth as
    ``items`` (quantity an int, prices Decimals), and its locale."""
    import json
    manifest = json.load(open(f'{CORPUS}/manifest.json', encoding='utf-8'))
    entry = next(d for d in manifest['documents'] if d['file'] == file)
    truth = [{'description': li['description'], 'quantity': int(li['quantity']),
              'unitPrice': Decimal(li['unitPrice']), 'amount': Decimal(li['amount'])}
             for li in entry['truth'].get('lineItems', [])]
    with open(f'{CORPUS}/{file}', 'rb') as f:
        return Doc(f.read(), _MEDIA[file.rsplit('.', 1)[1]], truth), entry['locale']


def corpus_definition(locale: str, headers: dict[str, str | list[str]] | None = None) -> list[dict]:
    """``line_item_definition`` with ``headers`` (default: every layout's header texts) and the
    document's locale."""
    taxons = line_item_definition(headers=headers or CORPUS_HEADERS)
    for child in taxons[0]['children'][1]['children']:
        child['locale'] = locale
    return taxons
