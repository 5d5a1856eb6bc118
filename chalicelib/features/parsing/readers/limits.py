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
