"""Property tests of the equality indexes, through HTTP.

Hypothesis draws programs of writes (creates, moves of an indexed value to another value or to
none, hard deletes of tasks, soft deletes of prompts), each applied through the API in an
organization of its own (examples are independent, so a failure replays), and after each
program checks, for every value: pages of ``field == 'v'`` (the index walk:
any page, size and createdOn/updatedOn order), of ``field =in= (...)`` (partitions merged) and of
a conjunction (the value's records finished in memory) against an in-memory oracle of the live
records, and that the per-value counters (``totalElements``, and the counter items themselves)
equal the true counts.
"""
from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from tests.conftest import ADMIN_KEY, Api
from tests.support import task_statuses

pytestmark = pytest.mark.slow   # minutes of CPU: `make test` runs it, the quick loop (`make check`) does not

EXAMPLES = int(os.environ.get('INDEX_PROPERTY_EXAMPLES', '25'))
STATUSES = ('open', 'done', 'blocked', 'review')
TYPES = ('chat', 'extraction', 'summary')


@dataclass
class Env:
    api: Api
    org_id: str = ''
    project_id: str = ''
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)     # live, as last answered
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def fresh_tenant(self) -> None:
        from tests.conftest import make_org
        self.org_id = make_org(self.api)['id']
        self.project_id = self.api.post('/api/projects', {'name': 'p', 'organizationId': self.org_id}).json['id']
        task_statuses(self.api, self.org_id, *STATUSES)
        self.tasks, self.prompts = {}, {}


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
        bootstrap(api_key=ADMIN_KEY)
        with Client(app) as client:
            yield Env(Api(client, ADMIN_KEY))
    model.reset()


# ----------------------------------------------------------------------------- writes

operation = st.one_of(
    st.tuples(st.just('create-task'), st.sampled_from(STATUSES + (None,)), st.integers(0, 4)),
    st.tuples(st.just('move-task'), st.integers(0, 1000), st.sampled_from(STATUSES + (None,))),
    st.tuples(st.just('delete-task'), st.integers(0, 1000), st.none()),
    st.tuples(st.just('create-prompt'), st.sampled_from(TYPES + (None,)), st.none()),
    st.tuples(st.just('retype-prompt'), st.integers(0, 1000), st.sampled_from(TYPES)),
    st.tuples(st.just('delete-prompt'), st.integers(0, 1000), st.none()),
)


def _pick(records: dict[str, dict], index: int) -> dict | None:
    return records[sorted(records)[index % len(records)]] if records else None


def _apply(env: Env, op: tuple) -> None:
    api = env.api
    kind, a, b = op
    if kind == 'create-task':
        body = {'projectId': env.project_id, 'title': f't{len(env.tasks)}', 'priority': b}
        if a is not None:
            body['statusSlug'] = a
        r = api.post('/api/tasks', body)
        assert r.status == 201, r.json
        env.tasks[r.json['id']] = r.json
    elif kind == 'move-task' and (task := _pick(env.tasks, a)) is not None:
        r = api.put(f"/api/tasks/{task['id']}", {'statusSlug': b})    # None clears it (leaves every index)
        assert r.status in (200, 400), r.json
        if r.status == 200:
            env.tasks[task['id']] = r.json
    elif kind == 'delete-task' and (task := _pick(env.tasks, a)) is not None:
        assert api.delete(f"/api/tasks/{task['id']}").status == 204
        del env.tasks[task['id']]
    elif kind == 'create-prompt':
        body = {'organizationId': env.org_id, 'name': f'p{len(env.prompts)}', **({'type': a} if a else {})}
        r = api.post('/api/prompts', body)
        assert r.status == 201, r.json
        env.prompts[r.json['id']] = r.json
    elif kind == 'retype-prompt' and (prompt := _pick(env.prompts, a)) is not None:
        r = api.put(f"/api/prompts/{prompt['id']}", {'type': b})
        assert r.status == 200, r.json
        env.prompts[prompt['id']] = r.json
    elif kind == 'delete-prompt' and (prompt := _pick(env.prompts, a)) is not None:
        assert api.delete(f"/api/prompts/{prompt['id']}").status == 204      # soft delete
        del env.prompts[prompt['id']]


# ----------------------------------------------------------------------------- checks

def _page(env: Env, path: str, **params) -> dict:
    params['filter'] = [params['filter'], f"organizationId == '{env.org_id}'"]
    query = urllib.parse.urlencode(params, doseq=True)
    r = env.api.get(f'{path}?{query}')
    assert r.status == 200, r.json
    return r.json


def _oracle(records, keep, sort: str, desc: bool) -> list[str]:
    rows = sorted((r for r in records.values() if keep(r)), key=lambda r: (r[sort], r['id']), reverse=desc)
    return [r['id'] for r in rows]


def _check_family(env: Env, path: str, name: str, values: tuple, records: dict, draw) -> None:
    for value in values:
        sort, desc = draw(st.sampled_from(('createdOn', 'updatedOn'))), draw(st.booleans())
        size = draw(st.integers(1, 7))
        expected = _oracle(records, lambda r, v=value: r.get(name) == v, sort, desc)
        page = draw(st.integers(0, 9)) % (len(expected) // size + 2)   # a page past the end too
        got = _page(env, path, filter=f"{name} == '{value}'", sort=f"{sort}:{'desc' if desc else 'asc'}",
                    pageSize=size, page=page)
        assert got['totalElements'] == len(expected)
        assert [r['id'] for r in got['content']] == expected[page * size:(page + 1) * size]
    pair = draw(st.lists(st.sampled_from(values), min_size=1, max_size=3, unique=True))
    expected = _oracle(records, lambda r: r.get(name) in pair, 'createdOn', False)
    rendered = ', '.join(f"'{v}'" for v in pair)
    got = _page(env, path, filter=f'{name} =in= ({rendered})', pageSize=100)
    assert [r['id'] for r in got['content']] == expected and got['totalElements'] == len(expected)


def _check_counters(env: Env, family: str, name: str, values: tuple, records: dict) -> None:
    from chalicelib.kernel.store import table
    for value in values:
        assert table.count_value(family, env.org_id, name, value) == \
            sum(1 for r in records.values() if r.get(name) == value), (family, value)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(program=st.lists(operation, min_size=1, max_size=8), data=st.data())
def test_indexed_pages_and_counters_equal_the_oracle(env, program, data):
    env.fresh_tenant()
    for op in program:
        _apply(env, op)
    _check_family(env, '/api/tasks', 'statusSlug', STATUSES, env.tasks, data.draw)
    _check_family(env, '/api/prompts', 'type', TYPES, env.prompts, data.draw)
    threshold = data.draw(st.integers(0, 4))
    value = data.draw(st.sampled_from(STATUSES))
    expected = sorted(t['id'] for t in env.tasks.values()
                      if t.get('statusSlug') == value and t.get('priority', 0) >= threshold)
    got = _page(env, '/api/tasks', filter=f"statusSlug == '{value}' and priority >= {threshold}", pageSize=100)
    assert sorted(t['id'] for t in got['content']) == expected and got['totalElements'] == len(expected)
    _check_counters(env, 'tasks', 'statusSlug', STATUSES, env.tasks)
    _check_counters(env, 'prompts', 'type', TYPES, env.prompts)
