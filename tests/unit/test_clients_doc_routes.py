"""docs/api/clients.md "SDK paths left out, and why" names no route this API serves (issue 46
item 8: it listed `/api/exceptions`, the store's `dataObjects` and `/taxonomies` as not served
long after they were). Each code span of the table's first column is a path as the SDK builds
it, optionally after the methods it sends; the notation is the page's own: ``{a,b}`` either,
``[...]`` optional, a trailing ``...`` anything under it, any other ``{name}`` a placeholder.

A listed path is served when a registered route (``app.routes``, the SDK aliases included) has
one of its methods and matches it segment by segment: a literal of the doc matches the same
literal or a route's placeholder (the router would take it there); a placeholder of the doc
matches only a route's placeholder (``{type}`` stands for names the SDK fills in, not for every
literal path of this API)."""
from __future__ import annotations

import itertools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / 'docs' / 'api' / 'clients.md'
SECTION = '### SDK paths left out, and why'
METHODS = ('GET', 'POST', 'PUT', 'DELETE', 'PATCH')
SPEC = re.compile(r'^(?P<methods>(?:(?:GET|POST|PUT|DELETE|PATCH),\s*)*(?:GET|POST|PUT|DELETE|PATCH)\s+)?'
                  r'(?P<path>/api/\S+)$')


def _listed() -> list[str]:
    """The code spans of the first column of the section's table (up to the next heading)."""
    lines = PAGE.read_text().split(SECTION, 1)[1].splitlines()[1:]
    lines = lines[:next((i for i, line in enumerate(lines) if line.startswith('#')), len(lines))]
    rows = [line for line in lines if line.startswith('| ')][1:]   # the header row is not a path
    return [spec for row in rows for spec in re.findall(r'`([^`]+)`', row.split(' | ')[0])]


def _expand(path: str) -> list[str]:
    """Every concrete spelling of a path: ``{a,b}`` alternatives and ``[...]`` optional parts."""
    optional = re.search(r'\[([^\]]*)\]', path)
    if optional:
        return [*_expand(path[:optional.start()] + path[optional.end():]),
                *_expand(path[:optional.start()] + optional.group(1) + path[optional.end():])]
    choice = re.search(r'\{([^{}]*,[^{}]*)\}', path)
    if choice:
        return list(itertools.chain.from_iterable(
            _expand(path[:choice.start()] + alt + path[choice.end():]) for alt in choice.group(1).split(',')))
    return [path]


def _is_placeholder(segment: str) -> bool:
    return segment.startswith('{') and segment.endswith('}')


def _matches(doc: list[str], route: list[str], under: bool) -> bool:
    if len(route) < len(doc) or (not under and len(route) != len(doc)):
        return False
    return all(_is_placeholder(r) if _is_placeholder(d) else (d == r or _is_placeholder(r))
               for d, r in zip(doc, route[:len(doc)], strict=True))


def served(spec: str, routes: dict[str, set[str]]) -> list[str]:
    """The registered routes ``spec`` (one code span of the table) would reach."""
    found = SPEC.match(spec.strip())
    assert found, f'not a path spec of clients.md: {spec!r}'
    methods = set(re.findall('|'.join(METHODS), found['methods'] or '')) or set(METHODS)
    hits = []
    for path in _expand(found['path']):
        under = path.endswith('...')
        doc = path.removesuffix('...').strip('/').split('/')
        hits += [f'{sorted(methods & set(have))} {route}' for route, have in routes.items()
                 if methods & set(have) and _matches(doc, route.strip('/').split('/'), under)]
    return hits


def _routes() -> dict[str, set[str]]:
    from app import app  # noqa: PLC0415 - the whole route table, aliases included
    return {path: set(methods) for path, methods in app.routes.items()}


def test_the_matcher_reads_the_page_s_notation():
    routes = {'/api/exceptions': {'GET'}, '/api/tasks/{id}': {'GET', 'PUT'}, '/api/tasks/take-next': {'POST'},
              '/api/stores/{o}/{s}/dataObjects/{id}': {'GET'}, '/api/x/{id}/{slug}/{version}': {'GET'}}
    assert served('/api/exceptions', routes)
    assert not served('POST /api/exceptions', routes)                      # the method counts
    assert served('GET /api/tasks/createTaskWithRequest', routes)          # a literal reaches a placeholder
    assert not served('POST /api/{type}/{orgSlug}', routes)                # a placeholder never a literal
    assert served('/api/stores/{o}/{s}/dataObjects...', routes)            # anything under
    assert not served('/api/stores/{o}/{s}/dataObjects', routes)
    assert served('/api/stores/{o}/{s}/{dataObjects,other}/{id}', routes)  # either
    assert served('/api/x/{o}/{slug}[/{version}]', routes)                 # optional
    assert not served('/api/x/{o}/{slug}', routes)


def test_every_path_of_the_table_is_written_in_the_page_s_notation():
    specs = _listed()
    assert len(specs) > 40, specs   # the table was read
    assert [spec for spec in specs if not SPEC.match(spec.strip())] == []


def test_clients_md_lists_no_served_route_as_left_out():
    routes = _routes()
    specs = [spec for spec in _listed() if SPEC.match(spec.strip())]
    assert len(specs) > 30, specs   # the table was read
    wrong = {spec: hits for spec in specs if (hits := served(spec, routes))}
    assert not wrong, f'docs/api/clients.md lists served routes as not served: {wrong}'
