"""The readers of chalicelib/features/parsing/readers/ over the corpus of tests/fixtures/documents/
(its README says where each file comes from; manifest.json holds the words known to be in it).

Each real file yields its known words in the contract's node shape (ids unique, every parent
present, top nodes under the root, PDF and OCR boxes inside their page, OCR words with
confidences); each hostile file fails with its cause within its budget; a document read in page
ranges concatenates to the same nodes as one call. OCR tests (Tesseract, which `make test`
installs) are marked slow: the quick loop leaves them out.
"""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from chalicelib.features.parsing import readers
from chalicelib.features.parsing.readers import (
    DEFAULT_LIMITS,
    Limits,
    NeedsOcr,
    NoParser,
    ParseFailure,
    ReadResult,
    ocr_available,
    read,
)

CORPUS = Path(__file__).resolve().parents[1] / 'fixtures' / 'documents'
MANIFEST = json.loads((CORPUS / 'manifest.json').read_text())
REAL = MANIFEST['real']
HOSTILE = MANIFEST['hostile']
HOSTILE_BUDGET_SECONDS = 10.0


def _data(name: str) -> bytes:
    return (CORPUS / name).read_bytes()


def _read(name: str, **kwargs) -> ReadResult:
    kwargs.setdefault('deadline', time.monotonic() + 120)
    return read(_data(name), media_type=kwargs.pop('media_type', None), filename=kwargs.pop('filename', name),
                **kwargs)


def _marks(name: str):
    return [pytest.mark.slow] if REAL.get(name, {}).get('ocr') else []


_cache: dict[str, ReadResult] = {}


def _read_once(name: str) -> ReadResult:
    if name not in _cache:
        _cache[name] = _read(name)
    return _cache[name]


def _text(nodes: list[dict]) -> str:
    return ' '.join(node['content'] or '' for node in nodes)


def _words(nodes: list[dict]) -> set[str]:
    """The words of the nodes' text, without the punctuation around them."""
    return {word.strip('.,:;()[]\'"') for word in _text(nodes).split()}


def _check_shape(nodes: list[dict]) -> None:
    ids = [node['id'] for node in nodes]
    assert len(ids) == len(set(ids)), 'node ids are unique'
    known = set(ids)
    for node in nodes:
        assert set(node) == {'id', 'parentId', 'nodeType', 'content', 'index', 'features'}
        assert node['content'] is None or isinstance(node['content'], str)
        assert isinstance(node['index'], int) and node['index'] >= 0
        if node['id'] == 'doc':
            assert node['parentId'] is None and node['nodeType'] == 'document'
        else:
            assert node['parentId'] in known, f'{node["id"]}: its parent {node["parentId"]} is in the list'
    top = [node for node in nodes if node['parentId'] == 'doc']
    assert top, 'the document has top nodes under the root'


@pytest.mark.parametrize('name', [pytest.param(name, marks=_marks(name)) for name in REAL])
def test_each_real_file_yields_its_known_words_in_the_contract_shape(name):
    expected = REAL[name]
    result = _read_once(name)
    assert result.media_type == expected['mediaType']
    assert result.parser == expected['parser']
    assert result.next_page is None
    assert result.nodes[0] == {
        'id': 'doc', 'parentId': None, 'nodeType': 'document', 'content': None, 'index': 0,
        'features': {'mediaType': expected['mediaType'], 'pageCount': result.page_count, 'parser': expected['parser']}}
    _check_shape(result.nodes)
    words = _words(result.nodes)
    for word in expected['words']:
        assert word in words, f'{word!r} read from {name}'
    if 'pages' in expected:
        assert result.page_count == expected['pages']
    assert result.text_chars > 0


@pytest.mark.parametrize('name', [pytest.param(name, marks=_marks(name)) for name in REAL
                                  if REAL[name]['mediaType'] in ('application/pdf', 'image/png', 'image/jpeg',
                                                                 'image/tiff')])
def test_pages_lines_and_words_have_boxes_inside_their_page(name):
    expected = REAL[name]
    result = _read_once(name)
    pages = {node['id']: node for node in result.nodes if node['nodeType'] == 'page'}
    assert [page['features']['page'] for page in pages.values()] == list(range(1, expected['pages'] + 1))
    by_id = {node['id']: node for node in result.nodes}
    for node in result.nodes:
        if node['nodeType'] not in ('line', 'word'):
            continue
        page = pages[f'p{node["features"]["page"]}']
        assert node['id'].startswith(page['id'] + '.')
        x0, y0, x1, y1 = node['features']['bbox']
        width, height = page['features']['width'], page['features']['height']
        assert 0 <= x0 <= x1 <= width + 0.5 and 0 <= y0 <= y1 <= height + 0.5, (node, width, height)
        if node['nodeType'] == 'word':
            line = by_id[node['parentId']]
            assert node['content'] in line['content'].split()
            lx0, ly0, lx1, ly1 = line['features']['bbox']
            assert lx0 <= x0 and ly0 <= y0 and x1 <= lx1 and y1 <= ly1, 'a word lies inside its line'
            if expected.get('ocr'):
                assert 0.0 <= node['features']['confidence'] <= 1.0
            else:
                assert 'confidence' not in node['features']
    for page_number, page_words in expected.get('pageWords', {}).items():
        on_page = _words([node for node in result.nodes
                          if node['nodeType'] == 'word' and node['features']['page'] == int(page_number)])
        for word in page_words:
            assert word in on_page, f'{word!r} on page {page_number} of {name}'


@pytest.mark.slow
def test_ocr_words_carry_confidences_and_most_are_confident():
    assert ocr_available()
    words = [node for node in _read_once('scanned-page.png').nodes if node['nodeType'] == 'word']
    confident = [word for word in words if word['features']['confidence'] >= 0.8]
    assert len(words) > 300 and len(confident) > len(words) * 0.8


@pytest.mark.slow
def test_ocr_reads_the_accents_of_a_french_invoice():
    """English alone read a French invoice's table as `Classeur a levier`, `Stylos bille (boite)`:
    wrong values at high confidence (bench/README.md "Accuracy pass"); ocr.py reads with the
    installed languages of LANGUAGES."""
    assert ocr_available()
    photo = CORPUS.parent / 'invoices' / 'photo-dupont-1-200dpi-2deg.png'
    result = read(photo.read_bytes(), media_type='image/png', filename=photo.name, deadline=time.monotonic() + 120)
    text = ' '.join(n['content'] for n in result.nodes if n['nodeType'] == 'line')
    assert 'Classeur à levier' in text and 'Stylos bille (boîte)' in text, text


def test_ocr_languages_are_those_installed_english_always_first(monkeypatch):
    from chalicelib.features.parsing.readers import ocr
    monkeypatch.setattr(ocr, 'installed_languages', lambda: frozenset({'osd', 'fra', 'eng', 'deu', 'jpn'}))
    assert ocr.languages() == 'eng+deu+fra'    # LANGUAGES' order, English first
    monkeypatch.setattr(ocr, 'installed_languages', lambda: frozenset())
    assert ocr.languages() == 'eng'            # Tesseract could not say: English, the minimum


def test_a_tesseract_without_the_english_model_fails_the_page_not_reads_it_with_the_others(monkeypatch):
    """With eng.traineddata gone, Tesseract reads on with deu+fra+spa and answers words with no
    error: the page must fail, naming the missing model (the OCR image rehearsal's broken image,
    tests/integration/test_ocr_image.py)."""
    from chalicelib.features.parsing.readers import ocr
    from chalicelib.features.parsing.readers.errors import ParseFailure
    from chalicelib.features.parsing.readers.limits import Limits
    monkeypatch.setattr(ocr, 'installed_languages', lambda: frozenset({'osd', 'fra', 'deu', 'spa'}))
    monkeypatch.setattr(ocr, 'ocr_available', lambda: True)
    with pytest.raises(ParseFailure) as caught:
        ocr.tesseract_tsv(b'not read', dpi=200, page=3, deadline=time.monotonic() + 30, limits=Limits())
    assert caught.value.cause == 'ocr-failed' and 'English model' in str(caught.value) and caught.value.page == 3


@pytest.mark.slow
@pytest.mark.parametrize('turn', [90, 180])
def test_a_page_scanned_sideways_or_upside_down_is_read_the_right_way_up(turn):
    """Tesseract's orientation detection (--psm 1): the default segmentation read these as noise
    ('(0} poywuny you st ynq)'); the boxes stay in the image as uploaded."""
    from PIL import Image
    upright = Image.open(CORPUS / 'scanned-page.png')
    turned = io.BytesIO()
    upright.rotate(turn, expand=True).save(turned, 'PNG')
    result = read(turned.getvalue(), media_type='image/png', filename='turned.png', deadline=time.monotonic() + 120)
    lines = [n['content'] for n in result.nodes if n['nodeType'] == 'line']
    assert 'Project Public License' in ' '.join(lines[:3]), lines[:3]
    page = next(n for n in result.nodes if n['nodeType'] == 'page')['features']
    for word in (n for n in result.nodes if n['nodeType'] == 'word'):
        x0, y0, x1, y1 = word['features']['bbox']
        assert 0 <= x0 <= x1 <= page['width'] + 0.5 and 0 <= y0 <= y1 <= page['height'] + 0.5


def test_pdf_text_follows_the_page_and_splits_words_hyphenated_across_lines():
    nodes = _read_once('lppl.pdf').nodes
    lines = [node for node in nodes if node['nodeType'] == 'line' and node['features']['page'] == 1]
    assert lines[0]['content'] == 'The LATEX Project Public License'
    assert [line['features']['bbox'][1] for line in lines[:6]] == sorted(line['features']['bbox'][1]
                                                                        for line in lines[:6])
    # "free-" ends a line and "dom" starts the next (pdfium marks the break with U+FFFE)
    words = [node['content'] for node in nodes if node['nodeType'] == 'word']
    at = words.index('free-')
    assert words[at + 1] == 'dom'
    assert not any('\ufffe' in word for word in words)


def test_the_two_columns_of_a_newsletter_are_read_one_after_the_other():
    text = _text([node for node in _read_once('ltnews11.pdf').nodes if node['nodeType'] == 'line'])
    assert text.index('Back in sync') < text.index('Yearly release cycles') < text.index('LPPL update')


def test_docx_headings_paragraphs_and_table_in_document_order():
    nodes = _read_once('memo.docx').nodes
    expected = REAL['memo.docx']
    headings = {node['content']: node['features']['level'] for node in nodes if node['nodeType'] == 'heading'}
    for text, level in expected['headings'].items():
        assert headings[text] == level
    top = [node for node in nodes if node['parentId'] == 'doc']
    assert [node['index'] for node in top] == list(range(len(top)))
    assert [node['nodeType'] for node in top][:5] == ['heading', 'paragraph', 'heading', 'paragraph', 'table']
    table = next(node for node in top if node['nodeType'] == 'table')
    rows = [node for node in nodes if node['parentId'] == table['id']]
    assert len(rows) == expected['table']['rows']
    row, column, text = expected['table']['cell']
    cell = next(node for node in nodes if node['nodeType'] == 'cell' and node['features'] == {'row': row,
                                                                                           'column': column})
    assert cell['content'] == text and cell['parentId'] == rows[row]['id']


def _word_document_as_word_writes_one() -> bytes:
    """A DOCX with what Word puts in real documents and python-docx's ``.text`` misses: a content
    control around body paragraphs, a tracked insertion (and a deletion), a field (its code and its
    result), a text box with its ``mc:Fallback`` copy, a table nested in a cell, a header and a
    footer."""
    import docx
    from docx.oxml import parse_xml
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    mc = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = 'ACME Ltd header'
    document.sections[0].footer.paragraphs[0].text = 'Page footer'
    document.add_paragraph('Plain paragraph')
    body = document.element.body
    sect = body[-1]   # w:sectPr stays last
    for xml in (
        f'<w:sdt {w}><w:sdtPr/><w:sdtContent><w:p><w:r><w:t>Inside a content control</w:t></w:r></w:p>'
        '</w:sdtContent></w:sdt>',
        f'<w:p {w}><w:r><w:t xml:space="preserve">Total </w:t></w:r><w:ins w:id="1" w:author="x"><w:r>'
        '<w:t>inserted</w:t></w:r></w:ins><w:del w:id="2" w:author="x"><w:r><w:delText>removed</w:delText>'
        '</w:r></w:del></w:p>',
        f'<w:p {w}><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGE </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>7</w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>',
        f'<w:p {w} {mc}><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><w:txbxContent>'
        '<w:p><w:r><w:t>Boxed text</w:t></w:r></w:p></w:txbxContent></w:drawing></mc:Choice><mc:Fallback>'
        '<w:pict><w:txbxContent><w:p><w:r><w:t>Boxed text</w:t></w:r></w:p></w:txbxContent></w:pict>'
        '</mc:Fallback></mc:AlternateContent></w:r></w:p>'):
        sect.addprevious(parse_xml(xml))
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = 'Outer'
    table.cell(0, 1).add_table(rows=1, cols=1).cell(0, 0).text = 'Nested cell'
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_docx_text_in_content_controls_tracked_changes_text_boxes_nested_tables_and_margins():
    nodes = read(_word_document_as_word_writes_one(), media_type=None, filename='w.docx',
                 deadline=time.monotonic() + 60).nodes
    top = [(n['nodeType'], n['content'], n['features'].get('part')) for n in nodes if n['parentId'] == 'doc']
    assert top == [('paragraph', 'ACME Ltd header', 'header'), ('paragraph', 'Plain paragraph', None),
                   ('paragraph', 'Inside a content control', None), ('paragraph', 'Total inserted', None),
                   ('paragraph', '7', None), ('paragraph', 'Boxed text', None), ('table', None, None),
                   ('paragraph', 'Page footer', 'footer')]
    cells = [n['content'] for n in nodes if n['nodeType'] == 'cell']
    assert cells == ['Outer', 'Nested cell']
    assert [n['index'] for n in nodes if n['parentId'] == 'doc'] == list(range(8))


def test_xlsx_sheets_rows_and_cells_with_formula_results():
    nodes = _read_once('ledger.xlsx').nodes
    sheets = [node for node in nodes if node['nodeType'] == 'sheet']
    assert [sheet['content'] for sheet in sheets] == REAL['ledger.xlsx']['sheets']
    sheet_name, row, column, text = REAL['ledger.xlsx']['cell']
    sheet = next(node for node in sheets if node['content'] == sheet_name)
    cell = next(node for node in nodes if node['id'] == f'{sheet["id"]}.r{row}.c{column}')
    assert cell['content'] == text and cell['features'] == {'row': row, 'column': column}
    assert '4641.25' in _text(nodes) and '1250' in _text(nodes).split()


def test_csv_delimiter_is_sniffed():
    nodes = _read_once('ledger.csv').nodes
    row, column, text = REAL['ledger.csv']['cell']
    assert next(node for node in nodes if node['id'] == f's1.r{row}.c{column}')['content'] == text
    assert not any(';' in (node['content'] or '') for node in nodes if node['nodeType'] == 'cell')


def test_html_keeps_blocks_and_drops_styles_and_scripts():
    nodes = _read_once('debian-faq-contributing.html').nodes
    text = _text(nodes)
    for absent in REAL['debian-faq-contributing.html']['absent']:
        assert absent not in text
    headings = [node for node in nodes if node['nodeType'] == 'heading']
    assert headings[0]['content'].startswith('Chapter 13.') and headings[0]['features']['level'] in (1, 2)
    paragraphs = [node['content'] for node in nodes if node['nodeType'] == 'paragraph']
    assert '13.1. How can I become a Debian member/Debian developer?' in paragraphs
    assert any(node['nodeType'] == 'table' for node in nodes), 'DocBook\'s navigation header is a table'


def test_html_reads_no_entity_and_no_network_and_keeps_tables():
    page = (b'<!DOCTYPE html [<!ENTITY secret SYSTEM "file:///etc/passwd">]><html><head><title>t</title>'
            b'<script>alert("x")</script></head><body><h2>Totals</h2><p>Due &amp; payable &secret;</p>'
            b'<ul><li>one</li><li>two <b>bold</b> tail</li></ul>'
            b'<table><tr><th>Item</th><th>Cost</th></tr><tr><td>Paper</td><td>4.50</td></tr></table></body></html>')
    result = read(page, media_type='text/html', filename='x.html', deadline=time.monotonic() + 10)
    text = _text(result.nodes)
    assert 'root:' not in text and 'alert' not in text
    assert 'Due & payable' in text
    items = [node['content'] for node in result.nodes if node['features'].get('listItem')]
    assert items == ['one', 'two bold tail']
    cell = next(node for node in result.nodes if node['id'].endswith('.r1.c1'))
    assert cell['content'] == '4.50' and cell['nodeType'] == 'cell'


def test_plain_text_paragraphs_hold_lines_and_other_encodings_are_decoded():
    nodes = _read_once('apache-2.0.txt').nodes
    paragraphs = [node for node in nodes if node['nodeType'] == 'paragraph']
    lines = [node for node in nodes if node['nodeType'] == 'line']
    assert len(paragraphs) > 20 and len(lines) > len(paragraphs)
    assert all(line['parentId'] in {p['id'] for p in paragraphs} for line in lines)
    latin = 'Résumé du contrat\nsignée à Genève\n\nDeuxième paragraphe'.encode('cp1252')
    result = read(latin, media_type='text/plain', filename='note.txt', deadline=time.monotonic() + 5)
    assert [node['content'] for node in result.nodes if node['nodeType'] == 'paragraph'] == [
        'Résumé du contrat\nsignée à Genève', 'Deuxième paragraphe']
    assert result.warnings == ['the text is not UTF-8: it was read as Windows-1252']


@pytest.mark.parametrize('name', list(HOSTILE))
def test_each_hostile_file_fails_with_its_cause_within_its_budget(name):
    started = time.monotonic()
    with pytest.raises(ParseFailure) as failure:
        _read(name, deadline=started + HOSTILE_BUDGET_SECONDS)
    assert failure.value.cause == HOSTILE[name]['cause']
    assert time.monotonic() - started < HOSTILE_BUDGET_SECONDS
    assert str(failure.value) and failure.value.message == str(failure.value)


def test_hostile_failures_name_what_a_user_can_act_on():
    messages = {}
    for name in HOSTILE:
        try:
            _read(name)
        except ParseFailure as error:
            messages[name] = str(error)
    assert 'password' in messages['hostile-encrypted.pdf']
    assert 'cut short' in messages['hostile-truncated.pdf']
    assert 'page tree' in messages['hostile-page-tree-loop.pdf']
    assert 'max_pixels_per_page' in messages['hostile-bomb.png']
    assert 'max_compression_ratio' in messages['hostile-zip-bomb.docx']
    assert messages['hostile-empty.pdf'] == 'the file is empty (0 bytes)'
    assert messages['hostile-png-named.pdf'] == 'the file is a PNG image but its name says a PDF'


def test_a_label_that_contradicts_the_bytes_is_mislabelled_and_a_generic_one_is_not():
    with pytest.raises(ParseFailure) as failure:
        _read('upref.pdf', media_type='image/png', filename=None)
    assert failure.value.cause == 'mislabelled'
    assert str(failure.value) == 'the file is a PDF but its media type says a PNG image'
    assert _read('upref.pdf', media_type='application/octet-stream', filename='upload.bin').parser == 'pdf-text'
    with pytest.raises(ParseFailure) as failure:
        _read('apache-2.0.txt', filename='contract.pdf')
    assert failure.value.cause == 'mislabelled'


@pytest.mark.parametrize(('name', 'label', 'filename', 'parser'), [
    ('ledger.csv', 'application/vnd.ms-excel', 'ledger.csv', 'csv'),   # a browser on Windows uploading a .csv
    ('ledger.csv', 'application/vnd.ms-excel', None, 'csv'),
    ('ledger.xlsx', 'application/vnd.ms-excel', 'ledger.xlsx', 'xlsx'),
    ('upref.pdf', 'application/x-pdf', 'upref.pdf', 'pdf-text'),
    ('apache-2.0.txt', 'application/x-www-form-urlencoded', None, 'text'),   # curl --data-binary's label
    ('ledger.csv', 'text/x-csv', None, 'csv'),
])
def test_the_labels_senders_really_use_are_not_mislabelled(name, label, filename, parser):
    assert _read(name, media_type=label, filename=filename).parser == parser


@pytest.mark.parametrize(('label', 'filename'), [('application/vnd.ms-excel', 'old.xls'),
                                                 ('application/msword', 'old.doc'),
                                                 ('application/vnd.ms-powerpoint', 'old.ppt')])
def test_a_legacy_office_file_rightly_labelled_has_no_parser_and_is_not_mislabelled(label, filename):
    """A .doc/.xls/.ppt is an OLE compound file: its label is right, so the parse says 'no parser'
    (the family is kept and the pipelines run on its metadata), not 'mislabelled' (FAILED)."""
    ole = b'\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1' + bytes(600)
    with pytest.raises(NoParser) as failure:
        read(ole, media_type=label, filename=filename, deadline=time.monotonic() + 5)
    assert failure.value.cause == 'no-parser'


@pytest.mark.parametrize('label', ['application/zip', 'application/x-zip-compressed'])
def test_an_office_file_labelled_as_the_zip_it_is_is_read(label):
    assert _read('memo.docx', media_type=label, filename=None).parser == 'docx'


def test_a_legacy_label_still_names_its_kind():
    with pytest.raises(ParseFailure) as failure:
        _read('upref.pdf', media_type='image/x-png', filename=None)
    assert str(failure.value) == 'the file is a PDF but its media type says a PNG image'
    with pytest.raises(ParseFailure) as failure:
        _read('upref.pdf', media_type='application/vnd.ms-excel', filename=None)
    assert failure.value.cause == 'mislabelled'


def test_types_without_a_reader_say_no_parser():
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, 'w') as written:
        written.writestr('readme.txt', 'hello')
    for data, media_type in ((b'GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'image/gif'),
                             (archive.getvalue(), 'application/zip'),
                             (b'\x00\x01\x02binary\x00' * 20, 'application/octet-stream')):
        with pytest.raises(NoParser) as failure:
            read(data, media_type=None, filename=None, deadline=time.monotonic() + 5)
        assert failure.value.cause == 'no-parser'
        assert str(failure.value) == f'no parser for {media_type}'


def _fake_clock(monkeypatch, step: float = 1.0):
    """time.monotonic for the readers that moves ``step`` seconds on each reading: deterministic pacing."""
    now = [1000.0]

    def monotonic() -> float:
        now[0] += step
        return now[0]

    # the readers' modules share the time module: this replaces time.monotonic for the test
    # (subprocess keeps its own reference, so Tesseract's real timeout is unaffected)
    monkeypatch.setattr('chalicelib.features.parsing.readers.nodes.time.monotonic', monotonic)
    return now


def _read_in_ranges(name: str, monkeypatch, budget_seconds: float, step: float = 1.0) -> tuple[list[dict], list[int]]:
    now = _fake_clock(monkeypatch, step)
    nodes: list[dict] = []
    starts = []
    first_page: int | None = 1
    chars = 0
    while first_page is not None:
        starts.append(first_page)
        result = read(_data(name), media_type=None, filename=name, first_page=first_page,
                      deadline=now[0] + budget_seconds, text_chars_before=chars)
        assert (result.nodes[0]['id'] == 'doc') == (first_page == 1)
        assert all(node['parentId'] != 'doc' or node['nodeType'] == 'page' for node in result.nodes)
        chars += result.text_chars
        nodes.extend(result.nodes)
        first_page = result.next_page
        assert len(starts) < 20
    return nodes, starts


def test_a_pdf_read_in_page_ranges_concatenates_to_the_same_nodes(monkeypatch):
    whole = _read_once('lppl.pdf')
    nodes, starts = _read_in_ranges('lppl.pdf', monkeypatch, budget_seconds=12.0)
    assert len(starts) > 2, 'the budget split the document into several calls'
    assert nodes == whole.nodes


@pytest.mark.slow
def test_a_multi_page_tiff_read_in_page_ranges_concatenates_to_the_same_nodes(monkeypatch):
    whole = _read_once('scanned-pages.tiff')
    # a long step: Tesseract's real timeout is the deadline less the fake clock's reading
    nodes, starts = _read_in_ranges('scanned-pages.tiff', monkeypatch, budget_seconds=1000.0, step=100.0)
    assert starts == [1, 2]
    assert nodes == whole.nodes


def test_the_deadline_already_spent_is_a_time_budget_failure():
    with pytest.raises(ParseFailure) as failure:
        _read('lppl.pdf', deadline=time.monotonic() - 1)
    assert failure.value.cause == 'time-budget'


def _mixed_pdf() -> bytes:
    """lppl.pdf's first page (a text layer) then the scanned page (none)."""
    mixed = pdfium.PdfDocument.new()
    mixed.import_pages(pdfium.PdfDocument(_data('lppl.pdf')), [0])
    mixed.import_pages(pdfium.PdfDocument(_data('scanned-page.pdf')), [0])
    out = io.BytesIO()
    mixed.save(out)
    return out.getvalue()


def test_without_ocr_a_page_without_text_hands_over_to_the_ocr_function():
    data = _mixed_pdf()
    first = read(data, media_type='application/pdf', filename='mixed.pdf', deadline=time.monotonic() + 30,
                 ocr=False)
    assert first.next_page == 2 and first.parser == 'pdf-text'
    assert {node['features'].get('page') for node in first.nodes if node['nodeType'] != 'document'} == {1}
    with pytest.raises(NeedsOcr) as needs:
        read(data, media_type='application/pdf', filename='mixed.pdf', first_page=2,
             deadline=time.monotonic() + 30, ocr=False)
    assert needs.value.page == 2 and needs.value.cause == 'needs-ocr'
    with pytest.raises(NeedsOcr) as needs:
        _read('scanned-page.png', ocr=False)
    assert needs.value.page == 1


@pytest.mark.slow
def test_the_ocr_function_goes_on_where_the_text_reader_stopped():
    data = _mixed_pdf()
    rest = read(data, media_type='application/pdf', filename='mixed.pdf', first_page=2,
                deadline=time.monotonic() + 60, ocr=True)
    assert rest.parser == 'pdf-ocr' and rest.next_page is None
    assert 'verbatim' in _text(rest.nodes).split()
    assert all(node['id'].startswith('p2') for node in rest.nodes)


def test_limits_are_named_in_their_failures():
    cases = [
        ('lppl.pdf', Limits(max_pages=5), 'too-many-pages', 'max_pages'),
        ('lppl.pdf', Limits(max_text_chars=1_000), 'too-much-text', 'max_text_chars'),
        ('lppl.pdf', Limits(max_bytes=1_000), 'too-large', 'max_bytes'),
        ('scanned-page.png', Limits(max_pixels_per_page=1_000_000), 'too-many-pixels', 'max_pixels_per_page'),
        ('scanned-pages.tiff', Limits(max_pixels_per_page=1_000_000), 'too-many-pixels', 'max_pixels_per_page'),
        ('ledger.csv', Limits(max_cells=10), 'too-many-cells', 'max_cells'),
        ('ledger.xlsx', Limits(max_cells=10), 'too-many-cells', 'max_cells'),
        ('memo.docx', Limits(max_cells=10), 'too-many-cells', 'max_cells'),
        ('memo.docx', Limits(max_uncompressed_bytes=10_000), 'zip-bomb', 'max_uncompressed_bytes'),
    ]
    for name, limits, cause, limit in cases:
        with pytest.raises(ParseFailure) as failure:
            _read(name, limits=limits)
        assert (failure.value.cause, failure.value.limit) == (cause, limit), name
        assert limit in str(failure.value)


def test_the_text_cap_holds_across_page_ranges():
    result = _read('upref.pdf')
    with pytest.raises(ParseFailure) as failure:
        _read('upref.pdf', limits=Limits(max_text_chars=DEFAULT_LIMITS.max_text_chars),
              text_chars_before=DEFAULT_LIMITS.max_text_chars - result.text_chars + 1)
    assert failure.value.cause == 'too-much-text'


def test_a_sparse_sheet_whose_grid_would_not_fit_is_refused_before_calamine_allocates_it():
    source = zipfile.ZipFile(io.BytesIO(_data('ledger.xlsx')))
    out = io.BytesIO()
    with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as sparse:
        for member in source.infolist():
            body = source.read(member)
            if member.filename == 'xl/worksheets/sheet1.xml':
                body = body.replace(b'</sheetData>', b'<row r="1048576"><c r="XFD1048576" t="n"><v>1</v></c>'
                                                     b'</row></sheetData>')
            sparse.writestr(member, body)
    started = time.monotonic()
    with pytest.raises(ParseFailure) as failure:
        read(out.getvalue(), media_type=None, filename='sparse.xlsx', deadline=started + 10)
    assert failure.value.cause == 'too-many-cells' and 'rows 1 to 1,048,576' in str(failure.value)


@pytest.mark.slow
def test_a_pdf_page_too_large_for_the_pixel_cap_is_rendered_at_a_lower_dpi():
    result = _read('scanned-page.pdf', limits=Limits(max_pixels_per_page=3_000_000))
    assert result.warnings and 'dpi' in result.warnings[0] and 'max_pixels_per_page' in result.warnings[0]
    assert 'verbatim' in _text(result.nodes).split()


def test_the_public_api_is_what_the_parse_stage_codes_against():
    assert readers.ROOT == 'doc'
    assert issubclass(NoParser, ParseFailure) and issubclass(NeedsOcr, ParseFailure)
    assert DEFAULT_LIMITS.ocr_dpi == 300
    assert readers.sniff(_data('memo.docx'), filename='memo.docx').endswith('wordprocessingml.document')


def test_page_limit_reads_a_pdf_in_fixed_chunks_that_concatenate():
    whole = _read_once('lppl.pdf')
    nodes: list[dict] = []
    starts = []
    first_page = 1
    while first_page is not None:
        starts.append(first_page)
        result = _read('lppl.pdf', first_page=first_page, page_limit=3)
        nodes.extend(result.nodes)
        first_page = result.next_page
    assert starts == [1, 4, 7]
    assert nodes == whole.nodes
    with pytest.raises(ValueError):
        _read('lppl.pdf', page_limit=0)


@pytest.mark.slow
def test_images_cut_short_fail_as_truncated_or_corrupt_not_as_ocr_errors():
    png = _data('scanned-page.png')[:20_000]
    with pytest.raises(ParseFailure) as failure:
        read(png, media_type='image/png', filename='cut.png', deadline=time.monotonic() + 30)
    assert failure.value.cause == 'truncated'
    jpeg = _data('scanned-page.jpg')[:20_000]
    with pytest.raises(ParseFailure) as failure:
        read(jpeg, media_type='image/jpeg', filename='cut.jpg', deadline=time.monotonic() + 30)
    assert failure.value.cause == 'corrupt' and 'cannot be decoded' in str(failure.value)


def test_an_html_page_without_text_is_a_document_without_blocks():
    for page in (b'<html><head><style>p{}</style></head><body></body></html>', b'<!DOCTYPE html>'):
        result = read(page, media_type=None, filename='blank.html', deadline=time.monotonic() + 5)
        assert [node['id'] for node in result.nodes] == ['doc'] and result.parser == 'html'


@pytest.mark.parametrize('rotation', [90, 270])
def test_boxes_of_a_rotated_page_are_in_the_displayed_page(rotation):
    """/Rotate turns the page clockwise: boxes and the page's size are those a viewer shows."""
    rotated = pdfium.PdfDocument.new()
    rotated.import_pages(pdfium.PdfDocument(_data('lppl.pdf')), [0])
    rotated[0].set_rotation(rotation)
    out = io.BytesIO()
    rotated.save(out)
    upright = {node['content']: node['features']['bbox'] for node in _read_once('lppl.pdf').nodes
               if node['nodeType'] == 'word' and node['features']['page'] == 1}
    result = read(out.getvalue(), media_type=None, filename='rotated.pdf', deadline=time.monotonic() + 10)
    page = result.nodes[1]['features']
    assert (page['width'], page['height']) == (841.89, 595.28)
    x0, y0, x1, y1 = next(node['features']['bbox'] for node in result.nodes if node['content'] == 'Preamble')
    u0, v0, u1, v1 = upright['Preamble']
    expected = [841.89 - v1, u0, 841.89 - v0, u1] if rotation == 90 else [v0, 595.28 - u1, v1, 595.28 - u0]
    assert [x0, y0, x1, y1] == pytest.approx(expected, abs=0.02)


# The zip-packaged worker never imports Pillow (it reads with ocr=False; the zip carries Pillow for the
# API's page images only, render.py): run in a fresh interpreter where importing PIL fails, and
# records that it was tried.
_WITHOUT_PIL = '''
import importlib.abc, json, sys, time
tried = []

class NoPillow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == 'PIL' or name.startswith('PIL.'):
            tried.append(name)
            raise ModuleNotFoundError(f'No module named {name!r} (as in the zip-packaged worker)')
        return None

sys.meta_path.insert(0, NoPillow())
from pathlib import Path
from chalicelib.features.parsing.readers import NeedsOcr, ParseFailure, read

corpus = Path(sys.argv[1])
outcomes = {}
for name in json.loads(sys.argv[2]):
    try:
        result = read((corpus / name).read_bytes(), media_type=None, filename=name,
                      deadline=time.monotonic() + 60, ocr=False)
        outcomes[name] = ['read', result.parser, result.next_page]
    except NeedsOcr as error:
        outcomes[name] = ['needs-ocr', error.page]
    except ParseFailure as error:
        outcomes[name] = ['failed', error.cause]
loaded = sorted(m for m in sys.modules if m.startswith('PIL'))
print(json.dumps({'outcomes': outcomes, 'tried': tried, 'loaded': loaded}))
'''


def test_the_readers_without_ocr_never_import_pillow():
    """Every file of the corpus read with ocr=False (the zip worker's way) where Pillow is missing:
    the images hand over to the OCR function unopened, everything else reads or fails as with it,
    and PIL is never even tried."""
    names = sorted(REAL) + sorted(HOSTILE)
    answer = subprocess.run([sys.executable, '-c', _WITHOUT_PIL, str(CORPUS), json.dumps(names)],
                            capture_output=True, text=True, timeout=300,
                            cwd=Path(__file__).resolve().parents[2])
    assert answer.returncode == 0, answer.stderr
    report = json.loads(answer.stdout.splitlines()[-1])
    assert report['tried'] == [] and report['loaded'] == [], report
    outcomes = report['outcomes']
    for name in ('scanned-page.png', 'scanned-page.jpg', 'scanned-pages.tiff', 'hostile-bomb.png'):
        assert outcomes[name] == ['needs-ocr', 1], name
    assert outcomes['scanned-page.pdf'] == ['needs-ocr', 1]
    for name, expected in REAL.items():
        if not expected.get('ocr'):
            assert outcomes[name][:2] == ['read', expected['parser']], name
    for name, expected in HOSTILE.items():
        if name != 'hostile-bomb.png':   # refused by the OCR function, before any decode
            assert outcomes[name] == ['failed', expected['cause']], name


def _turned(name: str, rotation: int) -> bytes:
    """``name`` with every page turned by /Rotate; at 180 also cropped off-centre (a crop box whose
    origin is not the media box's)."""
    document = pdfium.PdfDocument(_data(name))
    for index in range(len(document)):
        page = document[index]
        page.set_rotation(rotation)
        if rotation == 180:
            left, bottom, right, top = page.get_mediabox()
            page.set_cropbox(left + 13.3, bottom + 7.7, right - 5.1, top - 11.9)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _reference_boxes(data: bytes) -> list[tuple[str, list[float]]]:
    """Each word of a text PDF and its box, the plain way: pypdfium2's own wrapped calls, the union
    of the loose boxes of the word's first and last characters, turned into the displayed page's
    top-left points and round()ed: what the reader's hot loop computes its faster way
    (chalicelib/features/parsing/readers/pdf.py _text_nodes)."""
    document = pdfium.PdfDocument(data)
    words = []
    for index in range(len(document)):
        page = document[index]
        crop_left, crop_bottom, crop_right, crop_top = page.get_cropbox()
        w, h, rotation = crop_right - crop_left, crop_top - crop_bottom, page.get_rotation() % 360
        text_page = page.get_textpage()
        text = text_page.get_text_range()
        assert len(text) == text_page.count_chars()
        for line in re.finditer('[^\r\n\ufffe]+\ufffe?', text):
            for word in re.finditer(r'\S+', line.group()):
                first, last = line.start() + word.start(), line.start() + word.end() - 1
                l0, b0, r0, t0 = text_page.get_charbox(first, loose=True)
                l1, b1, r1, t1 = text_page.get_charbox(last, loose=True)
                u0, u1 = min(l0, l1) - crop_left, max(r0, r1) - crop_left
                v0, v1 = crop_top - max(t0, t1), crop_top - min(b0, b1)     # from the top, down
                box = {0: (u0, v0, u1, v1), 90: (h - v1, u0, h - v0, u1),
                       180: (w - u1, h - v1, w - u0, h - v0), 270: (v0, w - u1, v1, w - u0)}[rotation]
                words.append((word.group().replace('\ufffe', '-').replace('\x00', ''),
                              [round(value, 2) for value in box]))
    return words


@pytest.mark.parametrize('rotation', [0, 90, 180, 270])
@pytest.mark.parametrize('name', [name for name, known in REAL.items()
                                  if known['mediaType'] == 'application/pdf' and not known.get('ocr')])
def test_pdf_word_boxes_are_the_plain_computation_and_line_boxes_the_union_of_their_words(name, rotation):
    """The hot loop's boxes (ctypes without pypdfium2's wrappers, rounding by arithmetic, line boxes
    turned once) against the plain computation, on every text PDF of the corpus at each /Rotate:
    every word's box within 0.01 pt, every line's box exactly the union of its words'. The reader
    gives the words in reading order (layout.py), the reference in pdfium's drawing order: they
    are compared as the same set of words and boxes."""
    data = _data(name) if rotation == 0 else _turned(name, rotation)
    nodes = read(data, media_type=None, filename=name, deadline=time.monotonic() + 60).nodes
    words = [node for node in nodes if node['nodeType'] == 'word']
    reference = _reference_boxes(data)
    assert sorted(word['content'] for word in words) == sorted(content for content, _ in reference)
    read_boxes = sorted((word['content'], word['features']['bbox']) for word in words)
    for (content, box), (expected, reference_box) in zip(read_boxes, sorted(reference), strict=True):
        assert content == expected and box == pytest.approx(reference_box, abs=0.0101), (content, box)
    for line in (node for node in nodes if node['nodeType'] == 'line'):
        boxes = [word['features']['bbox'] for word in words if word['parentId'] == line['id']]
        assert boxes, line
        assert line['features']['bbox'] == [min(box[0] for box in boxes), min(box[1] for box in boxes),
                                            max(box[2] for box in boxes), max(box[3] for box in boxes)], line


def test_html_cell_text_keeps_a_nested_tables_words_apart():
    html = (b'<table><tr><td>Total<table><tr><td>inner</td></tr></table></td>'
            b'<td><h4>Due</h4><p>now</p></td></tr></table>')
    nodes = read(html, media_type='text/html', filename='t.html', deadline=time.monotonic() + 30).nodes
    assert [n['content'] for n in nodes if n['nodeType'] == 'cell'] == ['Total inner', 'Due now']


def _raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (1 0 obj first), with its cross-reference table."""
    out, offsets = b'%PDF-1.7\n', []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b'%d 0 obj\n' % number + body + b'\nendobj\n'
    xref = len(out)
    out += b'xref\n0 %d\n0000000000 65535 f \n' % (len(objects) + 1)
    out += b''.join(b'%010d 00000 n \n' % offset for offset in offsets)
    return out + b'trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n' % (len(objects) + 1, xref)


def _stream(content: bytes, extra: bytes = b'') -> bytes:
    return b'<< /Length %d %s >>\nstream\n' % (len(content), extra) + content + b'\nendstream'


def _pdf_with_a_field_value_and_no_appearance() -> bytes:
    """A form as form-filling tools leave one: the field holds its value (/V), NeedAppearances is
    set, and no appearance stream draws it (only a form environment does)."""
    return _raw_pdf([
        b'<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [4 0 R] /NeedAppearances true '
        b'/DA (/Helv 0 Tf 0 g) /DR << /Font << /Helv 5 0 R >> >> >> >>',
        b'<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
        b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Annots [4 0 R] /Contents 6 0 R '
        b'/Resources << /Font << /F1 5 0 R >> >> >>',
        b'<< /Type /Annot /Subtype /Widget /FT /Tx /T (inv) /V (INV-9-NOAP) /Rect [160 740 310 760] /P 3 0 R '
        b'/DA (/Helv 12 Tf 0 g) /F 4 >>',
        b'<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
        _stream(b'BT /F1 12 Tf 72 750 Td (Invoice No:) Tj ET'),
    ])


def _pdf_with_a_free_text_note() -> bytes:
    """A typewriter note as Acrobat or Preview adds one: a FreeText annotation drawn by its
    appearance stream, over a page that says something else."""
    return _raw_pdf([
        b'<< /Type /Catalog /Pages 2 0 R >>',
        b'<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
        b'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Annots [4 0 R] /Contents 6 0 R '
        b'/Resources << /Font << /F1 5 0 R >> >> >>',
        b'<< /Type /Annot /Subtype /FreeText /Rect [100 700 300 720] /Contents (Approved by Kim) '
        b'/DA (/F1 12 Tf 0 g) /F 4 /AP << /N 7 0 R >> >>',
        b'<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
        _stream(b'BT /F1 12 Tf 72 750 Td (Terms of payment) Tj ET'),
        _stream(b'BT /F1 12 Tf 2 5 Td (Approved by Kim) Tj ET',
                b'/Type /XObject /Subtype /Form /BBox [0 0 200 20] /Resources << /Font << /F1 5 0 R >> >>'),
    ])


def test_a_filled_pdf_forms_values_and_notes_are_text_of_the_page():
    from reportlab.pdfgen import canvas
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer)
    pdf.drawString(72, 750, 'Invoice No:')
    pdf.acroForm.textfield(name='inv', value='INV-2026-77', x=160, y=740, width=150, height=20)
    pdf.linkURL('https://example.org/', (72, 600, 200, 620))   # a link annotation: nothing drawn
    pdf.drawString(72, 605, 'Terms')
    pdf.showPage()
    pdf.save()
    forms = ((buffer.getvalue(), 'INV-2026-77'), (_pdf_with_a_field_value_and_no_appearance(), 'INV-9-NOAP'))
    for data, value in forms:
        result = read(data, media_type='application/pdf', filename='form.pdf', deadline=time.monotonic() + 30)
        words = {n['content']: n for n in result.nodes if n['nodeType'] == 'word'}
        assert value in words and result.parser == 'pdf-text', sorted(words)
        height = next(n for n in result.nodes if n['nodeType'] == 'page')['features']['height']
        x0, y0, x1, y1 = words[value]['features']['bbox']
        assert 155 <= x0 < x1 <= 315 and height - 765 <= y0 < y1 <= height - 735   # in the field; top-left origin


def test_a_free_text_note_is_read_and_an_empty_form_is_read_as_it_was(monkeypatch):
    """A typewriter note (FreeText, as Preview or Acrobat's fill and sign add) is flattened into its
    page; a form whose fields are empty (cups-form-english.pdf) and a page with a link only
    (ltnews11.pdf) are read without flattening (it costs ~1 ms a field)."""
    result = read(_pdf_with_a_free_text_note(), media_type=None, filename='n.pdf', deadline=time.monotonic() + 30)
    assert [n['content'] for n in result.nodes if n['nodeType'] == 'line'] == ['Terms of payment', 'Approved by Kim']
    from chalicelib.features.parsing.readers import pdf as pdf_reader

    def refused(*_args):
        raise AssertionError('flattened a page whose annotations draw no text')
    monkeypatch.setattr(pdf_reader.pdfium_c, 'FPDFPage_Flatten', refused)
    for name in ('cups-form-english.pdf', 'ltnews11.pdf'):
        assert read(_data(name), media_type=None, filename=name, deadline=time.monotonic() + 30).nodes == \
            _read_once(name).nodes
