"""Pillow in the deployment package without its AVIF codec, which nothing here reads.

Pillow is in the zip for the API's page images of PNG, JPEG and TIFF uploads
(chalicelib/features/parsing/render.py; docs/operations/deploy.md "The package"). Its manylinux
wheel bundles libavif (``pillow.libs/libavif-*.so``, 3.2 MiB of the zip, 7.4 MiB unzipped: the
largest file Pillow brings) for its AVIF plugin, ``PIL/_avif*.so``. The readers' sniffing
(chalicelib/features/parsing/readers/sniff.py) never hands Pillow an AVIF file, and Pillow runs
without the codec as a build without AVIF does: ``AvifImagePlugin`` catches the missing ``_avif``
and marks AVIF unsupported. ``trim_zip`` rewrites deployment.zip (after ``chalice package``, before
infra/bytecode.py) without those two files; every other Pillow file stays (``_imaging`` links
libjpeg, libtiff, libopenjp2, libxcb; a file dropped that it needs would fail the deploy
rehearsal's page image of a scan, tests/integration/test_deploy_rehearsal.py).
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

DROPPED = ('PIL/_avif.', 'pillow.libs/libavif-')   # zip entry name prefixes


def trim_zip(zip_path: Path) -> int:
    """Rewrite ``zip_path`` without the AVIF codec; returns the unzipped bytes dropped. Fails when
    the zip holds Pillow but none of the codec (a Pillow that renamed it: this list is stale)."""
    rewritten = zip_path.with_suffix('.trimming')
    dropped = 0
    found = {prefix: False for prefix in DROPPED}
    has_pillow = False
    with zipfile.ZipFile(zip_path) as src, \
            zipfile.ZipFile(rewritten, 'w', compression=zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            has_pillow = has_pillow or info.filename.startswith('PIL/')
            prefix = next((p for p in DROPPED if info.filename.startswith(p)), None)
            if prefix is None:
                out.writestr(info, src.read(info.filename))   # names, modes, dates unchanged
            else:
                found[prefix] = True
                dropped += info.file_size
    if has_pillow and not all(found.values()):
        rewritten.unlink()
        raise ValueError(f'Pillow without {[p for p, seen in found.items() if not seen]} in the package: '
                         'update infra/pillow_trim.py DROPPED')
    os.replace(rewritten, zip_path)
    return dropped
