"""Text formats: plain text (``paragraph`` -> ``line``), CSV (one ``sheet`` -> ``row`` -> ``cell``)
and HTML (headings, paragraphs, list items, tables -> rows -> cells).

Decoding: a byte order mark decides (UTF-8, UTF-16); otherwise UTF-8, and when that fails
Windows-1252 (every byte decodes; the result says so in ``warnings``).
CSV: the standard library's ``csv`` with its ``Sniffer`` choosing among ``, ; TAB |`` on the
first 64 KiB (comma when it cannot tell); rows and cells capped by ``Limits.max_cells``.
HTML: lxml's HTML parser (libxml2) with the network off; it expands no entity beyond HTML's
own and reads no DTD. ``script``, ``style``, ``template``, ``noscript``, ``head`` and embedded
objects are dropped. Block elements (``p``, ``div``, ``li``, ``pre``, ``blockquote``,
``section``...) end a paragraph; inline elements' text joins the paragraph around them.
"""
from __future__ import annotations

import codecs
import csv
import io

from chalicelib.features.parsing.readers.errors import ParseFailure
from chalicelib.features.parsing.readers.limits import Limits
from chalicelib.features.parsing.readers.nodes import ROOT, Budget, node


def decode(data: bytes, warnings: list[str]) -> str:
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode('utf-8', 'replace')
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode('utf-16', 'replace')
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        warnings.append('the text is not UTF-8: it was read as Windows-1252')
        return data.decode('cp1252', 'replace')


def read_text(data: bytes, *, budget: Budget, warnings: list[str]) -> list[dict]:
    text = decode(data, warnings).replace('\r\n', '\n').replace('\r', '\n')
    out: list[dict] = []
    paragraph: list[str] = []
    index = 0

    def flush() -> None:
        nonlocal index
        if not paragraph:
            return
        index += 1
        block_id = f'b{index}'
        out.append(node(block_id, ROOT, 'paragraph', '\n'.join(paragraph), index - 1))
        out.extend(node(f'{block_id}.l{number + 1}', block_id, 'line', line, number)
                   for number, line in enumerate(paragraph))
        paragraph.clear()

    for count, line in enumerate(text.split('\n')):
        if count % 4096 == 0:
            budget.check('the text')
        line = line.rstrip()
        if line.strip():
            budget.text(len(line))
            paragraph.append(line)
        else:
            flush()
    flush()
    return out


def read_csv(data: bytes, *, budget: Budget, filename: str | None, warnings: list[str]) -> list[dict]:
    text = decode(data, warnings)
    try:
        dialect = csv.Sniffer().sniff(text[:65536], delimiters=',;\t|')
    except csv.Error:
        dialect = csv.excel
    sheet_name = (filename or 'Sheet1').rsplit('/', 1)[-1]
    out = [node('s1', ROOT, 'sheet', sheet_name, 0, {'sheet': 0})]
    csv.field_size_limit(10 * 2 ** 20)
    try:
        for row_index, row in enumerate(csv.reader(io.StringIO(text, newline=''), dialect)):
            if row_index % 1024 == 0:
                budget.check('the CSV rows')
            cells = [(column, value.strip()) for column, value in enumerate(row) if value.strip()]
            if not cells:
                continue
            row_id = f's1.r{row_index}'
            out.append(node(row_id, 's1', 'row', None, row_index, {'row': row_index}))
            for column, value in cells:
                budget.cell()
                budget.text(len(value))
                out.append(node(f'{row_id}.c{column}', row_id, 'cell', value, column,
                                {'row': row_index, 'column': column}))
    except csv.Error as error:
        raise ParseFailure('corrupt', f'the CSV cannot be read: {error}') from error
    return out


_DROPPED = {'script', 'style', 'template', 'noscript', 'head', 'title', 'iframe', 'object', 'embed', 'svg',
            'math', 'canvas', 'audio', 'video', 'select', 'button'}
_HEADINGS = {'h1': 1, 'h2': 2, 'h3': 3, 'h4': 4, 'h5': 5, 'h6': 6}
_BLOCKS = {'p', 'div', 'li', 'pre', 'blockquote', 'section', 'article', 'header', 'footer', 'nav', 'main',
           'aside', 'figure', 'figcaption', 'address', 'ul', 'ol', 'dl', 'dt', 'dd', 'form', 'fieldset',
           'legend', 'details', 'summary', 'hr', 'caption', 'center', 'body', 'html', 'tbody', 'thead'}

_APART = _BLOCKS | set(_HEADINGS) | {'br', 'td', 'th', 'tr', 'table'}


class _Html:
    def __init__(self, budget: Budget):
        self.budget = budget
        self.out: list[dict] = []
        self.buffer: list[str] = []
        self.index = 0
        self.steps = 0

    def _add(self, node_type: str, text: str, features: dict | None = None) -> str:
        self.index += 1
        block_id = f'b{self.index}'
        self.budget.text(len(text))
        self.out.append(node(block_id, ROOT, node_type, text, self.index - 1, features))
        return block_id

    def flush(self, list_item: bool = False) -> None:
        text = ' '.join(' '.join(self.buffer).split())
        self.buffer.clear()
        if text:
            self._add('paragraph', text, {'listItem': True} if list_item else None)

    def text_of(self, element) -> str:
        parts: list[str] = []

        def collect(current) -> None:
            tag = current.tag.lower() if isinstance(current.tag, str) else ''
            if tag in _DROPPED:
                return
            apart = tag in _APART   # a block inside a cell or heading (a nested table's cells too) stands apart
            if apart:
                parts.append(' ')
            if current.text:
                parts.append(current.text)
            for child in current:
                collect(child)
                if child.tail:
                    parts.append(child.tail)
            if apart:
                parts.append(' ')

        collect(element)
        return ' '.join(''.join(parts).split())

    def table(self, element) -> None:
        self.flush()
        self.index += 1
        table_id = f'b{self.index}'
        self.out.append(node(table_id, ROOT, 'table', None, self.index - 1))
        rows = element.xpath('./tr|./thead/tr|./tbody/tr|./tfoot/tr')
        for row_index, row in enumerate(rows):
            row_id = f'{table_id}.r{row_index}'
            self.out.append(node(row_id, table_id, 'row', None, row_index, {'row': row_index}))
            for column, cell in enumerate(row.xpath('./td|./th')):
                self.budget.cell()
                text = self.text_of(cell)
                self.budget.text(len(text))
                self.out.append(node(f'{row_id}.c{column}', row_id, 'cell', text, column,
                                     {'row': row_index, 'column': column}))

    def walk(self, element) -> None:
        if element.text:
            self.buffer.append(element.text)
        for child in element:
            self.steps += 1
            if self.steps % 1024 == 0:
                self.budget.check('the HTML')
            tag = child.tag.lower() if isinstance(child.tag, str) else ''
            if not tag or tag in _DROPPED:
                pass
            elif tag in _HEADINGS:
                self.flush()
                text = self.text_of(child)
                if text:
                    self._add('heading', text, {'level': _HEADINGS[tag]})
            elif tag == 'table':
                self.table(child)
            elif tag in _BLOCKS:
                self.flush()
                self.walk(child)
                self.flush(list_item=tag == 'li')
            elif tag == 'br':
                self.buffer.append('\n')
            else:
                self.walk(child)
            if child.tail:
                self.buffer.append(child.tail)


def read_html(data: bytes, *, budget: Budget, limits: Limits, warnings: list[str]) -> list[dict]:
    import lxml.etree  # noqa: PLC0415 - lazy: lxml loads only when HTML is read
    import lxml.html  # noqa: PLC0415 - lazy: as above

    del limits
    parser = lxml.html.HTMLParser(no_network=True, remove_comments=True, remove_pis=True, huge_tree=False,
                                  default_doctype=False)
    try:
        tree = lxml.html.document_fromstring(data, parser=parser)
    except (lxml.etree.ParserError, ValueError) as error:
        if 'empty' in str(error).lower():
            return []      # markup and nothing else: a document without blocks
        raise ParseFailure('corrupt', f'the HTML cannot be read: {error}') from error
    reader = _Html(budget)
    body = tree.find('body')
    reader.walk(body if body is not None else tree)
    reader.flush()
    return reader.out
