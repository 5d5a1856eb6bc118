"""The OCR reader's second pass (chalicelib/features/parsing/readers/ocr.py ``SECOND_PASS_BELOW``,
``SECOND_PASS_OPTIONS``): a page whose words Tesseract read with a mean confidence under the floor
is read again with its adaptive Sauvola threshold and the more confident reading is kept; a page
read well is read once; no time left keeps the first reading. On the corpus: a phone-like photo of
a page printed in light grey, blurred, with light falling off down the page and dust
(tests/fixtures/invoices/photo-tata-1-200dpi-0.5deg.png) is read with every amount and quantity of
its table as printed; with Tesseract's default global Otsu threshold alone the light parts of
strokes were lost: ``1,183.65`` was read ``118365``, ``8,428.75`` ``BAT``, ``11`` ``no``
(bench/README.md "Extraction on unseen layouts (issue 48)", "Scans: a second pass with Sauvola")."""
from __future__ import annotations

import time

import pytest

from chalicelib.features.parsing.readers import ocr
from chalicelib.features.parsing.readers.errors import ParseFailure
from chalicelib.features.parsing.readers.limits import DEFAULT_LIMITS
from tests.unit.test_label_rules import corpus_nodes

PHOTO = 'photo-tata-1-200dpi-0.5deg.png'
HEAD = 'level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext'


def _tsv(*words: tuple[str, float]) -> str:
    rows = [HEAD, '1\t1\t0\t0\t0\t0\t0\t0\t100\t100\t-1\t']
    rows += [f'5\t1\t1\t1\t1\t{k}\t{10 * k}\t0\t9\t9\t{conf}\t{text}' for k, (text, conf) in enumerate(words, 1)]
    return '\n'.join(rows)


@pytest.fixture
def passes(monkeypatch):
    """Tesseract replaced by canned readings: Otsu's (the first pass) and Sauvola's."""
    calls: list[tuple[str, ...]] = []
    readings: dict[tuple[str, ...], object] = {}

    def fake(image, *, dpi, page, deadline, limits, options):
        calls.append(options)
        answer = readings[options]
        if isinstance(answer, Exception):
            raise answer
        return answer
    monkeypatch.setattr(ocr, '_tesseract', fake)
    return calls, readings


def _read() -> str:
    return ocr.tesseract_tsv(b'P5 1 1 255\n\x00', dpi=200, page=1, deadline=time.monotonic() + 60,
                             limits=DEFAULT_LIMITS)


def test_the_mean_word_confidence_counts_words_only():
    assert ocr.mean_confidence(_tsv(('a', 90), ('b', 70))) == 80
    assert ocr.mean_confidence(_tsv()) is None     # no word: nothing to judge
    assert ocr.better_reading(_tsv(('a', 60)), _tsv(('b', 60))) == _tsv(('a', 60))   # a tie keeps the first


def test_a_poorly_read_page_is_read_again_with_sauvola_and_the_more_confident_reading_kept(passes):
    calls, readings = passes
    readings[ocr.TESSERACT_OPTIONS] = otsu = _tsv(('118365', 40), ('771.39', 80))
    readings[ocr.SECOND_PASS_OPTIONS] = sauvola = _tsv(('1,183.65', 93), ('771.39', 95))
    assert _read() == sauvola and calls == [ocr.TESSERACT_OPTIONS, ocr.SECOND_PASS_OPTIONS]
    calls.clear()
    readings[ocr.SECOND_PASS_OPTIONS] = _tsv(('doc', 50), ('ument', 50))   # Sauvola less sure: Otsu's stands
    assert _read() == otsu and len(calls) == 2


def test_a_well_read_page_is_read_once(passes):
    calls, readings = passes
    readings[ocr.TESSERACT_OPTIONS] = good = _tsv(('Everyone', 95), ('is', 96))
    assert _read() == good and calls == [ocr.TESSERACT_OPTIONS]


def test_no_time_left_for_the_second_pass_keeps_the_first_reading_and_other_failures_still_fail(passes):
    calls, readings = passes
    readings[ocr.TESSERACT_OPTIONS] = poor = _tsv(('BAT', 30))
    readings[ocr.SECOND_PASS_OPTIONS] = ParseFailure('time-budget', 'no time', page=1, limit='deadline')
    assert _read() == poor
    readings[ocr.SECOND_PASS_OPTIONS] = ParseFailure('ocr-failed', 'out of memory', page=1, limit='ocr_memory_bytes')
    with pytest.raises(ParseFailure) as failed:
        _read()
    assert failed.value.cause == 'ocr-failed'


def test_a_light_grey_dusty_photo_keeps_its_decimal_points_and_thin_digits():
    lines = [n['content'] for n in corpus_nodes(PHOTO) if n['nodeType'] == 'line']
    rows = {line.split()[0]: line.split() for line in lines if line.split()[0] in {'1', '2', '3', '4', '5'}}
    printed = {'1': ('1', '771.39', '771.39'), '2': ('3', '394.55', '1,183.65'), '3': ('11', '766.25', '8,428.75'),
               '4': ('1', '673.47', '673.47'), '5': ('7', '394.74', '2,763.18')}
    assert {k: tuple(words[-3:]) for k, words in rows.items()} == printed, lines
    words = [n for n in corpus_nodes(PHOTO) if n['nodeType'] == 'word']
    assert any(w['content'] == '13,820.44' for w in words) and any(w['content'] == '16,308.12' for w in words)
