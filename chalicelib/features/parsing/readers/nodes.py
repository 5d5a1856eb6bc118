"""Building the node list of the parsed-document contract (docs/operations/parsing.md "Nodes").

Ids are short and deterministic per parse: ``doc`` (the root), ``p3`` (page 3), ``p3.l2``
(the second line read on it, in reading order: layout.py), ``p3.l2.w5``; ``b4`` (the fourth
block of a DOCX/HTML/text document), ``b4.r1.c0`` (a cell of a table block); ``s1.r0.c2`` (a
cell of the first sheet). Reading the same bytes twice gives the same ids, so page ranges read
in several calls concatenate.
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


def check_page_count(count: int, limits: Limits, what: str) -> None:
    if count > limits.max_pages:
        raise ParseFailure('too-many-pages', f'{what} has {count:,} pages, more than {limits.describe("max_pages")} '
                                             'allows', limit='max_pages')


class PageRange:
    """The pacing of one call over pages: always the first page, then each next page only while
    the time left is over 1.5 x the slowest page so far and ``page_limit`` is not reached."""

    def __init__(self, budget: Budget, first_page: int, page_limit: int | None):
        self.budget = budget
        self.first_page = first_page
        self.page_limit = page_limit
        self.slowest = 0.0
        self.started = 0.0

    def stop_before(self, number: int) -> bool:
        self.started = time.monotonic()
        if number == self.first_page:
            return False
        return self.budget.left() < self.slowest * 1.5 or (
            self.page_limit is not None and number - self.first_page >= self.page_limit)

    def done(self) -> None:
        self.slowest = max(self.slowest, time.monotonic() - self.started)
