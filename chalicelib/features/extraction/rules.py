"""The extraction rules: where in a parsed document a taxon's value is (docs/api/extraction.md
"Rules"). Each runs offline and deterministically over a ``document.Document``:

  regex    the pattern (RE2, linear time) over the text of the scope; the capture group's span
           maps back to its units and words
  label    labels.py (its own module: label lists, the value's own line, cell or box, the
           "label: value" fallback)
  table    (a many group) one instance per row of the table whose header row holds every child's
           column header: PDF lines split into columns at the midpoints between the headers'
           word x-ranges; DOCX/HTML/XLSX from row/cell nodes
  jsonata  an expression over {text, lines, nodes} (core/expressions.py: same caps and budget)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from chalicelib.core import budget
from chalicelib.core.errors import ApiError
from chalicelib.features.extraction.document import Document, Found, Unit, Word, span_words
from chalicelib.features.extraction.taxons import compile_regex

MAX_TABLE_ROWS = 2_000        # rows one table rule may turn into instances
MAX_TEXT_CHARACTERS = 5_000_000   # characters of document text the rules read
DEFAULT_CONFIDENCE = {'regex': 0.9, 'label': 0.85, 'labelPair': 0.7, 'column': 0.9, 'table': 0.9, 'jsonata': 0.8}
DEFAULT_STOP = r'^\s*(sub-?total|total|tax|vat|amount due|balance due|notes?)\b'


class ExtractionLimit(ApiError):
    """An extraction reached one of its caps: the message names it (docs/api/limits.md)."""
    status = 422


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

def _too_many(where: str) -> ExtractionLimit:
    return ExtractionLimit(f'the table of {where} has more than {MAX_TABLE_ROWS:,} rows; extraction turns at most '
                           f'{MAX_TABLE_ROWS:,} rows of one table into data objects (limit maxTableRows)',
                           limit='maxTableRows', maximum=MAX_TABLE_ROWS)


def table(doc: Document, rule: dict[str, Any], columns: dict[str, str], where: str) -> list[dict[str, Found]] | None:
    """Rows of the first table whose header holds every column header: [{child name: Found}]."""
    stop = compile_regex(rule.get('stopAt') or DEFAULT_STOP, True)
    found = _structured(doc, columns, stop, where)
    if found is None:
        found = _laid_out(doc, columns, stop, where)
    if found is None:
        return None
    for row in found:
        for value in row.values():
            _confidence({'type': 'column', 'confidence': rule.get('confidence', DEFAULT_CONFIDENCE['table'])}, value)
    return found


def _header_of(texts: list[str], header: str) -> int | None:
    want = _norm(header)
    exact = next((k for k, t in enumerate(texts) if _norm(t) == want), None)
    return exact if exact is not None else next((k for k, t in enumerate(texts) if want in _norm(t)), None)


def _structured(doc: Document, columns: dict[str, str], stop, where: str) -> list[dict[str, Found]] | None:
    for tbl in doc.tables:
        rows = tbl['rows']
        for r, row in enumerate(rows):
            texts = [c.text for c in row['cells']]
            at = {name: _header_of(texts, header) for name, header in columns.items()}
            if any(v is None for v in at.values()):
                continue
            cols = {name: row['cells'][k].column if row['cells'][k].column is not None else k for name, k in at.items()}
            out: list[dict[str, Found]] = []
            for data in rows[r + 1:]:
                cells = {(c.column if c.column is not None else k): c for k, c in enumerate(data['cells'])}
                line = ' '.join(c.text for c in data['cells'])
                if not line.strip():
                    break
                if stop.search(line):
                    break
                if len(out) >= MAX_TABLE_ROWS:
                    raise _too_many(where)
                if len(out) % 256 == 0:
                    budget.check(f'reading the table of {where}')
                out.append({name: Found(text=cells[col].text.strip(), units=[cells[col]], words=cells[col].words)
                            for name, col in cols.items() if col in cells and cells[col].text.strip()})
            return out
    return None


def visual_rows(doc: Document) -> list[Unit]:
    """The page's words regrouped into visual rows (by vertical position, left to right): a
    reader (OCR above all) may give a table's columns as separate line nodes; a table row is
    the words that sit at the same height, whichever lines they came in."""
    by_page: dict[int | None, list[Word]] = {}
    for u in doc.units:
        for w in u.words:
            if w.bbox:
                by_page.setdefault(w.page if w.page is not None else u.page, []).append(w)
    rows: list[Unit] = []
    for page in sorted(by_page, key=lambda p: (p is None, p or 0)):
        words = sorted(by_page[page], key=lambda w: ((w.bbox[1] + w.bbox[3]) / 2, w.bbox[0]))
        band: tuple[float, float] | None = None
        current: list[Word] = []
        for w in words:
            mid = (w.bbox[1] + w.bbox[3]) / 2
            if band is not None and not band[0] - 0.5 <= mid <= band[1] + 0.5:
                rows.append(_row_unit(current, page, len(rows)))
                current, band = [], None
            if band is None:
                band = (w.bbox[1], w.bbox[3])
            current.append(w)
        if current:
            rows.append(_row_unit(current, page, len(rows)))
    return rows


def _left(w: Word) -> float:
    return w.bbox[0]


def _row_unit(words: list[Word], page: int | None, n: int) -> Unit:
    words = sorted(words, key=_left)
    out, at = [], 0
    for w in words:
        end = at + len(w.text)
        out.append(Word(w.id, w.text, w.page, w.bbox, w.confidence, at, end))
        at = end + 1
    box = (words[0].bbox[0], min(w.bbox[1] for w in words),   # sorted by their left edge
           max(w.bbox[2] for w in words), max(w.bbox[3] for w in words))
    return Unit(id=f'row{n}', node_type='line', text=' '.join(w.text for w in words), page=page, bbox=box,
                start=0, words=out)


def _laid_out(doc: Document, columns: dict[str, str], stop, where: str) -> list[dict[str, Found]] | None:
    lines = visual_rows(doc)
    units_of = {w.id: u for u in doc.units for w in u.words}
    for i, line in enumerate(lines):
        spans = {name: _label_span(line, header) for name, header in columns.items()}
        if any(s is None for s in spans.values()):
            continue
        ranges = {}
        for name, span in spans.items():
            words = span_words(line, *span)
            if not words or not all(w.bbox for w in words):
                break
            ranges[name] = (min(w.bbox[0] for w in words), max(w.bbox[2] for w in words))
        else:
            return _rows(lines[i + 1:], line, ranges, stop, where, units_of)
    return None


def _rows(lines: list[Unit], header: Unit, ranges: dict[str, tuple[float, float]], stop, where: str,
          units_of: dict[str, Unit]):
    order = sorted(ranges, key=lambda n: ranges[n][0])
    cuts = [(ranges[a][1] + ranges[b][0]) / 2 for a, b in zip(order, order[1:], strict=False)]
    height = max(header.bbox[3] - header.bbox[1], 1.0) if header.bbox else 10.0
    need = min(2, len(order))
    out: list[dict[str, list[Word]]] = []
    last: Unit = header
    header_text = _norm(header.text)
    for n, line in enumerate(lines):
        if n % 256 == 0:
            budget.check(f'reading the table of {where}')
        if line.page != last.page:
            if _norm(line.text) == header_text:   # the header again on the next page: go on
                last = line
                continue
            if line.page != header.page and not out:
                break
        elif line.bbox and last.bbox and line.bbox[1] - last.bbox[3] > 2.5 * height:
            break
        if stop.search(line.text):
            break
        cells: dict[str, list[Word]] = {}
        for w in line.words:
            if not w.bbox:
                continue
            centre = (w.bbox[0] + w.bbox[2]) / 2
            k = sum(1 for c in cuts if centre > c)
            cells.setdefault(order[k], []).append(w)
        if len(cells) < need:
            if out and line.page == last.page:   # a wrapped cell: its text belongs to the row above
                for name, words in cells.items():
                    out[-1].setdefault(name, []).extend(words)
                last = line
                continue
            break
        if len(out) >= MAX_TABLE_ROWS:
            raise _too_many(where)
        out.append(cells)
        last = line
    return [{name: Found(text=' '.join(w.text for w in words), words=words,
                         units=list({units_of[w.id].id: units_of[w.id] for w in words}.values()))
             for name, words in row.items()} for row in out]


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
