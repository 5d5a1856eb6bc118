"""Where the parse stage runs: in the OCR function (Tesseract) or the zip worker, and where pages
that need OCR go (docs/api/processing.md "The parse stage"). Shared by stage.py (the chain of
messages) and fanout.py (page ranges).
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar

_in_ocr_function: ContextVar[bool] = ContextVar('in_ocr_function', default=False)


@contextlib.contextmanager
def ocr_function():
    """Marks the work done inside as the OCR function's (front/handlers.py ``ocr_batch``): there
    pages without a text layer are read with Tesseract."""
    token = _in_ocr_function.set(True)
    try:
        yield
    finally:
        _in_ocr_function.reset(token)


def in_ocr_function() -> bool:
    return _in_ocr_function.get()


def _ocr_queue() -> str:
    from chalicelib.core.config import get_config  # noqa: PLC0415 - small
    return get_config().ocr_queue_name


def ocr_queue() -> str:
    """The OCR function's queue name ('' when none is configured)."""
    return _ocr_queue()


def ocr_here() -> bool:
    """Whether this process reads scans itself: in the OCR function, yes; in the zip worker, only
    when Tesseract is there and no OCR function's queue is configured (``OCR_QUEUE_NAME`` empty
    turns the hand-over off). Otherwise the readers raise NeedsOcr and the engine continues the
    run on the OCR queue (docs/api/processing.md "The parse stage")."""
    from chalicelib.core.config import get_config  # noqa: PLC0415 - small
    if _in_ocr_function.get():
        return True
    return not get_config().ocr_queue_name and _readers().ocr_available()


def _readers():
    from chalicelib.features.parsing import readers  # noqa: PLC0415 - lazy: pypdfium2, lxml... only in the worker
    return readers
