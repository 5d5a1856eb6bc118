"""Header fields of one general definition on the invoice corpus (issue 48, "Labels and
conventions" in bench/README.md): how many of the truth's header fields the run reads right, and
how many it reads wrong with no exception pointing at them (silent errors).

    PYTHONPATH=. .venv/bin/python bench/bench_extraction_labels.py [definition.json] [kinds]

``definition.json`` defaults to tests/fixtures/invoices/definitions/general.json; ``kinds`` a
comma list of the manifest's kinds (default ``text-pdf,docx,xlsx``; ``scan,image`` runs OCR).
The definition's line items are left out (the table rule's figures are tables'). Documents are
parsed by the parse stage's readers (features/parsing/readers). To measure another checkout's
engine, put its ``chalicelib`` first: ``CODE=/path/to/checkout`` (e.g. ``git archive main
chalicelib | tar -x -C /tmp/main``). Scoring follows the corpus's rules: dates as ISO text,
money as decimals, strings ignoring case and runs of spaces; a wrong value is silent unless an
exception names its taxon (for money, also a failed validation on the invoice).
"""
from __future__ import annotations

import json
import os
import sys
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path

sys.path.insert(0, os.environ.get('CODE', '.'))

from chalicelib.features.extraction import engine  # noqa: E402
from chalicelib.features.extraction import taxons as taxon_rules  # noqa: E402
from chalicelib.features.parsing import readers  # noqa: E402

CORPUS = Path('tests/fixtures/invoices')
FIELDS = ('invoiceNumber', 'invoiceDate', 'dueDate', 'vendorName', 'customerName', 'currency', 'subtotal', 'tax',
          'total')
MONEY = ('subtotal', 'tax', 'total')


def same(name: str, truth: str, found) -> bool:
    if found is None:
        return False
    if name in MONEY:
        try:
            return Decimal(str(found)) == Decimal(truth)
        except InvalidOperation:
            return False
    if name in ('invoiceDate', 'dueDate'):
        return str(found)[:10] == truth
    return ' '.join(str(found).split()).casefold() == ' '.join(truth.split()).casefold()


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS / 'definitions' / 'general.json'
    kinds = sys.argv[2].split(',') if len(sys.argv) > 2 else ['text-pdf', 'docx', 'xlsx']
    definition = json.loads(path.read_text())
    taxons = definition['taxons']
    for t in taxons:
        t['children'] = [c for c in t['children'] if not c.get('group')]
    locale = (definition.get('metadata') or {}).get('locale')
    manifest = json.loads((CORPUS / 'manifest.json').read_text())
    right = total = silent = 0
    seconds = 0.0
    for doc in manifest['documents']:
        if doc['kind'] not in kinds:
            continue
        data = (CORPUS / doc['file']).read_bytes()
        nodes = readers.read(data, media_type=None, filename=doc['file'], deadline=time.monotonic() + 300).nodes
        started = time.perf_counter()
        result = engine.extract(taxons, nodes, locale=locale)
        seconds += time.perf_counter() - started
        tree = [{'id': o.key, 'parentId': o.parent, 'path': o.path, 'rowNum': o.row,
                 'attributes': [{**a, 'id': f"{o.key}/{a['tag']}"} for a in o.attributes]} for o in result.objects]
        found = engine.assess(tree, dict(taxon_rules.walk(taxons))).values()
        flagged = {e['taxon'].rsplit('/', 1)[-1] for e in found}
        invoice_flagged = any('/' not in e['taxon'] for e in found)
        attrs = {a['tag']: a for a in result.objects[0].attributes}
        wrong = []
        for name in FIELDS:
            if name not in doc['truth']:
                continue
            total += 1
            attr = attrs.get(name) or {}
            if same(name, doc['truth'][name], attr.get('typedValue')):
                right += 1
                continue
            quiet = attr.get('value') is not None and name not in flagged and not (name in MONEY and invoice_flagged)
            silent += quiet
            wrong.append(f"{name}={attr.get('value')!r}{' (SILENT)' if quiet else ''}")
        print(f"{doc['file']:38} {'; '.join(wrong)}")
    print(f'header fields right {right}/{total} = {right / total:.2f}; silent errors {silent}; '
          f'extraction {seconds:.2f} s in all')


if __name__ == '__main__':
    main()
