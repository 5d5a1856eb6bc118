"""The page renderer's dense parts (chalicelib/features/parsing/render.py): our PNG encoder read back
by Pillow (padded rows, grey detection) and the dpi lowered to the caps."""
from __future__ import annotations

import io

from PIL import Image

from chalicelib.features.parsing import render


def _decode(png: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(png))
    image.load()
    return image


def test_rgb_rows_with_padding_are_encoded_exactly_and_grey_pages_as_grey():
    width, height, stride = 5, 3, 16          # 15 bytes of pixels a row, 1 of padding
    pixels = [(x * 40, y * 80, (x + y) * 20) for y in range(height) for x in range(width)]
    buffer = bytearray(stride * height)
    for y in range(height):
        row = b''.join(bytes(p) for p in pixels[y * width:(y + 1) * width])
        buffer[y * stride:y * stride + 15] = row
        buffer[y * stride + 15] = 0xAB       # padding never reaches the image
    image = _decode(render.encode_png(buffer, width, height, stride, 3))
    assert image.mode == 'RGB' and image.size == (width, height) and list(image.getdata()) == pixels
    grey = bytes(v for y in range(height) for x in range(width) for v in (x * 50,) * 3)
    image = _decode(render.encode_png(grey, width, height, width * 3, 3))
    assert image.mode == 'L' and list(image.getdata()) == [x * 50 for _ in range(height) for x in range(width)]
    image = _decode(render.encode_png(bytes(range(15)), 5, 3, 5, 1))
    assert image.mode == 'L' and list(image.getdata()) == list(range(15))


def test_the_dpi_is_lowered_to_fit_the_pixel_and_side_caps():
    assert render.fitted_dpi(612, 792, 150) == 150                    # a letter page: 1275 x 1650
    assert render.fitted_dpi(612, 792, 300) == 300                    # 2550 x 3300 = 8.4 Mpx
    poster = render.fitted_dpi(14_400, 14_400, 300)                   # 200 in x 200 in
    assert poster == 25 and 14_400 * poster / 72 <= render.MAX_SIDE
    wide = render.fitted_dpi(14_400, 72, 300)                         # a long strip: the side cap binds
    assert wide == 40 and 14_400 * wide // 72 == render.MAX_SIDE
    for size in ((612, 792), (5_000, 7_000), (3_456.7, 2_222.2), (1, 1)):
        dpi = render.fitted_dpi(*size, 300)
        w, h = render._pixels(size[0], dpi), render._pixels(size[1], dpi)
        assert w * h <= render.MAX_PIXELS and max(w, h) <= render.MAX_SIDE and dpi >= 1
