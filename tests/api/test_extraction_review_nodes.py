"""A reviewer's correction pointing at words (docs/api/extraction.md "Review"): ``nodeIds`` name
word or line nodes of the family's parsed document; with no ``value`` the value is their text in
reading order, with one the value wins and the ids record where it stands; the attribute's
``dataFeatures`` become {nodeIds, page, bbox, rule: "reviewer"}. An id the document does not
hold is a 400 naming it, and nothing is written; another organization's object is a 404."""
from __future__ import annotations

from tests.api.test_extraction import _base, _extract, family_with, setup  # noqa: F401 - fixture
from tests.extraction_corpus import invoice_pdf, invoice_values, pdf_nodes


def _words(values) -> dict[str, dict]:
    """The nodes written for the invoice (the same generator, the same reader): by id."""
    return {n['id']: n for n in pdf_nodes(invoice_pdf(values))}


def _line_of(nodes: dict[str, dict], text: str) -> dict:
    return next(n for n in nodes.values() if n['nodeType'] == 'line' and n['content'].startswith(text))


def _kids(nodes, line):
    return [n for n in nodes.values() if n.get('parentId') == line['id'] and n['nodeType'] == 'word']


def _invoice(api, setup, fam):  # noqa: F811
    obj = api.get(f"{_base(setup)}/dataObjects?path=invoice&documentFamilyId={fam['id']}").json['content'][0]
    return obj, {a['tag']: a for a in obj['attributes']}


def test_a_missing_value_is_filled_by_pointing_at_its_words(api, setup):  # noqa: F811
    """The broken invoice has no due date (REQUIRED_MISSING): the reviewer points at the words
    of a date on the page; the value is their text, normalised, the exception closed, and the
    attribute records the words, their page and box and the rule "reviewer"."""
    values = invoice_values(number='INV-NODES-1', broken=True)
    nodes = _words(values)
    fam = family_with(api, setup, values)
    _extract(api, setup, fam)
    obj, by_tag = _invoice(api, setup, fam)
    assert by_tag['dueDate']['value'] is None
    po = _line_of(nodes, 'PO Number')
    words = _kids(nodes, po)
    # the PO number's line holds "PO Number: PO-77812 Currency: EUR": point at the value's word
    value_word = next(w for w in words if w['content'] == 'PO-77812')
    r = api.put(f"/api/data-objects/{obj['id']}/attributes/{by_tag['poNumber']['id']}",
                {'nodeIds': [value_word['id']]})
    assert r.status == 200, r.json
    assert r.json['value'] == 'PO-77812' and r.json['typedValue'] == 'PO-77812'
    feats = r.json['dataFeatures']
    assert feats['nodeIds'] == [value_word['id']] and feats['rule'] == 'reviewer' and feats['page'] == 1
    assert feats['bbox'] == [round(v, 2) for v in value_word['features']['bbox']]
    assert r.json['reviewStatus'] == 'CORRECTED' and r.json['history'][-1]['nodeIds'] == [value_word['id']]
    # two words given out of order are read in reading order; a date normalises, closing REQUIRED_MISSING
    date_line = _line_of(nodes, 'Invoice Date')
    [label, value] = _kids(nodes, date_line)[1:3]
    assert label['content'] == 'Date:' and value['content'] == '31/02/2026'
    open_before = {e['exceptionType'] for e in obj['dataExceptions']}
    assert 'REQUIRED_MISSING' in open_before
    r = api.put(f"/api/data-objects/{obj['id']}/attributes/{by_tag['dueDate']['id']}",
                {'nodeIds': [value['id'], label['id']]})
    assert r.status == 200, r.json
    assert r.json['value'] == 'Date: 31/02/2026' and r.json['dataFeatures']['nodeIds'] == [value['id'], label['id']]
    x0, y0, x1, y1 = r.json['dataFeatures']['bbox']
    assert x0 == round(label['features']['bbox'][0], 2) and x1 == round(value['features']['bbox'][2], 2)
    assert 'REQUIRED_MISSING' not in {e['exceptionType'] for e in r.json['dataObject']['dataExceptions']}


def test_a_line_id_reads_its_words_and_a_sent_value_wins(api, setup):  # noqa: F811
    values = invoice_values(number='INV-NODES-2')
    nodes = _words(values)
    fam = family_with(api, setup, values)
    _extract(api, setup, fam)
    obj, by_tag = _invoice(api, setup, fam)
    line = _line_of(nodes, 'Invoice Date')
    r = api.put(f"{_base(setup)}/dataObjects/{obj['id']}/attributes/{by_tag['customerName']['id']}",
                {'nodeIds': [line['id']]})
    assert r.status == 200, r.json
    assert r.json['value'] == line['content'] and r.json['dataFeatures']['nodeIds'] == [line['id']]
    # value and nodeIds: the value is what the reviewer typed, the ids where it stands
    number = next(w for w in _kids(nodes, _line_of(nodes, 'Invoice No')) if w['content'] == 'INV-NODES-2')
    r = api.put(f"/api/data-objects/{obj['id']}/attributes/{by_tag['invoiceNumber']['id']}",
                {'value': 'INV-2026-0042/A', 'nodeIds': [number['id']]})
    assert r.status == 200, r.json
    assert r.json['value'] == 'INV-2026-0042/A'
    assert r.json['dataFeatures'] == {'nodeIds': [number['id']], 'rule': 'reviewer', 'page': 1,
                                      'bbox': [round(v, 2) for v in number['features']['bbox']]}


def test_ids_the_document_does_not_hold_are_a_400_and_nothing_is_written(api, setup, users):  # noqa: F811
    from tests.conftest import make_org, make_user
    values = invoice_values(number='INV-NODES-3')
    fam = family_with(api, setup, values)
    _extract(api, setup, fam)
    obj, by_tag = _invoice(api, setup, fam)
    url = f"/api/data-objects/{obj['id']}/attributes/{by_tag['poNumber']['id']}"
    for body, words in (({'nodeIds': ['p1.l3.w3', 'p9.l1.w1']}, "nodeIds[1] 'p9.l1.w1' is not a node"),
                        ({'nodeIds': ['p1']}, "nodeIds[0] 'p1' is a page node"),
                        ({'nodeIds': []}, '1 to 50'),
                        ({'nodeIds': [f'p1.l1.w{i}' for i in range(51)]}, 'maxNodeIdsPerCorrection'),
                        ({'nodeIds': 'p1.l3.w3'}, 'nodeIds must be a list'),
                        ({'nodeIds': [3]}, 'nodeIds[0] must be a node id')):
        r = api.put(url, body)
        assert r.status == 400 and words in r.json['message'], (body, r.json)
        assert set(r.json) == {'error', 'message', 'status'}
    after = api.get(f"/api/data-objects/{obj['id']}").json
    assert after['changeSequence'] == obj['changeSequence']
    assert next(a for a in after['attributes'] if a['tag'] == 'poNumber') == by_tag['poNumber']
    # another organization's member, even a manager, does not see the object
    other = make_org(api)
    _, key = make_user(api, other['id'], 'MANAGE')
    assert api.as_key(key).put(url, {'nodeIds': ['p1.l3.w3']}).status == 404
    # a viewer of the organization sees it but may not change it
    assert api.as_key(users['VIEWER']).put(url, {'nodeIds': ['p1.l3.w3']}).status == 403
    # a member may
    assert api.as_key(users['MEMBER']).put(url, {'nodeIds': ['p1.l3.w3']}).status == 200
