"""The media type of a file from its first bytes; the name and the label are only claims.

A claim (the upload's media type, unless generic, and the file name's extension) that names a
different kind of file than the bytes are is ``mislabelled``: a PNG named ``invoice.pdf`` fails
rather than being read as something its sender did not say it was. Text formats have no magic
bytes: HTML is recognised by its markup, and a text file is read as CSV when it is claimed to be
CSV (``text/csv`` or ``.csv``/``.tsv``), as plain text otherwise.

Written here rather than taken from a library (python-magic, filetype): the types read here are
few, each recognised by a fixed signature, and libmagic is a native dependency the zip-packaged
Lambda would have to carry.
"""
from __future__ import annotations

import io
import zipfile

from chalicelib.features.parsing.readers.errors import ParseFailure

PDF = 'application/pdf'
PNG = 'image/png'
JPEG = 'image/jpeg'
TIFF = 'image/tiff'
DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'
XLSX = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'
PPTX = 'application/vnd.openxmlformats-officedocument.presentationml.presentation'
CSV = 'text/csv'
HTML = 'text/html'
TEXT = 'text/plain'
ZIP = 'application/zip'
OCTETS = 'application/octet-stream'
OLE = 'application/x-ole-storage'   # a legacy Office file (.doc, .xls, .ppt, .msg): no reader here

_SIGNATURES = (
    (b'\x89PNG\r\n\x1a\n', PNG),
    (b'\xff\xd8\xff', JPEG),
    (b'II*\x00', TIFF),
    (b'MM\x00*', TIFF),
    (b'II+\x00', TIFF),
    (b'MM\x00+', TIFF),
    (b'GIF87a', 'image/gif'),
    (b'GIF89a', 'image/gif'),
    (b'BM', 'image/bmp'),
    (b'%!PS', 'application/postscript'),
    (b'\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1', OLE),   # .doc, .xls, .ppt, .msg
    (b'\x1f\x8b', 'application/gzip'),
    (b'7z\xbc\xaf\x27\x1c', 'application/x-7z-compressed'),
    (b'Rar!', 'application/vnd.rar'),
)

_EXTENSIONS = {
    'pdf': PDF, 'png': PNG, 'jpg': JPEG, 'jpeg': JPEG, 'jpe': JPEG, 'tif': TIFF, 'tiff': TIFF,
    'docx': DOCX, 'xlsx': XLSX, 'pptx': PPTX, 'csv': CSV, 'tsv': CSV, 'html': HTML, 'htm': HTML,
    'xhtml': HTML, 'txt': TEXT, 'text': TEXT, 'md': TEXT, 'log': TEXT,
}
# Labels that say nothing about the bytes: the generic ones, and what tools send by default
# (`curl --data-binary` labels any body application/x-www-form-urlencoded; a form field without
# a type is multipart/form-data).
_GENERIC_LABELS = {'', OCTETS, 'binary/octet-stream', 'application/binary', 'application/unknown',
                   'application/x-www-form-urlencoded', 'multipart/form-data', 'application/force-download',
                   'application/download'}
# Other names senders use for the types read here: legacy and vendor spellings, and the label
# Windows gives a .csv file (browsers on Windows upload CSV as application/vnd.ms-excel, the
# program registered for the extension; the bytes decide whether it is a workbook or text).
_LABEL_ALIASES = {'image/jpg': JPEG, 'image/pjpeg': JPEG, 'image/x-png': PNG, 'image/tif': TIFF,
                  'image/x-tiff': TIFF, 'application/x-pdf': PDF, 'application/acrobat': PDF,
                  'application/csv': CSV, 'text/x-csv': CSV, 'text/comma-separated-values': CSV,
                  'application/x-csv': CSV, 'application/xhtml+xml': HTML}
# Labels that name a family of files rather than one kind: the bytes decide within it. A legacy
# Office file (.doc, .xls, .ppt, .msg) is an OLE compound file, read by no reader here: its label
# is right, and the parse says "no parser" (the pipelines still run) rather than "mislabelled".
# An Office Open XML file is a zip, and some clients label it so.
_OFFICE_ZIPS = {DOCX, XLSX, PPTX, ZIP}
_LOOSE = {'application/vnd.ms-excel': {CSV, TEXT, XLSX, OLE}, 'application/msword': {OLE},
          'application/vnd.ms-powerpoint': {OLE}, 'application/vnd.ms-outlook': {OLE},
          ZIP: _OFFICE_ZIPS, 'application/x-zip-compressed': _OFFICE_ZIPS,
          'application/x-zip': _OFFICE_ZIPS}
_TEXTUAL = {CSV, HTML, TEXT}


def _kind(media_type: str) -> str:
    """What a media type claims the bytes are: a binary type's own name, or 'text'."""
    if media_type in _TEXTUAL or media_type.startswith('text/') or media_type in (
            'application/xhtml+xml', 'application/csv', 'application/json', 'application/xml'):
        return 'text'
    return media_type


def claims(media_type: str | None, filename: str | None) -> list[str]:
    """The media types the upload's label and its file name claim (generic labels claim nothing)."""
    out = []
    label = (media_type or '').split(';')[0].strip().lower()
    if label and label not in _GENERIC_LABELS:
        out.append(_LABEL_ALIASES.get(label, label))
    if filename and '.' in filename:
        extension = filename.rsplit('.', 1)[1].strip().lower()
        if extension in _EXTENSIONS:
            out.append(_EXTENSIONS[extension])
    return out


def _zip_type(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist()[:10_000])
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise ParseFailure('corrupt', f'the file starts like a zip archive but is not one: {error}') from error
    if 'word/document.xml' in names:
        return DOCX
    if 'xl/workbook.xml' in names:
        return XLSX
    if 'ppt/presentation.xml' in names:
        return PPTX
    if 'mimetype' in names:
        return 'application/vnd.oasis.opendocument'
    return ZIP


def _looks_html(head: bytes) -> bool:
    text = head[:4096].lstrip(b'\xef\xbb\xbf \t\r\n').lower()
    if text.startswith((b'<!doctype html', b'<html')):
        return True
    return (text.startswith((b'<?xml', b'<!doctype', b'<!--')) and b'<html' in text) or (
        text.startswith(b'<') and any(tag in text for tag in (b'<body', b'<head', b'<p>', b'<div', b'<table')))


def _looks_text(head: bytes) -> bool:
    if head.startswith((b'\xff\xfe', b'\xfe\xff')):
        return True      # UTF-16 with its byte order mark
    sample = head[:8192]
    if b'\x00' in sample:
        return False
    controls = sum(1 for byte in sample if byte < 9 or 13 < byte < 32)
    return controls <= len(sample) // 100


def sniff(data: bytes, *, media_type: str | None = None, filename: str | None = None) -> str:
    """The media type of ``data``; raises ``ParseFailure('empty' | 'mislabelled' | 'corrupt')``."""
    if not data:
        raise ParseFailure('empty', 'the file is empty (0 bytes)')
    head = data[:8192]
    sniffed = None
    if b'%PDF-' in data[:1024]:
        sniffed = PDF
    elif head[8:12] == b'WEBP' and head.startswith(b'RIFF'):
        sniffed = 'image/webp'
    elif head.startswith(b'PK\x03\x04'):
        sniffed = _zip_type(data)
    else:
        for signature, kind in _SIGNATURES:
            if head.startswith(signature):
                sniffed = kind
                break
    claimed = claims(media_type, filename)
    if sniffed is None:
        if not _looks_text(head):
            sniffed = OCTETS
        elif _looks_html(head) or HTML in claimed:
            sniffed = HTML
        elif CSV in claimed:
            sniffed = CSV
        else:
            sniffed = TEXT
    if sniffed == TEXT and any(claim in _LOOSE for claim in claimed) and TEXT not in claims(None, filename):
        sniffed = CSV   # a .csv uploaded from Windows (labelled application/vnd.ms-excel)
    for claim in claimed:
        if sniffed in _LOOSE.get(claim, ()):
            continue
        if _kind(claim) != _kind(sniffed):
            said_by = 'name' if claim in claims(None, filename) else 'media type'
            raise ParseFailure('mislabelled',
                               f'the file is {describe(sniffed)} but its {said_by} says {describe(claim)}')
    return sniffed


def describe(media_type: str) -> str:
    return {PDF: 'a PDF', PNG: 'a PNG image', JPEG: 'a JPEG image', TIFF: 'a TIFF image', DOCX: 'a Word document',
            XLSX: 'an Excel workbook', CSV: 'CSV text', HTML: 'HTML', TEXT: 'plain text',
            OCTETS: 'not a known kind of file'}.get(media_type, media_type)
