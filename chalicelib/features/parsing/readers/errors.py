"""The ways a read fails, each with a short ``cause`` code and a message a user understands.

The causes (docs/operations/parsing.md "What each error means"): ``empty``, ``too-large``,
``mislabelled``, ``encrypted``, ``corrupt``, ``truncated``, ``too-many-pages``,
``too-many-pixels``, ``too-much-text``, ``too-many-cells``, ``zip-bomb``, ``time-budget``,
``ocr-failed``, ``ocr-unavailable``, ``no-parser`` (``NoParser``) and ``needs-ocr``
(``NeedsOcr``: not a failure of the document, a hand-over to the OCR function).
"""
from __future__ import annotations


class ParseFailure(Exception):
    """The document cannot be read; ``cause`` names why, ``str(error)`` says it to a user."""

    def __init__(self, cause: str, message: str, *, page: int | None = None, limit: str | None = None):
        super().__init__(message)
        self.cause = cause
        self.message = message
        self.page = page          # the 1-based page the failure happened on, when it has pages
        self.limit = limit        # the name of the ``Limits`` field that was hit, if one was

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.cause!r}, {self.message!r})'


class NoParser(ParseFailure):
    """No reader for this type of file: the family is kept, its pipelines run on its metadata."""

    def __init__(self, media_type: str):
        super().__init__('no-parser', f'no parser for {media_type}')
        self.media_type = media_type


class NeedsOcr(ParseFailure):
    """Page ``page`` has no text layer and this process has no OCR (``ocr=False``): read again
    from ``first_page=page`` where Tesseract is (the OCR function on AWS)."""

    def __init__(self, page: int):
        super().__init__('needs-ocr', f'page {page} has no text layer: it needs OCR', page=page)
