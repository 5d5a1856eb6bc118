"""OCR with Tesseract's command line (TSV output): one page image in, ``page`` -> ``line`` -> ``word``.

Why the CLI rather than a binding (pytesseract, tesserocr): the CLI is what Debian's
``tesseract-ocr`` and the OCR Lambda's image install; a subprocess gets a hard timeout from the
caller's deadline and a hard memory cap (``RLIMIT_AS``, ``Limits.ocr_memory_bytes``) that a crash
or a runaway image cannot get around, and the Python process never holds more than the image's
bytes. The image goes in on stdin, the TSV comes back on stdout: no temporary files.
TSV rows of level 5 are words (``block_num``, ``par_num``, ``line_num`` group them into lines);
``conf`` is 0..100 (kept as 0..1). ``OMP_THREAD_LIMIT=1``: one core per page, as the bench
measures it and as a Lambda of 1,769 MB or less has.

Page segmentation ``--psm 1`` (automatic, with orientation and script detection: Debian's
``tesseract-ocr-osd``, which ``tesseract-ocr`` depends on, and the OCR image's osd.traineddata): a
page scanned sideways or upside down is read the right way up, its words' boxes still in the
image as uploaded (the default ``--psm 3`` reads such a page as noise). The detection costs ~0.2
CPU-seconds a page (0.85 -> 1.07 on scanned-page.png; bench/README.md "Parsing"): paid on every
page, rather than a second pass on pages read with low confidence, which would double the cost of
poor upright scans.

Languages (``LANGUAGES``): English first, then German, French and Spanish, each of those
Tesseract has installed (``tesseract --list-langs``, asked once a process; Debian's
``tesseract-ocr-<lang>``, which `make ocr-tools` and infra/ocr/Dockerfile install). With English
alone, accented letters are read without their accents (``Müller`` -> ``Miller``, ``boîte`` ->
``boite``): a wrong value read with high confidence. Four languages cost ~1.85x the CPU of
English alone on a 200-dpi photo, seven (with Italian, Dutch, Portuguese) ~2.7x for the same
accuracy on the invoice corpus (bench/README.md "Extraction on unseen layouts (issue 48)",
"Accuracy pass"); Italian's and Portuguese's accented letters are mostly French's or Spanish's.

Binarisation: a second pass on a poorly read page (``SECOND_PASS_BELOW``, ``SECOND_PASS_OPTIONS``).
A page is read with Tesseract's default global Otsu threshold; when its words' mean confidence is
under ``SECOND_PASS_BELOW`` (clean scans read at 93-96), it is read again with Tesseract's adaptive
Sauvola threshold (``-c thresholding_method=2``, built into Tesseract 5: no model, no image work
in Python) and the reading Tesseract is more confident of is kept. On a phone photo of a page
printed in light grey, blurred, with light falling off down the page, one threshold for the whole
page loses the light parts of strokes: decimal points and thin digits vanish (``1,183.65`` read
``118365``, ``11`` read ``no``; mean confidence 70, then 93 with Sauvola). Sauvola on every page
was measured and dropped: a bilevel scan rendered from a PDF (edges interpolated) came apart
between letters (``doc ument``: 0.955 -> 0.899 of its words, mean confidence 93 -> 89). Bounded:
at most one more Tesseract run a page, within the same deadline (no time left: the first reading
is kept) and memory cap. Measured in bench/bench_ocr_thresholding.py (bench/README.md
"Extraction on unseen layouts (issue 48)", "Scans: a second pass with Sauvola"); tried there and
dropped: a 3x3 median (despeckle) before Tesseract, upscaling, an isolated-speck filter,
autocontrast, Tesseract's adaptive Otsu (``thresholding_method=1``), Sauvola's factor and window
tuned.
"""
from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import time

from chalicelib.features.parsing.readers import layout
from chalicelib.features.parsing.readers.errors import ParseFailure
from chalicelib.features.parsing.readers.limits import Limits
from chalicelib.features.parsing.readers.nodes import ROOT, node

PAGE_SEGMENTATION = '1'   # automatic, with orientation detection (module docstring)
LANGUAGES = ('eng', 'deu', 'fra', 'spa')   # those installed are used (module docstring)
TESSERACT_OPTIONS: tuple[str, ...] = ()   # the first pass: Tesseract's defaults (global Otsu)
SECOND_PASS_OPTIONS = ('-c', 'thresholding_method=2')   # Sauvola, adaptive (module docstring)
SECOND_PASS_BELOW = 90.0   # a page's mean word confidence (0..100) under which it is read again


def ocr_available() -> bool:
    """Whether Tesseract is on PATH (the zip-packaged worker has none; the OCR function has it)."""
    return shutil.which('tesseract') is not None


@functools.lru_cache(maxsize=1)
def installed_languages() -> frozenset[str]:
    """The languages Tesseract has installed here (asked once a process); none when it cannot say."""
    try:
        done = subprocess.run(['tesseract', '--list-langs'], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    lines = done.stdout.decode('utf-8', 'replace').splitlines()[1:]   # the first line names the folder
    return frozenset(line.strip() for line in lines if line.strip())


def languages() -> str:
    """Tesseract's ``-l``: ``LANGUAGES`` that are installed, English always (the OCR image's minimum:
    a Tesseract that lists its languages without English fails the page, ``tesseract_tsv``)."""
    have = installed_languages()
    return '+'.join(lang for lang in LANGUAGES if lang == 'eng' or lang in have)


def _limit_memory(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def _word_rows(tsv: str):
    """The fields of each row of Tesseract's TSV that is a word with text (level 5)."""
    for row in tsv.splitlines()[1:]:
        fields = row.split('\t')
        if len(fields) >= 12 and fields[0] == '5' and fields[11].strip():
            yield fields


def mean_confidence(tsv: str) -> float | None:
    """The mean confidence (0..100) of the words of Tesseract's TSV; None when it read none."""
    values = []
    for fields in _word_rows(tsv):
        try:
            values.append(max(0.0, float(fields[10])))
        except ValueError:
            continue
    return sum(values) / len(values) if values else None


def better_reading(first: str, second: str) -> str:
    """The reading Tesseract is more confident of (the first on a tie)."""
    a, b = mean_confidence(first), mean_confidence(second)
    return second if b is not None and (a is None or b > a) else first


def tesseract_tsv(image: bytes, *, dpi: int, page: int, deadline: float, limits: Limits) -> str:
    """Tesseract's TSV for one image, read again with ``SECOND_PASS_OPTIONS`` when the first
    reading's mean word confidence is under ``SECOND_PASS_BELOW`` (module docstring);
    ParseFailure 'time-budget' / 'ocr-failed' / 'ocr-unavailable'."""
    first = _tesseract(image, dpi=dpi, page=page, deadline=deadline, limits=limits, options=TESSERACT_OPTIONS)
    confidence = mean_confidence(first)
    if confidence is None or confidence >= SECOND_PASS_BELOW:
        return first
    try:
        second = _tesseract(image, dpi=dpi, page=page, deadline=deadline, limits=limits, options=SECOND_PASS_OPTIONS)
    except ParseFailure as error:
        if error.cause == 'time-budget':   # no time left for it: the first reading stands
            return first
        raise
    return better_reading(first, second)


def _tesseract(image: bytes, *, dpi: int, page: int, deadline: float, limits: Limits,
               options: tuple[str, ...]) -> str:
    if not ocr_available():
        raise ParseFailure('ocr-unavailable', f'page {page} needs OCR and Tesseract is not installed here', page=page)
    have = installed_languages()
    if have and 'eng' not in have:   # fail closed: Tesseract reads on with the others and answers wrong words
        raise ParseFailure('ocr-failed', f'page {page} needs OCR and Tesseract here has no English model '
                                         '(tesseract-ocr-eng, the OCR image\'s minimum)', page=page)
    timeout = deadline - time.monotonic()
    if timeout <= 0:
        raise ParseFailure('time-budget', f'no time was left to read page {page} by OCR', page=page, limit='deadline')
    env = dict(os.environ, OMP_THREAD_LIMIT='1')
    try:
        done = subprocess.run(
            ['tesseract', 'stdin', 'stdout', '--dpi', str(dpi), '-l', languages(), '--psm', PAGE_SEGMENTATION,
             *options, 'tsv'],
            input=image, capture_output=True, timeout=timeout, env=env, check=False,
            preexec_fn=_limit_memory(limits.ocr_memory_bytes))
    except subprocess.TimeoutExpired as error:
        raise ParseFailure('time-budget', f'OCR of page {page} did not finish within the time budget of this step',
                           page=page, limit='deadline') from error
    stderr = done.stderr.decode('utf-8', 'replace')
    if 'no pix returned' in stderr or 'Error in pixReadMem' in stderr:
        raise ParseFailure('corrupt', f'page {page}: the image cannot be decoded (it is damaged or cut short)',
                           page=page)
    if done.returncode != 0:
        detail = (stderr.strip().splitlines() or ['no message'])[-1]
        if done.returncode < 0 or 'alloc' in detail.lower():
            raise ParseFailure('ocr-failed', f'OCR of page {page} ran out of {limits.describe("ocr_memory_bytes")} '
                                             'bytes of memory', page=page, limit='ocr_memory_bytes')
        raise ParseFailure('ocr-failed', f'OCR of page {page} failed: {detail[:300]}', page=page)
    return done.stdout.decode('utf-8', 'replace')


def tesseract_tsv_or_stop(image: bytes, *, dpi: int, page: int, first_page: int, deadline: float,
                          limits: Limits) -> str | None:
    """``tesseract_tsv``, or None when the time ran out on a page after the call's first: the
    caller stops there (``next_page``) and the next message goes on from that page."""
    try:
        return tesseract_tsv(image, dpi=dpi, page=page, deadline=deadline, limits=limits)
    except ParseFailure as error:
        if error.cause == 'time-budget' and page > first_page:
            return None
        raise


def page_nodes(tsv: str, *, page: int, points_per_pixel: float, width: float, height: float,
               index: int) -> tuple[list[dict], int]:
    """The ``page`` node, its lines and words from Tesseract's TSV -> (nodes, characters of text);
    lines in reading order (``layout``), ids by position in it."""
    page_id = f'p{page}'
    out = [node(page_id, ROOT, 'page', None, index, {'page': page, 'width': round(width, 2),
                                                     'height': round(height, 2)})]
    lines: dict[tuple[str, str, str], list[tuple[str, list[float], float]]] = {}
    for fields in _word_rows(tsv):
        text = fields[11].strip()
        left, top, w, h = (int(value) for value in fields[6:10])
        box = [round(left * points_per_pixel, 2), round(top * points_per_pixel, 2),
               round((left + w) * points_per_pixel, 2), round((top + h) * points_per_pixel, 2)]
        confidence = max(0.0, min(1.0, float(fields[10]) / 100))
        lines.setdefault((fields[2], fields[3], fields[4]), []).append((text, box, round(confidence, 3)))
    # Tesseract's lines, in reading order (layout.py): its own block order reads a skewed page's
    # table or a label beside its value out of order
    nodes, chars = layout.emit_lines([([text for text, _, _ in words], [box for _, box, _ in words])
                                      for words in lines.values()], page,
                                     [[confidence for _, _, confidence in words] for words in lines.values()])
    out.extend(nodes)
    return out, chars
