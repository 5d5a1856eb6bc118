"""The label rule and the "label: value" fallback (docs/api/extraction.md "Rules" and "Labels"):
where a value stands beside or under its label, on the label's own line, cell or box.

Moved out of rules.py (which keeps the regex, table and JSONata rules) so that the geometry of
one label lives in one place. Written here rather than taken from a library: the open-source
key-value tools either fetch a model at run time or need one template per issuer; this reads
the words' boxes the readers give, offline and deterministically.

  label    ``label``: one text or a list of up to 20 (synonyms, languages). The texts are tried
           in the list's order (put the specific ones first: ``Invoice Date`` before ``Date``);
           each text's occurrences in reading order (the units' order); the first occurrence
           whose value the taxon's type reads wins, else the first value found (so it is an
           exception, not skipped). An occurrence inside a longer label of any taxon (``Date``
           inside ``Due Date``) is not that label.
           right: the words to the right on the same visual line (not those of another line
           node whose middle is off the label's line: a skewed scan's next line), after leaders (``....``,
           ``:``), up to the next label-like text (a word ending with ``:`` or a label of any
           taxon of the definition) or a gap wider than 2 label line heights. A first word
           farther than that is taken only when nothing follows it on the line (an amount
           right-aligned after a wide gap); a next box's label is never a value.
           When right finds nothing: below.
           below: the first line under the label (the words under its x-range, and those that
           run on from them), if it starts within 2.5 line heights and is not a label itself.
           Without boxes (DOCX, HTML, sheets): the rest of the paragraph after the label (cut at
           the next label-like text) or the next cell of the row; below: the next paragraph
           or the cell below.
  pairs    the fallback when a value taxon's rules find nothing (whole-document taxons only):
           ``<label>: <value>`` anywhere in the document's text, for the taxon's label texts
           and its own ``label``; confidence 0.7 (rule ``labelPair``).
"""
from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from chalicelib.core import budget
from chalicelib.features.extraction.document import Found, Unit, Word, span_words
from chalicelib.features.extraction.rules import DEFAULT_CONFIDENCE, Scope

MAX_LABELS = 20               # texts in one label rule's list (taxons.py checks it)
MAX_LABEL_TEXT = 100          # characters of one text of a list
MAX_OCCURRENCES = 100         # occurrences of one label text a rule tries (the rest are not read)
PAIR_CONFIDENCE = DEFAULT_CONFIDENCE['labelPair']   # 0.7: under a usual threshold of 0.8, a warning
RIGHT_GAP = 3.0               # label line heights: a gap wider than this ends a value; a first word farther is "far"
BELOW_GAP = 2.5               # label line heights: the line below starts within this
UNDER_GAP = 1.2               # label line heights: a line this close under the label is its box's (before a far word)
_LEADERS = '.:#-–—_…·|'   # `|`: a ruling between a label and its value, as OCR reads it

Accept = Callable[[str], bool]


def texts(value: Any) -> list[str]:
    """A rule's ``label`` (or a column's ``header``): one text or a list, spaces made one."""
    items = value if isinstance(value, list) else [value]
    return [' '.join(t.split()) for t in items if isinstance(t, str) and t.strip()]


def _base(ch: str) -> str:
    """A letter without its accent (``é`` -> ``e``): OCR and typists drop accents."""
    base = unicodedata.normalize('NFKD', ch)[0]
    return base if base.isascii() and base.isalpha() else ch


_ACCENTLESS = {cp: _base(chr(cp)) for cp in range(0xC0, 0x250) if _base(chr(cp)) != chr(cp)}


def _is_sign(ch: str) -> bool:
    """A sign that stands for a word in a label (``Nº``, ``N°``, ``№``, ``#``, ``€``): a symbol,
    or the ordinal indicators (letters to Unicode, signs to a reader); not a ruling (``|``)."""
    if ch in '|¦+<=>^`~':   # rulings and arithmetic as OCR reads them, not a word's sign
        return False
    return ch in 'ºª#*' or unicodedata.category(ch).startswith('S')


# Latin-1, Latin Extended, the currency and letterlike blocks (``№``) and a few arrows/maths: the
# signs a label or OCR writes. One character for one, so offsets stay.
_SIGNS = ''.join(chr(cp) for block in ((0x21, 0x250), (0x2000, 0x2200)) for cp in range(*block) if _is_sign(chr(cp)))
_SIGN_MARK = '\x1a'   # every sign folds to this one character (``fold``)
_SIGN_CLASS = '[' + re.escape(_SIGNS) + ']'


def fold(text: str) -> str:
    """``text`` in lower case without accents, every sign one mark (``_is_sign``), one
    character for one (offsets stay)."""
    out = text.lower()
    if len(out) != len(text):   # a letter whose lower case is two ('İ'): keep it as it is
        out = ''.join(c.lower() if len(c.lower()) == 1 else c for c in text)
    return out.translate(_FOLD)


_FOLD = {**_ACCENTLESS, **{ord(c): _SIGN_MARK for c in _SIGNS}}
_VARIANTS: dict[str, str] = {}   # a base letter -> every accented letter of it (OCR reads `emisión` as `emisiön`)
for _cp, _b in _ACCENTLESS.items():
    _VARIANTS[_b] = _VARIANTS.get(_b, '') + chr(_cp)


def _word(word: str) -> str:
    """An accented letter of a label matches the letter without an accent or with any other
    accent (a typist drops it, OCR misreads it); an unaccented one only itself. A sign
    (``_is_sign``: the ``º`` of ``Nº``, ``°``, ``#``) matches any one sign: OCR reads ``Nº`` as
    ``N£`` or ``N°``, and the rest of the label still has to match."""
    return ''.join(_SIGN_CLASS if c in _SIGNS
                   else f'[{re.escape(c)}{re.escape(_base(c))}{re.escape(_VARIANTS.get(_base(c), ""))}]'
                   if _base(c) != c else re.escape(c) for c in word)


@lru_cache(maxsize=512)
def pattern(label: str) -> re.Pattern[str] | None:
    """``label`` as whole words, ignoring case, accents the document drops or OCR misreads
    (``Fecha de emision``, ``Fecha de emisiön`` for ``Fecha de emisión``), a sign OCR misreads
    (``N£ de factura`` for ``Nº de factura``) and runs of spaces ('Total' is not in 'Subtotal')."""
    words = label.split()
    if not words:
        return None
    return re.compile(r'(?<!\w)' + r'\s+'.join(_word(w) for w in words) + r'(?!\w)', re.IGNORECASE)


class Known:
    """Every label and column header of a definition: a value stops at one (docs "Labels")."""

    def __init__(self, labels: Iterable[str], headers: Iterable[str] = ()) -> None:
        self.pattern = _alternation(labels)
        self.headers = _alternation(headers)   # the column headers: a line holding 3 is a table's header

    @classmethod
    def of(cls, taxons: list[dict[str, Any]]) -> Known:
        found: list[str] = []
        headers: list[str] = []

        def walk(items: list[dict[str, Any]]) -> None:
            for t in items or []:
                for rule in t.get('rules') or []:
                    if rule.get('type') == 'label':
                        found.extend(texts(rule.get('label')))
                    elif rule.get('type') == 'column':
                        headers.extend(texts(rule.get('header')))
                walk(t.get('children') or [])
        walk(taxons)
        return cls(found + headers, headers)

    def table_header(self, text: str) -> bool:
        """``text`` (a visual line) is a table's header row: it holds 3 column headers."""
        return bool(self.headers) and sum(1 for _ in zip(range(3), self.headers.finditer(text), strict=False)) >= 3

    def starts(self, text: str) -> bool:
        return bool(self.pattern and self.pattern.match(text))

    def covers(self, text: str, span: tuple[int, int]) -> bool:
        """A longer known label holds ``span`` of ``text``."""
        if self.pattern is None:
            return False
        for m in self.pattern.finditer(text, max(0, span[0] - 60), min(len(text), span[1] + 60)):
            if m.start() <= span[0] and m.end() >= span[1] and m.end() - m.start() > span[1] - span[0]:
                return True
        return False

    def cut(self, text: str) -> int:
        """Where a value running along ``text`` stops: the next label-like text (a known label, a
        word ending with ':'), else its end."""
        ends = [len(text)]
        if self.pattern is not None:
            m = next((m for m in self.pattern.finditer(text) if m.start() > 0), None)
            if m is not None:
                ends.append(m.start())
        colon = re.search(r'(?<=\s)[^\s:]+:(?=\s|$)', text)
        if colon is not None:
            ends.append(colon.start())
        return min(ends)


def _alternation(labels: Iterable[str]) -> re.Pattern[str] | None:
    words = sorted({' '.join(t.split()) for t in labels if t and t.strip()}, key=len, reverse=True)
    if not words:
        return None
    return re.compile(r'(?<!\w)(?:' + '|'.join(r'\s+'.join(re.escape(w) for w in t.split()) for t in words)
                      + r')(?!\w)', re.IGNORECASE)


def _label_like(words: list[Word], k: int, known: Known) -> bool:
    text = words[k].text
    if len(text) > 1 and text.endswith(':') and not text[:-1].replace('.', '').replace(',', '').isdigit():
        return True
    return known.starts(' '.join(w.text for w in words[k:k + 8]))


def _confidence(rule: dict[str, Any], found: Found, base: float | None = None) -> Found:
    if base is None:
        base = rule.get('confidence', DEFAULT_CONFIDENCE['label'])
    ocr = found.ocr_confidence()
    found.confidence = round(float(base) * (ocr if ocr is not None else 1.0), 4)
    found.rule = 'label'
    return found


def _candidates(scope: Scope, text: str) -> list[int]:
    """Indexes of the units whose text holds ``text`` ignoring case, accents and which sign, in order."""
    folded = getattr(scope, '_accentless', None)
    if folded is None:
        folded = fold(scope.text)
        scope._accentless = folded   # once per scope: every label rule searches it
    needle = fold(text)
    out: list[int] = []
    at = folded.find(needle)
    while at >= 0 and len(out) < MAX_OCCURRENCES:
        k = bisect_right(scope.starts, at) - 1
        if k >= 0 and (not out or out[-1] != k):
            out.append(k)
        at = folded.find(needle, at + 1)
    return out


def label(scope: Scope, rule: dict[str, Any], known: Known, accept: Accept | None = None) -> Found | None:
    """The value of a label rule (module docstring): the first that ``accept`` takes, else the
    first found."""
    direction = rule.get('direction', 'right')
    first: Found | None = None
    for text in texts(rule.get('label')):
        pat = pattern(text)
        for i in _candidates(scope, text):
            budget.check('running a label rule')
            unit = scope.units[i]
            for m in pat.finditer(unit.text):
                span = m.span()
                if known.covers(unit.text, span):
                    continue
                boxed = bool(unit.words and unit.words[0].bbox)
                options = _boxed(scope, unit, span, direction, known) if boxed else \
                    _flowed(scope, i, unit, span, direction, known)
                for found in options:
                    if found is None or not found.text.strip():
                        continue
                    found = _confidence(rule, found)
                    if accept is None or accept(found.text):
                        return found
                    first = first or found
    return first


def pairs(scope: Scope, labels: list[str], known: Known, accept: Accept | None = None) -> Found | None:
    """``<label>: <value>`` anywhere in the text, for the fallback (module docstring)."""
    first: Found | None = None
    for text in labels:
        pat = pattern(text)
        if pat is None:
            continue
        pair = re.compile(pat.pattern + r'[ \t]*[:：][ \t]*', re.IGNORECASE)
        for i in _candidates(scope, text):
            budget.check('looking for label: value pairs')
            unit = scope.units[i]
            for m in pair.finditer(unit.text):
                rest = unit.text[m.end():]
                value = rest[:known.cut(rest)].strip()
                if not value or known.starts(rest) or re.match(r'[^\s:]+:(\s|$)', rest):
                    continue   # the next label, not a value
                start = m.end() + rest.index(value)
                words = span_words(unit, start, start + len(value))
                before = span_words(unit, m.start(), m.end())
                if words and before and all(w.bbox for w in words + before):   # on a page: no wide gap
                    height = max(max(w.bbox[3] - w.bbox[1] for w in before), 1.0)
                    gap = max(RIGHT_GAP * height, 6.0)
                    if words[0].bbox[0] - before[-1].bbox[2] > gap:
                        continue
                    words = _run(words, gap, known)
                    value = unit.text[start:words[-1].end].strip()
                found = Found(text=value, words=words, units=[unit])
                found = _confidence({}, found, PAIR_CONFIDENCE)
                found.rule = 'labelPair'
                if accept is None or accept(found.text):
                    return found
                first = first or found
    return first


# ----------------------------------------------------------------------------- with boxes

def _line_words(scope: Scope, page: int | None, top: float, bottom: float, skip: list[Word],
                own: Unit | None = None) -> list[Word]:
    """The page's words whose vertical middle lies in [top, bottom], left to right. With ``own``
    (the label's unit): not the words of another line node whose own middle lies outside [top,
    bottom] - on a skewed scan the next line's last word rises into the label's band, and the
    reader's line (Tesseract follows the skew) says it is not on the label's line."""
    def elsewhere(u: Unit) -> bool:
        return own is not None and u is not own and u.node_type == 'line' and bool(u.bbox) and \
            not top <= (u.bbox[1] + u.bbox[3]) / 2 <= bottom
    out = [w for u in scope.on_page(page) if not elsewhere(u) for w in u.words
           if w.bbox and top <= (w.bbox[1] + w.bbox[3]) / 2 <= bottom and not any(w is s for s in skip)]
    out.sort(key=lambda w: w.bbox[0])
    return out


# between a label and its value: a rate (``VAT (20%)``, ``MwSt. 19%:``, ``TVA 20 % :``) or a short
# qualifier in brackets with a letter (``Amount Due (USD):``; ``(100.00)`` is a negative value) is not the value
_QUALIFIER = re.compile(r'\(?[-+]?\d{1,2}(?:[.,]\d{1,3})?\s*%\)?:?|\((?=[^()]*[^\W\d_])[^()]{1,24}\):?|%:?')


def _leaders(words: list[Word]) -> tuple[list[Word], bool]:
    k = 0
    while k < len(words):
        if words[k].text.strip(_LEADERS) == '':
            k += 1
            continue
        n = next((n for n in (1, 2, 3) if k + n <= len(words)
                  and _QUALIFIER.fullmatch(' '.join(w.text for w in words[k:k + n]))), None)
        if n is None:
            break
        k += n
    words = words[k:]
    if words and words[0].text[:1] in ':#_|' and words[0].text.lstrip(':#_|').strip():   # ":INV-1", OCR's "_TT/1"
        w = words[0]
        cut = len(w.text) - len(w.text.lstrip(':#_|'))
        words = [Word(w.id, w.text[cut:], w.page, w.bbox, w.confidence, w.start + cut, w.end), *words[1:]]
    return words, k > 0


def _run(words: list[Word], gap: float, known: Known) -> list[Word]:
    """The leading words closer than ``gap`` to each other, up to a label-like word."""
    out: list[Word] = []
    for k, w in enumerate(words):
        if out and (w.bbox[0] - out[-1].bbox[2] > gap or _label_like(words, k, known)):
            break
        out.append(w)
    return out


def _boxed(scope: Scope, unit: Unit, span: tuple[int, int], direction: str, known: Known) -> list[Found]:
    """The values this occurrence may have, in the order they are tried: the words right of it
    (near: within 3 line heights or after leaders); else the line under it. Between a far word
    right of it and a line under it, the one that holds a figure comes first (``Invoice No. ...
    TT/26-27/1`` over ``Dated``: the number; ``INVOICE NO ... INVOICE DATE`` over ``INV-1``: the
    line under); else the line directly under it (its own box), else the far word."""
    label_words = span_words(unit, *span)
    if not label_words or not all(w.bbox for w in label_words):
        return []
    x0 = min(w.bbox[0] for w in label_words)
    x1 = max(w.bbox[2] for w in label_words)
    y0 = min(w.bbox[1] for w in label_words)
    y1 = max(w.bbox[3] for w in label_words)
    height = max(y1 - y0, 1.0)
    gap = max(RIGHT_GAP * height, 6.0)
    if known.headers is not None:
        row = _line_words(scope, unit.page, y0 - 0.3 * height, y1 + 0.3 * height, [])
        if known.table_header(' '.join(w.text for w in row)):
            return []   # a column's header ("Total" over the amounts), not a label of a value
    right: list[Word] = []
    far = False
    if direction == 'right':
        line = [w for w in _line_words(scope, unit.page, y0 - 0.3 * height, y1 + 0.3 * height, label_words, unit)
                if w.bbox[0] >= x1 - 0.5]
        line, led = _leaders(line)
        if line and not _label_like(line, 0, known):
            right = _run(line, gap, known)
            far = not led and line[0].bbox[0] - x1 > gap
    below = [] if right and not far else _below(scope, unit, label_words, (x0, y0, x1, y1), height, gap, known)
    if not far:
        order = [right, below]
    elif _digits(right) != _digits(below):   # a far word and a line under: the one that holds a figure first
        order = [right, below] if _digits(right) else [below, right]
    elif below and below[0].bbox[1] - y1 > UNDER_GAP * height:
        order = [right, below]   # nothing directly under the label: the far word is its value first
    else:
        order = [below, right]
    return [Found(text=' '.join(w.text for w in words), words=words, units=scope.units_of_words(words))
            for words in order if words]


def _digits(words: list[Word]) -> bool:
    return any(ch.isdigit() for w in words for ch in w.text)


def _below(scope: Scope, unit: Unit, label_words: list[Word], box: tuple[float, float, float, float],
           height: float, gap: float, known: Known) -> list[Word]:
    x0, _, x1, y1 = box
    under = [w for u in scope.on_page(unit.page) for w in u.words
             if w.bbox and w.bbox[1] >= y1 - 0.3 * height and w.bbox[2] >= x0 - 2 and w.bbox[0] <= x1 + 2
             and not any(w is s for s in label_words)]
    if not under:
        return []
    nearest = min(under, key=lambda w: w.bbox[1])
    if nearest.bbox[1] - y1 > BELOW_GAP * height:
        return []
    line = _line_words(scope, unit.page, nearest.bbox[1], nearest.bbox[3], label_words)
    start = next((k for k, w in enumerate(line) if w.bbox[2] >= x0 - 2), None)
    if start is None:
        return []
    while start > 0 and line[start].bbox[0] - line[start - 1].bbox[2] <= 0.6 * height:
        start -= 1   # a value centred under its label starts a little left of it
    line, _ = _leaders(line[start:])
    if not line or _label_like(line, 0, known):
        return []
    return _run(line, gap, known)


# ----------------------------------------------------------------------------- without boxes

_LEAD = re.compile(r'(?:[\s' + re.escape(_LEADERS) + r']+|(?:' + _QUALIFIER.pattern + r')(?=\s|$))+')


def _lead(text: str) -> int:
    """How many characters of ``text`` are leaders and qualifiers before a value."""
    m = _LEAD.match(text)
    return m.end() if m else 0


def _flowed(scope: Scope, i: int, unit: Unit, span: tuple[int, int], direction: str, known: Known) -> list[Found]:
    """The values this occurrence may have, in the order they are tried: right, the rest of its
    unit (cut at the next label-like text), then the next cell of the row; then below (the
    cell under it, or the next paragraph)."""
    out: list[Found] = []
    if direction == 'right':
        rest = unit.text[span[1]:]
        lead = _lead(rest)
        value = rest[lead:][:known.cut(rest[lead:])].strip()
        if value:
            start = span[1] + lead
            out.append(Found(text=value, words=span_words(unit, start, start + len(value)), units=[unit]))
        if unit.node_type == 'cell':
            nxt = next((u for u in scope.units if u.row_id == unit.row_id and u.column is not None
                        and unit.column is not None and u.column > unit.column and u.text.strip()), None)
            if nxt is not None and not known.starts(nxt.text.strip()) and not nxt.text.strip().endswith(':'):
                out.append(Found(text=nxt.text.strip(), units=[nxt]))
    if unit.node_type == 'cell':
        nxt = next((u for u in scope.units if u.table == unit.table and u.column == unit.column
                    and u.row is not None and unit.row is not None and u.row > unit.row and u.text.strip()), None)
    else:
        nxt = next((u for u in scope.units[i + 1:] if u.text.strip()), None)
    if nxt is not None and not known.starts(nxt.text.strip()) and (direction == 'below' or not out):
        out.append(Found(text=nxt.text.strip(), units=[nxt]))
    return out
