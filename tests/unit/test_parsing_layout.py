"""The reading order of a page's lines (chalicelib/features/parsing/readers/layout.py) on laid-out
boxes: a scan's skewed table stays rows, a page read upside down or sideways by OCR is ordered
the right way up, label/value pairs are rows, two columns of prose are read one after the other,
an indented block's closing line is no column, and a page of many lines is ordered in bounded
time. Through the HTTP layer on a PDF: tests/api/test_parsing_reading_order.py."""
from __future__ import annotations

import math
import random
import time

from chalicelib.features.parsing.readers import layout


def _line(x: float, y: float, words: list[str], size: float = 10.0) -> list[tuple[float, float, float, float]]:
    """The boxes of a line's words set at (x, y) (top-left), ``size`` points high."""
    boxes, at = [], x
    for word in words:
        width = 0.55 * size * len(word)
        boxes.append((at, y, at + width, y + size))
        at += width + 0.3 * size
    return boxes


def _turned(lines, degrees: float, centre=(300.0, 420.0)):
    """Every word's box turned by ``degrees`` about ``centre`` (the box of its turned corners)."""
    a = math.radians(degrees)
    cos, sin = math.cos(a), math.sin(a)
    cx, cy = centre

    def turn(box):
        x0, y0, x1, y1 = box
        corners = [(cx + (x - cx) * cos - (y - cy) * sin, cy + (x - cx) * sin + (y - cy) * cos)
                   for x, y in ((x0, y0), (x1, y0), (x0, y1), (x1, y1))]
        return (min(p[0] for p in corners), min(p[1] for p in corners),
                max(p[0] for p in corners), max(p[1] for p in corners))
    return [[turn(box) for box in words] for words in lines]


def _invoice():
    """(lines, their texts) in reading order: a title, an address beside the invoice's details
    (other font, other leading), a table whose every cell is a line of its own, totals."""
    texts, lines = [], []

    def put(x, y, text, size=10.0):
        texts.append(text)
        lines.append(_line(x, y, text.split(), size))
    put(50, 40, 'INVOICE', 18)
    for n, text in enumerate(['Nordlicht Handel GmbH', 'Hafenstrasse 12', '20457 Hamburg', 'Germany']):
        put(50, 90 + 16 * n, text, 11)
    for n, text in enumerate(['Invoice number: INV-2041', 'Invoice date: 14.03.2026', 'Due date: 13.04.2026']):
        put(350, 93 + 12 * n, text, 9)
    for n, row in enumerate([('Description', 'Qty', 'Amount'), ('Widget A', '2', '20.00'),
                             ('Gadget B', '5', '80.00'), ('Service hour', '1', '20.00')]):
        for x, cell in zip((50, 320, 500), row, strict=True):
            put(x, 200 + 14 * n, cell)
    for n, (label, value) in enumerate([('Subtotal', '120.00'), ('Total', '142.80')]):
        put(400, 290 + 14 * n, label)
        put(500, 290 + 14 * n, value)
    return lines, texts


def _read(lines, texts, seed: int = 7) -> list[str]:
    """The texts in the order ``layout.order`` reads the lines given in a shuffled order."""
    shuffled = list(range(len(lines)))
    random.Random(seed).shuffle(shuffled)
    return [texts[shuffled[i]] for i in layout.order([lines[i] for i in shuffled])]


def test_lines_given_in_any_order_are_read_as_a_person_reads_the_page():
    lines, texts = _invoice()
    for seed in range(5):
        assert _read(lines, texts, seed) == texts


def test_a_scans_skewed_table_stays_rows():
    lines, texts = _invoice()
    for degrees in (-2.0, -1.0, 1.5, 2.0):
        assert _read(_turned(lines, degrees), texts) == texts, degrees


def test_a_page_read_upside_down_or_sideways_is_ordered_the_right_way_up():
    lines, texts = _invoice()
    for degrees in (90, 180, 270):
        # each word turned where it lies, its line's first word still first (as Tesseract reads it)
        assert _read(_turned(lines, degrees), texts) == texts, degrees


def test_two_columns_of_prose_on_one_baseline_grid_are_read_one_after_the_other():
    words = 'the quick brown fox jumps over the lazy dog again and again'.split()
    left = [_line(50, 100 + 12 * n, [f'L{n}'] + words[:7]) for n in range(10)]
    right = [_line(320, 100 + 12 * n, [f'R{n}'] + words[:7]) for n in range(10)]
    texts = [f'L{n}' for n in range(10)] + [f'R{n}' for n in range(10)]
    assert _read(left + right, texts) == texts


def test_an_indented_blocks_closing_line_is_read_after_the_block():
    lines = [_line(60, 100, ['\\def\\x{%']), _line(80, 112, ['\\relax']), _line(80, 124, ['\\fi']),
             _line(60, 136, ['}'])]
    lines[3] = [(55.0, 136.0, 58.0, 146.0)]   # the brace left of every line above it
    texts = ['def', 'relax', 'fi', 'brace']
    assert _read(lines, texts) == texts


def test_a_line_of_words_drawn_out_of_place_is_cut_where_it_jumps():
    boxes = _line(300, 100, ['Amount', '20.00']) + _line(50, 100, ['Widget', 'A']) + _line(50, 120, ['next'])
    assert layout.runs(boxes) == [0, 2, 4]
    # right-to-left script: its words run leftwards on the baseline, one line until it leaves it
    rtl = list(reversed(_line(50, 100, ['a', 'b', 'c']))) + _line(50, 120, ['d'])
    assert layout.runs(rtl, backwards=True) == [0, 3]


def test_many_lines_are_ordered_in_bounded_time():
    lines = [_line(50 + (n % 40) * 3, 10 + n * 0.5, ['w']) for n in range(20_000)]   # a staircase
    lines += [_line(50 + (n % 5) * 100, 20_000 + (n // 5) * 12, ['cell']) for n in range(20_000)]   # a long table
    started = time.monotonic()
    ordered = layout.order(lines)
    assert sorted(ordered) == list(range(len(lines)))
    assert time.monotonic() - started < 5
