"""The deployment package carries bytecode (infra/bytecode.py): a Lambda's read-only code
directory cannot cache it, so without it every cold start compiles every module it imports."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from infra import bytecode

TAG = sys.implementation.cache_tag


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, 'w') as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def _run(cwd: Path, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, 'PYTHONDONTWRITEBYTECODE': '1', 'PYTHONPATH': str(cwd)}
    return subprocess.run([sys.executable, '-c', code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_zip_gains_an_unchecked_pyc_per_module_and_keeps_every_original_entry(tmp_path):
    pkg = _zip(tmp_path / 'deployment.zip', {
        'app.py': 'import chalicelib.mod\nVALUE = chalicelib.mod.VALUE\n',
        'chalicelib/__init__.py': '',
        'chalicelib/mod.py': 'VALUE = "compiled"\n',
        'vendor/broken.py': 'print "python 2"\n',          # does not compile: stays source only
        'vendor/data.txt': 'not python',
        # what chalice zips from a developer's tree: a timestamp-checked .pyc of some build
        f'chalicelib/__pycache__/mod.{TAG}.pyc': 'stale',
    })
    assert bytecode.add_to_zip(pkg) == 3
    with zipfile.ZipFile(pkg) as z:
        names = set(z.namelist())
        pyc = z.read(f'chalicelib/__pycache__/mod.{TAG}.pyc')
    assert {'app.py', 'chalicelib/__init__.py', 'chalicelib/mod.py', 'vendor/broken.py', 'vendor/data.txt',
            f'__pycache__/app.{TAG}.pyc',
            f'chalicelib/__pycache__/__init__.{TAG}.pyc', f'chalicelib/__pycache__/mod.{TAG}.pyc'} == names
    assert pyc[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(pyc[4:8], 'little') == 0b01      # PEP 552: hash-based, source not checked


def test_the_packaged_bytecode_is_what_runs_without_compiling_the_source(tmp_path):
    pkg = _zip(tmp_path / 'deployment.zip', {
        'app.py': 'import chalicelib.mod\nVALUE = chalicelib.mod.VALUE\n',
        'chalicelib/__init__.py': '',
        'chalicelib/mod.py': 'VALUE = "compiled"\n',
    })
    bytecode.add_to_zip(pkg)
    task = tmp_path / 'task'
    with zipfile.ZipFile(pkg) as z:
        z.extractall(task)
    # the loader trusts the packaged .pyc: it neither reads nor compiles the source
    (task / 'chalicelib' / 'mod.py').write_text('VALUE = "source"\n')
    probe = ('import importlib._bootstrap_external as b\n'
             'b.SourceLoader.source_to_code = lambda *a, **k: (_ for _ in ()).throw(AssertionError(a[2]))\n'
             'import app; print(app.VALUE)\n')
    r = _run(task, probe)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == 'compiled'


def test_a_staged_app_is_the_packaged_files_compiled(tmp_path):
    project = tmp_path / 'project'
    (project / 'chalicelib' / 'sub').mkdir(parents=True)
    (project / 'app.py').write_text('from chalicelib.sub import mod\n')
    (project / 'chalicelib' / '__init__.py').write_text('')
    (project / 'chalicelib' / 'sub' / '__init__.py').write_text('')
    (project / 'chalicelib' / 'sub' / 'mod.py').write_text('X = 1\n')
    (project / 'tests').mkdir()
    (project / 'tests' / 'test_x.py').write_text('')
    staged = bytecode.stage_app(project, tmp_path / 'staged')
    assert {p.relative_to(staged).as_posix() for p in staged.rglob('*') if p.is_file()} == {
        'app.py', 'chalicelib/__init__.py', 'chalicelib/sub/__init__.py', 'chalicelib/sub/mod.py',
        f'__pycache__/app.{TAG}.pyc', f'chalicelib/__pycache__/__init__.{TAG}.pyc',
        f'chalicelib/sub/__pycache__/__init__.{TAG}.pyc', f'chalicelib/sub/__pycache__/mod.{TAG}.pyc'}
