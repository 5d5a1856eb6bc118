"""The ``table`` rule's reading of a table (docs/api/extraction.md "Rules", rows ``table`` and
``column``, and "Tables"): which rows of a parsed document are a many group's instances. The
rule's entry point is ``rules.table``; this module reads the rows.

Two kinds of table:

  structured  DOCX/HTML/XLSX ``table``/``sheet`` -> ``row`` -> ``cell`` nodes: the first row
              holding a header text of every column it must hold, then the rows below
  laid out    PDFs and scans: the words of each page, deskewed (the page's skew estimated from
              the words' baselines on each line node), regrouped into visual rows; the header
              row's word ranges split the rows below into columns; the table goes on over the
              next pages under its repeated header, or without one when the columns line up;
              page furniture (running headers and footers, page numbers, "continued" lines) is
              skipped; it ends at ``stopAt`` or a totals row, a gap, or a row that does not line up

Which columns a header must hold: every column whose taxon is ``required``; when no column
taxon is required, every column (the rule before several header texts existed). A column's
``header`` is one text or a list of texts (synonyms, languages): the first text found in the row
names the column. Header texts match the row's words ignoring case, spaces and punctuation, so
OCR's separate words (``Unit`` ``Price``) match ``Unit Price``.

Why our own code rather than a table library (camelot, pdfplumber, img2table): those read a PDF's
drawing operators or a page image; extraction reads the parsed-document contract's nodes (text
PDFs, OCR words, office files alike), offline and deterministic, within the run's time budget.
"""
from __future__ import annotations

import math
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import budget
from chalicelib.core.errors import ApiError
from chalicelib.features.extraction.document import Document, Found, Unit, Word

MAX_TABLE_ROWS = 2_000        # rows one table rule may turn into instances
MAX_SKEW_DEGREES = 5.0        # a larger estimate is not trusted: the page is read unrotated
MIN_SKEW_DEGREES = 0.05       # under this a page is read as it is (text PDFs: 0)
# a totals row ends a table (a row starting with one of these words; `stopAt` replaces them)
DEFAULT_STOP = (r'^\s*(sub-?total|total|grand total|tax|taxable value|vat|gst|[cis]gst|utgst|hst|amount due|'
                r'balance due|notes?|'
                r'zwischensumme|summe|gesamt\w*|netto\w*|brutto\w*|mwst\.?|ust\.?|umsatzsteuer|rechnungsbetrag|'
                r'sous-total|total ht|total ttc|montant total|tva|net [àa] payer|'
                r'iva|importe total|importe neto|base imponible|subtotale|totale|imponibile|'
                r'btw|totaal|subtotaal|te betalen)\b')


class ExtractionLimit(ApiError):
    """An extraction reached one of its caps: the message names it (docs/api/limits.md)."""
    status = 422


def too_many(where: str) -> ExtractionLimit:
    return ExtractionLimit(f'the table of {where} has more than {MAX_TABLE_ROWS:,} rows; extraction turns at most '
                           f'{MAX_TABLE_ROWS:,} rows of one table into data objects (limit maxTableRows)',
                           limit='maxTableRows', maximum=MAX_TABLE_ROWS)


def _norm(text: str) -> str:
    return ' '.join(text.split()).casefold()


def _compact(text: str) -> str:
    """A header text or word for comparison: letters and digits (and # %), lower case."""
    out = ''.join(ch for ch in text.casefold() if ch.isalnum() or ch in '#%')
    return out or _norm(text)


def must_hold(columns: dict[str, list[str]], required: set[str] | frozenset[str]) -> set[str]:
    """The columns a header row must hold (the module docstring)."""
    wanted = {name for name in columns if name in required}
    return wanted or set(columns)


def read(doc: Document, columns: dict[str, list[str]], required: set[str] | frozenset[str], stop,
         where: str) -> list[dict[str, Found]] | None:
    """Rows of the first table whose header holds the columns it must: [{child name: Found}]."""
    need = must_hold(columns, required)
    found = _structured(doc, columns, need, stop, where)
    if found is None:
        found = _laid_out(doc, columns, need, stop, where)
    return found


# ----------------------------------------------------------------------------- structured

def _header_of(texts: list[str], header: str, used: set[int]) -> int | None:
    want = _norm(header)
    exact = next((k for k, t in enumerate(texts) if k not in used and _norm(t) == want), None)
    if exact is not None:
        return exact
    return next((k for k, t in enumerate(texts) if k not in used and want and want in _norm(t)), None)


def _structured(doc: Document, columns: dict[str, list[str]], need: set[str], stop,
                where: str) -> list[dict[str, Found]] | None:
    for tbl in doc.tables:
        rows = tbl['rows']
        for r, row in enumerate(rows):
            texts = [c.text for c in row['cells']]
            at: dict[str, int] = {}
            used: set[int] = set()
            for name, headers in columns.items():
                for header in headers:
                    k = _header_of(texts, header, used)
                    if k is not None:
                        at[name] = k
                        used.add(k)
                        break
            if not need <= set(at) or len(at) < min(2, len(columns)):
                continue
            cols = {name: row['cells'][k].column if row['cells'][k].column is not None else k for name, k in at.items()}
            first = min(cols.values())
            out: list[dict[str, Found]] = []
            body = rows[r + 1:]
            for n, data in enumerate(body):
                cells = {(c.column if c.column is not None else k): c for k, c in enumerate(data['cells'])}
                line = ' '.join(c.text for c in data['cells'])
                if not line.strip():
                    break
                if stop.search(line):
                    break
                filled = {col for col in cols.values() if col in cells and cells[col].text.strip()}
                if filled == {first} and len(cols) > 1 and _full_next(body[n + 1:], cols, stop):
                    continue   # a section heading: only the first column, proper rows below
                if len(out) >= MAX_TABLE_ROWS:
                    raise too_many(where)
                if len(out) % 256 == 0:
                    budget.check(f'reading the table of {where}')
                out.append({name: Found(text=cells[col].text.strip(), units=[cells[col]], words=cells[col].words)
                            for name, col in cols.items() if col in cells and cells[col].text.strip()})
            return out
    return None


def _full_next(rows: list[dict[str, Any]], cols: dict[str, int], stop) -> bool:
    for data in rows[:1]:
        cells = {(c.column if c.column is not None else k): c for k, c in enumerate(data['cells'])}
        line = ' '.join(c.text for c in data['cells'])
        if not line.strip() or stop.search(line):
            return False
        return sum(1 for col in cols.values() if col in cells and cells[col].text.strip()) >= min(2, len(cols))
    return False


# ----------------------------------------------------------------------------- laid out: rows

@dataclass(slots=True)
class _Cell:
    """A word and its box on the deskewed page."""
    word: Word
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def centre(self) -> float:
        return (self.x0 + self.x1) / 2


@dataclass
class _Row:
    page: int | None
    cells: list[_Cell]            # left to right
    top: float
    bottom: float
    text: str = ''
    compact: list[str] = field(default_factory=list)

    @property
    def height(self) -> float:
        return max(self.bottom - self.top, 1.0)


_DESCENDS = re.compile(r'[gjpqy,;()\[\]{}|/]')


def page_skew(units: list[Unit]) -> float:
    """The page's skew in radians (positive: text rising to the right in a top-left frame goes
    down), from its line nodes: each line of 2+ words spanning 40 pt or more gives the median
    slope between its words' baselines (words without descenders: their box bottom is the
    baseline); the page's skew is the median of those. 0 below ``MIN_SKEW_DEGREES``, above
    ``MAX_SKEW_DEGREES`` or from fewer than 3 lines."""
    slopes: list[float] = []
    for u in units:
        words = [w for w in u.words if w.bbox]
        if len(words) < 2:
            continue
        plain = [w for w in words if not _DESCENDS.search(w.text)]
        if len(plain) >= 2:
            words = plain
        pairs = []
        for a in range(len(words)):
            ax = (words[a].bbox[0] + words[a].bbox[2]) / 2
            for b in range(a + 1, min(len(words), a + 8)):
                bx = (words[b].bbox[0] + words[b].bbox[2]) / 2
                if abs(bx - ax) >= 20:
                    pairs.append((words[b].bbox[3] - words[a].bbox[3]) / (bx - ax))
        span = max(w.bbox[2] for w in words) - min(w.bbox[0] for w in words)
        if pairs and span >= 40:
            slopes.append(_median(pairs))
        if len(slopes) >= 400:
            break
    if len(slopes) < 3:
        return 0.0
    angle = math.atan(_median(slopes))
    if not math.radians(MIN_SKEW_DEGREES) <= abs(angle) <= math.radians(MAX_SKEW_DEGREES):
        return 0.0
    return angle


def _median(values: list[float]) -> float:
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def _deskewed(words: list[Word], angle: float, centre: tuple[float, float]) -> list[_Cell]:
    if not angle:
        return [_Cell(w, *w.bbox) for w in words]
    cos, sin = math.cos(angle), math.sin(angle)
    cx, cy = centre
    out = []
    for w in words:
        x0, y0, x1, y1 = w.bbox
        mx, my = (x0 + x1) / 2 - cx, (y0 + y1) / 2 - cy
        rx = cx + mx * cos + my * sin
        ry = cy - mx * sin + my * cos
        width = x1 - x0
        height = max((y1 - y0) - width * abs(sin), 0.5 * (y1 - y0))   # the box of a tilted word is taller
        out.append(_Cell(w, rx - width / 2, ry - height / 2, rx + width / 2, ry + height / 2))
    return out


def _pages(doc: Document) -> dict[int | None, tuple[list[Word], list[Unit]]]:
    by_page: dict[int | None, tuple[list[Word], list[Unit]]] = {}
    for u in doc.units:
        for w in u.words:
            if w.bbox:
                entry = by_page.setdefault(w.page if w.page is not None else u.page, ([], []))
                entry[0].append(w)
        if u.words:
            by_page.setdefault(u.page, ([], []))[1].append(u)
    return by_page


def _rows_of(doc: Document) -> tuple[list[_Row], dict[int | None, float]]:
    """Every page's visual rows (deskewed, top to bottom) and each page's height."""
    rows: list[_Row] = []
    heights: dict[int | None, float] = {}
    for page, (words, units) in sorted(_pages(doc).items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        if not words:
            continue
        size = doc.page_size(page)
        if size and size[0] and size[1]:
            centre = (size[0] / 2, size[1] / 2)
            heights[page] = size[1]
        else:
            centre = ((min(w.bbox[0] for w in words) + max(w.bbox[2] for w in words)) / 2,
                      (min(w.bbox[1] for w in words) + max(w.bbox[3] for w in words)) / 2)
        cells = _deskewed(words, page_skew(units), centre)
        cells.sort(key=lambda c: ((c.y0 + c.y1) / 2, c.x0))
        band: tuple[float, float] | None = None
        current: list[_Cell] = []
        for c in cells:
            mid = (c.y0 + c.y1) / 2
            if band is not None and not band[0] - 0.5 <= mid <= band[1] + 0.5:
                rows.append(_row(current, page))
                current, band = [], None
            if band is None:
                band = (c.y0, c.y1)
            current.append(c)
        if current:
            rows.append(_row(current, page))
    return rows, heights


def _row(cells: list[_Cell], page: int | None) -> _Row:
    cells.sort(key=lambda c: c.x0)
    return _Row(page=page, cells=cells, top=min(c.y0 for c in cells), bottom=max(c.y1 for c in cells),
                text=' '.join(c.word.text for c in cells))


def visual_rows(doc: Document) -> list[Unit]:
    """The pages' words regrouped into visual rows (by deskewed vertical position, left to
    right): a reader (OCR above all) may give a table's columns as separate line nodes; a table
    row is the words that sit at the same height once the page's skew is taken out."""
    out = []
    for n, row in enumerate(_rows_of(doc)[0]):
        words, at = [], 0
        for c in row.cells:
            w = c.word
            words.append(Word(w.id, w.text, w.page, w.bbox, w.confidence, at, at + len(w.text)))
            at += len(w.text) + 1
        box = (min(c.word.bbox[0] for c in row.cells), min(c.word.bbox[1] for c in row.cells),
               max(c.word.bbox[2] for c in row.cells), max(c.word.bbox[3] for c in row.cells))
        out.append(Unit(id=f'row{n}', node_type='line', text=row.text, page=row.page, bbox=box, start=0, words=words))
    return out


# ----------------------------------------------------------------------------- laid out: furniture

_PAGE_NUMBER = re.compile(
    r'(^\W*(page|seite|pagina|página|pág\.?|p\.|blatt|feuille|sida|strona)?\s*\d{1,4}\s*'
    r'(of|von|de|sur|di|/|van|av|z|из)\s*\d{1,4}\W*$)'
    r'|(\b(page|seite|pagina|página|feuille|blatt)\s+\d{1,4}\s+(of|von|de|sur|di|/|van)\s+\d{1,4}\b)'
    r'|(^\W*(page|seite|pagina|página|feuille|blatt)\s*\d{1,4}\W*$)', re.IGNORECASE)
_BARE_NUMBER = re.compile(r'^\W*\d{1,4}\W*$')
_CONTINUED = re.compile(
    r'(^\W*(continued|cont\'d|contd|fortsetzung|continuación|continua|segue|vervolg|übertrag)\W*$)'
    r'|([-–—(,:]\s*(continued|cont\'d|fortsetzung|fortgesetzt|continuación)\W*$)'
    r'|(\((suite|continua|segue|vervolg)\)\W*$)'
    r'|(\b(continued|continues) (on|from|overleaf)\b)|(\bsee next page\b)|(\bfortsetzung (auf|von|siehe)\b)'
    r'|(\b(übertrag|uebertrag)\b)|(\bsuite (au verso|page suivante|à la page|de la page)\b)'
    r'|(\bcontin[úu]a (en|de) la p[áa]gina\b)|(\bcontinua (nella|alla|dalla) pagina\b)', re.IGNORECASE)
_MARGIN = 0.2     # running headers and footers sit in the top or bottom fifth of the page


def _furniture(rows: list[_Row], heights: dict[int | None, float]) -> set[int]:
    """Indexes of the rows that are page furniture: page numbers, "continued" lines, and text
    repeated at about the same place on two pages or more in the top or bottom fifth."""
    out: set[int] = set()
    seen: dict[str, list[tuple[int, int | None, float]]] = {}
    for k, row in enumerate(rows):
        text = row.text.strip()
        height = heights.get(row.page)
        in_margin = height is None or row.top < _MARGIN * height or row.bottom > (1 - _MARGIN) * height
        if _PAGE_NUMBER.search(text) or _CONTINUED.search(text) or (in_margin and height and _BARE_NUMBER.match(text)):
            out.add(k)
            continue
        if in_margin:
            seen.setdefault(_norm(text), []).append((k, row.page, row.top))
    for places in seen.values():
        if len({p for _, p, _ in places}) < 2:
            continue
        for k, page, top in places:
            if any(p != page and abs(t - top) <= max(3 * rows[k].height, 12.0) for _, p, t in places):
                out.add(k)
    return out


# ----------------------------------------------------------------------------- laid out: the table

def _one_edit(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by at most one substituted, inserted or deleted character."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(1 for x, y in zip(a, b, strict=True) if x != y) <= 1
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:k] + long_[k + 1:] == short for k in range(len(long_)))


def _match(row: _Row, texts: list[str], used: set[int]) -> tuple[int, int] | None:
    """Where one of ``texts`` stands in the row as consecutive words: (first, end) cells. OCR
    words (they carry a confidence) may differ from a text of 3 characters or more by one
    character (``até`` for ``Qté``), tried after every exact reading."""
    gap_limit = 2 * row.height
    if not row.compact:
        row.compact = [_compact(c.word.text) for c in row.cells]
    ocr = any(c.word.confidence is not None for c in row.cells)
    for fuzzy in (False, True) if ocr else (False,):
        for text in texts:
            want = _compact(text)
            if not want or (fuzzy and len(want) < 3):
                continue
            for i in range(len(row.cells)):
                if i in used or not row.compact[i]:
                    continue
                acc = ''
                for j in range(i, len(row.cells)):
                    if j in used or (j > i and row.cells[j].x0 - row.cells[j - 1].x1 > gap_limit):
                        break
                    acc += row.compact[j]
                    if acc == want:
                        return i, j + 1
                    if fuzzy and all(c.word.confidence is not None for c in row.cells[i:j + 1]) \
                            and _one_edit(acc, want):
                        return i, j + 1
                    if len(acc) > len(want) + 1 or (not fuzzy and not want.startswith(acc)):
                        break
    return None


def _header(row: _Row, columns: dict[str, list[str]], need: set[str]) -> dict[str, tuple[float, float]] | None:
    """The columns' x-ranges if ``row`` is a header holding what it must, else None."""
    used: set[int] = set()
    ranges: dict[str, tuple[float, float]] = {}
    for name, texts in columns.items():
        span = _match(row, texts, used)
        if span is None:
            continue
        cells = row.cells[span[0]:span[1]]
        used.update(range(*span))
        ranges[name] = (min(c.x0 for c in cells), max(c.x1 for c in cells))
    if not need <= set(ranges) or len(ranges) < min(2, len(columns)):
        return None
    other: list[_Cell] = []     # header words of columns the definition does not read ("Pos.")
    for k, c in enumerate(row.cells):
        if k in used or _ruling(c):   # a ruling OCR read as `|` is no column (its range would cut the one beside)
            continue
        if other and c.x0 - other[-1].x1 <= row.height:
            other.append(c)
            continue
        if other:
            ranges[f'{_OTHER}{len(ranges)}'] = (other[0].x0, other[-1].x1)
        other = [c]
    if other:
        ranges[f'{_OTHER}{len(ranges)}'] = (other[0].x0, other[-1].x1)
    return ranges


_RULING = frozenset('|¦[]{}_')


def _ruling(cell: _Cell) -> bool:
    """An OCR word that is only a table's ruling read as text (``|``, ``[``, ``_``): no value's word. A
    text PDF's ``|`` is the document's own character and stays."""
    return cell.word.confidence is not None and all(ch in _RULING for ch in cell.word.text)


def _value_text(cells: list[_Cell]) -> str:
    """A cell's text; from OCR without a ruling stuck to its edge (``[Auditoría``, ``total|``):
    a ``[`` or ``]`` the cell holds more of than of its partner, a ``|`` or ``¦`` at either end."""
    text = ' '.join(c.word.text for c in cells)
    if not cells or cells[0].word.confidence is None:
        return text
    while text and (text[0] in '|¦' or (text[0] == '[' and text.count('[') > text.count(']'))):
        text = text[1:].lstrip()
    while text and (text[-1] in '|¦' or (text[-1] == ']' and text.count(']') > text.count('['))):
        text = text[:-1].rstrip()
    return text


_OTHER = '\x00other'   # the name of a header column no child reads: its words belong to no value


def _laid_out(doc: Document, columns: dict[str, list[str]], need: set[str], stop,
              where: str) -> list[dict[str, Found]] | None:
    rows, heights = _rows_of(doc)
    units_of = {w.id: u for u in doc.units for w in u.words}
    for i, row in enumerate(rows):
        budget.check(f'looking for the table of {where}') if i % 512 == 0 else None
        ranges = _header(row, columns, need)
        if ranges is not None:
            furniture = _furniture(rows, heights)
            found = _Body(rows, furniture, columns, need, stop, where).read(i, ranges)
            return [{name: Found(text=_value_text(cells), words=[c.word for c in cells],
                                 units=list({units_of[c.word.id].id: units_of[c.word.id] for c in cells}.values()))
                     for name, cells in r.items() if not name.startswith(_OTHER)} for r in found]
    return None


class _Body:
    """The rows under a header, over the pages: furniture skipped, section headings skipped,
    wrapped cells joined to their row, resumed on the next page (docs/api/extraction.md "Tables")."""

    def __init__(self, rows: list[_Row], furniture: set[int], columns: dict[str, list[str]], need: set[str],
                 stop, where: str) -> None:
        self.rows, self.furniture, self.columns, self.need_cols = rows, furniture, columns, need
        self.stop, self.where = stop, where

    def _columns_at(self, ranges: dict[str, tuple[float, float]]) -> None:
        self.order = sorted(ranges, key=lambda n: ranges[n][0])
        self.cuts = [(ranges[a][1] + ranges[b][0]) / 2 for a, b in zip(self.order, self.order[1:], strict=False)]
        self.need = min(2, sum(1 for name in self.order if not name.startswith(_OTHER)))
        self.first = next(name for name in self.order if not name.startswith(_OTHER))
        self.extent = {name: list(r) for name, r in ranges.items()}

    def split(self, row: _Row) -> dict[str, list[_Cell]]:
        """The row's words by column: the columns no child reads are left out."""
        cells: dict[str, list[_Cell]] = {}
        for c in row.cells:
            if _ruling(c):
                continue
            k = bisect_left(self.cuts, c.centre)   # the cuts passed: the column's index
            if not self.order[k].startswith(_OTHER):
                cells.setdefault(self.order[k], []).append(c)
        return cells

    def lines_up(self, row: _Row, cells: dict[str, list[_Cell]]) -> bool:
        """Every word of the row within a column's range (the header's and the values' read so far)."""
        if len(cells) < self.need:
            return False
        slack = row.height
        return all(self.extent[name][0] - slack <= c.centre <= self.extent[name][1] + slack
                   for name, cs in cells.items() for c in cs)

    def _proper(self, k: int, page: int | None) -> dict[str, list[_Cell]] | None:
        """The next non-furniture row after ``k`` on ``page`` as cells, if it is a full row."""
        for j in range(k + 1, min(len(self.rows), k + 20)):
            if j in self.furniture:
                continue
            row = self.rows[j]
            if row.page != page or self.stop.search(row.text):
                return None
            cells = self.split(row)
            return cells if len(cells) >= self.need else None
        return None

    def _header_ahead(self, k: int) -> int | None:
        """The repeated header on row ``k``'s page at or after ``k``."""
        page = self.rows[k].page
        for j in range(k, len(self.rows)):
            if self.rows[j].page != page:
                return None
            if _header(self.rows[j], self.columns, self.need_cols) is not None:   # furniture too: it repeats
                return j
        return None

    def read(self, at: int, ranges: dict[str, tuple[float, float]]) -> list[dict[str, list[_Cell]]]:
        rows = self.rows
        self._columns_at(ranges)
        out: list[dict[str, list[_Cell]]] = []
        last = rows[at]
        height = last.height
        fresh = True          # no row read yet under this header (a section heading may come first)
        pending: dict[str, list[_Cell]] = {}
        looked: set[int | None] = {last.page}   # pages searched for the header repeated
        pitches: list[float] = []   # top to top between consecutive rows read on one page
        previous = last       # the row above the next one read: the header, a heading or a row
        k = at + 1
        while k < len(rows):
            if k % 256 == 0:
                budget.check(f'reading the table of {self.where}')
            row = rows[k]
            if row.page != last.page and row.page not in looked:
                looked.add(row.page)
                again = self._header_ahead(k)
                if again is not None:      # the header repeated on the next page: go on under it
                    taught = self.extent
                    self._columns_at(_header(rows[again], self.columns, self.need_cols))
                    for name, r in taught.items():   # keep what the values taught about the columns
                        if name in self.extent:
                            self.extent[name] = [min(self.extent[name][0], r[0]), max(self.extent[name][1], r[1])]
                    last, height, fresh, k = rows[again], rows[again].height, True, again + 1
                    previous = last
                    continue
            if k in self.furniture or _noise(row, height):
                k += 1
                continue
            if row.page != last.page:
                if not self.lines_up(row, self.split(row)) or self.stop.search(row.text):
                    break
            elif row.top - last.bottom > 2.5 * height:
                break
            if self.stop.search(row.text):
                break
            cells = self.split(row)
            if len(cells) < self.need:
                nxt = self._proper(k, row.page)
                if nxt is not None and not (set(nxt) & set(cells)) and nxt_close(rows, k, self.furniture, row):
                    for name, cs in cells.items():   # a cell centred against a taller row: joins it
                        pending.setdefault(name, []).extend(cs)
                    last, k = row, k + 1
                    continue
                first_only = set(cells) == {self.first}
                if first_only and nxt is not None and (fresh or self._heading(k, row, last, pitches)):
                    previous = last = row     # a section heading: skipped
                    k += 1
                    continue
                if out and not fresh:
                    for name, cs in cells.items():   # a wrapped cell: joins the row above
                        out[-1].setdefault(name, []).extend(cs)
                    last, k = row, k + 1
                    continue
                break
            if len(out) >= MAX_TABLE_ROWS:
                raise too_many(self.where)
            if pending:
                for name, cs in pending.items():
                    cells[name] = cs + cells.get(name, [])
                pending = {}
            for name, cs in cells.items():
                ext = self.extent.setdefault(name, [cs[0].x0, cs[0].x1])
                ext[0], ext[1] = min(ext[0], min(c.x0 for c in cs)), max(ext[1], max(c.x1 for c in cs))
            out.append(cells)
            if previous.page == row.page and len(pitches) < 64:
                pitches.append(row.top - previous.top)
            previous = last = row
            fresh, k = False, k + 1
        return out

    def _heading(self, k: int, row: _Row, last: _Row, pitches: list[float]) -> bool:
        """A first-column-only row with a proper row below is a section heading when it stands a
        row's pitch or more below the row above (a wrapped cell's lines are tighter than the
        table's rows: the pitch is the lower quartile of those read, the first from the header or
        heading above the first row), or, with no pitch yet, when it is nearer the row below."""
        if last.page == row.page and pitches:   # the lower quartile: rows with wrapped cells are taller
            return row.top - last.top >= 0.85 * sorted(pitches)[len(pitches) // 4]
        below = next((self.rows[j] for j in range(k + 1, len(self.rows)) if j not in self.furniture), None)
        if below is None or below.page != row.page or last.page != row.page:
            return False
        return (row.top - last.bottom) > (below.top - row.bottom) + 0.25 * row.height


def _noise(row: _Row, height: float) -> bool:
    """A row of specks, rules or underlines as OCR reads them: no letter or digit, or under a
    third of the header's height."""
    return row.height < height / 3 or not any(ch.isalnum() for ch in row.text)


def nxt_close(rows: list[_Row], k: int, furniture: set[int], row: _Row) -> bool:
    """The next non-furniture row overlaps or nearly touches ``row`` (a vertically centred row)."""
    below = next((rows[j] for j in range(k + 1, len(rows)) if j not in furniture), None)
    return below is not None and below.page == row.page and below.top - row.bottom < 0.3 * row.height
