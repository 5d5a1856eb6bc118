"""The extraction rules: where in a parsed document a taxon's value is (docs/api/extraction.md
"Rules"). Each runs offline and deterministically over a ``document.Document``:

  regex    the pattern (RE2, linear time) over the text of the scope; the capture group's span
           maps back to its units and words
  label    labels.py (its own module: label lists, the value's own line, cell or box, the
           "label: value" fallback)
  table    (a many group) one instance per row of the table whose header row holds the columns
           it must: the entry point is ``table`` here, the reading is features/extraction/tables.py
           (deskewed visual rows, furniture, pages, header texts)
  jsonata  an expression over {text, lines, nodes} (core/expressions.py: same caps and budget)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from chalicelib.core import budget
from chalicelib.features.extraction import tables
from chalicelib.features.extraction.document import Document, Found, Unit, Word, span_words
from chalicelib.features.extraction.tables import MAX_TABLE_ROWS, ExtractionLimit
from chalicelib.features.extraction.taxons import compile_regex

__all__ = ['MAX_TABLE_ROWS', 'ExtractionLimit', 'regex', 'table']

MAX_TEXT_CHARACTERS = 5_000_000   # characters of document text the rules read
DEFAULT_CONFIDENCE = {'regex': 0.9, 'label': 0.85, 'labelPair': 0.7, 'column': 0.9, 'table': 0.9, 'jsonata': 0.8}


def _norm(text: str) -> str:
    return ' '.join(text.split()).casefold()


@dataclass
class Scope:
    """What a rule reads: the whole document, or one table row's units."""
    text: str
    units: list[Unit]
    starts: list[int]
    _folded: str | None = None
    _pages: dict[int | None, list[Unit]] | None = None
    _owner: dict[int, int] | None = None

    @classmethod
    def of_document(cls, doc: Document) -> Scope:
        if len(doc.text) > MAX_TEXT_CHARACTERS:
            raise ExtractionLimit(f'the document has {len(doc.text):,} characters of text; extraction reads at most '
                                  f'{MAX_TEXT_CHARACTERS:,} (limit maxTextCharacters)',
                                  limit='maxTextCharacters', maximum=MAX_TEXT_CHARACTERS)
        return cls(doc.text, doc.units, [u.start for u in doc.units])

    @classmethod
    def of_units(cls, units: list[Unit]) -> Scope:
        starts, parts, at = [], [], 0
        for u in units:
            starts.append(at)
            parts.append(u.text)
            at += len(u.text) + 1
        return cls('\n'.join(parts), units, starts)

    def folded(self) -> str:
        """The text in lower case (same length: ``str.lower`` keeps offsets for the scripts the
        platform reads; a label search only uses it to find candidate units)."""
        if self._folded is None:
            self._folded = self.text.lower()
        return self._folded

    def on_page(self, page: int | None) -> list[Unit]:
        """The scope's units on ``page``, in order (built once: every label rule reads a page)."""
        if self._pages is None:
            self._pages = {}
            for u in self.units:
                self._pages.setdefault(u.page, []).append(u)
        return self._pages.get(page, [])

    def units_of_words(self, words: list[Word]) -> list[Unit]:
        """The scope's units holding any of ``words`` (by identity), in order."""
        if self._owner is None:
            self._owner = {id(w): k for k, u in enumerate(self.units) for w in u.words}
        owner = self._owner
        found = sorted({owner[id(w)] for w in words if id(w) in owner})
        return [self.units[k] for k in found]

    def locate(self, start: int, end: int) -> tuple[list[Unit], list[Word]]:
        units, words = [], []
        for u, s in zip(self.units, self.starts, strict=True):
            if s >= end:
                break
            if s + len(u.text) < start:
                continue
            units.append(u)
            words += span_words(u, max(0, start - s), end - s)
        return units, words


def _confidence(rule: dict[str, Any], found: Found) -> Found:
    base = rule.get('confidence', DEFAULT_CONFIDENCE.get(rule.get('type', ''), 0.8))
    ocr = found.ocr_confidence()
    found.confidence = round(float(base) * (ocr if ocr is not None else 1.0), 4)
    found.rule = rule.get('type', '')
    return found


# ----------------------------------------------------------------------------- regex

def regex(scope: Scope, rule: dict[str, Any]) -> Found | None:
    budget.check('running a regex rule')
    pattern = compile_regex(rule['pattern'], bool(rule.get('ignoreCase')))
    match = pattern.search(scope.text)
    if match is None:
        return None
    group = rule.get('group', 1)
    if isinstance(group, int) and group > pattern.groups:
        group = 0
    text = match.group(group)
    if text is None:
        return None
    start, end = match.span(group)
    units, words = scope.locate(start, end)
    return _confidence(rule, Found(text=text, words=words, units=units))


# ----------------------------------------------------------------------------- label

def _label_span(unit: Unit, label: str) -> tuple[int, int] | None:
    """Where ``label`` stands in the unit as whole words ('Total' is not in 'Subtotal'),
    ignoring case and runs of spaces."""
    pattern = _label_pattern(label)
    if pattern is None:
        return None
    m = pattern.search(unit.text)
    return m.span() if m else None


@lru_cache(maxsize=256)   # a table's headers are looked for on every visual row
def _label_pattern(label: str) -> re.Pattern[str] | None:
    words = label.split()
    if not words:
        return None
    return re.compile(r'(?<!\w)' + r'\s+'.join(re.escape(w) for w in words) + r'(?!\w)', re.IGNORECASE)


# ----------------------------------------------------------------------------- table

def table(doc: Document, rule: dict[str, Any], columns: dict[str, str | list[str]], where: str,
          required: set[str] | frozenset[str] = frozenset()) -> list[dict[str, Found]] | None:
    """Rows of the first table whose header holds the columns it must (features/extraction/tables.py
    reads them): [{child name: Found}]. ``columns``: each child's header texts, in order."""
    stop = compile_regex(rule.get('stopAt') or tables.DEFAULT_STOP, True)
    texts = {name: [h] if isinstance(h, str) else list(h) for name, h in columns.items()}
    found = tables.read(doc, texts, required, stop, where)
    if found is None:
        return None
    for row in found:
        for value in row.values():
            _confidence({'type': 'column', 'confidence': rule.get('confidence', DEFAULT_CONFIDENCE['table'])}, value)
    return found


# ----------------------------------------------------------------------------- jsonata

def document_input(doc: Document) -> dict[str, Any]:
    """A JSONata rule's input: the text and its units (``lines``: every line, paragraph, heading
    and cell with its id, page and box), not the raw node list (words included, it is several
    times larger and JSONata walks its whole input on every evaluation)."""
    return {'text': doc.text, 'pageCount': (doc.root.get('features') or {}).get('pageCount'),
            'lines': [{'id': u.id, 'text': u.text, 'page': u.page, 'bbox': list(u.bbox) if u.bbox else None,
                       'nodeType': u.node_type} for u in doc.units]}


def found_of(value: Any, doc: Document, rule: dict[str, Any]) -> Found | None:
    """A JSONata result as a value: a scalar, or {value, nodeId | nodeIds}."""
    ids: list[str] = []
    if isinstance(value, dict):
        ids = [str(i) for i in (value.get('nodeIds') or ([value['nodeId']] if value.get('nodeId') else []))]
        value = value.get('value')
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None or isinstance(value, (dict, list)):
        return None
    text = value if isinstance(value, str) else ('true' if value is True else 'false' if value is False else str(value))
    units = [u for u in doc.units if u.id in ids]
    words = [w for u in doc.units for w in u.words if w.id in ids]
    return _confidence(rule, Found(text=text, words=words, units=units))


_WS = re.compile(r'\s+')
