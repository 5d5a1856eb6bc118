"""Every link and path README.md and docs/ give resolves inside a clone of the repository
(issue 41): a new user follows them from a fresh checkout, where nothing outside it exists.

* A Markdown link ``[text](target)`` that is not a URL or an anchor resolves relative to its page
  (as GitHub renders it).
* A path named in the text (``docs/api/conventions.md``, ``chalicelib/kernel/crud.py``: one that
  starts at a top folder of the repository) resolves from the repository's root, as the docs
  name paths; a git-ignored folder (made by a command: ``.local/``, ``out/``) is allowed. Nothing
  may point outside the repository (``../something.md``)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
TOP = ('docs', 'chalicelib', 'localdev', 'tests', 'bench', 'infra', '.chalice')
NAMED = re.compile(r'(?<![\w./-])((?:\.\./)+[\w./-]*\.[a-z]{1,5}\b|(?:' + '|'.join(re.escape(t) for t in TOP)
                   + r')/[\w./*{}-]*[\w/*}])')


def pages() -> list[Path]:
    return [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]


def _ignored() -> tuple[str, ...]:
    """The folders .gitignore names (outputs of commands), as path prefixes."""
    lines = (ROOT / '.gitignore').read_text().splitlines()
    return tuple(line.strip().lstrip('/') for line in lines if line.strip().endswith('/'))


def broken(text: str, page: Path) -> list[str]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(line):
            if re.match(r'[a-z][a-z0-9+.-]*:', target) or target.startswith('#'):
                continue
            if not (page.parent / target.split('#')[0]).exists():
                out.append(f'{page.relative_to(ROOT)}:{number}: link {target}')
        for named in NAMED.findall(LINK.sub('', line)):
            named = named.rstrip('.')
            if '*' in named or '{' in named:   # a pattern: tests/api/test_bridges_*.py
                continue
            if named.startswith('../'):
                out.append(f'{page.relative_to(ROOT)}:{number}: outside the repository: {named}')
            elif '...' not in named and not named.startswith(_ignored()) and not (ROOT / named).exists():
                out.append(f'{page.relative_to(ROOT)}:{number}: no such path: {named}')
    return out


def test_every_link_and_path_of_the_docs_resolves():
    problems = [p for page in pages() for p in broken(page.read_text(), page)]
    assert problems == [], '\n'.join(problems)


def test_the_checker_finds_what_a_clone_would_miss(tmp_path):
    page = ROOT / 'docs' / 'api' / 'conventions.md'
    text = ('The contract is `../shared/spec/platform-api.md`; see [scale](docs/scale.md), '
            '[ok](../scale.md), docs/nothing-here.md, docs/api/work.md and .local/admin-api-key.')
    assert broken(text, page) == [
        'docs/api/conventions.md:1: link docs/scale.md',
        'docs/api/conventions.md:1: outside the repository: ../shared/spec/platform-api.md',
        'docs/api/conventions.md:1: no such path: docs/nothing-here.md']
