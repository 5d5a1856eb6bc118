"""PDFs with pypdfium2 (Apache-2.0/BSD-3; PyMuPDF's AGPL rules it out): a text layer read page
by page, a page without one rendered and read by OCR (docs/operations/parsing.md).

Text: pdfium's text page (content order, with the line breaks pdfium generates between lines).
Lines are the runs between those breaks, cut where a word jumps back or off the baseline, and put
in reading order by layout.py (the file's drawing order is not a reading order); words are the
runs between whitespace. A word's box is the union of the loose boxes (font ascent to descent) of its first
and last characters: two native calls a word rather than one a character, which keeps the reader
within reach of raw text extraction (bench/bench_parsing.py); for text on a line the two agree
with the union of every character's box. pdfium marks a word hyphenated across a line break with
U+FFFE and no break: the line is split there, the first part keeps a ``-`` (as pdftotext does).
Boxes are turned from PDF user space (origin bottom-left of the media box) into the contract's
top-left origin of the visible page (the crop box, after ``/Rotate``).

Filled forms and annotations: a PDF with an interactive form gets pdfium's form environment
(which draws the appearance of a field that has only a value, as form-filling tools leave them),
and a page with annotations is flattened before its text is read, so a field's value, a
typewriter (FreeText) note or a stamp is text of the page like what it is drawn over (pdftotext
reads field values too). Only a page where an annotation draws text is flattened (a field with a
value, a FreeText note), at most ``_MAX_FLATTENED_ANNOTATIONS`` annotations a page: past it the
page is read without them, with a warning.

One page is loaded at a time and closed before the next; a page to OCR is rendered at
``Limits.ocr_dpi`` (lowered to fit ``max_pixels_per_page``, computed before rendering) into one
grey bitmap handed to Tesseract and freed.
"""
from __future__ import annotations

import ctypes
import math
import re

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from chalicelib.features.parsing.readers import layout
from chalicelib.features.parsing.readers import ocr as tesseract
from chalicelib.features.parsing.readers.errors import NeedsOcr, ParseFailure
from chalicelib.features.parsing.readers.limits import Limits
from chalicelib.features.parsing.readers.nodes import ROOT, Budget, PageRange, check_page_count, node

_LINES = re.compile('[^\r\n\ufffe]+\ufffe?')
_WORDS = re.compile(r'\S+')
_MIN_OCR_DPI = 72
_MAX_FLATTENED_ANNOTATIONS = 2_000   # a page's annotations merged into its content (module docstring)
_OCR_OBJECTS = (pdfium_c.FPDF_PAGEOBJ_IMAGE, pdfium_c.FPDF_PAGEOBJ_PATH, pdfium_c.FPDF_PAGEOBJ_SHADING)
# FPDFText_GetLooseCharBox(text_page, index, FS_RECTF*), the same C function as pypdfium2's, with
# no declared argument types: called with a ready c_void_p (the text page), an int and the 4-float
# array (passed by address), ctypes converts only the int (~140 ns a call against ~240 ns through
# pypdfium2's declared prototype; bench/README.md "Parsing"). The text page and the array outlive
# every call (both are held by _text_nodes).
_LOOSE_BOX = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.cast(pdfium_c.FPDFText_GetLooseCharBox, ctypes.c_void_p).value)


class Outcome:
    def __init__(self) -> None:
        self.nodes: list[dict] = []
        self.page_count = 0
        self.next_page: int | None = None
        self.ocr_pages = 0
        self.warnings: list[str] = []


def open_pdf(data: bytes, *, forms: bool = False) -> pdfium.PdfDocument:
    """The document; ``forms``: with pdfium's form environment when it has an interactive form
    (before any page is loaded: it draws the fields that only hold a value)."""
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as error:
        text = str(error).lower()
        if 'password' in text:
            raise ParseFailure('encrypted', 'the PDF is encrypted with a password; upload it without one') from error
        if b'%%EOF' not in data[-2048:]:
            raise ParseFailure('truncated', 'the PDF is cut short: its end (%%EOF and the cross-reference table) is '
                                            'missing; upload the whole file') from error
        raise ParseFailure('corrupt', f'the PDF cannot be opened: {error}') from error
    if forms and pdfium_c.FPDF_GetFormType(document) == pdfium_c.FORMTYPE_ACRO_FORM:
        document.init_forms()
    return document


def _draws_text(document: pdfium.PdfDocument, page: pdfium.PdfPage, count: int) -> bool:
    """Whether one of the page's annotations draws text: a FreeText note, or a form field holding a
    value (links, highlights and empty fields draw none; flattening a page costs ~1 ms a field)."""
    form = document.formenv.raw if document.formenv is not None else None
    for index in range(count):
        annotation = pdfium_c.FPDFPage_GetAnnot(page, index)
        if not annotation:
            continue
        try:
            subtype = pdfium_c.FPDFAnnot_GetSubtype(annotation)
            if subtype == pdfium_c.FPDF_ANNOT_FREETEXT:
                return True
            # the value's length in bytes of UTF-16 with its terminator: over 2 is a non-empty value
            if subtype == pdfium_c.FPDF_ANNOT_WIDGET and form is not None and \
                    pdfium_c.FPDFAnnot_GetFormFieldValue(form, annotation, None, 0) > 2:
                return True
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annotation)
    return False


def _flattened(document: pdfium.PdfDocument, page: pdfium.PdfPage, number: int,
               warnings: list[str]) -> pdfium.PdfPage:
    """``page`` with its annotations' appearances merged into its content when one of them draws
    text (form fields' values, FreeText notes: module docstring), reloaded; else the page itself."""
    count = pdfium_c.FPDFPage_GetAnnotCount(page)
    if count <= 0:
        return page
    if count > _MAX_FLATTENED_ANNOTATIONS:
        warnings.append(f'page {number} has {count:,} annotations: read without them (at most '
                        f'{_MAX_FLATTENED_ANNOTATIONS:,} are merged into a page)')
        return page
    if not _draws_text(document, page, count):
        return page
    if pdfium_c.FPDFPage_Flatten(page, pdfium_c.FLAT_NORMALDISPLAY) != pdfium_c.FLATTEN_SUCCESS:
        return page   # nothing drawn (links only) or pdfium could not: the page as it is
    page.close()
    return document[number - 1]


class _Geometry:
    """PDF user space -> points from the top-left of the visible page, after /Rotate."""

    def __init__(self, page: pdfium.PdfPage):
        left, bottom, right, top = page.get_cropbox()
        self.left, self.top = left, top
        self.w, self.h = right - left, top - bottom
        self.rotation = page.get_rotation() % 360
        self.width, self.height = (self.h, self.w) if self.rotation in (90, 270) else (self.w, self.h)

    def box(self, x0: float, y0: float, x1: float, y1: float) -> list[float]:
        u0, u1 = x0 - self.left, x1 - self.left
        v0, v1 = self.top - y0, self.top - y1
        if self.rotation == 90:
            u0, v0, u1, v1 = self.h - v0, u0, self.h - v1, u1
        elif self.rotation == 180:
            u0, v0, u1, v1 = self.w - u0, self.h - v0, self.w - u1, self.h - v1
        elif self.rotation == 270:
            u0, v0, u1, v1 = v0, self.w - u0, v1, self.w - u1
        return [round(min(u0, u1), 2), round(min(v0, v1), 2), round(max(u0, u1), 2), round(max(v0, v1), 2)]


def _text_nodes(text_page: pdfium.PdfTextPage, text: str, geometry: _Geometry, page: int) -> tuple[list[dict], int]:
    """Lines and words of one page, in reading order: the hot loop of text PDFs
    (bench/bench_parsing.py, bench/README.md "Parsing"). Per word: two native box calls through
    ``_LOOSE_BOX``, the box rounded by arithmetic. pdfium's lines (in drawing order) are cut
    where a word jumps back left or off the baseline and put in reading order by ``layout``;
    then the nodes are written as literals (ids from a cached suffix). A line's box is its
    words' union."""
    handle = ctypes.c_void_p(ctypes.cast(text_page.raw, ctypes.c_void_p).value)
    rect = (ctypes.c_float * 4)()            # FS_RECTF: left, top, right, bottom
    view = memoryview(rect).cast('B').cast('f')
    loose_box = _LOOSE_BOX
    left, top = geometry.left, geometry.top
    turn = geometry.box if geometry.rotation else None
    lines: list[tuple[list[str], list[list[float]]]] = []
    for line in _LINES.finditer(text):
        line_text = line.group()
        words = line_text.split()
        if not words:
            continue
        # pdfium separates words by one space: each word starts two past the previous one's end;
        # otherwise (runs of spaces, tabs) the starts are looked up
        starts = None if ' '.join(words) == line_text else [match.start() for match in _WORDS.finditer(line_text)]
        if '\ufffe' in line_text or '\x00' in line_text:
            contents = [word.replace('\ufffe', '-').replace('\x00', '') for word in words]
        else:
            contents = words
        offset = line.start()
        first = offset
        boxes = []
        for index, word in enumerate(words):
            if starts is not None:
                first = offset + starts[index]
            last = first + len(word) - 1
            loose_box(handle, first, rect)
            x0, y1, x1, y0 = view
            if last != first:
                loose_box(handle, last, rect)
                a0, b1, a1, b0 = view
                if a1 > x1:
                    x1 = a1
                if a0 < x0:
                    x0 = a0
                if b0 < y0:
                    y0 = b0
                if b1 > y1:
                    y1 = b1
            first = last + 2
            # to 1/100 pt without round()'s call: (v * 100.0 + 0.5) // 1.0 / 100.0
            boxes.append([((x0 - left) * 100.0 + 0.5) // 1.0 / 100.0, ((top - y1) * 100.0 + 0.5) // 1.0 / 100.0,
                          ((x1 - left) * 100.0 + 0.5) // 1.0 / 100.0, ((top - y0) * 100.0 + 0.5) // 1.0 / 100.0]
                         if turn is None else turn(x0, y0, x1, y1))
        lines.append((contents, boxes))
    # pdfium's lines cut where a word jumps (a cell drawn after one to its right, on another
    # baseline), seen the way most of the page's lines run (a /Rotate or sideways text)
    way = layout.direction([boxes for _, boxes in lines])
    # lines running right to left are right-to-left script (Hebrew, Arabic), not a page upside
    # down (a PDF turns a page by /Rotate, which the boxes already follow): read top to bottom,
    # cut only where a word leaves the baseline
    backwards = way == (-1, 0)
    if backwards:
        way = (1, 0)
    split: list[tuple[list[str], list[list[float]]]] = []
    for contents, boxes in lines:
        cuts = layout.runs(boxes, way, backwards=backwards) if len(boxes) > 1 else [0]
        if len(cuts) == 1:
            split.append((contents, boxes))
        else:
            for a, b in zip(cuts, cuts[1:] + [len(boxes)], strict=True):
                split.append((contents[a:b], boxes[a:b]))
    return layout.emit_lines(split, page, way=way)


def _page_text(text_page: pdfium.PdfTextPage) -> str:
    count = text_page.count_chars()
    text = text_page.get_text_range() if count > 0 else ''
    if len(text) != count:
        # characters outside the BMP (two UTF-16 units, one char index): one character at a time
        text = ''.join(chr(pdfium_c.FPDFText_GetUnicode(text_page.raw, index) or 32) for index in range(count))
    return text


def _needs_ocr(page: pdfium.PdfPage) -> bool:
    """No text layer, but something drawn: a scan, or text turned into outlines."""
    return any(True for _ in page.get_objects(filter=_OCR_OBJECTS, max_depth=3))


def _render_for_ocr(page: pdfium.PdfPage, geometry: _Geometry, number: int, limits: Limits,
                    warnings: list[str]) -> tuple[bytes, int]:
    dpi = limits.ocr_dpi
    pixels = math.ceil(geometry.width * dpi / 72) * math.ceil(geometry.height * dpi / 72)
    if pixels > limits.max_pixels_per_page:
        dpi = int(dpi * math.sqrt(limits.max_pixels_per_page / pixels))
        if dpi < _MIN_OCR_DPI:
            raise ParseFailure('too-many-pixels', f'page {number} is too large to read by OCR at {_MIN_OCR_DPI} dpi '
                                                  f'within {limits.describe("max_pixels_per_page")} pixels',
                               page=number, limit='max_pixels_per_page')
        warnings.append(f'page {number} was rendered for OCR at {dpi} dpi to stay within '
                        f'{limits.describe("max_pixels_per_page")} pixels')
    bitmap = page.render(scale=dpi / 72, grayscale=True, may_draw_forms=True)
    try:
        width, height, stride = bitmap.width, bitmap.height, bitmap.stride
        buffer = memoryview(bitmap.buffer).cast('B')
        if bitmap.n_channels != 1:
            raise ParseFailure('ocr-failed', f'page {number} did not render in grey', page=number)
        header = b'P5\n%d %d\n255\n' % (width, height)
        if stride == width:
            image = header + bytes(buffer[:width * height])
        else:
            image = header + b''.join(bytes(buffer[row * stride:row * stride + width]) for row in range(height))
    finally:
        bitmap.close()
    return image, dpi


def read_pdf(data: bytes, *, first_page: int, budget: Budget, limits: Limits, ocr: bool,
             page_limit: int | None = None) -> Outcome:
    outcome = Outcome()
    document = open_pdf(data, forms=True)
    try:
        outcome.page_count = count = len(document)
        if count == 0:
            raise ParseFailure('corrupt', 'the PDF has no pages')
        check_page_count(count, limits, 'the PDF')
        pacing = PageRange(budget, first_page, page_limit)
        for number in range(first_page, count + 1):
            if pacing.stop_before(number):
                outcome.next_page = number
                break
            budget.check(f'page {number}', page=number)
            try:
                page = document[number - 1]
            except pdfium.PdfiumError as error:
                raise ParseFailure('corrupt', f'page {number} of the PDF cannot be loaded: its page tree is broken '
                                              '(it may loop)', page=number) from error
            try:
                page = _flattened(document, page, number, outcome.warnings)
                geometry = _Geometry(page)
                text_page = page.get_textpage()
                try:
                    text = _page_text(text_page)
                    if text.strip():
                        nodes, chars = _text_nodes(text_page, text, geometry, number)
                    else:
                        nodes, chars = None, 0
                finally:
                    text_page.close()
                if nodes is None and _needs_ocr(page):
                    if not ocr:
                        if number > first_page:
                            outcome.next_page = number
                            break
                        raise NeedsOcr(number)
                    image, dpi = _render_for_ocr(page, geometry, number, limits, outcome.warnings)
                    tsv = tesseract.tesseract_tsv_or_stop(image, dpi=dpi, page=number, first_page=first_page,
                                                          deadline=budget.deadline, limits=limits)
                    del image
                    if tsv is None:
                        outcome.next_page = number
                        break
                    nodes, chars = tesseract.page_nodes(tsv, page=number, points_per_pixel=72 / dpi,
                                                        width=geometry.width, height=geometry.height,
                                                        index=number - 1)
                    outcome.ocr_pages += 1
                else:
                    nodes = [node(f'p{number}', ROOT, 'page', None, number - 1,
                                  {'page': number, 'width': round(geometry.width, 2),
                                   'height': round(geometry.height, 2)})] + (nodes or [])
            finally:
                page.close()
            budget.text(chars, page=number)
            outcome.nodes.extend(nodes)
            pacing.done()
    finally:
        document.close()
    return outcome


def survey_pdf(data: bytes, *, limits: Limits) -> tuple[int, bool]:
    """(pages, whether the first page needs OCR) of a PDF, its page limit checked: what the parse
    stage plans page ranges from (features/parsing/fanout.py). One page is loaded."""
    document = open_pdf(data)
    try:
        count = len(document)
        if count == 0:
            raise ParseFailure('corrupt', 'the PDF has no pages')
        check_page_count(count, limits, 'the PDF')
        try:
            page = document[0]
        except pdfium.PdfiumError as error:
            raise ParseFailure('corrupt', 'page 1 of the PDF cannot be loaded', page=1) from error
        try:
            text_page = page.get_textpage()
            try:
                scan = text_page.count_chars() == 0 and _needs_ocr(page)
            finally:
                text_page.close()
        finally:
            page.close()
        return count, scan
    finally:
        document.close()
