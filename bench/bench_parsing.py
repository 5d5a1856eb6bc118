"""The readers of chalicelib/features/parsing/readers/ against their floors and peers, in one run
(figures in bench/README.md "Parsing"):

1. text PDFs: pages per CPU-second (one core) of ``read()`` vs raw pypdfium2 text extraction of
   the same files (the floor: open, load each page, ``get_text_range``) and vs poppler's
   ``pdftotext`` (a peer; its CPU time from ``RUSAGE_CHILDREN``); goal within 1.25x of the floor;
2. scanned pages: CPU-seconds per page of ``read()`` vs the raw ``tesseract`` CLI (TSV out, one
   thread) on the same images (for the scanned PDF: the page rendered at the same 300 dpi, saved
   as a PGM beforehand); goal within 1.15x;
3. peak memory (``VmHWM`` of a fresh subprocess: its own high-water mark, which ``ru_maxrss``
   is not, since Linux carries the parent's over fork and exec) reading a 50- and a 500-page PDF
   (lppl.pdf repeated with qpdf) in one call and in chunks of 25 pages (each chunk's nodes
   written out and dropped, as the parse stage does across messages); goal < 512 MB and flat in
   page count; of a 10,000 x 10,000 PNG (refused by ``max_pixels_per_page`` before decoding) and
   of a 7,000 x 7,000 one (49 Mpx, just under the cap: read by Tesseract, whose peak is the
   ``ru_maxrss`` of the children, an upper bound);
4. text fidelity: word-level F1 of the readers' words against ``pdftotext``'s for the corpus's
   text PDFs (>= 0.95), and OCR word accuracy (the share of the known words, from ``pdftotext``
   of the page that was scanned, found by OCR; bag of words, NFKC, punctuation stripped) (>= 0.9).

    PYTHONPATH=. .venv/bin/python bench/bench_parsing.py     # needs pdftotext, qpdf, tesseract
    PYTHONPATH=. .venv/bin/python bench/bench_parsing.py --text-pdfs    # part 1 only (~10 s)

``make bench`` installs those (the ``bench-tools`` target).
"""
from __future__ import annotations

import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import unicodedata
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / 'tests' / 'fixtures' / 'documents'
TEXT_PDFS = ('lppl.pdf', 'upref.pdf', 'ltnews11.pdf', 'cups-form-english.pdf')
SCANS = ('scanned-page.png', 'scanned-page.jpg', 'scanned-pages.tiff', 'scanned-page.pdf')
REPEAT = int(os.environ.get('BENCH_PARSING_REPEAT', '15'))
ENV_ONE_THREAD = dict(os.environ, OMP_THREAD_LIMIT='1')


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _read(data: bytes, name: str, **kwargs):
    from chalicelib.features.parsing.readers import read
    return read(data, media_type=None, filename=name, deadline=time.monotonic() + 3600, **kwargs)


# ----------------------------------------------------------------------------- 1. text PDFs

def text_pdfs() -> dict:
    import pypdfium2 as pdfium

    files = {name: (CORPUS / name).read_bytes() for name in TEXT_PDFS}
    pages = sum(len(pdfium.PdfDocument(data)) for data in files.values()) * REPEAT

    def floor() -> None:
        for data in files.values():
            document = pdfium.PdfDocument(data)
            for index in range(len(document)):
                page = document[index]
                text_page = page.get_textpage()
                text_page.get_text_range()
                text_page.close()
                page.close()
            document.close()

    def readers() -> None:
        for name, data in files.items():
            _read(data, name)

    for warm in (floor, readers):
        warm()
    out = {}
    # interleaved rounds, best of 3: the machine is shared
    rounds: dict[str, list[float]] = {'floor': [], 'readers': [], 'pdftotext': []}
    for _ in range(3):
        for label, fn in (('floor', floor), ('readers', readers)):
            started = _cpu_self()
            for _ in range(REPEAT):
                fn()
            rounds[label].append(_cpu_self() - started)
        started = _cpu_children()
        for _ in range(REPEAT):
            for name in files:
                subprocess.run(['pdftotext', '-q', str(CORPUS / name), '-'], check=True, capture_output=True)
        rounds['pdftotext'].append(_cpu_children() - started)
    for label, seconds in rounds.items():
        out[label] = pages / min(seconds)
    out['pages'] = pages
    return out


# ----------------------------------------------------------------------------- 2. scanned pages

def _tesseract_cpu(path: str, dpi: int | None) -> float:
    started = _cpu_children()
    command = ['tesseract', path, 'stdout', '-l', 'eng', '--psm', '1', 'tsv']   # as the reader runs it
    if dpi:
        command[3:3] = ['--dpi', str(dpi)]
    subprocess.run(command, check=True, capture_output=True, env=ENV_ONE_THREAD)
    return _cpu_children() - started


def scanned() -> list[dict]:
    import pypdfium2 as pdfium
    from PIL import Image

    from chalicelib.features.parsing.readers import DEFAULT_LIMITS
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in SCANS:
            data = (CORPUS / name).read_bytes()
            if name.endswith('.pdf'):
                page = pdfium.PdfDocument(data)[0]
                bitmap = page.render(scale=DEFAULT_LIMITS.ocr_dpi / 72, grayscale=True)
                bitmap.to_pil().save(f'{tmp}/page.pgm')
                images, dpi = [f'{tmp}/page.pgm'], DEFAULT_LIMITS.ocr_dpi
            elif name.endswith('.tiff'):
                image = Image.open(CORPUS / name)
                images = []
                for frame in range(image.n_frames):
                    image.seek(frame)
                    image.save(f'{tmp}/frame{frame}.pbm')
                    images.append(f'{tmp}/frame{frame}.pbm')
                dpi = 200
            else:
                images, dpi = [str(CORPUS / name)], 200
            raw = sum(_tesseract_cpu(path, dpi) for path in images)
            started_self, started_children = _cpu_self(), _cpu_children()
            result = _read(data, name)
            ours = (_cpu_self() - started_self) + (_cpu_children() - started_children)
            rows.append({'file': name, 'pages': result.page_count, 'raw': raw / len(images),
                         'readers': ours / result.page_count, 'result': result})
    return rows


# ----------------------------------------------------------------------------- 3. peak memory

MEMORY_CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from chalicelib.features.parsing.readers import Limits, ParseFailure, read
path, chunk = sys.argv[2], int(sys.argv[3])
data = open(path, 'rb').read()
limits = Limits(max_text_chars=10 ** 9)
started = time.monotonic()
pages = nodes = 0
first = 1
outcome = 'read'
try:
    while first is not None:
        result = read(data, media_type=None, filename=path, first_page=first, deadline=time.monotonic() + 3600,
                      limits=limits, page_limit=chunk or None)
        nodes += len(result.nodes)
        if chunk:
            with open('/dev/null', 'w') as sink:
                json.dump(result.nodes, sink)
        del result.nodes[:]
        first = result.next_page
except ParseFailure as error:
    outcome = f'{error.cause}: {error}'
hwm = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:'))
print(json.dumps({'maxrss_mb': hwm / 1024,
                  'children_maxrss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  'seconds': time.monotonic() - started, 'nodes': nodes, 'outcome': outcome}))
'''


def _peak(path: str, chunk: int) -> dict:
    done = subprocess.run([sys.executable, '-c', MEMORY_CHILD, str(ROOT), path, str(chunk)], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout)


def _big_png(path: str, side: int) -> None:
    """A valid grey PNG of side x side pixels (white, with a black band), written row by row."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return len(body).to_bytes(4, 'big') + kind + body + (zlib.crc32(kind + body) & 0xFFFFFFFF).to_bytes(4, 'big')

    compressor = zlib.compressobj(9)
    white = b'\x00' + b'\xff' * side
    black = b'\x00' + b'\x00' * side
    parts = []
    for row in range(side):
        parts.append(compressor.compress(black if side // 2 <= row < side // 2 + 40 else white))
    parts.append(compressor.flush())
    with open(path, 'wb') as out:
        out.write(b'\x89PNG\r\n\x1a\n')
        out.write(chunk(b'IHDR', side.to_bytes(4, 'big') * 2 + bytes([8, 0, 0, 0, 0])))
        out.write(chunk(b'IDAT', b''.join(parts)))
        out.write(chunk(b'IEND', b''))


def memory() -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        source = str(CORPUS / 'lppl.pdf')   # 8 pages
        for pages in (50, 500):
            copies = -(-pages // 8)
            path = f'{tmp}/lppl-{pages}.pdf'
            subprocess.run(['qpdf', '--empty', '--pages', *([source] * copies), '--', path + '.all'], check=True)
            subprocess.run(['qpdf', path + '.all', '--pages', '.', f'1-{pages}', '--', path], check=True)
            for chunk in (0, 25):
                rows.append({'what': f'{pages}-page text PDF, ' + ('one call' if not chunk else f'chunks of {chunk}'),
                             **_peak(path, chunk)})
        png = f'{tmp}/big.png'
        _big_png(png, 10_000)
        rows.append({'what': '10,000 x 10,000 PNG (default limits)', 'bytes': os.path.getsize(png),
                     **_peak(png, 0)})
        _big_png(png, 7_000)
        rows.append({'what': '7,000 x 7,000 PNG (49 Mpx, under the cap)', 'bytes': os.path.getsize(png),
                     **_peak(png, 0)})
    return rows


# ----------------------------------------------------------------------------- 4. fidelity

def _tokens(text: str) -> list[str]:
    text = unicodedata.normalize('NFKC', text)
    return [token for token in text.split() if token]


def _ocr_tokens(text: str) -> list[str]:
    words = (token.strip('.,:;()[]\'"‘’“”').lower() for token in _tokens(text))
    return [word for word in words if word]


def _f1(ours: list[str], theirs: list[str]) -> float:
    common = sum((collections.Counter(ours) & collections.Counter(theirs)).values())
    if not common:
        return 0.0
    precision, recall = common / len(ours), common / len(theirs)
    return 2 * precision * recall / (precision + recall)


def fidelity(scans: list[dict]) -> tuple[list[dict], list[dict]]:
    text_rows = []
    for name in TEXT_PDFS:
        ours = _tokens(' '.join(n['content'] for n in _read((CORPUS / name).read_bytes(), name).nodes
                                if n['nodeType'] == 'word'))
        theirs = _tokens(subprocess.run(['pdftotext', '-q', str(CORPUS / name), '-'], check=True,
                                        capture_output=True, text=True).stdout)
        text_rows.append({'file': name, 'ours': len(ours), 'pdftotext': len(theirs), 'f1': _f1(ours, theirs)})
    ocr_rows = []
    for row in scans:
        result = row['result']
        for page in range(1, result.page_count + 1):
            known = _ocr_tokens(subprocess.run(['pdftotext', '-q', '-f', str(page), '-l', str(page),
                                                str(CORPUS / 'lppl.pdf'), '-'],
                                               check=True, capture_output=True, text=True).stdout)
            read_words = _ocr_tokens(' '.join(n['content'] for n in result.nodes if n['nodeType'] == 'word'
                                              and n['features']['page'] == page))
            found = sum((collections.Counter(read_words) & collections.Counter(known)).values())
            ocr_rows.append({'file': f'{row["file"]} p{page}', 'known': len(known), 'read': len(read_words),
                             'accuracy': found / len(known)})
    return text_rows, ocr_rows


def _print_scans(scans: list[dict]) -> None:
    print('\n2. Scanned pages (CPU-seconds per page, one thread)\n')
    print('| file | pages | raw tesseract CLI | read() | ratio |')
    print('| --- | ---: | ---: | ---: | ---: |')
    for row in scans:
        print(f'| {row["file"]} | {row["pages"]} | {row["raw"]:.2f} | {row["readers"]:.2f} | '
              f'{row["readers"] / row["raw"]:.2f}x |')


def main() -> None:
    text_only = '--text-pdfs' in sys.argv[1:]
    scans_only = '--scans' in sys.argv[1:]
    print(f'bench_parsing.py: {time.strftime("%Y-%m-%d %H:%M")}, {os.cpu_count()} cores (shared), '
          f'repeat {REPEAT}', flush=True)
    if scans_only:
        _print_scans(scanned())
        return
    speed = text_pdfs()
    print(f'\n1. Text PDFs ({", ".join(TEXT_PDFS)}; {speed["pages"]} pages a round, best of 3, CPU time)\n')
    print('| reader | pages / CPU-second | vs floor |')
    print('| --- | ---: | ---: |')
    for label, text in (('floor', 'raw pypdfium2 text extraction (floor)'), ('readers', 'read() (pdf-text)'),
                        ('pdftotext', 'poppler pdftotext (peer)')):
        print(f'| {text} | {speed[label]:,.0f} | {speed["floor"] / speed[label]:.2f}x |')
    if text_only:
        return

    scans = scanned()
    _print_scans(scans)

    print('\n3. Peak memory (VmHWM of a fresh process; the tesseract child\'s ru_maxrss separately)\n')
    print('| input | outcome | nodes | seconds | peak RSS MB | tesseract peak MB (at most) |')
    print('| --- | --- | ---: | ---: | ---: | ---: |')
    for row in memory():
        print(f'| {row["what"]} | {row["outcome"][:90]} | {row["nodes"]:,} | {row["seconds"]:.2f} | '
              f'{row["maxrss_mb"]:.0f} | {row["children_maxrss_mb"]:.0f} |')

    text_rows, ocr_rows = fidelity(scans)
    print('\n4. Text fidelity\n')
    print('| text PDF | words (ours) | words (pdftotext) | word F1 |')
    print('| --- | ---: | ---: | ---: |')
    for row in text_rows:
        print(f'| {row["file"]} | {row["ours"]:,} | {row["pdftotext"]:,} | {row["f1"]:.3f} |')
    print('\n| OCR page | known words | words read | word accuracy |')
    print('| --- | ---: | ---: | ---: |')
    for row in ocr_rows:
        print(f'| {row["file"]} | {row["known"]} | {row["read"]} | {row["accuracy"]:.3f} |')


if __name__ == '__main__':
    main()
