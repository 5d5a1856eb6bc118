"""Page images (issue 49): the render per page at 150 dpi against the raw pypdfium2 render, the
PNG's size, and the cached path (figures in bench/README.md "Page images (issue 49)").

1. ``render.render_page`` (chalicelib/features/parsing/render.py: open the file, draw, encode our
   PNG) per page at 150 dpi, median of REPEAT, for text PDF pages and scans (a scan inside a PDF,
   a PNG, a JPEG, a TIFF frame), against the raw render measured in the same run: for a PDF
   ``pdfium.PdfDocument(data)[page].render(scale=150/72).to_pil()`` + Pillow's PNG save (the
   document opened each time, as ours does); for an image Pillow's open, resize to 150 dpi and
   PNG save. Sizes: our PNG against Pillow's.
2. The service (chalicelib/features/parsing/pages.py ``page_image``) over an in-process moto S3:
   the first call (read the original, draw, put) and the cached one (HEAD and a presign), with the
   S3 calls each makes. moto answers in-process, so the cached figure is our code's cost, not
   S3's round trip (a HEAD in the same region is ~10-20 ms on AWS).

    PYTHONPATH=. .venv/bin/python bench/bench_page_images.py
"""
from __future__ import annotations

import io
import os
import statistics
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / 'tests' / 'fixtures' / 'documents'
REPEAT = int(os.environ.get('BENCH_PAGE_IMAGES_REPEAT', '15'))
DPI = 150
PAGES = (('upref.pdf', 1, 'text PDF, letter'), ('lppl.pdf', 1, 'text PDF, A4'),
         ('cups-form-english.pdf', 1, 'text PDF with a form, A4'), ('scanned-page.pdf', 1, 'scan inside a PDF'),
         ('scanned-page.png', 1, 'scan, PNG 200 dpi'), ('scanned-page.jpg', 1, 'scan, JPEG 200 dpi'),
         ('scanned-pages.tiff', 1, 'scan, TIFF frame 200 dpi'))
TYPES = {'pdf': 'application/pdf', 'png': 'image/png', 'jpg': 'image/jpeg', 'tiff': 'image/tiff'}


def _median(fn) -> tuple[float, object]:
    times, out = [], None
    for _ in range(REPEAT):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), out


def _raw(data: bytes, name: str, page: int) -> bytes:
    from PIL import Image
    buffer = io.BytesIO()
    if name.endswith('.pdf'):
        import pypdfium2 as pdfium
        document = pdfium.PdfDocument(data)
        try:
            document[page - 1].render(scale=DPI / 72).to_pil().save(buffer, 'PNG')
        finally:
            document.close()
    else:
        image = Image.open(io.BytesIO(data))
        image.seek(page - 1)
        own = float((image.info.get('dpi') or (72, 72))[0]) or 72.0
        size = (round(image.width * DPI / own), round(image.height * DPI / own))
        frame = image.convert('L') if image.mode in ('1', 'P', 'L') else image.convert('RGB')
        frame.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0).save(buffer, 'PNG')
    return buffer.getvalue()


def renders() -> None:
    from chalicelib.features.parsing import render
    print(f'## render per page at {DPI} dpi (median of {REPEAT})')
    print('| page | ours ms | raw ms | ours / raw | pixels | our PNG KiB | raw PNG KiB |')
    print('|---|---|---|---|---|---|---|')
    for name, page, what in PAGES:
        data = (CORPUS / name).read_bytes()
        kind = TYPES[name.rsplit('.', 1)[1]]
        ours, image = _median(lambda data=data, kind=kind, name=name, page=page: render.render_page(
            data, media_type=kind, filename=name, page=page, dpi=DPI))
        raw, png = _median(lambda data=data, name=name, page=page: _raw(data, name, page))
        print(f'| {name} p{page} ({what}) | {ours * 1000:.1f} | {raw * 1000:.1f} | {ours / raw:.2f} | '
              f'{image.width} x {image.height} | {len(image.png) / 1024:.0f} | {len(png) / 1024:.0f} |')


def cached() -> None:
    os.environ.setdefault('AWS_DEFAULT_REGION', 'us-east-1')
    for name in ('AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'):
        os.environ.setdefault(name, 'testing')
    from moto import mock_aws

    from chalicelib.core.config import get_config
    from chalicelib.features.documents import blobs
    from chalicelib.features.parsing import pages
    calls: list[str] = []
    with mock_aws():
        blobs.reset()
        client = blobs.client()
        client.meta.events.register('before-call.s3.*', lambda model, **_: calls.append(model.name))
        client.create_bucket(Bucket=get_config().bucket_name)
        print(f'\n## the service over in-process moto S3 ({DPI} dpi)')
        print('| page | first call ms | S3 calls | cached call ms (median) | S3 calls |')
        print('|---|---|---|---|---|')
        for index, (name, page, _what) in enumerate(PAGES):
            data = (CORPUS / name).read_bytes()
            key = f'documents/org/families/f{index}/content/{name}'
            blobs.put(key, data, TYPES[name.rsplit('.', 1)[1]])
            family = types.SimpleNamespace(id=f'f{index}', org='org', data={
                'storageKey': key, 'contentType': TYPES[name.rsplit('.', 1)[1]], 'path': name})
            pages.crud.load_visible = lambda _family, _id, _principal, family=family: family
            calls.clear()
            started = time.perf_counter()
            pages.page_image(family.id, page, DPI, None)
            first, first_calls = time.perf_counter() - started, list(calls)
            calls.clear()
            again, _ = _median(lambda family=family, page=page: pages.page_image(family.id, page, DPI, None))
            per_call = calls[:len(calls) // REPEAT]
            print(f"| {name} p{page} | {first * 1000:.1f} | {', '.join(first_calls)} | {again * 1000:.2f} | "
                  f"{', '.join(per_call)} |")
        blobs.reset()


if __name__ == '__main__':
    renders()
    cached()
