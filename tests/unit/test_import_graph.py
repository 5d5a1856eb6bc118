"""The import graph of chalicelib (docs/architecture.md "Layout"): no import cycle, counting the
imports inside functions (lazy ones), and the .importlinter contracts really catch a forbidden
import (a kernel module importing a feature, tried once on a copy of the tree)."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def module_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in its body (inside functions too).
    The logic of /work/shared/tools/import_cycles.py, kept here so a clean clone runs it."""
    mods: dict[str, Path] = {}
    for path in (root / package).rglob('*.py'):
        name = '.'.join(path.relative_to(root).with_suffix('').parts)
        mods[name.removesuffix('.__init__')] = path

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition('.')[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == '__init__.py'
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ''
                if node.level:
                    parts = mod.split('.') if is_pkg else mod.split('.')[:-1]
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = '.'.join(parts + ([base] if base else []))
                targets = [f'{base}.{a.name}' for a in node.names] + [base]
            else:
                continue
            for target in targets:
                found = resolve(target)
                if found and found != mod and found.startswith(package):
                    edges[mod].add(found)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative), leaving out a
    package whose __init__ imports its own submodules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return [c for c in found if not all(x == c[0] or x.startswith(c[0] + '.') for x in c)]


def test_chalicelib_has_no_import_cycle():
    graph = module_graph(ROOT, 'chalicelib')
    assert len(graph) > 100   # the walk found the tree
    assert cycles(graph) == []


def test_a_cycle_through_a_lazy_import_is_found(tmp_path):
    pkg = tmp_path / 'toy'
    (pkg / 'sub').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'sub' / '__init__.py').write_text('')
    (pkg / 'a.py').write_text('from toy.sub import b\n')
    (pkg / 'sub' / 'b.py').write_text('def later():\n    from .. import c  # noqa\n')
    (pkg / 'c.py').write_text('def later():\n    import toy.a  # noqa\n')
    (pkg / 'd.py').write_text('import toy.a\n')
    assert cycles(module_graph(tmp_path, 'toy')) == [['toy.a', 'toy.c', 'toy.sub.b']]


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / 'lint-imports'), '--no-cache'], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, 'PYTHONPATH': str(cwd)})


def test_a_forbidden_import_breaks_the_contracts(tmp_path):
    """A kernel module importing a feature, and one feature importing another without a declared
    edge: lint-imports, with the project's own .importlinter, reports both contracts BROKEN."""
    shutil.copytree(ROOT / 'chalicelib', tmp_path / 'chalicelib',
                    ignore=shutil.ignore_patterns('__pycache__'))
    shutil.copy(ROOT / '.importlinter', tmp_path / '.importlinter')
    assert _lint_imports(tmp_path).returncode == 0   # the copy is clean before the change
    (tmp_path / 'chalicelib' / 'kernel' / 'sneaky.py').write_text(
        'def later():\n    from chalicelib.features.tasks import service  # noqa\n')
    (tmp_path / 'chalicelib' / 'features' / 'documents' / 'sneaky.py').write_text(
        'from chalicelib.features.bridges import proxy  # noqa\n')
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert 'Layers: front | ops -> features -> kernel -> core BROKEN' in result.stdout
    assert 'chalicelib.kernel.sneaky -> chalicelib.features.tasks.service' in result.stdout
    assert 'Features are independent of each other except the declared edges BROKEN' in result.stdout
    assert 'chalicelib.features.documents.sneaky -> chalicelib.features.bridges.proxy' in result.stdout
