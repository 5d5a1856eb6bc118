"""A reviewer's correction pointing at words (docs/api/extraction.md "Review"): ``nodeIds`` name
word or line nodes of the family's parsed document; the value is their text in reading order,
its provenance their page and box. Pure: the document is built by the caller
(features/extraction/review.py reads the family's parsed document as an extraction run does).

The reading order is the one extraction reads in (``document.Document``: its units in order,
each unit's words in order), so a value a reviewer points at reads as a rule would read it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.features.extraction.document import UNIT_TYPES, Document, Unit, Word, union

MAX_NODE_IDS = 50           # nodes one correction may point at (docs/api/limits.md)
MAX_NODE_ID_LENGTH = 200


class PointingError(ValueError):
    """A ``nodeIds`` list that cannot be read: the message names the id (a 400)."""


def check_node_ids(value: Any) -> list[str]:
    """1..MAX_NODE_IDS distinct node ids, as sent (order kept, duplicates dropped)."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_NODE_IDS:
        raise PointingError(f'nodeIds must be a list of 1 to {MAX_NODE_IDS} node ids (limit maxNodeIdsPerCorrection)')
    for i, v in enumerate(value):
        if not isinstance(v, str) or not v or len(v) > MAX_NODE_ID_LENGTH:
            raise PointingError(f'nodeIds[{i}] must be a node id (a text of at most {MAX_NODE_ID_LENGTH} characters)')
    return list(dict.fromkeys(value))


@dataclass
class Pointed:
    """What the node ids point at, in reading order."""
    words: list[Word]
    units: list[Unit]
    text: str
    page: int | None
    bbox: list[float] | None

    def features(self, node_ids: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {'nodeIds': node_ids, 'rule': 'reviewer'}
        if self.page is not None:
            out['page'] = self.page
        if self.bbox:
            out['bbox'] = self.bbox
        return out


def point(doc: Document, node_ids: list[str]) -> Pointed:
    """The words (and units without words) ``node_ids`` name, in reading order; an id that is not
    a word or text line (paragraph, heading, cell) of the document is a PointingError naming it."""
    words_at: dict[str, tuple[int, int, Word, Unit]] = {}
    units_at: dict[str, tuple[int, Unit]] = {}
    for k, unit in enumerate(doc.units):
        units_at[unit.id] = (k, unit)
        for j, w in enumerate(unit.words):
            words_at[w.id] = (k, j, w, unit)
    chosen: dict[tuple[int, int], tuple[Word | None, Unit]] = {}
    for i, node_id in enumerate(node_ids):
        if node_id in words_at:
            k, j, w, unit = words_at[node_id]
            chosen[(k, j)] = (w, unit)
        elif node_id in units_at:
            k, unit = units_at[node_id]
            if unit.words:
                for j, w in enumerate(unit.words):
                    chosen[(k, j)] = (w, unit)
            else:
                chosen[(k, -1)] = (None, unit)
        else:
            node = doc.by_id.get(node_id)
            what = f"a {node.get('nodeType')} node" if node is not None else 'not a node of the document'
            raise PointingError(f"nodeIds[{i}] {node_id[:100]!r} is {what}: point at words or lines "
                                f"({', '.join(['word', *sorted(UNIT_TYPES)])}) of the parsed document")
    ordered = [chosen[key] for key in sorted(chosen)]
    words = [w for w, _ in ordered if w is not None]
    units = list({id(u): u for _, u in ordered}.values())
    parts = [w.text if w is not None else u.text.strip() for w, u in ordered]
    text = ' '.join(p for p in parts if p)
    pages = [w.page for w in words if w.page is not None] + [u.page for w, u in ordered
                                                            if w is None and u.page is not None]
    page = min(pages) if pages else None
    boxes = [w.bbox for w in words if w.bbox and w.page == page] + \
        [u.bbox for w, u in ordered if w is None and u.bbox and u.page == page]
    return Pointed(words=words, units=units, text=text, page=page, bbox=union(boxes))
