"""Bytecode in the deployment package, so that a Lambda cold start does not compile the app.

``chalice package`` zips sources only (app.py, chalicelib/, the wheels' .py files), and a
Lambda's code directory is read-only: without ``__pycache__`` in the zip, every fresh instance
compiles every module it imports, on every cold start (measured: ~45 ms of CPU for the modules
the first authenticated GET imports, bench/bench_request_path.py). This module adds, next to
every .py of the zip, the ``__pycache__/<name>.cpython-3XX.pyc`` CPython loads instead.

The .pyc are *unchecked hash-based* (PEP 552): the zip is immutable once built, so the loader
need not stat or hash the source to trust them (timestamps would not survive the zip anyway).
They are compiled by the interpreter that runs packaging, which is also the one chalice takes
the Lambda runtime from (python3.11 here): same magic number by construction. A file that does
not compile (a wheel's test data, a Python 2 leftover) is left as source, as before.

``stage_app`` does the same for a local copy of the app (the cold-start bench runs the app as
the package ships it).
"""
from __future__ import annotations

import compileall
import os
import py_compile
import shutil
import tempfile
import zipfile
from pathlib import Path

MODE = py_compile.PycInvalidationMode.UNCHECKED_HASH


def compile_tree(root: Path) -> None:
    """Unchecked-hash .pyc for every .py under ``root`` (quietly skips what does not compile)."""
    # (the loader rewrites co_filename to the real source path: tracebacks stay right)
    compileall.compile_dir(str(root), quiet=2, invalidation_mode=MODE, force=True)


def add_to_zip(zip_path: Path) -> int:
    """Rewrite ``zip_path`` with the .pyc of its modules; returns how many it holds."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / 'pkg'
        with zipfile.ZipFile(zip_path) as src:
            infos = src.infolist()
            src.extractall(root)
        compile_tree(root)
        # every .pyc now on disk: ours, over any the zip brought (chalice zips a developer's
        # chalicelib/__pycache__ as it finds it: timestamp-checked, maybe of another build)
        compiled = sorted(root.rglob('*.pyc'))
        rewritten = zip_path.with_suffix('.tmp')
        with zipfile.ZipFile(zip_path) as src, \
                zipfile.ZipFile(rewritten, 'w', compression=zipfile.ZIP_DEFLATED) as out:
            for info in infos:   # the other entries unchanged (names, modes, dates)
                if not info.filename.endswith('.pyc'):
                    out.writestr(info, src.read(info.filename))
            for path in compiled:
                out.write(path, path.relative_to(root).as_posix())
        os.replace(rewritten, zip_path)
    return len(compiled)


def stage_app(project: Path, dest: Path, *, compiled: bool = True) -> Path:
    """Copy the files chalice packages from ``project`` (app.py, chalicelib/) into ``dest``,
    compiled as the package ships them (or, ``compiled=False``, as sources only: a package
    without bytecode, for comparison). Returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(project / 'app.py', dest / 'app.py')
    shutil.copytree(project / 'chalicelib', dest / 'chalicelib',
                    ignore=shutil.ignore_patterns('__pycache__', '*.pyc'), dirs_exist_ok=True)
    if compiled:
        compile_tree(dest)
    return dest
