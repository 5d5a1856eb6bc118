"""The extraction rules: where in a parsed document a taxon's value is (docs/api/extraction.md
"Rules"). Each runs offline and deterministically over a ``document.Document``:

  regex    the pattern (RE2, linear time) over the text of the scope; the capture group's span
           maps back to its units and words
  label    the value to the right of, or below, a label text, on the same page, from the word
           boxes (PDFs and images); for DOCX/HTML/sheets the rest of the paragraph or the next
           cell (right) and the next paragraph or the cell below (below)
  table    (a many group) one instance per row of the table whose header row holds the columns
           it must: the entry point is ``table`` here, the reading is features/extraction/tables.py
           (deskewed visual rows, furniture, pages, header texts)
  jsonata  an expression over {text, lines, nodes} (core/expressions.py: same caps and budget)
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from chalicelib.core import budget
from chalicelib.features.extraction import tables
from chalicelib.features.extraction.document import Document, Found, Unit, Word, span_words
from chalicelib.features.extraction.tables import MAX_TABLE_ROWS, ExtractionLimit
from chalicelib.features.extraction.taxons import compile_regex

__all__ = ['MAX_TABLE_ROWS', 'ExtractionLimit', 'label', 'regex', 'table']

MAX_TEXT_CHARACTERS = 5_000_000   # characters of document text the rules read
DEFAULT_CONFIDENCE = {'regex': 0.9, 'label': 0.85, 'column': 0.9, 'table': 0.9, 'jsonata': 0.8}


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


def _strip_lead(words: list[Word]) -> list[Word]:
    while words and words[0].text.strip(':#.-–') == '':
        words = words[1:]
    if words and words[0].text.startswith(':'):
        words[0] = Word(words[0].id, words[0].text.lstrip(':'), words[0].page, words[0].bbox, words[0].confidence,
                        words[0].start + 1, words[0].end)
    return words


def _run(words: list[Word], gap: float) -> list[Word]:
    """The leading words that follow each other with less than ``gap`` between them."""
    out: list[Word] = []
    for w in words:
        if out and out[-1].bbox and w.bbox and w.bbox[0] - out[-1].bbox[2] > gap:
            break
        out.append(w)
    return out


def _candidates(scope: Scope, text: str) -> list[int]:
    """Indexes of the units whose text holds ``text`` ignoring case (a substring search over the
    scope's text, then the units at each hit), in order."""
    folded = scope.folded()
    needle = text.lower()
    out: list[int] = []
    at = folded.find(needle)
    while at >= 0:
        k = bisect_right(scope.starts, at) - 1
        if k >= 0 and (not out or out[-1] != k):
            out.append(k)
        at = folded.find(needle, at + 1)
    return out


def label(scope: Scope, rule: dict[str, Any]) -> Found | None:
    text = ' '.join(rule['label'].split())
    direction = rule.get('direction', 'right')
    for i in _candidates(scope, text):
        unit = scope.units[i]
        span = _label_span(unit, text)
        if span is None:
            continue
        found = _boxed(scope, unit, span, direction) if unit.words and unit.words[0].bbox else \
            _flowed(scope, i, unit, span, direction)
        if found is not None and found.text.strip():
            return _confidence(rule, found)
    return None


def _boxed(scope: Scope, unit: Unit, span: tuple[int, int], direction: str) -> Found | None:
    label_words = span_words(unit, *span)
    if not label_words or not all(w.bbox for w in label_words):
        return None
    x0 = min(w.bbox[0] for w in label_words)
    x1 = max(w.bbox[2] for w in label_words)
    y0 = min(w.bbox[1] for w in label_words)
    y1 = max(w.bbox[3] for w in label_words)
    height = max(y1 - y0, 1.0)
    gap = max(3 * height, 18.0)
    page = unit.page
    if direction == 'right':
        mid = (y0 + y1) / 2
        candidates = [w for u in scope.on_page(page) for w in u.words
                      if w.bbox and w.bbox[0] >= x1 - 0.5 and w.bbox[1] <= mid <= w.bbox[3]
                      and w not in label_words]
        candidates.sort(key=lambda w: w.bbox[0])
        words = _run(_strip_lead(candidates), gap)
        if words and words[0].bbox[0] - x1 > 6 * gap:
            return None
    else:
        below = [u for u in scope.on_page(page) if u.bbox and u.bbox[1] >= y1 - 0.5
                 and u is not unit and any(w.bbox and w.bbox[2] >= x0 - 2 and w.bbox[0] <= x1 + 2 * gap
                                           for w in u.words)]
        if not below:
            return None
        nearest = min(below, key=lambda u: u.bbox[1])
        if nearest.bbox[1] - y1 > 4 * height:
            return None
        row = sorted([w for w in nearest.words if w.bbox], key=lambda w: w.bbox[0])
        first = next((k for k, w in enumerate(row) if w.bbox[2] >= x0 - 2), None)
        words = _run(row[first:], gap) if first is not None else []
    if not words:
        return None
    units = scope.units_of_words(words)
    return Found(text=' '.join(w.text for w in words), words=words, units=units)


def _flowed(scope: Scope, i: int, unit: Unit, span: tuple[int, int], direction: str) -> Found | None:
    if direction == 'right':
        rest = unit.text[span[1]:].lstrip(' \t:#-–')
        if rest.strip():
            start = len(unit.text) - len(rest)
            return Found(text=rest.strip(), words=span_words(unit, start, len(unit.text)), units=[unit])
        if unit.node_type == 'cell':
            nxt = next((u for u in scope.units if u.row_id == unit.row_id and u.column is not None
                        and unit.column is not None and u.column > unit.column and u.text.strip()), None)
            return Found(text=nxt.text.strip(), units=[nxt]) if nxt else None
        return None
    if unit.node_type == 'cell':
        nxt = next((u for u in scope.units if u.table == unit.table and u.column == unit.column
                    and u.row is not None and unit.row is not None and u.row > unit.row and u.text.strip()), None)
        return Found(text=nxt.text.strip(), units=[nxt]) if nxt else None
    nxt = next((u for u in scope.units[i + 1:] if u.text.strip()), None)
    return Found(text=nxt.text.strip(), units=[nxt]) if nxt else None


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
