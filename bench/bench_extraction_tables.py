"""The table rule (features/extraction/tables.py, via ``rules.table``):

1. **Time per page** on a 2-page and a 20-page line-item table: reportlab invoices with page
   furniture and the header repeated on every page (tests/extraction_tables_corpus.py
   ``two_page_invoice``), read once by the platform's PDF reader; then the table rule alone over
   the same ``Document``, median of repeated runs.
2. **Line items of the corpus** (tests/fixtures/invoices, issue 48: every document with line
   items, text PDFs, DOCX, XLSX, scans and photos, read by the platform's readers): one
   line-item definition whose columns list every layout's header texts, each document's locale;
   a row is right when its quantity, unit price and amount are the truth's (descriptions differ
   by OCR letters on scans). ``--single``: each column's one header text the document prints (a
   definition per layout: what main can run, header lists being new).

    PYTHONPATH=. .venv/bin/python bench/bench_extraction_tables.py [--single]

Run it on this branch and on main to compare (``rules.table`` takes the same arguments).

Figures: bench/README.md "Extraction on unseen layouts (issue 48)" -> "Tables".
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def corpus(single: bool) -> None:
    import json
    from decimal import Decimal

    from chalicelib.features.extraction import engine
    from tests.extraction_tables_corpus import CORPUS, CORPUS_HEADERS, corpus_definition, corpus_doc, parse
    manifest = json.load(open(f'{CORPUS}/manifest.json', encoding='utf-8'))
    right = read = truth = 0
    for entry in manifest['documents']:
        if not entry['truth'].get('lineItems'):
            continue
        doc, locale = corpus_doc(entry['file'])
        nodes = parse(doc)
        headers = CORPUS_HEADERS
        if single:
            texts = ' '.join(n.get('content') or '' for n in nodes)
            headers = {k: next((t for t in v if t in texts), v[0]) for k, v in CORPUS_HEADERS.items()}
        objects = engine.extract(corpus_definition(locale, headers), nodes).objects
        got = []
        for o in objects:
            if o.path.endswith('lineItems'):
                typed = {a['tag']: a.get('typedValue') for a in o.attributes}
                got.append(tuple(None if typed.get(k) is None else Decimal(str(typed[k])).normalize()
                                 for k in ('quantity', 'unitPrice', 'amount')))
        want = [(Decimal(li['quantity']), li['unitPrice'].normalize(), li['amount'].normalize()) for li in doc.items]
        ok = sum(1 for g in got if g in want)
        right, read, truth = right + ok, read + len(got), truth + len(want)
        print(f"  {entry['file']:40s} {entry['kind']:8s} rows {len(want):3d} read {len(got):3d} right {ok:3d}")
    precision, recall = right / max(read, 1), right / max(truth, 1)
    print(f'line items: {right} right of {truth} ({read} read): precision {precision:.3f} recall {recall:.3f} '
          f'F1 {2 * precision * recall / max(precision + recall, 1e-9):.3f}')


def main() -> None:
    from chalicelib.features.extraction import rules
    from chalicelib.features.extraction.document import Document
    from tests.extraction_tables_corpus import ONE_HEADER, parse, two_page_invoice
    for pages in (2, 20):
        doc = two_page_invoice(pages=pages, page1=14, page2=40)
        started = time.perf_counter()
        nodes = parse(doc)
        parse_s = time.perf_counter() - started
        document = Document(nodes)
        times, rows = [], None
        for _ in range(15 if pages == 2 else 5):
            started = time.perf_counter()
            rows = rules.table(document, {'type': 'table'}, dict(ONE_HEADER), "group 'bench'") or []
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        print(f'{pages:>2} pages, {len(doc.items):>3} rows written, {len(rows):>3} read: table rule '
              f'{median * 1000:7.2f} ms ({median / pages * 1000:.2f} ms/page); '
              f'parse {parse_s / pages * 1000:.1f} ms/page')
    corpus('--single' in sys.argv)


if __name__ == '__main__':
    main()
