"""The layout memory through `make run` for real (issue 48, docs/api/extraction.md "Layout
memory"): two invoices of one supplier (same layout, other values: reportlab text PDFs) are
uploaded through the store file API, parsed by the parse stage and extracted by the project's
assistant; the first misses its PO number (the definition's rule looks for a label these
invoices do not print), a reviewer points at its word through the REST API, and the second
invoice is read there by the assistant's run: no exception, no review task. One server, every
target 127.0.0.1."""
from __future__ import annotations

import copy

import pytest
from urllib3 import encode_multipart_formdata

from tests.extraction_corpus import invoice_definition, invoice_pdf, invoice_values
from tests.integration.test_extraction_local import _extracted, _objects, assistant_place
from tests.integration.test_parsing_local import _wait
from tests.live import LiveStack

WITHIN_SECONDS = 120   # parse + the pipeline, on a loaded 2-core machine


@pytest.fixture(scope='module')
def live(tmp_path_factory):
    stack = LiveStack(tmp_path_factory.mktemp('layout-memory'))
    yield stack
    stack.stop()


def _setup(live) -> dict:
    taxons = copy.deepcopy(invoice_definition())
    po = next(c for c in taxons[0]['children'] if c['name'] == 'poNumber')
    po.update(required=True, label='Order Ref', rules=[{'type': 'label', 'label': 'Order Ref'}])
    return assistant_place(live, {'taxons': taxons}, 'memory')


def _extract_upload(live, place, name: str, values: dict) -> tuple[dict, dict]:
    body, content_type = encode_multipart_formdata({'file': (name, invoice_pdf(values), 'application/pdf')})
    answer = live.call('POST', f"/api/stores/{place['org']['slug']}/{place['inbox']['slug']}/fs?path={name}",
                       raw=body, content_type=content_type)
    assert answer.status == 201, answer
    family = answer.body
    execution = _wait(lambda: _extracted(live, family['id']), WITHIN_SECONDS)
    assert execution is not None and execution['status'] == 'SUCCEEDED', (name, ''.join(live.output[-30:]))
    header = _objects(live, place, family['id'])[0]
    return family, header


def _supplier(number: str, po: str) -> dict:
    values = invoice_values(number=number)
    values.update(poNumber=po, iban='DE89370400440532013000')
    return values


def test_a_correction_on_one_invoice_reads_the_next_of_the_layout_without_review(live):
    place = _setup(live)
    family, header = _extract_upload(live, place, 'a-1.pdf', _supplier('INV-MEM-1', 'PO-77812'))
    po = next(a for a in header['attributes'] if a['tag'] == 'poNumber')
    assert po.get('value') is None and header['exceptionCount'] >= 1
    doc = live.get(f"/api/document-families/{family['id']}/document").body
    word = next(n['id'] for n in doc['nodes'] if n['nodeType'] == 'word' and n['content'] == 'PO-77812')
    fixed = live.put(f"/api/data-objects/{header['id']}/attributes/{po['id']}", {'nodeIds': [word]})
    assert fixed.status == 200, fixed
    assert fixed.body['value'] == 'PO-77812' and fixed.body['layoutMemory']['kept'] is True, fixed.body
    # the next invoice of the supplier: read where the reviewer pointed, nothing to review
    family2, header2 = _extract_upload(live, place, 'a-2.pdf', _supplier('INV-MEM-2', 'PO-2026-4242'))
    po2 = next(a for a in header2['attributes'] if a['tag'] == 'poNumber')
    assert po2['value'] == 'PO-2026-4242' and po2['dataFeatures']['rule'] == 'memory', po2
    assert header2['exceptionCount'] == 0
    [run] = live.get(f"/api/document-families/{family2['id']}").body['extraction']['runs'].values()
    assert run['openExceptions'] == 0 and not run.get('taskId'), run
    assert run['layoutMemory']['applied'] == ['invoice/poNumber']
    memories = live.get(f"/api/data-definitions/{place['definition']['id']}/layout-memories").body
    assert memories['totalElements'] == 1 and memories['content'][0]['kind'] == 'supplier'
