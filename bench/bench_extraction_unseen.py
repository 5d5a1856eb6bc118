"""Extraction on layouts it was not written for (issue 48): the invoice corpus of
tests/fixtures/invoices/ (made by LibreOffice, Chromium, reportlab, python-docx, openpyxl; scans at
150-300 dpi turned 0.5-2 degrees), read with one general definition and with a definition per layout.

    PYTHONPATH=. .venv/bin/python bench/bench_extraction_unseen.py            # ~2-4 min (OCR of 9 scans)
    PYTHONPATH=. .venv/bin/python bench/bench_extraction_unseen.py --detail   # and what each document got wrong
    PYTHONPATH=. .venv/bin/python bench/bench_extraction_unseen.py --no-ocr   # the text documents only

Every document is parsed in-process by the parse stage's readers (features/parsing/readers: the PDF
text layer, Tesseract for scans and images, python-docx / calamine for office files), then extracted
by features/extraction/engine.py ``extract`` + ``assess`` with
`tests/fixtures/invoices/definitions/general.json` (a definition written from docs/api/extraction.md
alone) and, for the document's layout, `definitions/layouts/<layout>.json`. The truth is the
manifest's, written by the generator; the scoring rules are bench/extraction_scoring.py's (typed
values; a line item matches on its amount and description; F1 over items). Figures: bench/README.md
"Extraction on unseen layouts (issue 48)".
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.extraction_scoring import DocScore, Totals, extraction_of, score  # noqa: E402

CORPUS = ROOT / 'tests' / 'fixtures' / 'invoices'
MEDIA = {'.pdf': 'application/pdf', '.png': 'image/png',
         '.docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
         '.xlsx': 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'}


def manifest() -> dict[str, Any]:
    return json.loads((CORPUS / 'manifest.json').read_text(encoding='utf-8'))


def definition(name: str) -> dict[str, Any] | None:
    path = CORPUS / 'definitions' / f'{name}.json'
    return json.loads(path.read_text(encoding='utf-8')) if path.exists() else None


def parse(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The parsed document's nodes (every chunk the reader answers), and its page count."""
    from chalicelib.features.parsing import readers
    data = path.read_bytes()
    nodes: list[dict[str, Any]] = []
    first, chars, pages = 1, 0, 1
    while True:
        result = readers.read(data, media_type=MEDIA[path.suffix], filename=path.name, first_page=first,
                              deadline=time.monotonic() + 300, text_chars_before=chars)
        nodes.extend(result.nodes)
        chars += result.text_chars
        pages = result.page_count
        if result.next_page is None:
            return nodes, pages
        first = result.next_page


def run(body: dict[str, Any], nodes: list[dict[str, Any]]) -> tuple[dict[str, Any], float]:
    """The plain extraction (bench/extraction_scoring.py) of ``body`` over ``nodes``, and its seconds."""
    from chalicelib.features.extraction import engine, taxons
    started = time.perf_counter()
    out = engine.extract(body['taxons'], nodes, locale=(body.get('metadata') or {}).get('locale'))
    tree = [{'id': o.key, 'parentId': o.parent, 'path': o.path, 'rowNum': o.row,
             'attributes': [{**a, 'id': f"{o.key}/{a['tag']}"} for a in o.attributes]} for o in out.objects]
    exceptions = list(engine.assess(tree, dict(taxons.walk(body['taxons']))).values())
    return extraction_of(tree, exceptions), time.perf_counter() - started


def _fmt(totals: Totals, what: str) -> str:
    if not totals.documents:
        return '-'
    if what == 'header':
        return f'{totals.header_accuracy:.2f} ({totals.header_right}/{totals.header_total})'
    if what == 'items':
        return f'{totals.items_f1:.2f} (tp {totals.items_tp}, fp {totals.items_fp}, fn {totals.items_fn})'
    if what == 'false':
        return f'{totals.false_exceptions} on {totals.well_formed_with_exceptions} of {totals.well_formed} docs'
    if what == 'silent':
        return str(totals.silent_errors)
    if what == 'broken':
        return f'{totals.broken_caught}/{totals.broken}'
    raise ValueError(what)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--detail', action='store_true', help='print what each document got wrong')
    parser.add_argument('--no-ocr', action='store_true', help='skip the scans and images')
    parser.add_argument('--json', help='write the per-document scores to this file')
    args = parser.parse_args()
    general = definition('general')
    docs = manifest()['documents']
    if args.no_ocr:
        docs = [d for d in docs if d['kind'] not in ('scan', 'image')]
    rows: list[dict[str, Any]] = []
    for doc in docs:
        path = CORPUS / doc['file']
        started = time.perf_counter()
        nodes, pages = parse(path)
        parse_seconds = time.perf_counter() - started
        row = {'doc': doc, 'pages': pages, 'parse': parse_seconds, 'scores': {}, 'extract': {}}
        for name, body in (('general', general), ('layout', definition(f"layouts/{doc['layout']}"))):
            if body is None:
                continue
            extraction, seconds = run(body, nodes)
            row['scores'][name] = score(doc['truth'], extraction, well_formed=doc['wellFormed'],
                                        expected_exceptions=doc.get('expectedExceptions'))
            row['extract'][name] = seconds
        rows.append(row)
        print(f"  {doc['file']}: parsed {pages} page(s) in {parse_seconds:.2f} s", file=sys.stderr, flush=True)
    report(rows, detail=args.detail)
    if args.json:
        Path(args.json).write_text(json.dumps([{'file': r['doc']['file'], 'parseSeconds': r['parse'],
                                                'extractSeconds': r['extract'],
                                                'scores': {k: vars(v) for k, v in r['scores'].items()}}
                                               for r in rows], indent=1, default=str))


def _totals(rows: list[dict[str, Any]], name: str, keep) -> Totals:
    totals = Totals()
    for r in rows:
        s: DocScore | None = r['scores'].get(name)
        if s is not None and keep(r['doc']):
            totals.add(s, well_formed=r['doc']['wellFormed'])
    return totals


def report(rows: list[dict[str, Any]], *, detail: bool) -> None:
    def is_text(d):
        return d['kind'] == 'text-pdf'

    def two_page(d):
        return d['kind'] == 'text-pdf' and d['pages'] > 1

    def scan_200(d):
        return d['kind'] in ('scan', 'image') and d.get('dpi') == 200 and d.get('skewDegrees', 0) <= 2

    def scans(d):
        return d['kind'] in ('scan', 'image')

    def office(d):
        return d['kind'] in ('docx', 'xlsx')

    def every(d):
        return True

    lines = [('text PDFs: header fields', is_text, 'header'),
             ('text PDFs: line items F1', is_text, 'items'),
             ('two-page text PDFs: line items F1', two_page, 'items'),
             ('text PDFs: exceptions on well-formed documents', is_text, 'false'),
             ('scans 200 dpi <= 2 deg: header recall', scan_200, 'header'),
             ('scans 200 dpi <= 2 deg: line items F1', scan_200, 'items'),
             ('all scans and photos (150-300 dpi): header recall', scans, 'header'),
             ('all scans and photos: line items F1', scans, 'items'),
             ('DOCX and XLSX: header fields', office, 'header'),
             ('DOCX and XLSX: line items F1', office, 'items'),
             ('every document (unknown suppliers): header fields', every, 'header'),
             ('every document (unknown suppliers): line items F1', every, 'items'),
             ('every document: exceptions on well-formed documents', every, 'false'),
             ('silent errors (a wrong value with no exception)', every, 'silent'),
             ('broken documents caught (every expected exception)', every, 'broken')]
    count = len(rows)
    print(f'\nExtraction on unseen layouts: {count} documents of tests/fixtures/invoices/')
    print('\n| measure | general definition | a definition per layout |')
    print('|---|---|---|')
    for title, keep, what in lines:
        general, layout = _totals(rows, 'general', keep), _totals(rows, 'layout', keep)
        print(f'| {title} | {_fmt(general, what)} | {_fmt(layout, what)} |')

    print('\n| seconds per page (median) | parse | extraction, general | extraction, per layout |')
    print('|---|---|---|---|')
    for kind in ('text-pdf', 'scan', 'image', 'docx', 'xlsx'):
        some = [r for r in rows if r['doc']['kind'] == kind]
        if not some:
            continue

        def median(values):
            return f'{statistics.median(values):.4f}' if values else '-'
        print(f"| {kind} ({len(some)} docs) | {median([r['parse'] / r['pages'] for r in some])} | "
              f"{median([r['extract'].get('general', 0) / r['pages'] for r in some])} | "
              f"{median([r['extract']['layout'] / r['pages'] for r in some if 'layout' in r['extract']])} |")
    if detail:
        print('\nPer document (general | per layout): header right/total, items tp/fp/fn, exceptions, silent')
        for r in rows:
            parts = []
            for name in ('general', 'layout'):
                s = r['scores'].get(name)
                if s is not None:
                    parts.append(f'{s.header_right}/{s.header_total} h, {s.items_tp}/{s.items_fp}/{s.items_fn} li, '
                                 f'{s.exceptions} exc, {s.silent_errors} silent')
            print(f"- {r['doc']['file']}: {' | '.join(parts)}")
            for name in ('general', 'layout'):
                s = r['scores'].get(name)
                for w in (s.wrong if s else [])[:8]:
                    print(f'    {name}: {w}')


if __name__ == '__main__':
    main()
