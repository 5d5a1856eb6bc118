"""Docs that stay true (issue 40): every repository path a doc or a comment names exists.

Read: README.md and docs/**/*.md (links and text alike), and the comments and docstrings of
chalicelib/, localdev/, infra/, bench/ and tests/ (string literals are data, not claims: a test's
made-up key is not a path of this repository). A path is a token with a folder and a file name
with an extension (``kernel/crud.py``, ``docs/api/work.md``, ``features/work/store.py``); it
is found relative to the repository, to chalicelib/ (the code's own short form), to
chalicelib/features/, or to the naming file's folder (a doc's relative link). A renamed or
removed module then fails here until every page and comment naming it is fixed.

Names that are not paths of this repository by design are listed in ``ELSEWHERE`` with why.
"""
from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ('chalicelib', 'localdev', 'infra', 'bench', 'tests')
PATH = re.compile(r'(?<![\w./:-])((?:\.\./|\./)?(?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_-]+\.'
                  r'(?:py|md|json|toml|txt|ya?ml|cfg|ini|sh|ts|js|html|csv))(?![\w/])')
# Prefixes that name something outside the repository on purpose.
ELSEWHERE = (
    'out/',           # what `make package` writes (docs/operations/deploy.md)
    '.local/',        # what `make run` and `make test` write
    'botocore/',      # a file of the installed botocore package (kernel/store/endpoints.py)
    'chalice/',       # a file of the installed chalice package (the bench's bare Chalice app)
    'aws_xray_sdk/',  # a file of the installed X-Ray SDK (infra/botocore_models.py)
    'kodexa/',        # a file of the platform's Python SDK package (docs/api/clients.md)
    'docs/...',       # docs/README.md's placeholder for "a page"
    '../something.md',  # tests/unit/test_doc_links.py's example of what may not be linked
)


def _tracked() -> list[str]:
    out = subprocess.run(['git', 'ls-files'], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in out.stdout.split() if (ROOT / f).is_file()]


def _docstrings(source: str) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.append((first.lineno, first.value.value))
    return out


def _comments(source: str) -> list[tuple[int, str]]:
    return [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT]


def _texts(rel: str) -> list[tuple[int, str]]:
    source = (ROOT / rel).read_text()
    if rel.endswith('.md'):
        return [(1, source)]
    return _docstrings(source) + _comments(source)


def _read() -> list[str]:
    return [f for f in _tracked()
            if f == 'README.md' or (f.startswith('docs/') and f.endswith('.md'))
            or (f.endswith('.py') and f.split('/')[0] in CODE_DIRS)]


def _exists(rel: str, token: str) -> bool:
    here = (ROOT / rel).parent
    return any((base / token).exists() for base in (ROOT, ROOT / 'chalicelib', ROOT / 'chalicelib' / 'features', here))


def missing_paths(files: list[str]) -> list[str]:
    found = []
    for rel in files:
        for line, text in _texts(rel):
            for m in PATH.finditer(text):
                token = m.group(1)
                if token.startswith(ELSEWHERE) or _exists(rel, token):
                    continue
                found.append(f'{rel}:{line + text.count(chr(10), 0, m.start())}: {token}')
    return found


def test_every_path_a_doc_or_a_comment_names_exists():
    assert missing_paths(_read()) == []


def test_a_stale_path_is_found(tmp_path, monkeypatch):
    """The check itself: a comment, a docstring and a page naming files that do not exist."""
    code = ROOT / 'tests' / 'unit' / '_stale_example.py'
    page = ROOT / 'docs' / '_stale_example.md'
    try:
        code.write_text('"""See kernel/gone.py."""\nX = "data/not/a/claim.py"   # hooks/tasks.py\n')
        page.write_text('Read [it](operations/nowhere.md) and `chalicelib/kernel/crud.py`.\n')
        found = missing_paths(['tests/unit/_stale_example.py', 'docs/_stale_example.md'])
    finally:
        code.unlink(missing_ok=True)
        page.unlink(missing_ok=True)
    assert found == ['tests/unit/_stale_example.py:1: kernel/gone.py',
                     'tests/unit/_stale_example.py:2: hooks/tasks.py',
                     'docs/_stale_example.md:1: operations/nowhere.md']


def test_the_docs_index_lists_every_page():
    """docs/README.md names every page of docs/ (by its file name: the index groups them by folder)."""
    index = (ROOT / 'docs' / 'README.md').read_text()
    pages = sorted(p.relative_to(ROOT / 'docs') for p in (ROOT / 'docs').rglob('*.md') if p.name != 'README.md')
    assert [str(p) for p in pages if p.name not in index] == []
