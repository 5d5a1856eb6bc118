"""A page of an uploaded file drawn as a PNG (docs/api/documents.md "Page images and words"): a
pure library, bytes in and PNG bytes out (no S3, no table; pages.py caches and serves it).

    image = render_page(data, media_type='application/pdf', filename='a.pdf', page=1, dpi=150)
    image.png, image.width, image.height, image.dpi, image.page_count

What draws what:
  * a PDF page (a text layer or a scan inside a PDF) is rendered by pypdfium2, the library the
    readers already read it with, at ``dpi`` (the page's crop box after /Rotate, the same space
    as the parsed document's boxes: readers/pdf.py ``_Geometry``);
  * a PNG, JPEG or TIFF (one frame a page) is decoded by Pillow and scaled to ``dpi``; a page is
    never enlarged past the image's own resolution (its dpi, 72 when it declares none, as the
    readers count its points: readers/images.py), so the dpi used may be lower than asked.

Caps, each checked before any pixel is drawn: the dpi used is lowered until the image fits
``MAX_PIXELS`` pixels and ``MAX_SIDE`` pixels a side (the answer says the dpi used); an image's
declared pixels past the readers' ``max_pixels_per_page`` are refused before decoding (a
decompression bomb costs a header read). The caller's time budget (core/budget.py) is checked
before the decode, the draw and the encode.

Always PNG, never JPEG: a reviewer reads glyph edges and thin rules, which JPEG blurs; a page
without colour is written as 8-bit grey (a third of RGB's bytes); see bench/README.md
"Page images (issue 49)" for the sizes. The PNG encoder is written here (zlib and struct from the
standard library, ~20 lines) rather than taken from Pillow: pypdfium2's bitmap is encoded without
converting it to a Pillow image, and it measured smaller and faster than Pillow's own PNG writer
on the corpus (bench/README.md "Page images (issue 49)").

Pillow is imported lazily, for image files only (a PDF's page never loads it). Every deployment
carries it: requirements.txt puts it in the zip-packaged API function (~8 MiB of the zip,
bench/README.md "Package sizes"; docs/operations/deploy.md "The package"), so a scanned PNG,
JPEG or TIFF is drawn on AWS as under ``make run`` and in the OCR image.
"""
from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass

from chalicelib.core import budget, limits
from chalicelib.features.parsing.readers.errors import ParseFailure
from chalicelib.features.parsing.readers.limits import DEFAULT_LIMITS
from chalicelib.features.parsing.readers.sniff import JPEG, PDF, PNG, TIFF, describe, sniff

MAX_PIXELS = limits.PAGE_IMAGE_MAX_PIXELS   # pixels of one page image (the dpi is lowered to fit)
MAX_SIDE = limits.PAGE_IMAGE_MAX_SIDE       # pixels of one side of a page image (the dpi is lowered to fit)
PNG_LEVEL = 6                # zlib level: level 1 is ~10 % bigger and not much faster (bench/README.md)
PAGED = (PDF, PNG, JPEG, TIFF)


@dataclass(frozen=True)
class PageImage:
    png: bytes
    width: int            # pixels
    height: int
    dpi: int              # the dpi used (pixel = point * dpi / 72)
    page_count: int


class NotPaged(Exception):
    """The file has no pages to draw (a Word document, a workbook, HTML, text)."""

    def __init__(self, kind: str) -> None:
        super().__init__(f'{describe(kind)} has no pages to render')
        self.kind = kind


class NoPage(Exception):
    def __init__(self, page: int, count: int) -> None:
        super().__init__(f'Page {page} does not exist: the document has {count} page{"s" if count != 1 else ""}')
        self.page, self.count = page, count


class Unreadable(Exception):
    """The file cannot be drawn (corrupt, encrypted, over the readers' limits)."""


def fitted_dpi(width_pt: float, height_pt: float, dpi: int) -> int:
    """``dpi`` lowered until a page of ``width_pt`` x ``height_pt`` points fits MAX_SIDE and
    MAX_PIXELS (at least 1)."""
    longest = max(width_pt, height_pt, 1.0)
    dpi = min(dpi, math.floor(MAX_SIDE * 72 / longest))
    area = max(width_pt * height_pt, 1.0)
    dpi = min(dpi, math.floor(math.sqrt(MAX_PIXELS / area) * 72))
    while dpi > 1 and _pixels(width_pt, dpi) * _pixels(height_pt, dpi) > MAX_PIXELS:
        dpi -= 1
    return max(1, dpi)


def _pixels(points: float, dpi: int) -> int:
    return max(1, math.ceil(points * dpi / 72 - 1e-6))


def render_page(data: bytes, *, media_type: str | None, filename: str | None, page: int, dpi: int) -> PageImage:
    """Page ``page`` (from 1) of the file drawn at ``dpi`` (lowered to fit the caps)."""
    try:
        kind = sniff(data, media_type=media_type, filename=filename)
    except ParseFailure as error:
        raise Unreadable(str(error)) from error
    if kind not in PAGED:
        raise NotPaged(kind)
    if len(data) > DEFAULT_LIMITS.max_bytes:
        raise Unreadable(f'the file is {len(data):,} bytes, more than {DEFAULT_LIMITS.describe("max_bytes")} allows')
    if kind == PDF:
        return _pdf_page(data, page, dpi)
    return _image_page(data, page, dpi)


# ----------------------------------------------------------------------------- PDF

def _pdf_page(data: bytes, number: int, dpi: int) -> PageImage:
    import pypdfium2 as pdfium  # noqa: PLC0415 - lazy: only a page image's first render loads pdfium

    from chalicelib.features.parsing.readers.pdf import open_pdf  # noqa: PLC0415 - lazy, with pdfium
    try:
        document = open_pdf(data, forms=True)
    except ParseFailure as error:
        raise Unreadable(str(error)) from error
    try:
        count = len(document)
        if not 1 <= number <= count:
            raise NoPage(number, count)
        try:
            page = document[number - 1]
        except pdfium.PdfiumError as error:
            raise Unreadable(f'page {number} of the PDF cannot be loaded: its page tree is broken') from error
        try:
            left, bottom, right, top = page.get_cropbox()
            width, height = right - left, top - bottom
            if page.get_rotation() % 180 == 90:
                width, height = height, width
            used = fitted_dpi(width, height, dpi)
            budget.check(f'rendering page {number} at {used} dpi')
            # pypdfium2 sizes the bitmap ceil(points * scale): 792 * (150 / 72) is 1650.0000000000002
            # in floating point, one pixel too many; a hair under the scale keeps it to point * dpi / 72
            bitmap = page.render(scale=used / 72 * (1 - 1e-9), may_draw_forms=True, rev_byteorder=True)
            try:
                budget.check(f'encoding page {number} ({bitmap.width} x {bitmap.height} pixels)')
                png = encode_png(bitmap.buffer, bitmap.width, bitmap.height, bitmap.stride, bitmap.n_channels)
                return PageImage(png, bitmap.width, bitmap.height, used, count)
            finally:
                bitmap.close()
        finally:
            page.close()
    finally:
        document.close()


# ----------------------------------------------------------------------------- images

def _image_page(data: bytes, number: int, dpi: int) -> PageImage:
    from PIL import Image  # noqa: PLC0415 - lazy: image files only (module docstring)

    from chalicelib.features.parsing.readers import images  # noqa: PLC0415 - lazy: Pillow
    caps = DEFAULT_LIMITS
    try:
        image = images._open(data, caps)
    except ParseFailure as error:
        raise Unreadable(str(error)) from error
    try:
        try:
            count = getattr(image, 'n_frames', 1)
            if not 1 <= number <= count:
                raise NoPage(number, count)
            image.seek(number - 1)
            images._check_pixels(image, number, caps)
        except ParseFailure as error:
            raise Unreadable(str(error)) from error
        except (EOFError, OSError, ValueError, SyntaxError) as error:
            raise Unreadable(f'page {number} of the image cannot be read: {error}') from error
        own = images._dpi(image) or 72.0
        px_width, px_height = image.size
        points_w, points_h = px_width * 72 / own, px_height * 72 / own
        used = fitted_dpi(points_w, points_h, min(dpi, max(1, round(own))))
        width, height = _pixels(points_w, used), _pixels(points_h, used)
        width, height = min(width, px_width), min(height, px_height)
        budget.check(f'decoding page {number} ({px_width} x {px_height} pixels)')
        try:
            frame = image
            if frame.mode not in ('L', 'RGB'):
                frame = frame.convert('L' if frame.mode in ('1', 'I;16', 'I', 'F') or _grey_palette(frame) else 'RGB')
            if (width, height) != frame.size:
                frame = frame.resize((width, height), Image.Resampling.LANCZOS, reducing_gap=3.0)
            pixels = frame.tobytes()
        except (OSError, ValueError, SyntaxError) as error:
            raise Unreadable(f'page {number} of the image cannot be decoded: {error}') from error
        channels = 1 if frame.mode == 'L' else 3
        budget.check(f'encoding page {number} ({width} x {height} pixels)')
        png = encode_png(pixels, width, height, width * channels, channels)
        return PageImage(png, width, height, used, count)
    finally:
        image.close()


def _grey_palette(image) -> bool:
    """A palette image whose every colour is a grey (scanners write grey scans so): scaled as grey,
    a third of RGB's work (bench/README.md "Page images (issue 49)")."""
    if image.mode != 'P' or 'transparency' in image.info:
        return False
    palette = image.getpalette() or []
    return bool(palette) and palette[0::3] == palette[1::3] == palette[2::3]


# ----------------------------------------------------------------------------- PNG

def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body) & 0xFFFFFFFF)


def encode_png(buffer, width: int, height: int, stride: int, channels: int) -> bytes:
    """8-bit grey (1 channel) or RGB (3) pixels, rows ``stride`` bytes apart -> a PNG (filter
    None, zlib PNG_LEVEL). RGB whose every pixel is grey is written as grey."""
    if channels not in (1, 3):
        raise ValueError('encode_png writes grey (1 channel) or RGB (3 channels)')
    view = memoryview(buffer).cast('B')
    row = width * channels
    packed = view[:row * height].tobytes() if stride == row else b''.join(
        view[r * stride:r * stride + row] for r in range(height))
    if channels == 3:
        red = packed[0::3]
        if red == packed[1::3] == packed[2::3]:
            packed, channels, row = red, 1, width
    raw = b''.join(b'\x00' + packed[r * row:(r + 1) * row] for r in range(height))
    header = struct.pack('>IIBBBBB', width, height, 8, 0 if channels == 1 else 2, 0, 0, 0)
    return (b'\x89PNG\r\n\x1a\n' + _chunk(b'IHDR', header) + _chunk(b'IDAT', zlib.compress(raw, PNG_LEVEL))
            + _chunk(b'IEND', b''))
