"""The layout memory, pure part (docs/api/extraction.md "Layout memory"): what a reviewer taught
by pointing at words (features/extraction/pointing.py), kept per kind of document and read back
from the next document of that kind. No I/O: features/extraction/memories.py stores and reads
the records; the extraction engine (engine.py) reads a recalled place before a taxon's rules.

**Fingerprint** (which documents are "the same kind"), two candidates per document, strongest
first; a memory is taught under the first the document has and found under either:

* ``supplier``: the supplier's identity from a token a supplier prints on every invoice and a
  customer does not: the first IBAN anywhere in the document whose ISO 13616 check digits hold
  (the account to be paid is the supplier's; cut at its country's length, so a BIC printed
  after it is not read into it), else the first VAT/tax id next to its label (VAT, USt-IdNr,
  TVA, IVA, BTW, GST, ABN, Tax ID ...) on page 1, never an amount ("VAT 12 345.67"). Exact, and stable across a
  supplier's invoices whatever their values; the memory of one supplier never applies to
  another. Kept as a hash, with a hint showing only the token's last 4 characters.
* ``layout``: when no such token is printed, the layout's own signature: the topmost line of
  page 1 when it holds no digit (most often the issuer's name) and page 1's labels, the text
  before each ``:`` (at most 4 words, letters only), each with the third of the page it
  stands in, in the header (the top 40% of the page, above its first line item: a line with 3
  numbers; totals and footers move with the number of line items), as a sorted set: values
  (numbers, dates, amounts, names after a label) change from one invoice to the next, labels
  and their columns do not. At least 3 labels, else no
  fingerprint (too little to tell layouts apart). A rough grid (thirds across, no vertical
  position) because a longer address or an extra line moves labels down, not across.

**Place** (per taxon path): the page, the value's box relative to the page size, and an
**anchor**: the label words next to the value (the run of words just left of it on its row,
at most a quarter of the page width away, else the nearest row above it) with the value's
offset from them. The anchor is found again by
its text on the next document and the value read at the same offset: an anchor survives a
value whose length changes and a block that moved down (to the next page too: an anchor no
longer on its page is looked for on the others); a place with no anchor is read at its
relative box. A place stops matching when its anchor's text is not on the page any more or no
word stands at the place: the taxon's rules read it then (the engine falls back).

**Reading a place**: the words whose middle is in the predicted box's rows and that overlap it
across (with a tolerance of half a line height), then on each row the words that continue them
(gaps under one line height), in reading order. A longer value (more words, a right-aligned
amount growing left) is read whole; the next column (a wide gap) is not.

Only values of ``one`` groups are learned (a line item's place changes with its row).

**Conventions** (``conventions_taught``): a correction whose typed value the words pointed at
read as under exactly one date order (``08/05/2026`` and 2026-08-05: month first) or one
decimal separator (``1,234`` and 1234: a decimal point), while the run's own conventions (locale
"auto", normalise.detect) leave the words ambiguous, teaches that convention; the memory keeps
at most one date order and one decimal separator. A run with locale "auto" fills what its
document does not settle from the recalled memory's conventions (engine.py, date_order.py "taught"):
the document's own dates and payment terms and an explicit locale still win; the taught order wins
over the issuer's country and the document's language. A correction whose words no convention reads as its
value, or two conventions read alike, teaches none.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from chalicelib.features.extraction.document import Document, Found, Unit, Word
from chalicelib.features.extraction.normalise import Ambiguous, Conventions, Locale, NotNormalised, normalise

VERSION = 'v1'
CONFIDENCE = 0.95          # a recalled value's confidence (times its words' OCR confidence)
MIN_LABELS = 3             # labels a layout fingerprint needs
MAX_ANCHOR_WORDS = 4
MAX_LAYOUT_LABELS = 60     # labels of page 1 a layout fingerprint reads
HEADER_SHARE = 0.4         # the top share of page 1 whose labels make a layout fingerprint
LEFT_REACH = 0.25          # how far left of a value (a share of the page width) its label may stand

_IBAN = re.compile(r'\b([A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30})\b')
_NUMBER = re.compile(r'(?<![\w/.-])\d[\d.,\']*(?![\w/-])')
_MONEY = re.compile(r'[.,]\d{2}\s*$')
# IBAN lengths of the countries whose invoices are common here (ISO 13616 registry); another
# country's IBAN is read as printed, its check digits deciding
IBAN_LENGTHS = {'AT': 20, 'BE': 16, 'CH': 21, 'CZ': 24, 'DE': 22, 'DK': 18, 'ES': 24, 'FI': 18, 'FR': 27, 'GB': 22,
                'IE': 22, 'IT': 27, 'LU': 20, 'NL': 18, 'NO': 15, 'PL': 28, 'PT': 25, 'SE': 24}
_TAX_LABEL = re.compile(r'(?i)\b(?:VAT|USt|UID|MwSt|TVA|IVA|BTW|GSTIN|GST|HST|ABN|NIF|CIF|P\.?\s?IVA|Steuer-?Nr|'
                        r'Tax\s*(?:ID|No|Number|Reg(?:istration)?))\b[^:\d]{0,30}[:#]?\s*'
                        r'([A-Z]{0,3}[ -]?\d[0-9A-Z .-]{5,20}[0-9A-Z])')
_LABEL = re.compile(r"([A-Za-z\u00C0-\u024F][A-Za-z\u00C0-\u024F .'/&()-]{0,40}):")


@dataclass
class Fingerprint:
    kind: str      # supplier | layout
    key: str       # 'supplier:<hash>' | 'layout:<hash>'
    hint: str      # what a person recognises it by ('IBAN ...3000', 'labels: invoice no, ...')


def _hash(text: str) -> str:
    return hashlib.sha256(f'{VERSION}|{text}'.encode()).hexdigest()[:32]


def _iban_ok(iban: str) -> bool:
    if not 15 <= len(iban) <= 34:
        return False
    moved = iban[4:] + iban[:4]
    digits = ''.join(str(int(c, 36)) for c in moved)
    return int(digits) % 97 == 1


def _norm_words(text: str) -> str:
    return ' '.join(re.sub(r"[^\w\s]", ' ', text.casefold()).split())


def _page_units(doc: Document, page: int) -> list[Unit]:
    return [u for u in doc.units if u.page == page or (u.page is None and page == 1)]


def fingerprints(doc: Document) -> list[Fingerprint]:
    """The document's fingerprints, strongest first (module docstring)."""
    out: list[Fingerprint] = []
    token = None
    for u in doc.units:
        for m in _IBAN.finditer(u.text):
            compact = m.group(1).replace(' ', '')
            iban = compact[:IBAN_LENGTHS.get(compact[:2], len(compact))]   # "... 00 BIC X": not the BIC
            if _iban_ok(iban):
                token = ('IBAN', iban)
                break
        if token:
            break
    first = _page_units(doc, 1)
    if token is None:
        for u in first:
            m = _TAX_LABEL.search(u.text)
            if m:
                vat = re.sub(r'[\s.-]', '', m.group(1)).upper()
                if sum(c.isdigit() for c in vat) >= 6 and not _MONEY.search(m.group(1)):   # not "VAT 12 345.67"
                    token = ('VAT', vat)
                    break
    if token is not None:
        out.append(Fingerprint('supplier', f'supplier:{_hash(token[0] + token[1])}', f'{token[0]} ...{token[1][-4:]}'))
    size = doc.page_size(1)
    width = size[0] if size and size[0] > 0 else None
    labels: set[str] = set()
    top = size[1] * HEADER_SHARE if size and size[1] > 0 else None
    rows = [u.bbox[1] for u in first if u.bbox is not None and len(_NUMBER.findall(u.text)) >= 3]
    if top is not None and rows:   # the first line item (3 numbers on a line) ends the header
        top = min(top, min(rows))
    for u in first:
        if top is not None and u.bbox is not None and u.bbox[1] > top:
            continue   # totals and footers move with the number of line items: the header's labels only
        for m in _LABEL.finditer(u.text):
            words = _norm_words(m.group(1)).split()[-MAX_ANCHOR_WORDS:]
            if not words or any(any(c.isdigit() for c in w) for w in words):
                continue
            third = ''
            if width and u.words:
                at = next((w for w in u.words if w.start >= m.start(1) and w.bbox), None)
                third = f'@{min(2, int(3 * at.bbox[0] / width))}' if at else ''
            labels.add(' '.join(words) + third)
            if len(labels) >= MAX_LAYOUT_LABELS:
                break
    head_unit = next((u for u in sorted(first, key=lambda u: (u.bbox[1] if u.bbox else 0.0)) if u.text.strip()), None)
    head = _norm_words(head_unit.text) if head_unit is not None and not any(c.isdigit() for c in head_unit.text) \
        else ''
    if len(labels) >= MIN_LABELS:
        ordered = sorted(labels)
        shown = ', '.join(lb.split('@')[0] for lb in ordered[:6]) + (' ...' if len(ordered) > 6 else '')
        out.append(Fingerprint('layout', f"layout:{_hash(head + '|' + '|'.join(ordered))}",
                               f"{head[:60] + ' / ' if head else ''}labels: {shown}"))
    return out


# ----------------------------------------------------------------------------- a page's words

@dataclass
class _Page:
    words: list[tuple[Word, Unit, int]] = field(default_factory=list)   # word, its unit, reading order


class Pages:
    """The words of a document by page, in reading order (built once per document)."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.pages: dict[int, _Page] = {}
        order = 0
        for u in doc.units:
            for w in u.words:
                page = w.page if w.page is not None else (u.page if u.page is not None else 1)
                if w.bbox:
                    self.pages.setdefault(page, _Page()).words.append((w, u, order))
                order += 1

    def size(self, page: int) -> tuple[float, float] | None:
        size = self.doc.page_size(page)
        return size if size and size[0] > 0 and size[1] > 0 else None

    def words(self, page: int) -> list[tuple[Word, Unit, int]]:
        found = self.pages.get(page)
        return found.words if found else []


def _mid(b) -> float:
    return (b[1] + b[3]) / 2


def _height(b) -> float:
    return max(b[3] - b[1], 1.0)


def _same_row(a, b) -> bool:
    return b[1] - 0.2 * _height(b) <= _mid(a) <= b[3] + 0.2 * _height(b)


def _has_letters(words: list[Word]) -> bool:
    return any(sum(c.isalpha() for c in w.text) >= 2 for w in words)


def _anchor_of(pages: Pages, page: int, value: list[Word]) -> list[Word] | None:
    """The label words next to the value: the run just left of its first word on its row, else
    the nearest row above whose words overlap it across (module docstring)."""
    first = value[0]
    h = _height(first.bbox)
    mine = {id(w) for w in value}
    others = [w for w, _, _ in pages.words(page) if id(w) not in mine]
    left = sorted((w for w in others if _same_row(w.bbox, first.bbox) and w.bbox[2] <= first.bbox[0] + 1),
                  key=lambda w: -w.bbox[2])
    run: list[Word] = []
    edge = first.bbox[0]
    size = pages.size(page)
    reach = max(2.5 * h, LEFT_REACH * size[0]) if size else 2.5 * h   # a label column may stand apart
    for w in left:
        if edge - w.bbox[2] > (reach if not _has_letters(run) else 2.5 * h) or len(run) >= MAX_ANCHOR_WORDS:
            break
        run.append(w)
        edge = w.bbox[0]
    run.reverse()
    if run and _has_letters(run):
        return run
    x0 = min(w.bbox[0] for w in value) - h
    x1 = max(w.bbox[2] for w in value) + h
    above = [w for w in others if w.bbox[3] <= first.bbox[1] + 1 and first.bbox[1] - w.bbox[3] <= 3 * h
             and w.bbox[2] >= x0 and w.bbox[0] <= x1]
    if not above:
        return None
    nearest = max(above, key=lambda w: w.bbox[3])
    row = sorted((w for w in above if _same_row(w.bbox, nearest.bbox)), key=lambda w: w.bbox[0])[:MAX_ANCHOR_WORDS]
    return row if _has_letters(row) else None


def _box(words: list[Word]) -> tuple[float, float, float, float]:
    return (min(w.bbox[0] for w in words), min(w.bbox[1] for w in words),
            max(w.bbox[2] for w in words), max(w.bbox[3] for w in words))


def place_of(pages: Pages, page: int | None, words: list[Word]) -> dict[str, Any] | None:
    """Where ``words`` (a value a reviewer pointed at) stand, to be found again: None when they
    have no page size or boxes to measure it by."""
    if page is None:
        return None
    size = pages.size(page)
    value = [w for w in words if w.bbox and (w.page == page or w.page is None)]
    if size is None or not value:
        return None
    width, height = size
    vb = _box(value)
    place: dict[str, Any] = {'page': page, 'box': [round(vb[0] / width, 4), round(vb[1] / height, 4),
                                                   round(vb[2] / width, 4), round(vb[3] / height, 4)],
                             'words': len(value)}
    anchor = _anchor_of(pages, page, value)
    if anchor:
        ab = _box(anchor)
        place['anchor'] = {'text': _norm_words(' '.join(w.text for w in anchor)),
                           'box': [round(ab[0] / width, 4), round(ab[1] / height, 4),
                                   round(ab[2] / width, 4), round(ab[3] / height, 4)],
                           'dx': round((vb[0] - ab[0]) / width, 4), 'dy': round((vb[1] - ab[1]) / height, 4)}
    return place


def _find_anchor(pages: Pages, page: int, anchor: dict[str, Any], size) -> list[Word] | None:
    """The run of words on ``page`` reading as the anchor's text, the one nearest its taught
    position; None when the page no longer holds it."""
    want = anchor['text'].split()
    if not want:
        return None
    words = [w for w, _, _ in pages.words(page)]
    width, height = size
    best, best_d = None, None
    for i, w in enumerate(words):
        if _norm_words(w.text).split()[:1] != want[:1]:
            continue
        run, k = [w], 0
        got = _norm_words(w.text).split()
        j = i + 1
        while len(got) < len(want) and j < len(words) and k < MAX_ANCHOR_WORDS:
            nxt = words[j]
            if not _same_row(nxt.bbox, w.bbox) or nxt.bbox[0] < run[-1].bbox[2] - 1 or \
                    nxt.bbox[0] - run[-1].bbox[2] > 2.5 * _height(w.bbox):
                break
            run.append(nxt)
            got += _norm_words(nxt.text).split()
            j += 1
            k += 1
        if got != want:
            continue
        b = _box(run)
        d = abs(b[0] / width - anchor['box'][0]) + abs(b[1] / height - anchor['box'][1])
        if best_d is None or d < best_d:
            best, best_d = run, d
    return best


def read(pages: Pages, place: dict[str, Any]) -> Found | None:
    """The value at a taught place (module docstring "Reading a place"), or None when the place
    stops matching (its anchor gone, no word there)."""
    page = place.get('page')
    box = place.get('box')
    if not isinstance(page, int) or not isinstance(box, list) or len(box) != 4:
        return None
    size = pages.size(page)
    if size is None:
        return None
    width, height = size
    vw, vh = (box[2] - box[0]) * width, (box[3] - box[1]) * height
    taken: set[int] = set()
    anchor = place.get('anchor')
    if isinstance(anchor, dict):
        found = _find_anchor(pages, page, anchor, size)
        if found is None:   # totals move to the last page when the table grows: the anchor's other pages
            for other in sorted(p for p in pages.pages if p != page):
                size_other = pages.size(other)
                found = _find_anchor(pages, other, anchor, size_other) if size_other else None
                if found is not None:
                    page, size = other, size_other
                    width, height = size
                    break
        if found is None:
            return None
        ab = _box(found)
        taken = {id(w) for w in found}
        x0, y0 = ab[0] + anchor['dx'] * width, ab[1] + anchor['dy'] * height
    else:
        x0, y0 = box[0] * width, box[1] * height
    x1, y1 = x0 + vw, y0 + vh
    all_words = [(w, u, k) for w, u, k in pages.words(page) if id(w) not in taken]
    line = min((_height(w.bbox) for w, _, _ in all_words if y0 <= _mid(w.bbox) <= y1), default=vh or 10.0)
    tol = 0.5 * line
    hit = [(w, u, k) for w, u, k in all_words
           if y0 - 0.3 * line <= _mid(w.bbox) <= y1 + 0.3 * line and w.bbox[2] >= x0 - tol and w.bbox[0] <= x1 + tol]
    if not hit:
        return None
    chosen = {id(w): (w, u, k) for w, u, k in hit}
    for w, _, _ in hit:   # continue each row's run both ways while the gaps are a word space
        row = sorted(((o, ou, ok) for o, ou, ok in all_words if _same_row(o.bbox, w.bbox)), key=lambda t: t[0].bbox[0])
        at = next(i for i, t in enumerate(row) if t[0] is w)
        for step in (1, -1):
            i = at
            while 0 <= i + step < len(row):
                a, b = (row[i][0], row[i + step][0]) if step == 1 else (row[i + step][0], row[i][0])
                nxt = row[i + step][0].text
                if b.bbox[0] - a.bbox[2] > line or not any(c.isalnum() for c in nxt) or nxt.endswith(':'):
                    break   # a wide gap, a label's colon or a lone sign: not the value's
                if step == -1 and any(c.isalnum() for c in nxt) and nxt.rstrip().endswith(('%', ')')):
                    break
                i += step
                chosen[id(row[i][0])] = row[i]
    ordered = sorted(chosen.values(), key=lambda t: t[2])
    while ordered and (not any(c.isalnum() for c in ordered[0][0].text) or ordered[0][0].text.endswith(':')):
        ordered.pop(0)   # a label's colon or a lone sign the box overlapped
    while ordered and not any(c.isalnum() for c in ordered[-1][0].text):
        ordered.pop()
    words = [w for w, _, _ in ordered]
    units = list({id(u): u for _, u, _ in ordered}.values())
    text = ' '.join(w.text for w in words if w.text)
    if not text.strip():
        return None
    found = Found(text=text, words=words, units=units, rule='memory')
    ocr = found.ocr_confidence()
    found.confidence = round(CONFIDENCE * (ocr if ocr is not None else 1.0), 4)
    return found


# ----------------------------------------------------------------------------- conventions taught

CONVENTION_KEYS = {'date': ('dateOrder', ('DMY', 'MDY')), 'number': ('decimal', ('.', ',')),
                   'decimal': ('decimal', ('.', ',')), 'currency': ('decimal', ('.', ','))}


def conventions_taught(text: str | None, taxon: dict[str, Any], typed: Any, run_locale: Locale) -> dict[str, str]:
    """The convention (``{'dateOrder': 'MDY'}`` or ``{'decimal': '.'}``) that reads ``text`` (the
    words a reviewer pointed at) as ``typed`` (the corrected typed value) where the run's
    conventions leave the words ambiguous; ``{}`` when there is nothing to learn (module
    docstring "Conventions")."""
    kind = taxon.get('type') or 'string'
    if kind not in CONVENTION_KEYS or typed is None or text is None or taxon.get('locale') \
            or not isinstance(run_locale, Conventions):
        return {}   # an explicit locale (the taxon's, the run's) reads its own way: nothing to learn
    try:
        normalise(text, taxon, run_locale)
        return {}   # the run reads the words by itself
    except Ambiguous:
        pass
    except NotNormalised:
        return {}
    key, options = CONVENTION_KEYS[kind]
    reading = []
    for option in options:
        conv = Conventions(run_locale.decimal, option) if key == 'dateOrder' else Conventions(option, run_locale.order)
        try:
            value, _ = normalise(text, taxon, conv)
        except NotNormalised:
            continue
        if value == typed:
            reading.append(option)
    return {key: reading[0]} if len(reading) == 1 else {}


class Recalled:
    """The places (and conventions) a document's memories hold, read on demand by the engine (engine.py)."""

    def __init__(self, doc: Document, fields: dict[str, dict[str, Any]], memory_ids: list[str],
                 conventions: dict[str, Any] | None = None) -> None:
        self.pages = Pages(doc)
        self.fields = fields
        self.memory_ids = memory_ids
        self.conventions = {k: v for k, v in (conventions or {}).items() if v}
        self.conventions_used = False
        self.used: list[str] = []
        self.stale: list[str] = []

    def read(self, path: str) -> Found | None:
        place = self.fields.get(path)
        if place is None:
            return None
        found = read(self.pages, place)
        (self.used if found is not None else self.stale).append(path)
        return found

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {'memoryIds': self.memory_ids, 'applied': self.used, 'fellBack': self.stale}
        if self.conventions_used:
            out['conventions'] = self.conventions
        return out
