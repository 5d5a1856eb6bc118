"""Tesseract's binarisation: its default global Otsu against its adaptive Sauvola
(``-c thresholding_method=2``, what chalicelib/features/parsing/readers/ocr.py ``TESSERACT_OPTIONS``
passes), each page read by the reader's own ``tesseract_tsv`` (``--psm 1``, four languages, one
thread). Word accuracy as bench/bench_ocr_preprocessing.py counts it (the share of the source PDF's
words, as a multiset, read exactly; precision: the share of OCR's words that are true) and CPU:
Tesseract's user + system seconds (the child's rusage), the figure a page costs on a shared machine.

Pages: bench_ocr_preprocessing.py's part 1 (lppl.pdf pages 1 and 3 and a reportlab invoice at 200
dpi, turned 0.5, 1 and 2 degrees, dusted and blurred: 9 scans) and every scan and photo of the
invoice corpus (tests/fixtures/invoices: 5 image-only PDFs rendered as the reader renders them, at
``Limits.ocr_dpi``; 4 phone-like PNGs as uploaded).

    PYTHONPATH=. .venv/bin/python bench/bench_ocr_thresholding.py      # 36 Tesseract runs, ~2 min

Figures: bench/README.md "Extraction on unseen layouts (issue 48)", "Scans: Sauvola binarisation".
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

MODES = {'otsu (before)': (), 'sauvola (after)': ('-c', 'thresholding_method=2')}


def _read(image: bytes, dpi: int, options: tuple[str, ...]) -> tuple[Counter, float]:
    ocr.TESSERACT_OPTIONS = options
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
    return out


def main() -> None:
    rows: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for group, label, image, dpi, truth in pages():
        for mode, options in MODES.items():
            read, cpu = _read(image, dpi, options)
            right = sum((read & truth).values())
            recall = right / max(sum(truth.values()), 1)
            precision = right / max(sum(read.values()), 1)
            rows.setdefault((group, mode), []).append((recall, precision, cpu))
            print(f'{label[:40]:40} {mode:16} accuracy {recall:.3f} precision {precision:.3f} '
                  f'tesseract CPU {cpu:5.2f} s', flush=True)
    print('\n| pages | binarisation | word accuracy (mean) | worst page | precision | Tesseract CPU s a page (mean) |')
    print('|---|---|---|---|---|---|')
    for (group, mode), values in rows.items():
        n = len(values)
        print(f'| {group} ({n}) | {mode} | {sum(v[0] for v in values) / n:.3f} | {min(v[0] for v in values):.3f} | '
              f'{sum(v[1] for v in values) / n:.3f} | {sum(v[2] for v in values) / n:.2f} |')


if __name__ == '__main__':
    main()
