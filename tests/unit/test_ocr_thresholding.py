"""The OCR reader's binarisation (chalicelib/features/parsing/readers/ocr.py ``TESSERACT_OPTIONS``:
Tesseract's adaptive Sauvola threshold): a phone-like photo of a page printed in light grey, with
light falling off down the page and dark dust (tests/fixtures/invoices/photo-tata-1-200dpi-0.5deg.png),
read with every amount and quantity of its table as printed. With Tesseract's default global
Otsu threshold the dust and the grey text split badly: ``1,183.65`` was read ``118365``,
``8,428.75`` ``BAT``, ``11`` ``no`` (bench/README.md "Extraction on unseen layouts (issue 48)",
"Scans: Sauvola binarisation")."""
from __future__ import annotations

from tests.unit.test_label_rules import corpus_nodes

PHOTO = 'photo-tata-1-200dpi-0.5deg.png'


def test_a_light_grey_dusty_photo_keeps_its_decimal_points_and_thin_digits():
    lines = [n['content'] for n in corpus_nodes(PHOTO) if n['nodeType'] == 'line']
    rows = {line.split()[0]: line.split() for line in lines if line.split()[0] in {'1', '2', '3', '4', '5'}}
    printed = {'1': ('1', '771.39', '771.39'), '2': ('3', '394.55', '1,183.65'), '3': ('11', '766.25', '8,428.75'),
               '4': ('1', '673.47', '673.47'), '5': ('7', '394.74', '2,763.18')}
    assert {k: tuple(words[-3:]) for k, words in rows.items()} == printed, lines
    words = [n for n in corpus_nodes(PHOTO) if n['nodeType'] == 'word']
    assert any(w['content'] == '13,820.44' for w in words) and any(w['content'] == '16,308.12' for w in words)
