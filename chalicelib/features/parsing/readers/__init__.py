"""Readers: the bytes of an uploaded file -> the nodes of the parsed-document contract.

    result = read(data, media_type='application/pdf', filename='invoice.pdf',
                  deadline=time.monotonic() + 60)
    result.nodes        # this call's nodes: the root 'doc' (first_page == 1 only), pages, lines, words
    result.next_page    # None when done; else read(..., first_page=result.next_page) continues

A pure library: no DynamoDB, no S3, no network. The type is sniffed from the bytes
(``sniff.py``); the budgets are ``Limits`` (checked before the work they bound: the page
count before the first page, a page's pixels before it is decoded or rendered, a zip's inflated
sizes before it is opened) plus the caller's ``deadline`` (a ``time.monotonic()`` value): PDFs
and multi-page TIFFs stop between two pages when the next one would not fit and say where to go
on (``next_page``); the ids of the nodes are the same whichever ranges a document is read in, so
the chunks concatenate. ``text_chars_before`` carries the text read by earlier chunks so
``max_text_chars`` holds for the whole document; ``page_limit`` caps the pages of one call (a
caller that stores each chunk before reading the next keeps its memory flat in page count).

One read at a time per process for PDFs: pdfium is not thread-safe (the worker reads one message
at a time; never read PDFs from several threads at once).

Parsers: ``pdf-text`` (pypdfium2's text layer), ``pdf-ocr`` (some page of this call rendered and
read by Tesseract), ``image-ocr``, ``docx``, ``xlsx``, ``csv``, ``html``, ``text``.
docs/operations/parsing.md lists the limits and what each error means.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from chalicelib.features.parsing.readers import sniff as sniffing
from chalicelib.features.parsing.readers.errors import NeedsOcr, NoParser, ParseFailure
from chalicelib.features.parsing.readers.limits import DEFAULT_LIMITS, Limits
from chalicelib.features.parsing.readers.nodes import ROOT, Budget, root
from chalicelib.features.parsing.readers.ocr import ocr_available

__all__ = ['DEFAULT_LIMITS', 'Limits', 'NeedsOcr', 'NoParser', 'ParseFailure', 'ROOT', 'ReadResult', 'Survey',
           'ocr_available', 'read', 'root', 'sniff', 'survey']

PAGED = (sniffing.PDF, sniffing.PNG, sniffing.JPEG, sniffing.TIFF)


@dataclass
class ReadResult:
    nodes: list[dict]
    page_count: int
    next_page: int | None
    parser: str
    media_type: str
    warnings: list[str] = field(default_factory=list)
    text_chars: int = 0          # characters of text read by this call (add to text_chars_before next time)


def sniff(data: bytes, *, media_type: str | None = None, filename: str | None = None) -> str:
    """The media type ``read`` would read ``data`` as (``ParseFailure`` 'empty' / 'mislabelled')."""
    return sniffing.sniff(data, media_type=media_type, filename=filename)


@dataclass(frozen=True)
class Survey:
    """What the parse stage plans a document's page ranges from (``survey``)."""
    media_type: str
    page_count: int
    scan: bool              # its first page has no text layer: read by OCR, in small ranges


def survey(data: bytes, *, media_type: str | None, filename: str | None,
           limits: Limits = DEFAULT_LIMITS) -> Survey | None:
    """The page count of a PDF (its ``max_pages`` checked: ``ParseFailure`` 'too-many-pages')
    and whether its first page is a scan; None for any other type (read in one chain of
    messages, features/parsing/fanout.py)."""
    if len(data) > limits.max_bytes:
        return None   # read() says why, as for any file
    kind = sniffing.sniff(data, media_type=media_type, filename=filename)
    if kind != sniffing.PDF:
        return None
    from chalicelib.features.parsing.readers.pdf import survey_pdf  # noqa: PLC0415 - lazy: pypdfium2 for PDFs only

    pages, scan = survey_pdf(data, limits=limits)
    return Survey(kind, pages, scan)


def read(data: bytes, *, media_type: str | None, filename: str | None, first_page: int = 1, deadline: float,
         limits: Limits = DEFAULT_LIMITS, ocr: bool = True, text_chars_before: int = 0,
         page_limit: int | None = None) -> ReadResult:
    """Read ``data`` from page ``first_page`` until it ends, ``deadline`` is near or ``page_limit``
    pages are read (see the module)."""
    if first_page < 1:
        raise ValueError('first_page counts from 1')
    if page_limit is not None and page_limit < 1:
        raise ValueError('page_limit is at least 1')
    if len(data) > limits.max_bytes:
        raise ParseFailure('too-large', f'the file is {len(data):,} bytes, more than {limits.describe("max_bytes")} '
                                        'allows', limit='max_bytes')
    kind = sniffing.sniff(data, media_type=media_type, filename=filename)
    if kind not in PAGED and first_page != 1:
        raise ValueError(f'{sniffing.describe(kind)} has no pages: read it from first_page=1')
    budget = Budget(limits, deadline, chars=text_chars_before)
    warnings: list[str] = []
    if time.monotonic() >= deadline:
        raise ParseFailure('time-budget', 'no time was left to read the file', limit='deadline')
    if kind == sniffing.PDF:
        from chalicelib.features.parsing.readers.pdf import read_pdf  # noqa: PLC0415 - lazy: pypdfium2 loads for PDFs only

        outcome = read_pdf(data, first_page=first_page, budget=budget, limits=limits, ocr=ocr,
                           page_limit=page_limit)
        parser = 'pdf-ocr' if outcome.ocr_pages else 'pdf-text'
        nodes, pages, next_page, warnings = outcome.nodes, outcome.page_count, outcome.next_page, outcome.warnings
    elif kind in (sniffing.PNG, sniffing.JPEG, sniffing.TIFF):
        if not ocr:
            # every page of an image needs OCR: handed over whole, unopened. The zip-packaged worker
            # (ocr=False) carries no Pillow; the OCR function checks the page count and each page's
            # declared pixels before decoding (images.py; docs/operations/parsing.md "What reads what")
            raise NeedsOcr(first_page)
        from chalicelib.features.parsing.readers.images import read_image  # noqa: PLC0415 - lazy: Pillow, OCR function only

        outcome = read_image(data, first_page=first_page, budget=budget, limits=limits, page_limit=page_limit)
        parser = 'image-ocr'
        nodes, pages, next_page, warnings = outcome.nodes, outcome.page_count, outcome.next_page, outcome.warnings
    else:
        pages, next_page = 1, None
        if kind == sniffing.DOCX:
            from chalicelib.features.parsing.readers.office import read_docx  # noqa: PLC0415 - lazy: python-docx

            parser, nodes = 'docx', read_docx(data, budget=budget, limits=limits)
        elif kind == sniffing.XLSX:
            from chalicelib.features.parsing.readers.office import read_xlsx  # noqa: PLC0415 - lazy: calamine

            parser, nodes = 'xlsx', read_xlsx(data, budget=budget, limits=limits)
        elif kind == sniffing.CSV:
            from chalicelib.features.parsing.readers.text import read_csv  # noqa: PLC0415 - lazy: as the others

            parser, nodes = 'csv', read_csv(data, budget=budget, filename=filename, warnings=warnings)
        elif kind == sniffing.HTML:
            from chalicelib.features.parsing.readers.text import read_html  # noqa: PLC0415 - lazy: lxml

            parser, nodes = 'html', read_html(data, budget=budget, limits=limits, warnings=warnings)
        elif kind == sniffing.TEXT:
            from chalicelib.features.parsing.readers.text import read_text  # noqa: PLC0415 - lazy: as the others

            parser, nodes = 'text', read_text(data, budget=budget, warnings=warnings)
        else:
            raise NoParser(sniffing.describe(kind) if kind != sniffing.OCTETS else kind)
    if first_page == 1:
        nodes.insert(0, root(kind, pages, parser))
    return ReadResult(nodes=nodes, page_count=pages, next_page=next_page, parser=parser, media_type=kind,
                      warnings=warnings, text_chars=budget.chars - text_chars_before)
