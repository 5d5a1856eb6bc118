"""Tesseract's binarisation, each page read by the reader's own ``tesseract_tsv`` (``--psm 1``,
four languages, one thread): its default global Otsu (before); its adaptive Sauvola
(``-c thresholding_method=2``) on every page; and what chalicelib/features/parsing/readers/ocr.py
does (after): Otsu, then a second pass with Sauvola on a page whose words' mean confidence is under
``SECOND_PASS_BELOW``, the more confident reading kept. Word accuracy as
bench/bench_ocr_preprocessing.py counts it (the share of the source PDF's words, as a multiset,
read exactly; precision: the share of OCR's words that are true) and CPU:
Tesseract's user + system seconds (the child's rusage), the figure a page costs on a shared machine.

Pages: bench_ocr_preprocessing.py's part 1 (lppl.pdf pages 1 and 3 and a reportlab invoice at 200
dpi, turned 0.5, 1 and 2 degrees, dusted and blurred: 9 scans) and every scan and photo of the
invoice corpus (tests/fixtures/invoices: 5 image-only PDFs rendered as the reader renders them, at
``Limits.ocr_dpi``; 4 phone-like PNGs as uploaded) and the parsing fixtures' scanned page
(tests/fixtures/documents/scanned-page.*: a bilevel image-only PDF, a 16-grey PNG, a JPEG; truth:
lppl.pdf's page 1).

    PYTHONPATH=. .venv/bin/python bench/bench_ocr_thresholding.py      # ~70 Tesseract runs, ~4 min

Figures: bench/README.md "Extraction on unseen layouts (issue 48)", "Scans: a second pass with Sauvola".
"""
from __future__ import annotations

import io
import json
import resource
import sys
import time
from collections import Counter
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_ocr_preprocessing import SKEWS, _pages, _render, _scan, _truth, _words  # noqa: E402
from chalicelib.features.parsing.readers import ocr  # noqa: E402
from chalicelib.features.parsing.readers.limits import DEFAULT_LIMITS  # noqa: E402

SAUVOLA = ('-c', 'thresholding_method=2')
MODES = {'otsu (before)': ((), -1.0), 'sauvola on every page': (SAUVOLA, -1.0),
         'second pass (after)': ((), ocr.SECOND_PASS_BELOW)}   # (first pass options, second pass below)


def _read(image: bytes, dpi: int, mode: tuple[tuple[str, ...], float]) -> tuple[Counter, float]:
    ocr.TESSERACT_OPTIONS, ocr.SECOND_PASS_BELOW = mode
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    tsv = ocr.tesseract_tsv(image, dpi=dpi, page=1, deadline=time.monotonic() + 300, limits=DEFAULT_LIMITS)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    nodes, _ = ocr.page_nodes(tsv, page=1, points_per_pixel=1.0, width=1.0, height=1.0, index=0)
    return _words(nodes), cpu


def _png(image: Image.Image, dpi: int) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, 'PNG', dpi=(dpi, dpi))
    return buffer.getvalue()


def pages() -> list[tuple[str, str, bytes, int, Counter]]:
    """(group, label, image bytes, dpi, truth) for every page measured."""
    out = []
    for label, data, page in _pages():
        truth = _truth(data, page)
        for k, angle in enumerate(SKEWS):
            out.append(('made here (200 dpi)', f'{label} {angle}°', _png(_scan(data, page, angle, seed=39 + k), 200),
                        200, truth))
    folder = ROOT / 'tests' / 'fixtures' / 'invoices'
    for entry in json.loads((folder / 'manifest.json').read_text())['documents']:
        if entry['kind'] not in ('scan', 'image'):
            continue
        truth = _truth((folder / entry['source']).read_bytes(), 1)
        data = (folder / entry['file']).read_bytes()
        if entry['kind'] == 'image':
            out.append(('corpus photos', entry['file'], data, entry['dpi'], truth))
        else:
            dpi = DEFAULT_LIMITS.ocr_dpi
            out.append(('corpus PDF scans', entry['file'], _png(_render(data, dpi), dpi), dpi, truth))
    fixtures = ROOT / 'tests' / 'fixtures' / 'documents'
    truth = _truth((fixtures / 'lppl.pdf').read_bytes(), 1)
    dpi = DEFAULT_LIMITS.ocr_dpi
    out.append(('parsing fixtures', 'scanned-page.pdf', _png(_render((fixtures / 'scanned-page.pdf').read_bytes(), dpi),
                                                             dpi), dpi, truth))
    for name in ('scanned-page.png', 'scanned-page.jpg'):
        out.append(('parsing fixtures', name, (fixtures / name).read_bytes(), 200, truth))
    return out


def main() -> None:
    rows: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for group, label, image, dpi, truth in pages():
        for mode, settings in MODES.items():
            read, cpu = _read(image, dpi, settings)
            right = sum((read & truth).values())
            recall = right / max(sum(truth.values()), 1)
            precision = right / max(sum(read.values()), 1)
            rows.setdefault((group, mode), []).append((recall, precision, cpu))
            print(f'{label[:40]:40} {mode:22} accuracy {recall:.3f} precision {precision:.3f} '
                  f'tesseract CPU {cpu:5.2f} s', flush=True)
    print('\n| pages | binarisation | word accuracy (mean) | worst page | precision | Tesseract CPU s a page (mean) |')
    print('|---|---|---|---|---|---|')
    for (group, mode), values in rows.items():
        n = len(values)
        print(f'| {group} ({n}) | {mode} | {sum(v[0] for v in values) / n:.3f} | {min(v[0] for v in values):.3f} | '
              f'{sum(v[1] for v in values) / n:.3f} | {sum(v[2] for v in values) / n:.2f} |')


if __name__ == '__main__':
    main()
