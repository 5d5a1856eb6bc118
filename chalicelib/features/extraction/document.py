"""A parsed document (the node model of the parsed-document contract, docs/api/extraction.md
"What extraction reads") seen the way extraction rules read it: text units, their words and
boxes, tables.

Units are the nodes that carry a run of text a rule matches against: ``line`` (PDF and image
pages, plain text), ``paragraph`` and ``heading`` (DOCX/HTML) and ``cell`` (tables, sheets).
``text`` is the units' content joined by newlines, in document order, with each unit's span
kept, so a match in the text maps back to its nodes, page and box. Words (``word`` nodes under
a line) keep their boxes and, from OCR, their confidence.

Pure data, no I/O: built once per extraction from the node list.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

UNIT_TYPES = frozenset({'line', 'paragraph', 'heading', 'cell'})
TABLE_TYPES = frozenset({'table', 'sheet'})


@dataclass(eq=False, slots=True)   # compared by identity: 'in' over a page's words stays cheap
class Word:
    id: str
    text: str
    page: int | None
    bbox: tuple[float, float, float, float] | None
    confidence: float | None
    start: int = 0      # offsets of the word inside its unit's text
    end: int = 0


@dataclass(eq=False, slots=True)
class Unit:
    id: str
    node_type: str
    text: str
    page: int | None
    bbox: tuple[float, float, float, float] | None
    start: int                      # offset of the unit in the document text
    words: list[Word] = field(default_factory=list)
    row: int | None = None          # cells: their row and column, and the table holding them
    column: int | None = None
    table: str | None = None
    row_id: str | None = None


def _bbox(value: Any) -> tuple[float, float, float, float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 4:
        a, b, c, d = value
        if type(a) is float and type(b) is float and type(c) is float and type(d) is float:
            return (a, b, c, d)   # what readers give: no conversion to make
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return (float(a), float(b), float(c), float(d))
    return None


def union(boxes: list[tuple[float, float, float, float]]) -> list[float] | None:
    if not boxes:
        return None
    if len(boxes) == 1:
        b = boxes[0]
        return [round(b[0], 2), round(b[1], 2), round(b[2], 2), round(b[3], 2)]
    return [round(min(b[0] for b in boxes), 2), round(min(b[1] for b in boxes), 2),
            round(max(b[2] for b in boxes), 2), round(max(b[3] for b in boxes), 2)]


def _index(node: dict[str, Any]) -> int:
    i = node.get('index')
    return i if isinstance(i, int) else 0


class Document:
    """The node list, indexed for the rules."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = [n for n in nodes if isinstance(n, dict) and n.get('id') is not None]
        self.by_id = {str(n['id']): n for n in self.nodes}
        children: dict[str | None, list[dict[str, Any]]] = {}
        last: dict[str | None, int] = {}
        unsorted: set[str | None] = set()
        for n in self.nodes:
            parent = n.get('parentId')
            key = None if parent is None else str(parent)
            i = n.get('index')
            i = i if isinstance(i, int) else 0
            kids = children.get(key)
            if kids is None:
                children[key] = [n]
            else:
                kids.append(n)
                if i < last[key]:
                    unsorted.add(key)
            last[key] = max(i, last.get(key, i))
        for key in unsorted:   # readers give siblings in order: a stable sort of those changes nothing
            children[key].sort(key=_index)
        self.children = children
        self.units: list[Unit] = []
        self.tables: list[dict[str, Any]] = []   # {id, rows: [[Unit|None, ...]]}
        parts: list[str] = []
        self._offset = 0
        roots = children.get(None, [])
        for root in roots:
            self._walk(root, parts, page=None, table=None, row=None)
        self.text = '\n'.join(parts)
        self.root = roots[0] if roots else {}

    # ------------------------------------------------------------------ building

    def _features(self, node: dict[str, Any]) -> dict[str, Any]:
        f = node.get('features')
        return f if isinstance(f, dict) else {}

    def _walk(self, node: dict[str, Any], parts: list[str], *, page: int | None, table: dict | None,
              row: dict | None) -> None:
        kind = node.get('nodeType')
        feats = self._features(node)
        if kind == 'page' and isinstance(feats.get('page'), int):
            page = feats['page']
        if kind in TABLE_TYPES:
            table = {'id': str(node['id']), 'rows': []}
            self.tables.append(table)
        if kind == 'row' and table is not None:
            row = {'id': str(node['id']), 'cells': []}
            table['rows'].append(row)
        if kind in UNIT_TYPES:
            self._unit(node, kind, feats, parts, page, table, row)
            return
        for child in self.children.get(str(node['id']), []):
            self._walk(child, parts, page=page, table=table, row=row)

    def _unit(self, node, kind, feats, parts, page, table, row) -> None:
        text = node.get('content')
        if not isinstance(text, str):
            text = ''
        unit_page = feats.get('page')
        if not isinstance(unit_page, int):
            unit_page = page
        node_id = str(node['id'])
        unit = Unit(id=node_id, node_type=kind, text=text, page=unit_page, bbox=_bbox(feats.get('bbox')),
                    start=self._offset)
        cursor = 0
        append = unit.words.append
        for w in self.children.get(node_id, ()):
            if w.get('nodeType') != 'word':
                continue
            wtext = w.get('content')
            if not isinstance(wtext, str):
                wtext = ''
            wf = w.get('features')
            if not isinstance(wf, dict):
                wf = {}
            at = text.find(wtext, cursor) if wtext else -1
            if at < 0:
                at = cursor
            conf = wf.get('confidence')
            conf = float(conf) if isinstance(conf, (int, float)) and not isinstance(conf, bool) else None
            wpage = wf.get('page')
            cursor = at + len(wtext)
            append(Word(str(w['id']), wtext, wpage if isinstance(wpage, int) else unit_page, _bbox(wf.get('bbox')),
                        conf, at, cursor))
        if unit.bbox is None and unit.words:
            box = union([w.bbox for w in unit.words if w.bbox])
            unit.bbox = tuple(box) if box else None
        if kind == 'cell':
            unit.row = feats.get('row') if isinstance(feats.get('row'), int) else None
            unit.column = feats.get('column') if isinstance(feats.get('column'), int) else None
            unit.table = table['id'] if table else None
            unit.row_id = row['id'] if row else None
            if row is not None:
                row['cells'].append(unit)
        self.units.append(unit)
        parts.append(text)
        self._offset += len(text) + 1

    # ------------------------------------------------------------------ reading

    def units_in(self, start: int, end: int) -> list[Unit]:
        """The units a span of ``text`` covers (binary search over their offsets)."""
        lo, hi = 0, len(self.units)
        while lo < hi:
            mid = (lo + hi) // 2
            u = self.units[mid]
            if u.start + len(u.text) < start:
                lo = mid + 1
            else:
                hi = mid
        out = []
        for u in self.units[lo:]:
            if u.start >= end and out:
                break
            if u.start < end and u.start + len(u.text) >= start:
                out.append(u)
            if u.start >= end:
                break
        return out

    def page_size(self, page: int | None) -> tuple[float, float] | None:
        for n in self.children.get(str(self.root.get('id')), []) if self.root else []:
            f = self._features(n)
            if n.get('nodeType') == 'page' and f.get('page') == page:
                return float(f.get('width') or 0), float(f.get('height') or 0)
        return None


@dataclass
class Found:
    """A value a rule found: its text and where it came from."""
    text: str
    words: list[Word] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    rule: str = ''
    confidence: float = 1.0

    def provenance(self) -> dict[str, Any]:
        ids = [w.id for w in self.words] or [u.id for u in self.units]
        boxes = [w.bbox for w in self.words if w.bbox] or [u.bbox for u in self.units if u.bbox]
        pages = [w.page for w in self.words if w.page is not None] + [u.page for u in self.units if u.page is not None]
        out: dict[str, Any] = {'nodeIds': ids, 'rule': self.rule}
        if pages:
            out['page'] = min(pages)   # the first page the value is on
        box = union(boxes)
        if box:
            out['bbox'] = box
        return out

    def ocr_confidence(self) -> float | None:
        values = [w.confidence for w in self.words if w.confidence is not None]
        return min(values) if values else None


def span_words(unit: Unit, start: int, end: int) -> list[Word]:
    """The words of ``unit`` overlapping [start, end) of its own text."""
    return [w for w in unit.words if w.end > start and w.start < end]
