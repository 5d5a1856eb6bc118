"""The generic list endpoint through HTTP, table-driven: every filter operator, precedence,
escapes, null handling, dotted paths into objects, references, memberTask on task groups,
pins, the text query, sorting, paging boundaries and bad input.

One moto-backed platform and one small data set serve the whole module (creating data is
what costs time here); every test only reads, except where it says so.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field

import pytest
from moto import mock_aws

from tests.conftest import ADMIN_KEY, Api
from tests.support import task_statuses

# ----------------------------------------------------------------------------- the data set

PROJECTS = {  # key -> body
    'P1': {'name': 'Alpha Project', 'options': {'properties': {'x': 1, 'color': 'red'}}},
    'P2': {'name': 'beta', 'options': {'properties': {'x': 2}}},
    'P3': {'name': 'Gamma'},
}
GROUPS = {  # key -> (project key, name)
    'G1': ('P1', 'Group one'), 'G2': ('P1', 'Group two'), 'G3': ('P1', 'Group three'),
    'G4': ('P2', 'Empty group'),
}
TASKS = {  # key -> (project key, group key, fields)
    'A': ('P1', None, {'title': 'Invoice A', 'description': 'First invoice', 'statusSlug': 'open',
                       'priority': 1, 'dueDate': '2026-01-01T00:00:00Z',
                       'metadata': {'properties': {'x': 1, 'tag': 'red'}, 'flag': True}}),
    'B': ('P1', None, {'title': 'invoice b', 'description': "it's quoted", 'statusSlug': 'done',
                       'priority': 2, 'dueDate': '2026-02-01T00:00:00Z',
                       'metadata': {'properties': {'x': 2, 'tag': 'blue'}, 'flag': False}}),
    'C': ('P2', None, {'title': 'Receipt', 'statusSlug': 'open', 'metadata': {'properties': {}}}),
    'D': ('P2', None, {'title': 'back\\slash', 'description': 'a*b literal star', 'statusSlug': 'blocked',
                       'priority': 10, 'dueDate': '2026-03-01T12:00:00+02:00',
                       'metadata': {'properties': {'x': 10}}}),
    'E': ('P3', 'G1', {'title': 'Ünïcode Straße', 'statusSlug': 'open', 'priority': -5}),
    'F': ('P1', 'G1', {'title': "O'Brien", 'description': 'Invoice follow-up', 'statusSlug': 'done',
                       'priority': 3}),
    'G': ('P1', 'G2', {'title': 'Gadget', 'searchText': 'hidden keyword', 'statusSlug': 'done',
                       'priority': 2}),
    # deleted right after creation: must count nowhere (lists, memberTask)
    'X': ('P1', 'G3', {'title': 'Gone', 'statusSlug': 'cancelled', 'priority': 99}),
}
LIVE = 'ABCDEFG'


@dataclass
class Env:
    api: Api
    org_id: str
    ids: dict[str, str] = field(default_factory=dict)      # data set key -> id
    names: dict[str, str] = field(default_factory=dict)    # id -> data set key
    other_org: str = ''
    app: object = None

    def keys(self, reply) -> list[str]:
        assert reply.status == 200, reply.body
        return [self.names.get(item['id'], item['id']) for item in reply.json['content']]

    def listing(self, family: str, *filters: str, **params) -> list[str]:
        query = [('filter', f) for f in filters] + [(k, str(v)) for k, v in params.items()]
        query.append(('pageSize', '100'))
        return self.keys(self.api.get(f'/api/{family}?{urllib.parse.urlencode(query)}'))


def _post(api: Api, family: str, body: dict) -> dict:
    r = api.post(f'/api/{family}', body)
    assert r.status == 201, (family, r.status, r.json)
    return r.json


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
            e = Env(Api(client, ADMIN_KEY), platform['organizationId'], app=app)
            for key, body in PROJECTS.items():
                e.ids[key] = _post(e.api, 'projects', {'organizationId': e.org_id, **body})['id']
            for key, (project, name) in GROUPS.items():
                e.ids[key] = _post(e.api, 'task-groups', {'projectId': e.ids[project], 'name': name})['id']
            task_statuses(e.api, e.org_id, *{fields['statusSlug'] for _, _, fields in TASKS.values()})
            for key, (project, group, fields) in TASKS.items():
                body = {'projectId': e.ids[project], **fields}
                if group:
                    body['taskGroupId'] = e.ids[group]
                e.ids[key] = _post(e.api, 'tasks', body)['id']
            assert e.api.delete(f"/api/tasks/{e.ids['X']}").status == 204
            # another organization the admin is no member of: never in an unpinned list
            other = _post(e.api, 'organizations', {'name': 'Other', 'slug': f'o-{uuid.uuid4().hex[:8]}'})
            e.other_org = other['id']
            mine = e.api.get('/api/memberships?' + urllib.parse.urlencode({'filter': (
                f"organizationId == '{other['id']}' and userId == '{platform['userId']}'")})).json['content']
            assert len(mine) == 1  # the creator's membership: removed, the admin stays a non-member
            assert e.api.delete(f"/api/memberships/{mine[0]['id']}").status == 204
            task_statuses(e.api, other['id'], 'open')
            e.ids['Q'] = _post(e.api, 'projects', {'organizationId': other['id'], 'name': 'Alpha Project'})['id']
            e.ids['Z'] = _post(e.api, 'tasks', {'projectId': e.ids['Q'], 'title': 'Invoice other org',
                                                'statusSlug': 'open', 'priority': 1})['id']
            e.names = {v: k for k, v in e.ids.items()}
            yield e
    model.reset()


# ----------------------------------------------------------------------------- operators

TASK_FILTERS = [
    # comparisons
    ("statusSlug == 'open'", 'ACE'),
    ("statusSlug != 'open'", 'BDFG'),
    ('priority > 2', 'DF'),
    ('priority >= 2', 'BDFG'),
    ('priority < 1', 'E'),
    ('priority <= 1', 'AE'),
    ('priority != 2', 'ADEF'),                       # missing priority (C) is not "!= 2"
    ("title =like= 'Invoice*'", 'A'),                # =like= is case-sensitive
    ("title =LIKE= '*e*'", 'ABCEFG'),
    ("description =like= 'a*b*'", 'D'),              # '*' in the value is just a character
    ("title ~~ 'INVOICE'", 'AB'),                    # ~~: case-insensitive contains
    ("title ~~ 'inv*'", 'AB'),                       # ~~ with '*': whole-value wildcard
    ("title ~~ 'STRASSE'", 'E'),                     # casefold: ß == ss
    ("statusSlug =in= ('done', 'blocked')", 'BDFG'),
    ('priority =in= (1, 10)', 'AD'),
    ("dueDate > '2026-01-15'", 'BD'),
    ("dueDate == '2026-03-01T10:00:00Z'", 'D'),      # stored normalised to UTC
    ("dueDate <= '2026-01-01T01:00:00+01:00'", 'A'),
    ("createdOn > '2000-01-01'", LIVE),
    # null handling (missing == null; comparisons with missing are false)
    ('dueDate is null', 'CEFG'),
    ('dueDate IS NOT NULL', 'ABD'),
    ('description is null', 'CEG'),
    ("not(statusSlug == 'open')", 'BDFG'),
    ('not(priority > 2)', 'ABCEG'),                  # not() of a false comparison on missing
    ('priority is null or priority < 0', 'CE'),
    # precedence: and binds tighter than or; parentheses, ';' and ','
    ("statusSlug == 'done' or statusSlug == 'open' and priority < 2", 'ABEFG'),
    ("(statusSlug == 'done' or statusSlug == 'open') and priority < 2", 'AE'),
    ("statusSlug=='done';priority==2", 'BG'),
    ("statusSlug=='blocked',priority==-5", 'DE'),
    ("statusSlug == 'open' AND priority IS NOT NULL", 'AE'),
    ("not(statusSlug == 'open' or priority > 2) and title ~~ 'i'", 'B'),
    ("((((statusSlug == 'done'))))", 'BFG'),
    # escapes
    ("title == 'O\\'Brien'", 'F'),
    ("title == 'back\\\\slash'", 'D'),
    ("description ~~ '\\'s quo'", 'B'),
    ("title == 'Ünïcode Straße'", 'E'),
    # dotted paths into object fields
    ('metadata.properties.x == 2', 'B'),
    ('metadata.properties.x > 1', 'BD'),
    ("metadata.properties.tag =in= ('red', 'green')", 'A'),
    ('metadata.properties.x is null', 'CEFG'),
    ('metadata.flag == false', 'B'),
    ('metadata.flag != true', 'B'),
    ('metadata.properties is not null', 'ABCD'),
    # references
    ("project.name == 'Alpha Project'", 'ABFG'),
    ("project.name ~~ 'ALPHA'", 'ABFG'),
    ("project.options.properties.x >= 2", 'CD'),
    ("organization.slug == 'default'", LIVE),
    ("project.name == 'beta' and priority > 5", 'D'),
    ("taskGroup.name == 'Group one'", 'EF'),
    ('taskGroup.name is null', 'ABCD'),              # no group -> no referenced record
]


@pytest.mark.parametrize('text,expected', TASK_FILTERS, ids=[t for t, _ in TASK_FILTERS])
def test_task_filters(env, text, expected):
    assert sorted(env.listing('tasks', text)) == sorted(expected)


def test_every_operator_is_covered():
    ops = ['==', '!=', '>', '>=', '<', '<=', '=like=', '=in=', '~~', 'is null', 'not null', 'not(',
           ' and ', ' or ', ';', ',']
    text = ' '.join(t.lower() for t, _ in TASK_FILTERS)
    assert [op for op in ops if op not in text] == []


def test_repeated_filters_mean_and(env):
    assert sorted(env.listing('tasks', "statusSlug == 'done'", 'priority == 2')) == ['B', 'G']
    assert env.listing('tasks', "statusSlug == 'done'", "statusSlug == 'open'") == []
    assert sorted(env.listing('tasks', "statusSlug == 'done'", '  ')) == ['B', 'F', 'G']  # blank ignored


PROJECT_FILTERS = [
    ('options.properties.x == 1', ['P1']),
    ('options.properties.x >= 1', ['P1', 'P2']),
    ("options.properties.color == 'red'", ['P1']),
    ('options.properties is null', ['P3']),
    ('options is not null', ['P1', 'P2']),
    ("organization.slug == 'default' and name ~~ 'a'", ['P1', 'P2', 'P3']),
]


@pytest.mark.parametrize('text,expected', PROJECT_FILTERS, ids=[t for t, _ in PROJECT_FILTERS])
def test_project_filters(env, text, expected):
    assert sorted(env.listing('projects', text)) == expected


GROUP_FILTERS = [
    ("memberTask.statusSlug == 'done'", ['G1', 'G2']),
    ("memberTask.statusSlug == 'open'", ['G1']),
    ("memberTask.statusSlug == 'cancelled'", []),        # only a deleted task had it
    ("memberTask.title ~~ 'gone'", []),
    ('memberTask.priority > 50', []),
    ("not(memberTask.statusSlug == 'done')", ['G3', 'G4']),  # G3's only task is deleted
    ('memberTask.priority > 2', ['G1']),
    ("memberTask.statusSlug == 'open' and memberTask.statusSlug == 'done'", ['G1']),  # two tasks
    ("memberTask.priority is not null and name ~~ 'two'", ['G2']),
    ("memberTask.project.name == 'x'", 'unknown'),        # no references inside collections
]


@pytest.mark.parametrize('text,expected', GROUP_FILTERS, ids=[t for t, _ in GROUP_FILTERS])
def test_member_task_filters(env, text, expected):
    if expected == 'unknown':
        r = env.api.get('/api/task-groups?' + urllib.parse.urlencode({'filter': text}))
        assert r.status == 400 and 'memberTask.project.name' in r.json['message']
        return
    assert sorted(env.listing('task-groups', text)) == expected


# ----------------------------------------------------------------------------- pins and tenants

def test_pins_select_a_partition_and_never_widen_the_list(env):
    ids = env.ids
    assert sorted(env.listing('tasks', f"projectId == '{ids['P2']}'")) == ['C', 'D']
    assert env.listing('tasks', f"projectId == '{ids['P2']}' and statusSlug == 'open'") == ['C']
    assert sorted(env.listing('tasks', f"projectId == '{ids['P2']}' or projectId == '{ids['P3']}'")) == ['C', 'D', 'E']
    assert env.listing('tasks', "projectId == 'not-a-uuid'") == []
    assert env.listing('tasks', f"projectId == '{ids['P2'].upper()}'") == []   # ids are lower case
    assert env.listing('tasks', f"projectId == '{uuid.uuid4()}'") == []
    assert env.listing('tasks', "organizationId == '" + 'x' * 3000 + "'") == []  # never a key
    assert env.listing('tasks', "projectId == '" + 'x' * 3000 + "'") == []
    assert sorted(env.listing('tasks', f"organizationId == '{env.org_id}'")) == sorted(LIVE)
    assert env.listing('tasks', f"organizationId == '{env.org_id}' and projectId == '{ids['Q']}'") == []
    # the admin is no member of the other organization: only a pin reaches it
    assert 'Z' not in env.listing('tasks', "title ~~ 'invoice'")
    assert env.listing('tasks', f"organizationId == '{env.other_org}'") == ['Z']
    assert env.listing('tasks', f"projectId == '{ids['Q']}'") == ['Z']
    assert env.listing('tasks', f"projectId == '{ids['Q']}' and organizationId == '{env.org_id}'") == []


def test_a_member_of_one_organization_cannot_pin_another(env):
    from tests.conftest import make_user
    _, key = make_user(env.api, env.other_org, 'VIEWER')
    viewer = env.api.as_key(key)
    assert env.keys(viewer.get('/api/tasks')) == ['Z']
    for text in (f"organizationId == '{env.org_id}'", f"projectId == '{env.ids['P1']}'",
                 "project.name == 'Alpha Project'"):
        r = viewer.get('/api/tasks?' + urllib.parse.urlencode({'filter': text}))
        assert r.status == 200
        assert env.keys(r) == (['Z'] if text.startswith('project.') else []), text


# ----------------------------------------------------------------------------- text query

@pytest.mark.parametrize('query,expected', [
    ('invoice', 'ABF'),          # title or description
    ('INVOICE', 'ABF'),
    ('hidden', 'G'),             # searchText
    ('inv*', 'ABF'),             # '*': whole-value wildcard (description 'Invoice follow-up')
    ('*', LIVE), ('', LIVE), ('**', LIVE), ('  ', LIVE),
    ('strasse', 'E'),
    ('nothing-like-this', ''),
])
def test_text_query(env, query, expected):
    assert sorted(env.listing('tasks', query=query)) == sorted(expected)


def test_text_query_and_filter_combine(env):
    assert sorted(env.listing('tasks', "statusSlug == 'done'", query='invoice')) == ['B', 'F']


# ----------------------------------------------------------------------------- sorting

@pytest.mark.parametrize('sort,expected', [
    ('title', ['D', 'G', 'A', 'B', 'F', 'C', 'E']),                  # case-insensitive
    ('title:asc', ['D', 'G', 'A', 'B', 'F', 'C', 'E']),
    ('title:desc', ['E', 'C', 'F', 'B', 'A', 'G', 'D']),
    ('title,desc', ['E', 'C', 'F', 'B', 'A', 'G', 'D']),              # Spring spelling
    ('createdOn', list(LIVE)),
    ('createdOn:DESC', list(reversed(LIVE))),
])
def test_sort(env, sort, expected):
    assert env.listing('tasks', sort=sort) == expected
    # the same order when a filter forces the in-memory plan
    assert env.listing('tasks', "organization.slug == 'default'", sort=sort) == expected


def test_sort_missing_first_and_ties_by_id(env):
    by_id = lambda *keys: sorted(keys, key=lambda k: env.ids[k])  # noqa: E731
    # priority: C missing; B and G tie at 2
    assert env.listing('tasks', sort='priority') == ['C', 'E', 'A', *by_id('B', 'G'), 'F', 'D']
    # one desc field reverses everything, ties included
    assert env.listing('tasks', sort='priority:desc') == ['D', 'F', *reversed(by_id('B', 'G')), 'A', 'E', 'C']
    # several fields: ties stay ascending by id
    assert env.listing('tasks', sort='statusSlug:asc;priority:desc') == [
        'D', 'F', *by_id('B', 'G'), 'A', 'E', 'C']
    assert env.listing('tasks', sort='statusSlug;description:desc') == [
        'D', 'B', 'F', 'G', 'A', *by_id('C', 'E')]


@pytest.mark.parametrize('sort', ['nope', 'metadata:asc', 'project.name', 'title:sideways', 'title:asc;x:desc'])
def test_bad_sort_is_400(env, sort):
    r = env.api.get('/api/tasks?' + urllib.parse.urlencode({'sort': sort}))
    assert r.status == 400, r.body
    assert set(r.json) == {'error', 'message', 'status'}


# ----------------------------------------------------------------------------- paging

@pytest.mark.parametrize('filters', [[], ["organization.slug == 'default'"]], ids=['index-walk', 'in-memory'])
def test_paging_boundaries(env, filters):
    def page(n, size=3):
        q = [('filter', f) for f in filters] + [('page', n), ('pageSize', size)]
        r = env.api.get('/api/tasks?' + urllib.parse.urlencode(q))
        assert r.status == 200, r.body
        return r.json

    seen = []
    for n, (size, first, last) in enumerate([(3, True, False), (3, False, False), (1, False, True)]):
        body = page(n)
        assert (len(body['content']), body['first'], body['last']) == (size, first, last)
        assert (body['totalElements'], body['totalPages'], body['number'], body['size']) == (7, 3, n, 3)
        seen += [env.names[item['id']] for item in body['content']]
    assert seen == list(LIVE)
    for n in (3, 4, 1000):
        past = page(n)
        assert past['content'] == [] and past['totalElements'] == 7 and past['totalPages'] == 3
        assert past['last'] is True and past['first'] is False and past['number'] == n
    exact = page(0, 7)
    assert exact['totalPages'] == 1 and exact['first'] and exact['last'] and len(exact['content']) == 7
    assert page(1, 7)['content'] == []
    big = page(0, 100)
    assert big['totalPages'] == 1 and len(big['content']) == 7


def test_defaults_and_empty_results(env):
    body = env.api.get('/api/tasks').json
    assert (body['number'], body['size'], body['totalElements']) == (0, 10, 7)
    none = env.api.get('/api/tasks?' + urllib.parse.urlencode({'filter': "title == 'none'"})).json
    assert none['content'] == [] and none['totalElements'] == 0 and none['totalPages'] == 0
    assert none['first'] is True and none['last'] is True


@pytest.mark.parametrize('query', ['page=-1', 'page=x', 'pageSize=0', 'pageSize=101', 'pageSize=-5',
                                   'pageSize=1.5', 'page=1000001', 'view=bogus', 'page=%2B1', 'page=%D9%A3',
                                   'pageSize=%205', 'page=1_0', 'page=99999999999999999999'])
def test_bad_paging_is_400(env, query):
    r = env.api.get(f'/api/tasks?{query}')
    assert r.status == 400, (query, r.body)
    assert set(r.json) == {'error', 'message', 'status'} and r.json['status'] == 400


# ----------------------------------------------------------------------------- bad filters

BAD_FILTERS = [
    ("title == 'abc", 'position 9'),                     # unclosed quote
    ("nope == 1", "'nope'"),                             # unknown field
    ("project.nope == 'x'", "'project.nope'"),
    ("priority == 'high'", "'priority'"),                # literal that does not fit the type
    ("priority ~~ 'x'", "'priority'"),                   # operator that does not fit the type
    ("dueDate > 'yesterday'", "'dueDate'"),
    ("title > true", 'position'),
    ("metadata > true", 'position'),
    ("title == 'a' and", 'position 16'),
    ("title == 'a' )", 'position'),
    ("title == \"a\"", 'position'),
    ("title == 'a\\q'", 'position'),                      # only \' and \\ escape
    ('(' * 1000 + "title == 'a'" + ')' * 1000, 'position'),
    ("not(title == 'a'", 'position'),
    ("title =in= ()", 'position'),
    ("priority == 1e5", 'position'),
    ("priority == 123456789012345678901234567890123456789012", 'position'),
]


@pytest.mark.parametrize('text,needle', BAD_FILTERS, ids=[t[:40] for t, _ in BAD_FILTERS])
def test_bad_filters_are_400_naming_position_or_field(env, text, needle):
    r = env.api.get('/api/tasks?' + urllib.parse.urlencode({'filter': text}))
    assert r.status == 400, r.body
    assert set(r.json) == {'error', 'message', 'status'}
    assert r.json['status'] == 400 and r.json['error'] == 'Bad Request'
    assert needle in r.json['message'], r.json['message']


def test_greater_than_on_a_boolean_field_is_400(env):
    r = env.api.get('/api/prompts?' + urllib.parse.urlencode({'filter': 'deprecated > true'}))
    assert r.status == 400 and "'deprecated'" in r.json['message'], r.body
    r = env.api.get('/api/prompts?' + urllib.parse.urlencode({'filter': "deprecated == 'yes'"}))
    assert r.status == 400 and "'deprecated'" in r.json['message'], r.body


def test_second_bad_filter_is_named(env):
    r = env.api.get('/api/tasks?' + urllib.parse.urlencode([('filter', "title == 'a'"), ('filter', 'x == 1')]))
    assert r.status == 400 and 'filter #2' in r.json['message'] and "'x'" in r.json['message']


def test_100kb_filter_is_400_through_the_test_client(env):
    r = env.api.get('/api/tasks?' + urllib.parse.urlencode({'filter': "title == '" + 'a' * 100_000 + "'"}))
    assert r.status == 400 and set(r.json) == {'error', 'message', 'status'}
    assert 'too long' in r.json['message']


def test_100kb_filter_is_400_through_the_local_server(env):
    """The same over a real socket (localdev/server.py accepts request lines up to 1 MiB)."""
    from localdev.server import serve_in_thread
    app_class = type(env.app)
    server, thread = serve_in_thread(env.app)  # (makes the app a LocalChalice: undone below)
    try:
        base = f'http://127.0.0.1:{server.server_address[1]}'
        for text, needle in (("title == '" + 'a' * 100_000 + "'", 'too long'),
                             ('(' * 1000 + 'x', 'nested too deeply')):
            request = urllib.request.Request(
                f"{base}/api/tasks?{urllib.parse.urlencode({'filter': text})}", headers={'x-api-key': ADMIN_KEY})
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(request, timeout=30)
            body = json.loads(caught.value.read())
            assert caught.value.code == 400 and body['status'] == 400 and needle in body['message']
        ok = urllib.request.Request(f'{base}/api/tasks?pageSize=2', headers={'x-api-key': ADMIN_KEY})
        with urllib.request.urlopen(ok, timeout=30) as resp:
            assert json.loads(resp.read())['totalElements'] == 7
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        env.app.__class__ = app_class


# ----------------------------------------------------------------------------- view=summary

def test_view_summary_drops_the_plan_in_every_plan_of_the_list(env):
    made = _post(env.api, 'tasks', {'projectId': env.ids['P3'], 'title': 'planned', 'plan': {'steps': [1, 2]}})
    try:
        for extra in ({}, {'filter': "title == 'planned'"}, {'sort': 'priority'}):
            full = env.api.get('/api/tasks?' + urllib.parse.urlencode({'pageSize': 100, **extra})).json['content']
            summary = env.api.get('/api/tasks?' + urllib.parse.urlencode(
                {'pageSize': 100, 'view': 'summary', **extra})).json['content']
            row = next(t for t in full if t['id'] == made['id'])
            assert row['plan'] == {'steps': [1, 2]}
            assert all('plan' not in t for t in summary)
            assert [t['id'] for t in summary] == [t['id'] for t in full]
            assert {k: v for k, v in row.items() if k != 'plan'} == next(t for t in summary if t['id'] == made['id'])
        assert env.api.get(f"/api/tasks/{made['id']}?view=summary").json['plan'] == {'steps': [1, 2]}
        projects = env.api.get('/api/projects?view=summary&pageSize=100').json['content']
        assert any('options' in p for p in projects)       # families without summary_omit: unchanged
    finally:
        assert env.api.delete(f"/api/tasks/{made['id']}").status == 204
