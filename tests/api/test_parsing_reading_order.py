"""Reading order through the parse stage, in process (chalice.test.Client over moto): a PDF that
draws its page out of reading order (the footer first, the right column of the header before
the left, the address bottom-up, the table column by column from the right, the totals
bottom-up with each value before its label) is read, through the family's text and document
routes, in the order a person reads it, and its line and word ids follow that order
(docs/api/processing.md "Reading order"; the layout: chalicelib/features/parsing/readers/layout.py).
"""
from __future__ import annotations

import io
import json
import time
import uuid
from pathlib import Path

import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from chalicelib.features.identity.service_token import SERVICE
from chalicelib.features.parsing import stage

ADDRESS = ['Nordlicht Handel GmbH', 'Hafenstrasse 12', '20457 Hamburg', 'Germany']
DETAILS = ['Invoice number: INV-2041', 'Invoice date: 14.03.2026', 'Due date: 13.04.2026']
TABLE = [('Description', 'Qty', 'Unit price', 'Amount'), ('Widget A', '2', '10.00', '20.00'),
         ('Gadget B', '5', '16.00', '80.00'), ('Service hour', '1', '20.00', '20.00')]
TOTALS = [('Subtotal', '120.00'), ('VAT 19%', '22.80'), ('Total', '142.80')]
FOOTER = 'Thank you for your business'
INVOICES = Path(__file__).resolve().parents[1] / 'fixtures' / 'invoices'


def _invoice_drawn_out_of_order() -> bytes:
    """One A4 page drawn in an order no reader would read it in (module docstring): the header's
    two blocks with their own fonts and leading (11 pt / 16 pt against 9 pt / 12 pt), as
    invoices set them, so their lines do not share baselines."""
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4, invariant=1)
    pdf.setFont('Helvetica', 9)
    pdf.drawString(50, 40, FOOTER)
    for n, text in enumerate(DETAILS):
        pdf.drawString(350, 742 - 12 * n, text)
    pdf.setFont('Helvetica', 11)
    for n, text in reversed(list(enumerate(ADDRESS))):
        pdf.drawString(50, 745 - 16 * n, text)
    pdf.setFont('Helvetica-Bold', 18)
    pdf.drawString(50, 790, 'INVOICE')
    pdf.setFont('Helvetica', 10)
    for column, x in reversed(list(enumerate([50, 330, 430, 545]))):
        for n, row in enumerate(TABLE):
            (pdf.drawRightString if column else pdf.drawString)(x, 640 - 18 * n, row[column])
    for n, (label, value) in reversed(list(enumerate(TOTALS))):
        pdf.drawRightString(545, 550 - 16 * n, value)
        pdf.drawString(400, 550 - 16 * n, label)
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()


# the page as a person reads it: the title, the address block, the invoice's details beside it,
# the table row by row (each cell drawn alone is a line of its own), the totals, the footer
READ = (['INVOICE'] + ADDRESS + DETAILS + [cell for row in TABLE for cell in row]
        + [f'{label} {value}' for label, value in TOTALS] + [FOOTER])


@pytest.fixture
def store(api, org_id, bucket):  # noqa: F811
    project = api.post('/api/projects', {'name': f'order-{uuid.uuid4().hex[:6]}', 'organizationId': org_id}).json
    return api.post('/api/document-stores', {'projectId': project['id'], 'name': 'order',
                                             'slug': f'order-{uuid.uuid4().hex[:8]}'}).json


def _parsed(api, store, data: bytes, name: str) -> str:
    r = api.post(f"/api/document-stores/{store['id']}/upload?path=order/{name}", raw=data,
                 headers={'content-type': 'application/pdf'})
    assert r.status == 201, r.json
    family_id = r.json['id']
    done = stage.run_slice(family_id, stage.new_state(f'run-{uuid.uuid4().hex[:8]}'), principal=SERVICE,
                           deadline=time.monotonic() + 60, ocr=False)
    assert done.kind == 'done' and done.output['parser'] == 'pdf-text', done
    return family_id


def test_a_pdf_drawn_out_of_reading_order_is_read_in_reading_order(api, store):
    family_id = _parsed(api, store, _invoice_drawn_out_of_order(), 'drawn-out-of-order.pdf')
    text = api.get(f'/api/document-families/{family_id}/text').body.decode()
    assert text.strip().split('\n') == READ

    nodes = api.get(f'/api/document-families/{family_id}/document').json['nodes']
    lines = [n for n in nodes if n['nodeType'] == 'line']
    assert [n['content'] for n in lines] == READ
    # ids are positions in reading order: the n-th line read is p1.l{n}, its k-th word .w{k}
    assert [n['id'] for n in lines] == [f'p1.l{n}' for n in range(1, len(READ) + 1)]
    assert [n['index'] for n in lines] == list(range(len(READ)))
    total = next(n for n in lines if n['content'] == 'Total 142.80')
    words = [n for n in nodes if n['parentId'] == total['id']]
    assert [(w['id'], w['content']) for w in words] == [(f"{total['id']}.w1", 'Total'),
                                                       (f"{total['id']}.w2", '142.80')]
    assert words[0]['features']['bbox'][0] < words[1]['features']['bbox'][0]



def test_the_corpus_invoice_drawn_out_of_reading_order_reads_top_to_bottom(api, store):
    """tests/fixtures/invoices/tata-1.pdf (README: totals first, the right column before the left,
    addresses and items bottom-up): its text runs title, seller, buyer, the invoice's details, the
    items in the order of its truth, the totals, the footer."""
    truth = next(d for d in json.loads((INVOICES / 'manifest.json').read_text())['documents']
                 if d['file'] == 'tata-1.pdf')['truth']
    family_id = _parsed(api, store, (INVOICES / 'tata-1.pdf').read_bytes(), 'tata-1.pdf')
    text = api.get(f'/api/document-families/{family_id}/text').body.decode()
    items = [item['description'] for item in truth['lineItems']]
    expected = (['TAX INVOICE', truth['vendorName'], 'Buyer (Bill to)', truth['customerName'],
                 f"Invoice No. {truth['invoiceNumber']}", 'Dated', 'Sl Particulars Qty Rate Amount'] + items
                + ['Taxable Value', 'Grand Total', 'Amounts in Indian Rupees'])
    at = [text.index(part) for part in expected]
    assert at == sorted(at), [part for part, _ in sorted(zip(expected, at, strict=True), key=lambda p: p[1])]


@pytest.mark.slow   # Tesseract reads a page (~1 CPU-second)
def test_an_ocr_page_is_read_in_reading_order_too(api, store):
    """tests/fixtures/invoices/photo-dupont-1-200dpi-2deg.png, a phone-like photo turned 2 degrees:
    Tesseract's own block order gave the page's footer before the totals; read in reading order,
    the items come in the order of the truth, then the totals, then the footer."""
    truth = next(d for d in json.loads((INVOICES / 'manifest.json').read_text())['documents']
                 if d['file'] == 'photo-dupont-1-200dpi-2deg.png')['truth']
    r = api.post(f"/api/document-stores/{store['id']}/upload?path=order/photo.png",
                 raw=(INVOICES / 'photo-dupont-1-200dpi-2deg.png').read_bytes(), headers={'content-type': 'image/png'})
    assert r.status == 201, r.json
    done = stage.run_slice(r.json['id'], stage.new_state(f'run-{uuid.uuid4().hex[:8]}'), principal=SERVICE,
                           deadline=time.monotonic() + 120, ocr=True)
    assert done.kind == 'done' and done.output['parser'] == 'image-ocr', done
    lines = api.get(f"/api/document-families/{r.json['id']}/text").body.decode().split('\n')

    def first(start: str) -> int:
        return next(n for n, line in enumerate(lines) if line.lstrip('\f').startswith(start))
    items = [first(item['description'].split()[0]) for item in truth['lineItems']]   # OCR drops accents
    assert items == sorted(items), lines
    assert items[-1] < first('Total HT') < first('TVA 20') < first('Total TTC') < first('Conditions de paiement'), lines
