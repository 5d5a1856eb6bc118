"""Property tests of the generic list endpoint, through HTTP.

One data set per module (tasks in three projects and two task groups; assistants with booleans
and soft deletes), with pseudo-random values and missing fields, created through the API.
Hypothesis then draws filters (rendered to text), text queries, sorts and pages; the page
``GET /api/{family}`` answers must equal what a pure in-memory oracle computes from the
created records:

  match   chalicelib.kernel.query.evaluate on every live record (references and memberTask resolved
          from the records the test created), AND of all filters, the text query as ``~~``
          on the searchable fields
  order   missing / null / empty first (ascending), strings case-insensitively, numbers
          numerically, false before true, ties by id ascending; a single ``desc`` sort
          reverses the whole order, ties included; several sort fields keep ties ascending
  page    zero-based slices of ``pageSize``; a page past the end is empty with the same totals

This covers every plan of kernel/listing.py: the index walk (unfiltered, indexed sorts),
the tenant read (keys, then the records), the pinned-project read.
"""
from __future__ import annotations

import math
import os
import random
import re
import urllib.parse
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from chalicelib.kernel.query import And, Compare, IsNull, Not, Or, evaluate, parse, render
from chalicelib.kernel.registry import family as family_of
from tests.conftest import ADMIN_KEY, Api
from tests.support import task_statuses

pytestmark = pytest.mark.slow   # minutes of CPU: `make test` runs it, the quick loop (`make check`) does not

SEED = int(os.environ.get('LIST_PROPERTY_SEED', '20261121'))
EXAMPLES = int(os.environ.get('LIST_PROPERTY_EXAMPLES', '70'))

TEXT = ['Alpha', 'alpha', 'ALPHA beta', 'beta', 'Gamma', 'straße', 'STRASSE', "it's", 'a*b', 'Zulu 10',
        'zulu 9', 'é', 'É', 'back\\slash', '']
INSTANTS = ['2026-01-01T00:00:00.000000Z', '2026-01-01T12:30:00.000000Z', '2025-12-31T23:00:00.000000Z',
            '2026-06-01T08:00:00.500000Z']
SPELLINGS = {INSTANTS[0]: ['2026-01-01', '2026-01-01T01:00:00+01:00'], INSTANTS[1]: ['2026-01-01T12:30:00Z'],
             INSTANTS[2]: ['2026-01-01T00:00:00+01:00'], INSTANTS[3]: ['2026-06-01T10:00:00.5+02:00']}
NUMBERS = [-1, 0, 1, 2, 10, Decimal('1.5')]
PATTERNS = ['a*', '*a*', '*A', 'al*a', '*', 'ss', 'SS', 'ß', "it'*", '*\\*', '*b*']
QUERIES = ['alpha', 'ALP', 'a*', '*', '', '**', 'strasse', 'straße', "it's", 'zulu 1', '*a', 'é', 'nothing']


def _maybe(rng: random.Random, pool, missing=0.25):
    return None if rng.random() < missing else rng.choice(pool)


def _put(body: dict, name: str, value):
    if value is not None:
        body[name] = value


# ----------------------------------------------------------------------------- the data set

@dataclass
class Env:
    api: Api
    org_id: str
    records: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # family -> id -> data
    deleted: dict[str, set[str]] = field(default_factory=dict)

    def add(self, family: str, data: dict[str, Any]) -> None:
        self.records.setdefault(family, {})[data['id']] = data

    def live(self, family: str) -> list[dict[str, Any]]:
        gone = self.deleted.get(family, set())
        return [d for i, d in self.records.get(family, {}).items() if i not in gone]


def _create(api: Api, family: str, body: dict) -> dict:
    r = api.post(f'/api/{family}', body)
    assert r.status == 201, (family, body, r.json)
    return r.json


def _build(env: Env) -> None:
    rng = random.Random(SEED)
    api = env.api
    env.add('organizations', api.get(f'/api/organizations/{env.org_id}').json)
    projects = []
    for name, x in (('Alpha Project', 1), ('beta', 2), ('Gamma', None)):
        body = {'organizationId': env.org_id, 'name': name}
        if x is not None:
            body['options'] = {'properties': {'x': x}}
        projects.append(_create(api, 'projects', body))
        env.add('projects', projects[-1])
    groups = [_create(api, 'task-groups', {'projectId': projects[i]['id'], 'name': n})
              for i, n in ((0, 'Group one'), (1, 'group TWO'))]
    for g in groups:
        env.add('task-groups', g)
    task_statuses(api, env.org_id, 'open', 'done', 'Open', 'blocked')   # slugs are case-sensitive
    for _ in range(18):
        body: dict[str, Any] = {'projectId': rng.choice(projects)['id']}
        _put(body, 'title', _maybe(rng, TEXT, 0.15))
        _put(body, 'description', _maybe(rng, TEXT, 0.4))
        _put(body, 'searchText', _maybe(rng, TEXT, 0.7))
        _put(body, 'statusSlug', _maybe(rng, ['open', 'done', 'Open', 'blocked']))
        _put(body, 'priority', _maybe(rng, [-1, 0, 1, 2, 10]))
        _put(body, 'dueDate', _maybe(rng, INSTANTS, 0.3))
        if rng.random() < 0.7:
            meta: dict[str, Any] = {}
            _put(meta, 'k', _maybe(rng, ['alpha', 'Beta', 1, 2, 1.5, True, False]))
            if rng.random() < 0.6:
                meta['n'] = {} if rng.random() < 0.2 else {'x': rng.choice([0, 1, 2, 'two'])}
            body['metadata'] = meta
        if rng.random() < 0.4:
            body['data'] = {'flag': rng.choice([True, False])}
        _put(body, 'taskGroupId', _maybe(rng, [g['id'] for g in groups], 0.5))
        env.add('tasks', _create(api, 'tasks', body))
    for _ in range(12):
        body = {'projectId': rng.choice(projects)['id']}
        _put(body, 'name', _maybe(rng, TEXT, 0.15))
        _put(body, 'description', _maybe(rng, TEXT, 0.5))
        _put(body, 'active', _maybe(rng, [True, False], 0.3))           # default true
        _put(body, 'chatEnabled', _maybe(rng, [True, False], 0.3))      # default false
        _put(body, 'priorityHint', _maybe(rng, [0, 1, 5]))
        _put(body, 'assistantRole', _maybe(rng, ['reviewer', 'Reader', 'writer']))
        if rng.random() < 0.6:
            body['options'] = {'mode': rng.choice(['fast', 'slow', 1, True])}
        env.add('assistants', _create(api, 'assistants', body))
    # updates (updatedOn order != createdOn order, changeSequence varies) and deletes
    for family, count in (('tasks', 5), ('assistants', 4)):
        for data in rng.sample(env.live(family), count):
            change = {'description': rng.choice(TEXT[:6])}
            if family == 'tasks' and rng.random() < 0.5:
                change = {'priority': None}  # null clears: missing again
            r = api.put(f"/api/{family}/{data['id']}", change)
            assert r.status == 200, r.json
            env.add(family, r.json)
    for family, count in (('tasks', 2), ('assistants', 2)):  # hard delete / soft delete
        for data in rng.sample(env.live(family), count):
            assert api.delete(f"/api/{family}/{data['id']}").status == 204
            env.deleted.setdefault(family, set()).add(data['id'])


@pytest.fixture(scope='module')
def env():
    from chalicelib.core.config import reset_config
    from chalicelib.kernel.store import model
    reset_config()
    model.reset()
    with mock_aws():
        from chalice.test import Client

        from app import app
        from chalicelib.features.identity.bootstrap import bootstrap
        platform = bootstrap(api_key=ADMIN_KEY)
        with Client(app) as client:
            e = Env(Api(client, ADMIN_KEY), platform['organizationId'])
            _build(e)
            yield e
    model.reset()


# ----------------------------------------------------------------------------- the oracle

class Context:
    """References and memberTask from the records the test created (deleted ones excluded)."""

    def __init__(self, env: Env, family: str) -> None:
        self.env, self.family = env, family_of(family)

    def reference(self, item, name):
        id_field, target = self.family.references[name]
        gone = self.env.deleted.get(target, set())
        ref = item.get(id_field)
        return None if ref in gone else self.env.records.get(target, {}).get(ref)

    def collection(self, item, name):
        target, fk = self.family.collections[name]
        return [t for t in self.env.live(target) if t.get(fk) == item['id']]


def _glob(pattern: str, value: str) -> bool:
    pattern, value = pattern.casefold(), value.casefold()
    if '*' not in pattern:
        return pattern in value
    return re.fullmatch('.*'.join(re.escape(p) for p in pattern.split('*')), value, re.S) is not None


def _text_ok(family, item, query: str | None) -> bool:
    if not query or not query.strip('*'):
        return True
    return any(isinstance(item.get(f), str) and _glob(query, item[f]) for f in family.searchable)


def _okey(value):
    if value is None or value == '' or isinstance(value, (dict, list)):
        return (0,)
    if isinstance(value, bool):
        return (1, 0, int(value))
    if isinstance(value, (int, float, Decimal)):
        return (1, 1, value)
    return (1, 2, value.lower())


def _ordered(items, sort):
    order = sort or [('createdOn', False)]
    if len(order) == 1:
        name, desc = order[0]
        out = sorted(items, key=lambda i: (_okey(i.get(name)), i['id']))
        return out[::-1] if desc else out
    out = sorted(items, key=lambda i: i['id'])
    for name, desc in reversed(order):  # stable passes, last key first
        out.sort(key=lambda i, n=name: _okey(i.get(n)), reverse=desc)
    return out


def oracle(env: Env, path: str, filters: list[str], query: str | None, sort) -> list[str]:
    from chalicelib.kernel.filtering import RegistrySchema
    family = family_of(path)
    nodes = [parse(f, RegistrySchema(family)) for f in filters]
    ctx = Context(env, path)
    items = [i for i in env.live(path)
             if all(evaluate(n, i, ctx) for n in nodes) and _text_ok(family, i, query)]
    return [i['id'] for i in _ordered(items, sort)]


# ----------------------------------------------------------------------------- generators

def _paths(env: Env, path: str) -> list[tuple[tuple[str, ...], str, list]]:
    """(path, type, literal pool) the filters are drawn from, per family."""
    org = [env.org_id]
    projects = [p['id'] for p in env.live('projects')] + [str(uuid.uuid4())]
    common = [(('createdOn',), 'datetime', INSTANTS + [d['createdOn'] for d in env.live(path)][:6]),
              (('updatedOn',), 'datetime', [d['updatedOn'] for d in env.live(path)][:6]),
              (('changeSequence',), 'integer', [1, 2, 3]),
              (('organizationId',), 'string', org), (('projectId',), 'string', projects),
              (('project', 'name'), 'string', ['Alpha Project', 'beta', 'gamma']),
              (('project', 'options', 'properties', 'x'), 'any', [1, 2, 'x']),
              (('organization', 'slug'), 'string', ['default', 'other']),
              (('description',), 'string', TEXT)]
    if path == 'tasks':
        groups = [g['id'] for g in env.live('task-groups')]
        return common + [
            (('title',), 'string', TEXT), (('searchText',), 'string', TEXT),
            (('statusSlug',), 'string', ['open', 'done', 'Open', 'blocked', 'x']),
            (('priority',), 'integer', NUMBERS), (('dueDate',), 'datetime', INSTANTS),
            (('metadata',), 'any', ['alpha', 1, True]),
            (('metadata', 'k'), 'any', ['alpha', 'beta', 'Beta', 1, 2, Decimal('1.5'), True, False]),
            (('metadata', 'n', 'x'), 'any', [0, 1, 2, 'two']),
            (('data', 'flag'), 'any', [True, False, 1]),
            (('taskGroupId',), 'string', groups), (('taskGroup', 'name'), 'string', ['Group one', 'group TWO']),
        ]
    return common + [
        (('name',), 'string', TEXT), (('active',), 'boolean', [True, False]),
        (('chatEnabled',), 'boolean', [True, False]), (('priorityHint',), 'integer', [0, 1, 5, 2]),
        (('assistantRole',), 'string', ['reviewer', 'Reader', 'writer', 'reader']),
        (('options', 'mode'), 'any', ['fast', 'slow', 1, True]),
        (('deleted',), 'boolean', [True, False]),
    ]


OPS = {
    'string': ['==', '!=', '>', '>=', '<', '<=', '=in=', '=like=', '~~'],
    'datetime': ['==', '!=', '>', '>=', '<', '<=', '=in='],
    'integer': ['==', '!=', '>', '>=', '<', '<=', '=in='],
    'boolean': ['==', '!=', '=in='],
    'any': ['==', '!=', '>', '>=', '<', '<=', '=in=', '=like=', '~~'],
}


def _literals(type_: str, op: str, pool: list):
    if op in ('=like=', '~~'):
        return st.sampled_from(PATTERNS + [v for v in pool if isinstance(v, str)])
    if type_ == 'datetime':
        return st.sampled_from(pool).flatmap(lambda v: st.sampled_from([v] + SPELLINGS.get(v, [])))
    if type_ == 'any' and op in ('>', '>=', '<', '<='):
        return st.sampled_from([v for v in pool if not isinstance(v, bool)] or ['a'])
    return st.sampled_from(pool)


def leaves(paths):
    @st.composite
    def leaf(draw):
        path, type_, pool = draw(st.sampled_from(paths))
        if draw(st.integers(0, 5)) == 0:
            return IsNull(path, draw(st.booleans()))
        op = draw(st.sampled_from(OPS[type_]))
        if op == '=in=':
            return Compare(path, op, tuple(draw(st.lists(_literals(type_, op, pool), min_size=1, max_size=3))))
        return Compare(path, op, draw(_literals(type_, op, pool)))
    return leaf()


def filters(paths):
    return st.recursive(
        leaves(paths),
        lambda children: st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda xs: And(tuple(xs))),
            st.lists(children, min_size=2, max_size=3).map(lambda xs: Or(tuple(xs))),
            children.map(Not)),
        max_leaves=5)


def _render(node) -> str:
    text = render(node)
    return f'({text})' if isinstance(node, Or) else text


_STRATEGIES: dict[str, Any] = {}


@st.composite
def requests(draw, env: Env, path: str):
    paths = _paths(env, path)
    family = family_of(path)
    if path not in _STRATEGIES:
        _STRATEGIES[path] = filters(paths)
    random_filter = _STRATEGIES[path]
    texts: list[str] = []
    if draw(st.integers(0, 9)) >= 3:  # 30% unfiltered: the index walk
        node = draw(random_filter)
        if draw(st.integers(0, 3)) == 0:  # pin a partition
            pins = [p for p in paths if p[0] in (('projectId',), ('organizationId',))]
            pin_path, _, pool = draw(st.sampled_from(pins))
            node = And((Compare(pin_path, '==', draw(st.sampled_from(pool))), node))
        texts.append(_render(node))
        if draw(st.integers(0, 4)) == 0:  # a second filter parameter: AND
            texts.append(_render(draw(random_filter)))
    query = draw(st.sampled_from(QUERIES)) if draw(st.integers(0, 4)) == 0 else None
    sortable = ['createdOn', 'updatedOn', 'id', 'changeSequence', 'description', family.name_field] + (
        ['priority', 'dueDate', 'statusSlug'] if path == 'tasks' else ['active', 'priorityHint', 'chatEnabled'])
    sort = draw(st.lists(st.tuples(st.sampled_from(sortable), st.sampled_from(['', ':asc', ':desc'])),
                         max_size=2))
    size = draw(st.integers(1, 12))
    return texts, query, sort, size


def _get(env: Env, path: str, texts, query, sort, size, page) -> dict[str, Any]:
    params = [('filter', t) for t in texts] + [('pageSize', size), ('page', page)]
    if query is not None:
        params.append(('query', query))
    if sort:
        params.append(('sort', ';'.join(f'{name}{d}' for name, d in sort)))
    r = env.api.get(f'/api/{path}?' + urllib.parse.urlencode(params))
    assert r.status == 200, (params, r.body)
    return r.json


def check(env: Env, path: str, request, data) -> None:
    texts, query, sort, size = request
    expected = oracle(env, path, texts, query, [(n, d == ':desc') for n, d in sort])
    total, pages = len(expected), math.ceil(len(expected) / size)
    unfiltered = not texts and query is None
    wanted = range(min(pages + 1, 4)) if unfiltered else [data.draw(st.integers(0, pages), label='page')]
    for page in wanted:  # unfiltered lists are cheap: several pages, else one (past-the-end included)
        body = _get(env, path, texts, query, sort, size, page)
        got = [i['id'] for i in body['content']]
        assert got == expected[page * size:(page + 1) * size], (texts, query, sort, size, page)
        assert (body['totalElements'], body['totalPages'], body['number'], body['size']) == (total, pages, page, size)
        assert body['first'] == (page == 0) and body['last'] == (page >= pages - 1)


SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.parametrize('path', ['tasks', 'assistants'])
def test_pages_equal_the_in_memory_oracle(env, path):
    @SETTINGS
    @given(data=st.data())
    def run(data):
        check(env, path, data.draw(requests(env, path), label='request'), data)
    run()


def test_the_data_set_has_what_the_properties_need(env):
    tasks, assistants = env.live('tasks'), env.live('assistants')
    assert len(tasks) == 16 and len(assistants) == 10
    assert any('priority' not in t for t in tasks) and any('dueDate' not in t for t in tasks)
    assert {a['active'] for a in assistants} == {True, False}
    assert len({t['projectId'] for t in tasks}) > 1 and any(t.get('taskGroupId') for t in tasks)
    # deleted records are gone from every plan of the list
    for path in ('tasks', 'assistants'):
        listed = _get(env, path, [], None, [], 100, 0)
        assert sorted(i['id'] for i in listed['content']) == sorted(d['id'] for d in env.live(path))
        assert listed['totalElements'] == len(env.live(path))
