"""Does preprocessing a scan before Tesseract help? Word accuracy and time of the OCR reader's own
Tesseract call (chalicelib/features/parsing/readers/ocr.py: ``--psm 1``, one thread) on scans
made like tests/fixtures/make_documents.py ``scanned`` does (a text PDF's page rendered at 200 dpi
in grey, turned, speckled, blurred a little), with each preprocessing against none (today):

- ``upscale``: the image resized to 300 dpi (Lanczos) and declared at 300 dpi;
- ``otsu``: binarised at Otsu's threshold (the grey histogram's best split);
- ``deskew``: turned back by the skew a projection profile finds (the angle in -3..3 degrees,
  0.1 apart, whose turned image's row means change most sharply, on a 100-dpi copy);
- ``deskew+otsu``.

Part 1, scans made here. Pages: lppl.pdf pages 1 and 3 (prose, 10 pt) and the invoice of
tests/api/test_parsing_reading_order.py (a table, 9-11 pt), each at 0.5, 1.0 and 2.0 degrees.
Truth: the words of the PDF's text layer (the PDF reader's words); accuracy: the share of
those words (as a multiset, punctuation around them dropped) that OCR read exactly;
precision: the share of OCR's words that are true.

Part 2, the invoice corpus's own scans (tests/fixtures/invoices: image-only PDFs at 150-300 dpi and
phone-like PNGs, 0.5-2 degrees; truth: the words of the text PDF each was made from, its
``source``): the PNGs as uploaded against ``otsu``, ``deskew`` and ``upscale``; the PDFs as the
reader renders them (``Limits.ocr_dpi``, 300) against the scan's own dpi (``native``) and
``otsu`` / ``deskew`` of the 300-dpi render.

    .venv/bin/python bench/bench_ocr_preprocessing.py            # part 1: 45 Tesseract runs
    .venv/bin/python bench/bench_ocr_preprocessing.py --corpus   # part 2: 31 runs; figures: bench/README.md
"""
from __future__ import annotations

import io
import json
import random
import resource
import sys
import time
from collections import Counter
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image, ImageFilter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chalicelib.features.parsing.readers import read  # noqa: E402
from chalicelib.features.parsing.readers.limits import DEFAULT_LIMITS  # noqa: E402
from chalicelib.features.parsing.readers.ocr import page_nodes, tesseract_tsv  # noqa: E402
from tests.api.test_parsing_reading_order import _invoice_drawn_out_of_order  # noqa: E402

DPI = 200
SKEWS = (0.5, 1.0, 2.0)
_PUNCTUATION = '.,:;()[]{}\'"“”‘’'


def _words(nodes: list[dict]) -> Counter:
    out: Counter = Counter()
    for node in nodes:
        if node['nodeType'] == 'word':
            word = node['content'].strip(_PUNCTUATION)
            if word:
                out[word] += 1
    return out


def _pages() -> list[tuple[str, bytes, int]]:
    lppl = (ROOT / 'tests' / 'fixtures' / 'documents' / 'lppl.pdf').read_bytes()
    return [('lppl p1', lppl, 1), ('lppl p3', lppl, 3),
            ('invoice', _invoice_drawn_out_of_order(), 1)]


def _truth(data: bytes, page: int) -> Counter:
    nodes = read(data, media_type='application/pdf', filename='t.pdf', deadline=time.monotonic() + 60).nodes
    return _words([n for n in nodes if n.get('features', {}).get('page') == page])


def _scan(data: bytes, page: int, angle: float, seed: int) -> Image.Image:
    document = pdfium.PdfDocument(data)
    image = document[page - 1].render(scale=DPI / 72, grayscale=True).to_pil().convert('L')
    document.close()
    image = image.rotate(angle, resample=Image.BICUBIC, expand=False, fillcolor=255)
    rng = random.Random(seed)
    pixels = image.load()
    width, height = image.size
    for _ in range(width * height // 400):   # dust on the glass, as make_documents.py
        pixels[rng.randrange(width), rng.randrange(height)] = rng.choice((0, 90, 160))
    return image.filter(ImageFilter.GaussianBlur(0.5))


def otsu(image: Image.Image) -> Image.Image:
    histogram = image.histogram()
    total = sum(histogram)
    weighted = sum(value * count for value, count in enumerate(histogram))
    best, threshold, below, below_weighted = -1.0, 127, 0, 0.0
    for value in range(256):
        below += histogram[value]
        if below == 0:
            continue
        above = total - below
        if above == 0:
            break
        below_weighted += value * histogram[value]
        mean_below = below_weighted / below
        mean_above = (weighted - below_weighted) / above
        between = below * above * (mean_below - mean_above) ** 2
        if between > best:
            best, threshold = between, value
    return image.point(lambda v: 255 if v > threshold else 0)


def skew_angle(image: Image.Image) -> float:
    """The angle (degrees) to turn ``image`` by to make its text rows level: the projection
    profile's sharpest (sum of squared differences of row means) over -3..3 degrees."""
    small = otsu(image.resize((image.width // 2, image.height // 2), Image.BILINEAR))

    def sharpness(angle: float) -> float:
        turned = small.rotate(angle, resample=Image.NEAREST, expand=False, fillcolor=255)
        rows = list(turned.resize((1, turned.height), Image.BOX).getdata())
        return sum((a - b) ** 2 for a, b in zip(rows, rows[1:], strict=False))
    return max((a / 10 for a in range(-30, 31)), key=sharpness)


def deskew(image: Image.Image) -> Image.Image:
    return image.rotate(skew_angle(image), resample=Image.BICUBIC, expand=False, fillcolor=255)


VARIANTS = {
    'none': (lambda image: image, DPI),
    'upscale': (lambda image: image.resize((image.width * 3 // 2, image.height * 3 // 2), Image.LANCZOS), 300),
    'otsu': (otsu, DPI),
    'deskew': (deskew, DPI),
    'deskew+otsu': (lambda image: otsu(deskew(image)), DPI),
}


def _run(label: str, name: str, image: Image.Image, prepare, dpi: int, truth: Counter,
         results: dict[str, list[tuple[float, float, float]]]) -> None:
    started = time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    image = prepare(image)
    buffer = io.BytesIO()
    image.save(buffer, 'PNG', dpi=(dpi, dpi))
    tsv = tesseract_tsv(buffer.getvalue(), dpi=dpi, page=1, deadline=time.monotonic() + 300, limits=DEFAULT_LIMITS)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = (time.process_time() - started + after.ru_utime - children.ru_utime
               + after.ru_stime - children.ru_stime)
    nodes, _ = page_nodes(tsv, page=1, points_per_pixel=72 / dpi, width=image.width * 72 / dpi,
                          height=image.height * 72 / dpi, index=0)
    read_words = _words(nodes)
    right = sum((read_words & truth).values())
    recall = right / max(sum(truth.values()), 1)
    precision = right / max(sum(read_words.values()), 1)
    results.setdefault(name, []).append((recall, precision, seconds))
    print(f'{label:34} {name:12} accuracy {recall:.3f} precision {precision:.3f} {seconds:5.2f} s', flush=True)


def _table(results: dict[str, list[tuple[float, float, float]]]) -> None:
    print()
    print('| preprocessing | word accuracy (mean) | worst page | precision | CPU seconds a page (mean) |')
    print('|---|---|---|---|---|')
    for name, rows in results.items():
        n = len(rows)
        print(f'| {name} | {sum(r[0] for r in rows) / n:.3f} | {min(r[0] for r in rows):.3f} | '
              f'{sum(r[1] for r in rows) / n:.3f} | {sum(r[2] for r in rows) / n:.2f} |')
    print(flush=True)


def _render(data: bytes, dpi: int) -> Image.Image:
    document = pdfium.PdfDocument(data)
    image = document[0].render(scale=dpi / 72, grayscale=True).to_pil().convert('L')
    document.close()
    return image


def corpus() -> None:
    folder = ROOT / 'tests' / 'fixtures' / 'invoices'
    manifest = json.loads((folder / 'manifest.json').read_text())
    results: dict[str, list[tuple[float, float, float]]] = {}
    for entry in manifest['documents']:
        if entry['kind'] not in ('scan', 'image') or not entry.get('wellFormed'):
            continue
        truth = _truth((folder / entry['source']).read_bytes(), 1)
        data = (folder / entry['file']).read_bytes()
        label = f"{entry['file'][:26]} ({entry['dpi']} dpi)"
        if entry['kind'] == 'image':
            image = Image.open(io.BytesIO(data)).convert('L')
            dpi = entry['dpi']
            for name, prepare, at in (('none', lambda i: i, dpi), ('otsu', otsu, dpi), ('deskew', deskew, dpi),
                                      ('upscale', lambda i, d=dpi: i.resize((i.width * 300 // d, i.height * 300 // d),
                                                                          Image.LANCZOS), 300)):
                _run(label, name, image, prepare, at, truth, results)
        else:
            rendered = _render(data, DEFAULT_LIMITS.ocr_dpi)
            _run(label, 'none', rendered, lambda i: i, DEFAULT_LIMITS.ocr_dpi, truth, results)
            _run(label, 'native', _render(data, entry['dpi']), lambda i: i, entry['dpi'], truth, results)
            _run(label, 'otsu', rendered, otsu, DEFAULT_LIMITS.ocr_dpi, truth, results)
            _run(label, 'deskew', rendered, deskew, DEFAULT_LIMITS.ocr_dpi, truth, results)
    _table(results)


def main() -> None:
    if '--corpus' in sys.argv:
        corpus()
        return
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in VARIANTS}
    for label, data, page in _pages():
        truth = _truth(data, page)
        for k, angle in enumerate(SKEWS):
            scan = _scan(data, page, angle, seed=39 + k)
            for name, (prepare, dpi) in VARIANTS.items():
                started = time.process_time()
                children = resource.getrusage(resource.RUSAGE_CHILDREN)
                image = prepare(scan)
                buffer = io.BytesIO()
                image.save(buffer, 'PNG', dpi=(dpi, dpi))
                tsv = tesseract_tsv(buffer.getvalue(), dpi=dpi, page=1, deadline=time.monotonic() + 300,
                                    limits=DEFAULT_LIMITS)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                # CPU seconds (ours preparing the image + Tesseract's): the machine is shared,
                # wall time is not what a page costs
                seconds = (time.process_time() - started + after.ru_utime - children.ru_utime
                           + after.ru_stime - children.ru_stime)
                nodes, _ = page_nodes(tsv, page=1, points_per_pixel=72 / dpi, width=image.width * 72 / dpi,
                                      height=image.height * 72 / dpi, index=0)
                read_words = _words(nodes)
                right = sum((read_words & truth).values())
                recall = right / max(sum(truth.values()), 1)
                precision = right / max(sum(read_words.values()), 1)
                results[name].append((recall, precision, seconds))
                print(f'{label:8} {angle:3.1f}° {name:12} accuracy {recall:.3f} precision {precision:.3f} '
                      f'{seconds:5.2f} s', flush=True)
    print()
    print('| preprocessing | word accuracy (mean) | worst page | precision | CPU seconds a page (mean) |')
    print('|---|---|---|---|---|')
    for name, rows in results.items():
        n = len(rows)
        print(f'| {name} | {sum(r[0] for r in rows) / n:.3f} | {min(r[0] for r in rows):.3f} | '
              f'{sum(r[1] for r in rows) / n:.3f} | {sum(r[2] for r in rows) / n:.2f} |')


if __name__ == '__main__':
    main()
