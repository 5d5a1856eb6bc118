"""The budgets of one read, each named in the error that reports it (docs/operations/parsing.md)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 100 * 2 ** 20                 # the input file
    max_pages: int = 2_000                         # PDF pages, TIFF frames
    max_pixels_per_page: int = 50_000_000          # an image or a rendered page, checked before decoding
    max_text_chars: int = 20_000_000               # text read from the whole document
    max_uncompressed_bytes: int = 200 * 2 ** 20    # DOCX/XLSX: the zip's members, inflated
    max_compression_ratio: int = 200               # DOCX/XLSX: one member's inflated / deflated size
    max_cells: int = 200_000                       # XLSX/CSV/tables: cells in the whole document
    ocr_dpi: int = 300                             # a PDF page rendered for OCR
    ocr_memory_bytes: int = 2 * 2 ** 30            # address space of one tesseract process

    def describe(self, name: str) -> str:
        """``max_pages`` -> "the limit max_pages (2,000)"."""
        return f'the limit {name} ({getattr(self, name):,})'


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class FanOut:
    """How the parse stage splits a big document into page ranges read by parallel messages
    (features/parsing/fanout.py; docs/operations/parsing.md "Big documents"). A paged document
    with more pages than one range of its reader holds is split; any other is read in one chain
    of messages as before. The page limit of a document is ``Limits.max_pages`` (checked before
    any range is planned: FAILED ``too-many-pages``)."""
    text_range_pages: int = 200      # a PDF with a text layer on its first page: pages per range
    ocr_range_pages: int = 10        # a scan (its first page has no text layer): pages per range
    max_ranges: int = 200            # ranges per document: a range grows past its size to stay within
    in_flight: int = 8               # range messages of one document queued at once (the next on each finish)
    range_attempts: int = 3          # attempts of one range (a storage or table failure) before the stage fails
    retry_seconds: int = 5           # a range's second try waits this long, its third twice as long (at most 60)
    check_seconds: int = 5           # the stage's first look at its ranges (its progress), besides the wake-up;
    max_check_seconds: int = 60      # each next look waits twice as long, up to this (a look costs ~44 WCU)
    ocr_range_seconds: int = 240     # a range's time box in the OCR function (300 s timeout, one message each)

    def look_after(self, looks: int) -> int:
        """Seconds before the stage's look number ``looks`` + 1 (0 = the first)."""
        return min(self.max_check_seconds, self.check_seconds * 2 ** min(looks, 16))

    def range_pages(self, ocr: bool) -> int:
        return self.ocr_range_pages if ocr else self.text_range_pages

    def ranges(self, page_count: int, ocr: bool) -> list[tuple[int, int]]:
        """The page ranges ``[(first, last), ...]`` of a document of ``page_count`` pages, in page
        order; one range when it fits one (not split)."""
        size = max(self.range_pages(ocr), -(-page_count // self.max_ranges))
        return [(first, min(first + size - 1, page_count)) for first in range(1, page_count + 1, size)]


FANOUT = FanOut()
