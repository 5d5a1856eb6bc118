"""PNG, JPEG and TIFF images read by OCR, one page (TIFF frame) at a time.

The declared size is read from the header with Pillow (``Image.open`` decodes nothing) and
checked against ``Limits.max_pixels_per_page`` before any pixel is decoded, by us or by
Tesseract: a 50,000 x 50,000 PNG of a few hundred bytes is refused, never inflated. Pillow's own
decompression-bomb guard (``DecompressionBombError``, raised at open past twice its
``MAX_IMAGE_PIXELS``) is reported the same way. A single-frame image goes to Tesseract as its
own bytes (Tesseract decodes it, in its own memory-capped process); a frame of a multi-page
TIFF is decoded alone and handed over as a PNM. Points are pixels at the image's own dpi when it
declares one (72 otherwise, so a point is a pixel).

This module runs where OCR runs (the OCR function's image, tests, ``make run``): the
zip-packaged worker reads with ``ocr=False`` and ``read`` hands an image over without importing
it. (Pillow is in requirements.txt, hence in the zip too, for the API's page images of image
files: render.py.) The checks above (pixels per page, page
count, a corrupt or cut-short file) therefore run in the OCR function, before it decodes
anything; a hostile image costs the worker one queue message, never a decode.
"""
from __future__ import annotations

import io
import warnings

from PIL import Image, UnidentifiedImageError

from chalicelib.features.parsing.readers import ocr as tesseract
from chalicelib.features.parsing.readers.errors import ParseFailure
from chalicelib.features.parsing.readers.limits import Limits
from chalicelib.features.parsing.readers.nodes import Budget, PageRange, check_page_count

_UNKNOWN_DPI_FOR_TESSERACT = 300


class Outcome:
    def __init__(self) -> None:
        self.nodes: list[dict] = []
        self.page_count = 0
        self.next_page: int | None = None
        self.warnings: list[str] = []


def _open(data: bytes, limits: Limits) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as error:
        raise ParseFailure('too-many-pixels', f'the image declares more pixels than '
                                              f'{limits.describe("max_pixels_per_page")} allows: {error}',
                           page=1, limit='max_pixels_per_page') from error
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise ParseFailure('corrupt', f'the image cannot be read: {error}') from error


def _check_pixels(image: Image.Image, number: int, limits: Limits) -> None:
    width, height = image.size
    if width * height > limits.max_pixels_per_page:
        raise ParseFailure('too-many-pixels', f'page {number} is {width:,} x {height:,} pixels, more than '
                                              f'{limits.describe("max_pixels_per_page")} allows',
                           page=number, limit='max_pixels_per_page')
    if width == 0 or height == 0:
        raise ParseFailure('corrupt', f'page {number} of the image has no pixels', page=number)


def _verify(data: bytes, image_format: str | None) -> None:
    """A PNG's chunks and their CRCs checked without inflating its pixels (Pillow's ``verify``):
    a PNG cut short fails here as ``truncated`` rather than inside Tesseract."""
    if image_format != 'PNG':
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', Image.DecompressionBombWarning)
            Image.open(io.BytesIO(data)).verify()
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        if 'truncated' in str(error).lower() or isinstance(error, EOFError):
            raise ParseFailure('truncated', 'the PNG image is cut short: upload the whole file', page=1) from error
        raise ParseFailure('corrupt', f'the PNG image is damaged: {error}', page=1) from error


def _dpi(image: Image.Image) -> float | None:
    value = image.info.get('dpi')
    try:
        dpi = float(value[0]) if value else 0.0
    except (TypeError, ValueError, IndexError):
        return None
    return dpi if 50 <= dpi <= 4800 else None


def read_image(data: bytes, *, first_page: int, budget: Budget, limits: Limits,
               page_limit: int | None = None) -> Outcome:
    """OCR of the image's pages from ``first_page`` (only where OCR runs: ``read`` hands an image
    over with ``NeedsOcr`` before this module is imported when ``ocr=False``)."""
    outcome = Outcome()
    image = _open(data, limits)
    try:
        try:
            frames = getattr(image, 'n_frames', 1)
        except (OSError, ValueError, SyntaxError) as error:
            raise ParseFailure('corrupt', f'the image\'s frames cannot be read: {error}') from error
        outcome.page_count = frames
        check_page_count(frames, limits, 'the image')
        _check_pixels(image, 1, limits)
        pacing = PageRange(budget, first_page, page_limit)
        for number in range(first_page, frames + 1):
            if pacing.stop_before(number):
                outcome.next_page = number
                break
            budget.check(f'page {number}', page=number)
            try:
                image.seek(number - 1)
            except (EOFError, OSError, ValueError) as error:
                raise ParseFailure('corrupt', f'page {number} of the image cannot be read: {error}',
                                   page=number) from error
            _check_pixels(image, number, limits)
            dpi = _dpi(image)
            width, height = image.size
            if frames == 1:
                _verify(data, image.format)
                payload = data
            else:
                try:
                    frame = image if image.mode in ('1', 'L', 'RGB') else image.convert('RGB')
                    buffer = io.BytesIO()
                    frame.save(buffer, format='PPM')
                    payload = buffer.getvalue()
                    del frame, buffer
                except (OSError, ValueError, SyntaxError) as error:
                    raise ParseFailure('corrupt', f'page {number} of the image cannot be decoded: {error}',
                                       page=number) from error
            tsv = tesseract.tesseract_tsv_or_stop(payload, dpi=round(dpi or _UNKNOWN_DPI_FOR_TESSERACT), page=number,
                                                  first_page=first_page, deadline=budget.deadline, limits=limits)
            del payload
            if tsv is None:
                outcome.next_page = number
                break
            points = 72 / (dpi or 72)
            nodes, chars = tesseract.page_nodes(tsv, page=number, points_per_pixel=points, width=width * points,
                                                height=height * points, index=number - 1)
            budget.text(chars, page=number)
            outcome.nodes.extend(nodes)
            pacing.done()
    finally:
        image.close()
    return outcome
