"""Scoring extraction against the invoice corpus's truth (tests/fixtures/invoices/manifest.json):
the rules bench/bench_extraction_unseen.py and tests/unit/test_invoice_corpus.py share.

Pure and small: no engine, no parsing. An extraction is given as plain data,

    {"fields": {"invoiceNumber": "INV-1", "invoiceDate": "2026-03-14", "total": 12.5, ...},
     "lineItems": [{"description": "Gadget", "amount": 39.98, "row": 1}, ...],
     "exceptions": [{"exceptionType": "INVALID_VALUE", "taxon": "invoice/invoiceDate", "row": None}, ...]}

(typed values as the engine gives them; ``row`` the line item's ``rowNum``, None on the invoice).

Matching (issue 48's targets, bench/README.md "Extraction on unseen layouts (issue 48)"):
- a header field is right when its typed value equals the truth's: dates as ISO text, decimals
  compared as ``Decimal`` (1234.5 == "1234.50"), strings with case and runs of spaces ignored;
- a line item matches a truth item when its amount and its description both match (each truth
  item matched once); F1 over items, micro-averaged over documents;
- a **silent error** is a value that is present and wrong with no exception that points at it: an
  exception on its own taxon (for a line item: on its row), or, for the money fields and the line
  items, a failed validation on the invoice (the sums that check them);
- every exception on a well-formed document is a **false exception**;
- a broken document is **caught** when every one of its ``expectedExceptions`` (type and taxon)
  was raised.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

DATE_FIELDS = frozenset({'invoiceDate', 'dueDate'})
MONEY_FIELDS = frozenset({'subtotal', 'tax', 'total'})
HEADER_FIELDS = ('invoiceNumber', 'invoiceDate', 'dueDate', 'vendorName', 'customerName', 'currency',
                 'subtotal', 'tax', 'total')
GROUP = 'invoice'


def _decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        return None


def _text(value: Any) -> str:
    return ' '.join(str(value).split()).casefold()


def same(name: str, truth: Any, found: Any) -> bool:
    """Whether ``found`` (a typed value) is the truth's value of field ``name``."""
    if found is None:
        return False
    if name in MONEY_FIELDS or name in ('amount', 'unitPrice', 'quantity'):
        a, b = _decimal(truth), _decimal(found)
        return a is not None and b is not None and a == b
    if name in DATE_FIELDS:
        return str(found)[:10] == str(truth)
    return _text(found) == _text(truth)


def item_matches(truth: dict[str, Any], found: dict[str, Any]) -> bool:
    return same('amount', truth.get('amount'), found.get('amount')) and \
        same('description', truth.get('description'), found.get('description'))


@dataclass
class DocScore:
    header_total: int = 0          # truth header fields
    header_right: int = 0
    header_wrong: int = 0          # present and wrong
    header_missing: int = 0
    items_tp: int = 0
    items_fp: int = 0
    items_fn: int = 0
    silent_errors: int = 0
    exceptions: int = 0
    false_exceptions: int = 0      # exceptions on a well-formed document
    expected_caught: bool | None = None   # broken documents: every expected exception raised
    wrong: list[str] = field(default_factory=list)   # what was wrong, for the detail listing


def score(truth: dict[str, Any], extraction: dict[str, Any], *, well_formed: bool = True,
          expected_exceptions: list[dict[str, Any]] | None = None) -> DocScore:
    """The score of one document's extraction against its truth."""
    s = DocScore()
    fields = extraction.get('fields') or {}
    exceptions = extraction.get('exceptions') or []
    on_taxon = {(e.get('taxon'), e.get('row')) for e in exceptions}
    group_failed = any(e.get('exceptionType') == 'VALIDATION_FAILED' and e.get('taxon') == GROUP
                       and e.get('row') is None for e in exceptions)
    for name in HEADER_FIELDS:
        if name not in truth:
            continue
        s.header_total += 1
        found = fields.get(name)
        if same(name, truth[name], found):
            s.header_right += 1
        elif found is None or (isinstance(found, str) and not found.strip()):
            s.header_missing += 1
        else:
            s.header_wrong += 1
            s.wrong.append(f'{name}: {found!r} (truth {truth[name]!r})')
            covered = (f'{GROUP}/{name}', None) in on_taxon or (name in MONEY_FIELDS and group_failed)
            if not covered:
                s.silent_errors += 1
    unmatched = list(truth.get('lineItems') or [])
    for item in extraction.get('lineItems') or []:
        hit = next((k for k, t in enumerate(unmatched) if item_matches(t, item)), None)
        if hit is not None:
            unmatched.pop(hit)
            s.items_tp += 1
            continue
        s.items_fp += 1
        s.wrong.append(f"line item {item.get('description')!r} {item.get('amount')!r}")
        row = item.get('row')
        covered = group_failed or any(r == row and row is not None for (_, r) in on_taxon)
        if not covered:
            s.silent_errors += 1
    s.items_fn = len(unmatched)
    s.exceptions = len(exceptions)
    if well_formed:
        s.false_exceptions = len(exceptions)
    else:
        raised = {(e.get('exceptionType'), e.get('taxon')) for e in exceptions}
        s.expected_caught = all((x['exceptionType'], x['taxon']) in raised for x in expected_exceptions or [])
    return s


@dataclass
class Totals:
    documents: int = 0
    header_total: int = 0
    header_right: int = 0
    header_wrong: int = 0
    items_tp: int = 0
    items_fp: int = 0
    items_fn: int = 0
    silent_errors: int = 0
    false_exceptions: int = 0
    well_formed: int = 0
    well_formed_with_exceptions: int = 0
    broken: int = 0
    broken_caught: int = 0

    def add(self, s: DocScore, *, well_formed: bool) -> None:
        self.documents += 1
        for name in ('header_total', 'header_right', 'header_wrong', 'items_tp', 'items_fp', 'items_fn',
                     'silent_errors', 'false_exceptions'):
            setattr(self, name, getattr(self, name) + getattr(s, name))
        if well_formed:
            self.well_formed += 1
            self.well_formed_with_exceptions += 1 if s.exceptions else 0
        else:
            self.broken += 1
            self.broken_caught += 1 if s.expected_caught else 0

    @property
    def header_accuracy(self) -> float:
        """Right header fields over the truth's (for scans: the recall)."""
        return self.header_right / self.header_total if self.header_total else 0.0

    @property
    def items_f1(self) -> float:
        denominator = 2 * self.items_tp + self.items_fp + self.items_fn
        return 2 * self.items_tp / denominator if denominator else 1.0


def extraction_of(objects: list[dict[str, Any]], exceptions: list[dict[str, Any]]) -> dict[str, Any]:
    """The plain extraction of an engine run: ``objects`` as ``engine.assess`` takes them (``id``,
    ``parentId``, ``path``, ``rowNum``, ``attributes`` with ``tag`` and ``typedValue``), the
    exceptions as it answers them (``dataObjectId``, ``taxon``, ``exceptionType``)."""
    fields: dict[str, Any] = {}
    items: list[dict[str, Any]] = []
    row_of = {}
    for o in objects:
        values = {a['tag']: a.get('typedValue') for a in o.get('attributes') or []}
        if o.get('path') == GROUP:
            fields = values
        elif o.get('path') == f'{GROUP}/lineItems':
            row_of[o['id']] = o.get('rowNum')
            items.append({**values, 'row': o.get('rowNum')})
    out_exceptions = [{'exceptionType': e.get('exceptionType'), 'taxon': e.get('taxon'),
                       'row': row_of.get(e.get('dataObjectId'))} for e in exceptions]
    return {'fields': fields, 'lineItems': items, 'exceptions': out_exceptions}
