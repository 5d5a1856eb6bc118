"""Building the node list of the parsed-document contract (docs/operations/parsing.md "Nodes").

Ids are short and deterministic per parse: ``doc`` (the root), ``p3`` (page 3), ``p3.l2``
(its second line), ``p3.l2.w5``; ``b4`` (the fourth block of a DOCX/HTML/text document),
``b4.r1.c0`` (a cell of a table block); ``s1.r0.c2`` (a cell of the first sheet). Reading the same
bytes twice gives the same ids, so page ranges read in several calls concatenate.
"""
from __future__ import annotations

import time

from chalicelib.features.parsing.readers.errors import ParseFailure
from chalicelib.features.parsing.readers.limits import Limits

ROOT = 'doc'


def node(id_: str, parent: str | None, node_type: str, content: str | None, index: int,
         features: dict | None = None) -> dict:
    return {'id': id_, 'parentId': parent, 'nodeType': node_type, 'content': content, 'index': index,
            'features': features if features is not None else {}}


def root(media_type: str, page_count: int, parser: str) -> dict:
    return node(ROOT, None, 'document', None, 0,
                {'mediaType': media_type, 'pageCount': page_count, 'parser': parser})


class Budget:
    """The text, cell and time budgets of one call; ``chars`` starts at the text read before it."""

    def __init__(self, limits: Limits, deadline: float, chars: int = 0):
        self.limits = limits
        self.deadline = deadline
        self.chars = chars
        self.cells = 0

    def text(self, count: int, page: int | None = None) -> None:
        self.chars += count
        if self.chars > self.limits.max_text_chars:
            limit = self.limits.describe('max_text_chars')
            raise ParseFailure('too-much-text', f'the document holds more characters of text than {limit} allows',
                               page=page, limit='max_text_chars')

    def cell(self) -> None:
        self.cells += 1
        if self.cells > self.limits.max_cells:
            limit = self.limits.describe('max_cells')
            raise ParseFailure('too-many-cells', f'the document has more cells than {limit} allows',
                               limit='max_cells')

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check(self, what: str, page: int | None = None) -> None:
        if time.monotonic() >= self.deadline:
            raise ParseFailure('time-budget', f'reading {what} did not finish within the time budget of this '
                                              'step', page=page, limit='deadline')
