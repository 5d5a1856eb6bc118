"""The extraction corpus: invoices and a form made by reportlab (text PDFs), one scanned invoice
(a page rendered to PNG by pypdfium2 and wrapped as an image-only PDF), and, for tests that run
before the parse stage, a reader turning a text PDF into the parsed-document contract's nodes
with pypdfium2 (page -> line -> word, boxes in points from the top-left).

Every value written into a document is returned beside it, so a test compares what extraction
found with what the generator wrote.
"""
from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

LINE_ITEMS = [
    ('Widget, large', 2, Decimal('1250.00')),
    ('Gadget', 10, Decimal('19.99')),
    ('Service hours', 7, Decimal('85.50')),
    ('Cable 3m', 3, Decimal('4.25')),
]


def many_items(n: int) -> list[tuple[str, int, Decimal]]:
    """``n`` line items (a long invoice: its table runs over pages)."""
    return [(f'Part {i:04d} steel bracket', 1 + i % 9, Decimal(f'{3 + i % 40}.{i % 100:02d}')) for i in range(n)]


def invoice_values(*, number: str = 'INV-2026-0042', items=LINE_ITEMS, broken: bool = False) -> dict[str, Any]:
    lines = [{'description': d, 'quantity': q, 'unitPrice': p, 'amount': p * q} for d, q, p in items]
    subtotal = sum((li['amount'] for li in lines), Decimal('0'))
    tax = (subtotal * Decimal('0.20')).quantize(Decimal('0.01'))
    total = subtotal + tax
    return {
        'invoiceNumber': number, 'invoiceDate': '2026-03-14', 'dueDate': '2026-04-13',
        'poNumber': 'PO-77812', 'customerId': 'C-1009', 'vendorName': 'Acme Supplies Ltd',
        'vendorVat': 'GB123456789', 'customerName': 'Globex Corporation', 'currency': 'EUR',
        'paymentTerms': 'Net 30', 'iban': 'DE89370400440532013000',
        'subtotal': subtotal, 'tax': tax, 'total': total if not broken else total + Decimal('100'),
        'lineItems': lines, 'broken': broken}


def _money(value: Decimal) -> str:
    return f'{value:,.2f}'


def invoice_pdf(values: dict[str, Any]) -> bytes:
    """An invoice laid out as most are: header fields left and right, a line-item table, totals.
    A broken invoice has no due date, an impossible invoice date and a total that does not add up."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    w, h = A4
    c.setFont('Helvetica-Bold', 18)
    c.drawString(50, h - 60, values['vendorName'])
    c.setFont('Helvetica', 10)
    c.drawString(50, h - 78, f"VAT No: {values['vendorVat']}")
    c.setFont('Helvetica-Bold', 14)
    c.drawString(380, h - 60, 'INVOICE')
    c.setFont('Helvetica', 10)
    y = h - 110
    left = [('Invoice No:', values['invoiceNumber']),
            ('Invoice Date:', '31/02/2026' if values['broken'] else '14/03/2026'),
            ('Due Date:', '' if values['broken'] else '13/04/2026'),
            ('PO Number:', values['poNumber'])]
    for label, value in left:
        c.drawString(50, y, label)
        c.drawString(140, y, value)
        y -= 16
    c.drawString(330, h - 110, 'Bill To')
    c.drawString(330, h - 126, values['customerName'])
    c.drawString(330, h - 142, f"Customer ID: {values['customerId']}")
    c.drawString(330, h - 158, f"Currency: {values['currency']}")
    y = h - 200
    cols = [(50, 'Description'), (300, 'Qty'), (360, 'Unit Price'), (470, 'Amount')]
    c.setFont('Helvetica-Bold', 10)
    for x, text in cols:
        c.drawString(x, y, text)
    c.setFont('Helvetica', 10)
    y -= 18
    for li in values['lineItems']:
        if y < 80:   # the table goes on over the next page, under its header again
            c.showPage()
            c.setFont('Helvetica-Bold', 10)
            y = h - 60
            for x, text in cols:
                c.drawString(x, y, text)
            c.setFont('Helvetica', 10)
            y -= 18
        c.drawString(50, y, li['description'])
        c.drawRightString(320, y, str(li['quantity']))
        c.drawRightString(420, y, _money(li['unitPrice']))
        c.drawRightString(520, y, _money(li['amount']))
        y -= 16
    y -= 14
    if y < 140:
        c.showPage()
        c.setFont('Helvetica', 10)
        y = h - 60
    for label, value in (('Subtotal', values['subtotal']), ('Tax (20%)', values['tax']), ('Total', values['total'])):
        c.drawString(360, y, label)
        c.drawRightString(520, y, f"EUR {_money(value)}")
        y -= 16
    y -= 20
    c.drawString(50, y, f"Payment Terms: {values['paymentTerms']}")
    c.drawString(50, y - 16, f"IBAN: {values['iban']}")
    c.showPage()
    c.save()
    return buf.getvalue()


def long_table_pdf(rows: int) -> bytes:
    """A table of ``rows`` lines over as many pages as it takes (the header repeated on each)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    _, h = A4
    c.setFont('Helvetica', 8)
    y = 0
    for i in range(rows):
        if y < 40:
            if i:
                c.showPage()
                c.setFont('Helvetica', 8)
            y = h - 40
            for x, text in ((50, 'Description'), (300, 'Qty'), (360, 'Unit Price'), (470, 'Amount')):
                c.drawString(x, y, text)
            y -= 10
        c.drawString(50, y, f'Item {i}')
        c.drawRightString(320, y, '1')
        c.drawRightString(420, y, '1.00')
        c.drawRightString(520, y, '1.00')
        y -= 10
    c.showPage()
    c.save()
    return buf.getvalue()


def scanned(pdf: bytes, dpi: int = 200) -> bytes:
    """The first page of ``pdf`` rendered to a PNG and wrapped as an image-only PDF (no text layer)."""
    import pypdfium2 as pdfium
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas
    doc = pdfium.PdfDocument(pdf)
    page = doc[0]
    width, height = page.get_size()
    image = page.render(scale=dpi / 72).to_pil()
    png = io.BytesIO()
    image.save(png, format='PNG')
    out = io.BytesIO()
    c = canvas.Canvas(out, pagesize=(width, height))
    c.drawImage(ImageReader(io.BytesIO(png.getvalue())), 0, 0, width=width, height=height)
    c.showPage()
    c.save()
    return out.getvalue()


def pdf_nodes(pdf: bytes) -> list[dict[str, Any]]:
    """A text PDF as the contract's nodes (page -> line -> word), read with pypdfium2: characters
    grouped into words at spaces, words into lines by their baseline."""
    import pypdfium2 as pdfium
    doc = pdfium.PdfDocument(pdf)
    nodes: list[dict[str, Any]] = [{'id': 'd', 'parentId': None, 'nodeType': 'document', 'content': '', 'index': 0,
                                    'features': {'mediaType': 'application/pdf', 'pageCount': len(doc),
                                                 'parser': 'tests.pdfium'}}]
    for p in range(len(doc)):
        page = doc[p]
        width, height = page.get_size()
        pid = f'p{p + 1}'
        nodes.append({'id': pid, 'parentId': 'd', 'nodeType': 'page', 'content': '', 'index': p,
                      'features': {'page': p + 1, 'width': width, 'height': height}})
        tp = page.get_textpage()
        count = tp.count_chars()
        text = tp.get_text_range(0, count)
        words: list[dict[str, Any]] = []
        current: dict[str, Any] | None = None
        for i in range(count):
            ch = text[i] if i < len(text) else ' '
            if ch.isspace():
                current = None
                continue
            x0, y0, x1, y1 = tp.get_charbox(i, loose=True)
            box = [x0, height - y1, x1, height - y0]
            size = max(box[3] - box[1], 1.0)
            if current is not None and abs(current['box'][3] - box[3]) < 1 and box[0] - current['box'][2] < 0.3 * size:
                current['text'] += ch
                current['box'] = [min(current['box'][0], box[0]), min(current['box'][1], box[1]),
                                  max(current['box'][2], box[2]), max(current['box'][3], box[3])]
            else:
                current = {'text': ch, 'box': box}
                words.append(current)
        lines: list[list[dict[str, Any]]] = []
        for word in sorted(words, key=lambda w: (round(w['box'][3]), w['box'][0])):
            if lines and abs(lines[-1][0]['box'][3] - word['box'][3]) < 3:
                lines[-1].append(word)
            else:
                lines.append([word])
        for li, line in enumerate(lines):
            line.sort(key=lambda w: w['box'][0])
            lid = f'{pid}.l{li + 1}'
            box = [min(w['box'][0] for w in line), min(w['box'][1] for w in line),
                   max(w['box'][2] for w in line), max(w['box'][3] for w in line)]
            nodes.append({'id': lid, 'parentId': pid, 'nodeType': 'line', 'content': ' '.join(w['text'] for w in line),
                          'index': li, 'features': {'page': p + 1, 'bbox': [round(v, 2) for v in box]}})
            for wi, word in enumerate(line):
                nodes.append({'id': f'{lid}.w{wi + 1}', 'parentId': lid, 'nodeType': 'word', 'content': word['text'],
                              'index': wi, 'features': {'page': p + 1, 'bbox': [round(v, 2) for v in word['box']]}})
    return nodes


def ocr_nodes(pdf: bytes, dpi: int = 300) -> list[dict[str, Any]]:
    """An image-only PDF as nodes through Tesseract's TSV output (words with confidences)."""
    import csv
    import subprocess
    import tempfile

    import pypdfium2 as pdfium
    doc = pdfium.PdfDocument(pdf)
    page = doc[0]
    width, height = page.get_size()
    scale = dpi / 72
    with tempfile.TemporaryDirectory() as tmp:
        path = f'{tmp}/page.png'
        page.render(scale=scale).to_pil().save(path)
        tsv = subprocess.run(['tesseract', path, '-', '--psm', '6', 'tsv'], capture_output=True, text=True,
                             timeout=120, check=True).stdout
    nodes: list[dict[str, Any]] = [
        {'id': 'd', 'parentId': None, 'nodeType': 'document', 'content': '', 'index': 0,
         'features': {'mediaType': 'application/pdf', 'pageCount': 1, 'parser': 'tests.tesseract'}},
        {'id': 'p1', 'parentId': 'd', 'nodeType': 'page', 'content': '', 'index': 0,
         'features': {'page': 1, 'width': width, 'height': height}}]
    lines: dict[tuple[int, int, int], list[dict[str, Any]]] = {}
    for row in csv.DictReader(io.StringIO(tsv), delimiter='\t', quoting=csv.QUOTE_NONE):
        if row.get('level') != '5' or not (row.get('text') or '').strip():
            continue
        left, top, w, h = (int(row[k]) / scale for k in ('left', 'top', 'width', 'height'))
        key = (int(row['block_num']), int(row['par_num']), int(row['line_num']))
        lines.setdefault(key, []).append({'text': row['text'], 'box': [left, top, left + w, top + h],
                                          'confidence': max(0.0, float(row['conf'])) / 100})
    for li, key in enumerate(sorted(lines)):
        words = lines[key]
        lid = f'p1.l{li + 1}'
        box = [min(w['box'][0] for w in words), min(w['box'][1] for w in words),
               max(w['box'][2] for w in words), max(w['box'][3] for w in words)]
        nodes.append({'id': lid, 'parentId': 'p1', 'nodeType': 'line', 'content': ' '.join(w['text'] for w in words),
                      'index': li, 'features': {'page': 1, 'bbox': [round(v, 2) for v in box]}})
        for wi, word in enumerate(words):
            nodes.append({'id': f'{lid}.w{wi + 1}', 'parentId': lid, 'nodeType': 'word', 'content': word['text'],
                          'index': wi, 'features': {'page': 1, 'bbox': [round(v, 2) for v in word['box']],
                                                    'confidence': round(word['confidence'], 3)}})
    return nodes


def invoice_definition(*, threshold: float | None = None) -> list[dict[str, Any]]:
    """A 20-taxon definition: an invoice group (14 header fields) with a line-item group (4 columns)."""
    def leaf(name, label, kind='string', *rules, **extra):
        return {'name': name, 'label': label, 'type': kind, 'rules': list(rules), **extra}

    def lab(text, direction='right'):
        return {'type': 'label', 'label': text, 'direction': direction}

    def rx(pattern, **kw):
        return {'type': 'regex', 'pattern': pattern, **kw}

    money = {'locale': 'en-GB'}
    conf = {'threshold': threshold} if threshold is not None else {}
    return [{
        'name': 'invoice', 'label': 'Invoice', 'group': True, 'cardinality': 'one',
        'validations': [{'name': 'total adds up', 'ruleFormula': '$round(subtotal + tax, 2) = total',
                         'messageFormula': "'the total ' & $string(total) & ' is not the subtotal plus tax ' & "
                                           "$string($round(subtotal + tax, 2))"}],
        'children': [
            leaf('invoiceNumber', 'Invoice number', 'string', lab('Invoice No'), required=True, **conf),
            leaf('invoiceDate', 'Invoice date', 'date', lab('Invoice Date'), required=True, locale='en-GB'),
            leaf('dueDate', 'Due date', 'date', lab('Due Date'), required=True, locale='en-GB'),
            leaf('poNumber', 'PO number', 'string', lab('PO Number')),
            leaf('customerId', 'Customer ID', 'string', lab('Customer ID')),
            leaf('vendorName', 'Vendor', 'string',
                 {'type': 'jsonata', 'expression': "$substringBefore(lines[0].text, ' INVOICE')"}),
            leaf('vendorVat', 'Vendor VAT number', 'string', rx(r'VAT No:\s*([A-Z]{2}\d{9})')),
            leaf('customerName', 'Customer', 'string', lab('Bill To', 'below')),
            leaf('currency', 'Currency', 'selection', lab('Currency'), options=['EUR', 'USD', 'GBP']),
            leaf('paymentTerms', 'Payment terms', 'string', lab('Payment Terms')),
            leaf('iban', 'IBAN', 'string', rx(r'IBAN:\s*([A-Z]{2}\d{2}[A-Z0-9]{10,30})')),
            leaf('subtotal', 'Subtotal', 'currency', lab('Subtotal'), required=True, **money),
            leaf('tax', 'Tax', 'currency', lab('Tax (20%)'), **money),
            leaf('total', 'Total', 'currency', lab('Total'), required=True, **money),
            {'name': 'lineItems', 'label': 'Line items', 'group': True, 'cardinality': 'many',
             'rules': [{'type': 'table'}],
             'validations': [{'name': 'amount is quantity x price',
                              'ruleFormula': '$round(quantity * unitPrice, 2) = amount'}],
             'children': [
                 leaf('description', 'Description', 'string', {'type': 'column', 'header': 'Description'}),
                 leaf('quantity', 'Quantity', 'number', {'type': 'column', 'header': 'Qty'}),
                 leaf('unitPrice', 'Unit price', 'decimal', {'type': 'column', 'header': 'Unit Price'}, **money),
                 leaf('amount', 'Amount', 'currency', {'type': 'column', 'header': 'Amount'}, **money),
             ]},
        ]}]
