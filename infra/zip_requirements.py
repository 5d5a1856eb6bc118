"""Every runtime requirement is in deployment.zip, or ``make package`` fails.

``chalice package`` installs requirements.txt into the zip from Lambda-compatible wheels only (for
python3.11, manylinux up to glibc 2.26: Amazon Linux 2; chalice/deploy/packager.py
``_RUNTIME_GLIBC``). A requirement it finds no such wheel for it leaves out, prints "Could not
install dependencies" and still exits 0: the zip ships without it and the function fails on Lambda
at the first import (google-re2 1.1.20251105, manylinux_2_28 wheels only, did exactly that;
docs/operations/deploy.md "The package"). infra/package.py therefore refuses chalice's warning
(``refuse_missing_dependencies``) and checks the zip itself (``missing``): each requirement
installed at its pinned version (its ``.dist-info``), the top-level modules its ``RECORD`` lists
present (``modules``; many wheels have no ``top_level.txt``), and, for a requirement with extras
(``pyjwt[crypto]``), the distributions those extras require. Written here rather than taken from
a library: no packaging tool inspects a built Lambda zip against a requirements file; the parsing
itself is ``packaging``'s.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CHALICE_MISSING = 'Could not install dependencies'   # chalice/constants.py MISSING_DEPENDENCIES_TEMPLATE


class MissingDependencies(Exception):
    """What the zip lacks, one line per requirement."""


def requirements(path: Path) -> list[Requirement]:
    """The requirements of a pip requirements file (comments and blank lines skipped)."""
    out = []
    for line in path.read_text().splitlines():
        line = line.split('#', 1)[0].strip()
        if line:
            out.append(Requirement(line))
    return out


def refuse_missing_dependencies(chalice_output: str) -> None:
    """Raise when chalice package said it left requirements out."""
    if CHALICE_MISSING in chalice_output:
        at = chalice_output.index(CHALICE_MISSING)
        detail = ' '.join(chalice_output[at:].split('\n\n', 1)[0].split())
        raise MissingDependencies(f'chalice package: {detail} (no Lambda-compatible wheel: '
                                  'docs/operations/deploy.md "The package")')


def _installed(names: list[str]) -> dict[str, tuple[str, str]]:
    """canonical name -> (version, dist-info folder) of the distributions installed in the zip."""
    found: dict[str, tuple[str, str]] = {}
    for name in names:
        folder = name.split('/', 1)[0]
        if folder.endswith('.dist-info') and '-' in folder:
            dist, version = folder[:-len('.dist-info')].rsplit('-', 1)
            found[canonicalize_name(dist)] = (version, folder)
    return found


def modules(record: str) -> list[str]:
    """The importable top-level modules a wheel's RECORD installs: packages, ``.py`` modules and
    extension modules at the root (not its .dist-info/.data folders, nor ``pillow.libs`` or
    ``wrapt-stubs``, which are not module names)."""
    found: set[str] = set()
    for line in record.splitlines():
        path = line.rsplit(',', 2)[0] if line.count(',') >= 2 else line
        first, _, rest = path.partition('/')
        if not first or first.endswith(('.dist-info', '.data')) or first in ('..', '__pycache__'):
            continue
        name = first if rest else first.split('.', 1)[0] if first.endswith(('.py', '.so', '.pyd')) else ''
        if name.isidentifier():
            found.add(name)
    return sorted(found)


def _has_module(names: set[str], tops: set[str], module: str) -> bool:
    """A package folder, a module file or an extension module named ``module`` at the zip's root."""
    path = module.replace('.', '/')
    if f'{path}.py' in names or any(n.startswith(f'{path}/') for n in names):
        return True
    return any(t.startswith(f'{path}.') and t.endswith(('.so', '.pyd')) for t in tops)


def missing(zip_path: Path, reqs: list[Requirement]) -> list[str]:
    """Why each requirement is not usable from the zip (empty: all are)."""
    with zipfile.ZipFile(zip_path) as z:
        names = set(z.namelist())
        installed = _installed(sorted(names))
        tops = {n for n in names if '/' not in n}
        problems: list[str] = []
        for req in reqs:
            key = canonicalize_name(req.name)
            if key not in installed:
                problems.append(f'{req}: not installed')
                continue
            version, folder = installed[key]
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                problems.append(f'{req}: {version} installed')
            record = f'{folder}/RECORD'
            listed = modules(z.read(record).decode()) if record in names else []
            if not listed:
                problems.append(f'{req}: no module listed in its RECORD')
            absent = [m for m in listed if not _has_module(names, tops, m)]
            if absent:
                problems.append(f'{req}: module(s) {", ".join(absent)} absent')
            if req.extras and f'{folder}/METADATA' in names:
                for line in z.read(f'{folder}/METADATA').decode().splitlines():
                    if not line.startswith('Requires-Dist:'):
                        continue
                    dep = Requirement(line.split(':', 1)[1].strip())
                    wanted = dep.marker is not None and any(
                        dep.marker.evaluate({'extra': extra, 'python_version': '3.11',
                                             'sys_platform': 'linux', 'platform_system': 'Linux',
                                             'platform_machine': 'x86_64',
                                             'platform_python_implementation': 'CPython',
                                             'implementation_name': 'cpython'})
                        for extra in req.extras) and 'extra' in str(dep.marker)
                    if wanted and canonicalize_name(dep.name) not in installed:
                        problems.append(f'{req}: {dep.name} (extra) not installed')
    return problems


def check(zip_path: Path, requirements_path: Path) -> None:
    problems = missing(zip_path, requirements(requirements_path))
    if problems:
        raise MissingDependencies(f'{zip_path.name} lacks runtime requirements of '
                                  f'{requirements_path.name}: ' + '; '.join(problems))
