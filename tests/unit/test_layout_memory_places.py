"""The layout memory's pure part (features/extraction/layout_memory.py): fingerprints that stay
the same across a supplier's invoices and differ between suppliers, and a taught place read
again when the value's length changes or its block moved down."""
from __future__ import annotations

from chalicelib.features.extraction import layout_memory as lm
from chalicelib.features.extraction.document import Document


def _doc(rows: list[tuple[float, list[tuple[float, str]]]]) -> Document:
    """A one-page document: rows of (top y, [(left x, word)]), 10 pt words, 6 pt per character."""
    nodes = [{'id': 'd', 'parentId': None, 'nodeType': 'document', 'index': 0, 'content': ''},
             {'id': 'p1', 'parentId': 'd', 'nodeType': 'page', 'index': 0, 'content': '',
              'features': {'page': 1, 'width': 600.0, 'height': 800.0}}]
    for i, (y, words) in enumerate(rows):
        line = f'p1.l{i}'
        nodes.append({'id': line, 'parentId': 'p1', 'nodeType': 'line', 'index': i,
                      'content': ' '.join(t for _, t in words), 'features': {'page': 1}})
        for j, (x, text) in enumerate(words):
            nodes.append({'id': f'{line}.w{j}', 'parentId': line, 'nodeType': 'word', 'index': j, 'content': text,
                          'features': {'page': 1, 'bbox': [x, y, x + 6.0 * len(text), y + 10.0]}})
    return Document(nodes)


def _invoice(number: str, po: str, *, issuer='Acme Ltd', shift=0.0, iban=None, labels=('Invoice No:', 'Date:')):
    rows = [(40.0, [(50.0, w) for w in issuer.split()[:1]] + [(110.0, w) for w in issuer.split()[1:2]]),
            (80.0 + shift, [(50.0, labels[0].split()[0]), (104.0, labels[0].split()[-1]), (200.0, number)]),
            (100.0 + shift, [(50.0, labels[1]), (200.0, '14/03/2026')]),
            (120.0 + shift, [(50.0, 'PO'), (68.0, 'Ref:'), (200.0, po)]),
            (140.0 + shift, [(50.0, 'Terms:'), (200.0, 'Net'), (224.0, '30')])]
    if iban:
        rows.append((700.0, [(50.0, 'IBAN:'), (90.0, iban)]))
    return _doc(rows)


def test_a_layout_fingerprint_follows_labels_not_values():
    one, two = lm.fingerprints(_invoice('INV-1', 'PO-1')), lm.fingerprints(_invoice('INV-22222', 'PO-9', shift=30))
    assert [f.kind for f in one] == ['layout'] and one[0].key == two[0].key
    assert 'labels: date, invoice no, po ref, terms' in one[0].hint
    assert lm.fingerprints(_invoice('INV-1', 'PO-1', issuer='Other Co'))[0].key != one[0].key
    assert lm.fingerprints(_invoice('INV-1', 'PO-1', labels=('Bill No:', 'Date:')))[0].key != one[0].key
    too_few = _doc([(40.0, [(50.0, 'Acme')]), (80.0, [(50.0, 'No:'), (200.0, '1')])])
    assert lm.fingerprints(too_few) == []


def test_a_supplier_token_comes_first_and_its_check_digits_must_hold():
    good = lm.fingerprints(_invoice('INV-1', 'PO-1', iban='DE89370400440532013000'))
    assert [f.kind for f in good] == ['supplier', 'layout'] and good[0].hint == 'IBAN ...3000'
    other = lm.fingerprints(_invoice('INV-2', 'PO-2', iban='DE89 3704 0044 0532 0130 00'))
    assert other[0].key == good[0].key   # spaces as printed
    bic = lm.fingerprints(_invoice('INV-3', 'PO-3', iban='DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX'))
    assert bic[0].key == good[0].key   # the BIC after it is not part of it
    bad = lm.fingerprints(_invoice('INV-1', 'PO-1', iban='DE00370400440532013000'))
    assert [f.kind for f in bad] == ['layout']
    vat = _doc([(40.0, [(50.0, 'Acme')]), (60.0, [(50.0, 'USt-IdNr.:'), (120.0, 'DE'), (136.0, '123'),
                                                  (160.0, '456'), (184.0, '789')])])
    [f] = lm.fingerprints(vat)
    assert f.kind == 'supplier' and f.hint == 'VAT ...6789'
    amount = _doc([(40.0, [(50.0, 'Acme')]), (60.0, [(50.0, 'VAT'), (80.0, '12'), (100.0, '345.67')])])
    assert lm.fingerprints(amount) == []   # an amount after "VAT" is no supplier's id


def test_a_place_is_read_again_by_its_anchor_whatever_the_values_length():
    taught = _invoice('INV-1', 'PO-1')
    pages = lm.Pages(taught)
    word = [w for u in taught.units for w in u.words if w.text == 'PO-1']
    place = lm.place_of(pages, 1, word)
    assert place['anchor']['text'] == 'po ref' and place['page'] == 1
    moved = _invoice('INV-2', 'PO-2026-000123', shift=45.0)   # longer, and the block 45 pt lower
    found = lm.read(lm.Pages(moved), place)
    assert found.text == 'PO-2026-000123' and found.rule == 'memory' and found.confidence == lm.CONFIDENCE
    # more words than taught are read whole; the next column (a wide gap) is not
    wide = _doc([(120.0, [(50.0, 'PO'), (68.0, 'Ref:'), (200.0, 'A'), (210.0, 'B'), (220.0, 'C'),
                          (420.0, 'Total:')])])
    assert lm.read(lm.Pages(wide), place).text == 'A B C'
    # the anchor gone, or nothing where it points: the place stops matching
    assert lm.read(lm.Pages(_invoice('INV-3', 'PO-3', labels=('Invoice No:', 'Date:'))), place) is not None
    gone = _doc([(120.0, [(50.0, 'Order'), (86.0, 'No:'), (200.0, 'PO-4')])])
    assert lm.read(lm.Pages(gone), place) is None
    empty = _doc([(120.0, [(50.0, 'PO'), (68.0, 'Ref:')])])
    assert lm.read(lm.Pages(empty), place) is None
