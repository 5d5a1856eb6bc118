"""DOCX with python-docx and XLSX with python-calamine, behind a zip-bomb guard.

Before either library opens the file, the zip's central directory is checked: the members'
declared inflated sizes added up against ``Limits.max_uncompressed_bytes`` and each member's
ratio (inflated / deflated, for members over 1 MiB) against ``max_compression_ratio`` (real
DOCX/XLSX XML deflates 5-30 times; deflate's ceiling is ~1,030). Python's zipfile never inflates a
member past its declared size (and checks its CRC), so the declared sizes bound what is read.

DOCX: the body's paragraphs and tables in document order (through content controls), after the
distinct headers' and before the distinct footers' (``features.part``: header, footer); a
paragraph whose style is ``Heading N`` (or ``Title``, level 0) is a ``heading`` with
``features.level``; a table is ``table`` -> ``row`` -> ``cell`` (a merged cell is given once, at
its first column; a nested table's text is its cell's). A paragraph's text is every visible
``w:t`` under it: tracked insertions, hyperlinks, fields' results and text boxes included,
deleted text and field codes not.
XLSX: each sheet -> its rows -> their non-empty cells, values as the cached results Excel or
LibreOffice saved (numbers as they print in Python: ``1250.0`` -> ``1250``).
"""
from __future__ import annotations

import datetime
import io
import math
import re
import zipfile

from chalicelib.features.parsing.readers.errors import ParseFailure
from chalicelib.features.parsing.readers.limits import Limits
from chalicelib.features.parsing.readers.nodes import ROOT, Budget, node

_BIG_MEMBER = 2 ** 20
_CELL_REFERENCE = re.compile(rb'<(?:\w+:)?(?:c|row)\b[^>]*?\sr="([A-Z]{0,3})([0-9]{1,7})"')
_DENSE_CELLS_PER_CELL = 4   # calamine holds a sheet as a dense grid: its area, not its cells, is the memory
_HEADING = re.compile(r'^heading\s*(\d)$', re.IGNORECASE)


def check_zip(data: bytes, limits: Limits, what: str) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise ParseFailure('corrupt', f'the {what} is not a readable zip archive: {error}') from error
    if len(members) > 10_000:
        raise ParseFailure('zip-bomb', f'the {what} holds {len(members):,} parts, more than 10,000',
                           limit='max_uncompressed_bytes')
    total = 0
    for member in members:
        total += member.file_size
        if member.file_size > _BIG_MEMBER and member.file_size > member.compress_size * limits.max_compression_ratio:
            ratio = member.file_size / max(member.compress_size, 1)
            raise ParseFailure('zip-bomb', f'the {what}\'s part {member.filename} inflates {ratio:,.0f} times '
                                           f'(to {member.file_size:,} bytes), more than '
                                           f'{limits.describe("max_compression_ratio")} allows',
                               limit='max_compression_ratio')
    if total > limits.max_uncompressed_bytes:
        raise ParseFailure('zip-bomb', f'the {what} inflates to {total:,} bytes, more than '
                                       f'{limits.describe("max_uncompressed_bytes")} allows',
                           limit='max_uncompressed_bytes')


def _text(value: str) -> str:
    return ' '.join(value.split())


_W = '{http://schemas.openxmlformats.org/wordprocessingml/2006/main}'
_W_P, _W_TBL, _W_T, _W_TAB, _W_BR, _W_CR = (f'{_W}{t}' for t in ('p', 'tbl', 't', 'tab', 'br', 'cr'))
_W_SDT, _W_SDT_CONTENT, _W_CUSTOM_XML = f'{_W}sdt', f'{_W}sdtContent', f'{_W}customXml'
_MC_FALLBACK = '{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback'
_SEPARATORS = frozenset({_W_P, _W_TAB, _W_BR, _W_CR})


def _blocks(parent):
    """The block elements (paragraphs, tables) of a body, header, footer or cell, in document order,
    through the content controls (``w:sdt``) and custom XML Word wraps them in (forms, cover pages,
    tables of contents)."""
    for child in parent.iterchildren():
        tag = child.tag
        if tag == _W_P or tag == _W_TBL:
            yield child
        elif tag == _W_SDT:
            content = child.find(_W_SDT_CONTENT)
            if content is not None:
                yield from _blocks(content)
        elif tag == _W_CUSTOM_XML:
            yield from _blocks(child)


def _words(element, out: list[str]) -> None:
    """The visible text under ``element``: every ``w:t`` (runs, hyperlinks, fields' results,
    tracked insertions, text boxes, nested tables), a space for a tab, a break and each paragraph;
    deleted text (``w:delText``) and field codes (``w:instrText``) are other elements and stay out,
    and a drawing's ``mc:Fallback`` (the same text box again, for older readers) is skipped."""
    for child in element.iterchildren():
        tag = child.tag
        if tag == _W_T:
            out.append(child.text or '')
        elif tag in _SEPARATORS:
            out.append(' ')
            if tag == _W_P:
                _words(child, out)
                out.append(' ')
        elif tag != _MC_FALLBACK and len(child):
            _words(child, out)


def _element_text(element) -> str:
    out: list[str] = []
    _words(element, out)
    return _text(''.join(out))


def read_docx(data: bytes, *, budget: Budget, limits: Limits) -> list[dict]:
    import docx  # noqa: PLC0415 - lazy: python-docx and lxml load only when a DOCX is read
    from docx.table import Table  # noqa: PLC0415 - lazy: as above
    from docx.text.paragraph import Paragraph  # noqa: PLC0415 - lazy: as above

    check_zip(data, limits, 'Word document')
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as error:  # noqa: BLE001 - python-docx raises KeyError, ValueError, lxml and zip errors alike
        raise ParseFailure('corrupt', f'the Word document cannot be read: {type(error).__name__}: {error}') from error
    out: list[dict] = []
    index = 0

    def emit(block, prefix: str, part: str | None) -> None:
        nonlocal index
        budget.check('the Word document')
        extra = {'part': part} if part else {}
        if block.tag == _W_P:
            text = _element_text(block)
            if not text:
                return
            index += 1
            paragraph = Paragraph(block, document)
            style = (paragraph.style.name if paragraph.style is not None else '') or ''
            heading = _HEADING.match(style)
            if heading or style.lower() == 'title':
                level = int(heading.group(1)) if heading else 0
                out.append(node(f'{prefix}{index}', ROOT, 'heading', text, index - 1, {'level': level, **extra}))
            else:
                out.append(node(f'{prefix}{index}', ROOT, 'paragraph', text, index - 1, extra or None))
            budget.text(len(text))
            return
        index += 1
        table_id = f'{prefix}{index}'
        rows = []
        for row_index, row in enumerate(Table(block, document).rows):
            row_id = f'{table_id}.r{row_index}'
            rows.append(node(row_id, table_id, 'row', None, row_index, {'row': row_index}))
            seen = set()
            for column, cell in enumerate(row.cells):
                if id(cell._tc) in seen:
                    continue
                seen.add(id(cell._tc))
                budget.cell()
                text = _element_text(cell._tc)
                budget.text(len(text))
                rows.append(node(f'{row_id}.c{column}', row_id, 'cell', text, column,
                                 {'row': row_index, 'column': column}))
        out.append(node(table_id, ROOT, 'table', None, index - 1, extra or None))
        out.extend(rows)

    # Headers first, then the body, then footers: each distinct header and footer once (a section
    # that links to the previous one's, or repeats its text, adds nothing), marked features.part.
    margins = {'header': [], 'footer': []}
    seen_parts: set[str] = set()
    for section in document.sections:
        for part, kept in (('header', section.header), ('footer', section.footer)):
            if kept.is_linked_to_previous:
                continue
            key = part + _element_text(kept._element)
            if key in seen_parts:
                continue
            seen_parts.add(key)
            margins[part].append(kept._element)
    for element in margins['header']:
        for block in _blocks(element):
            emit(block, 'h', 'header')
    for block in _blocks(document.element.body):
        emit(block, 'b', None)
    for element in margins['footer']:
        for block in _blocks(element):
            emit(block, 'f', 'footer')
    return out


def _cell_text(value: object) -> str:
    if value is None:
        return ''
    if isinstance(value, bool):
        return 'TRUE' if value else 'FALSE'
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return _text(str(value))


def _column(letters: bytes) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + letter - 64
    return number


def check_sheet_areas(data: bytes, *, budget: Budget, limits: Limits) -> None:
    """Refuse a sheet whose used area (first to last cell referenced) is larger than
    ``max_cells`` x 4: calamine allocates that grid whole (two cells at A1 and XFD1048576 ask for
    17 billion, and an allocation failure aborts the process rather than raising)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for member in archive.infolist():
            if not (member.filename.startswith('xl/worksheets/') and member.filename.endswith('.xml')):
                continue
            rows = [math.inf, 0]
            columns = [math.inf, 0]
            tail = b''
            with archive.open(member) as stream:
                while chunk := stream.read(1 << 20):
                    budget.check('the Excel workbook\'s sheets')
                    text = tail + chunk
                    cut = text.rfind(b'<')
                    for match in _CELL_REFERENCE.finditer(text, 0, cut if cut > 0 else len(text)):
                        row = int(match.group(2))
                        rows[0], rows[1] = min(rows[0], row), max(rows[1], row)
                        if match.group(1):
                            column = _column(match.group(1))
                            columns[0], columns[1] = min(columns[0], column), max(columns[1], column)
                    tail = text[cut:] if cut > 0 else b''
            if not rows[1]:
                continue
            area = (rows[1] - rows[0] + 1) * max(1, columns[1] - columns[0] + 1 if columns[1] else 1)
            if area > limits.max_cells * _DENSE_CELLS_PER_CELL:
                raise ParseFailure('too-many-cells', f'a sheet of the Excel workbook spans {area:,} cells (rows '
                                                     f'{rows[0]:,} to {rows[1]:,}), more than 4 x '
                                                     f'{limits.describe("max_cells")} allows', limit='max_cells')


def read_xlsx(data: bytes, *, budget: Budget, limits: Limits) -> list[dict]:
    from python_calamine import CalamineWorkbook  # noqa: PLC0415 - lazy: loads only when a workbook is read

    check_zip(data, limits, 'Excel workbook')
    check_sheet_areas(data, budget=budget, limits=limits)
    try:
        workbook = CalamineWorkbook.from_filelike(io.BytesIO(data))
        names = list(workbook.sheet_names)
    except Exception as error:  # noqa: BLE001 - calamine raises its own error types for every bad file
        raise ParseFailure('corrupt', f'the Excel workbook cannot be read: {error}') from error
    out: list[dict] = []
    for sheet_index, name in enumerate(names):
        sheet_id = f's{sheet_index + 1}'
        out.append(node(sheet_id, ROOT, 'sheet', name, sheet_index, {'sheet': sheet_index}))
        try:
            sheet = workbook.get_sheet_by_name(name)
            rows = sheet.iter_rows()
            for row_index, row in enumerate(rows):
                budget.check(f'sheet {name}')
                cells = [(column, _cell_text(value)) for column, value in enumerate(row)]
                cells = [(column, text) for column, text in cells if text]
                if not cells:
                    continue
                row_id = f'{sheet_id}.r{row_index}'
                out.append(node(row_id, sheet_id, 'row', None, row_index, {'row': row_index}))
                for column, text in cells:
                    budget.cell()
                    budget.text(len(text))
                    out.append(node(f'{row_id}.c{column}', row_id, 'cell', text, column,
                                    {'row': row_index, 'column': column}))
        except ParseFailure:
            raise
        except Exception as error:  # noqa: BLE001 - calamine raises its own error types for every bad sheet
            raise ParseFailure('corrupt', f'sheet {name} of the Excel workbook cannot be read: {error}') from error
    return out
