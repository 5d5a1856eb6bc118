"""How a list reads DynamoDB, counted through botocore's event hooks on the client the code
uses (pynamodb's; and the boto3 Table's, which no list uses now): which calls a list makes and
how many items each reads. Requests go through HTTP; only the calls made inside the list service are recorded
(authentication and rate limiting have their own, constant, cost; so has the embedding of
referenced records, one BatchGetItem per page: tests/api/test_sdk_compat.py).

  unfiltered, sorted by createdOn / updatedOn / the name field (or unsorted):
      Query of the counter shards (its 16 partitions, one round) + Query of a KEYS_ONLY index (keys up to the page) +
      BatchGetItem of the page: the items read do not depend on the tenant's size
  an equality on an indexed field (statusSlug...): the value's counter + its keys up to the page
      + BatchGetItem of the page; with other conditions: the value's keys and records only
  anything else (filters, text query, other sorts): the tenant's (or pinned project's) keys
      from a KEYS_ONLY index (by_created, parent_keys), whole, then its records (BatchGetItem);
      the filter is decided on the records (no index projects them: docs/scale.md "Projections")
"""
from __future__ import annotations

import contextlib
import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import pytest
from moto import mock_aws

from tests.conftest import ADMIN_KEY, Api
from tests.support import task_statuses

N_MAIN = 20      # tasks in the main project
N_SIDE = 4       # tasks in a second project (the pinned-project read must not see them)
TOTAL = N_MAIN + N_SIDE
SHARDS = 144     # config default COUNTER_SHARDS (docs/scale.md)
INDEX_SHARDS = 16   # kernel/store/table.py INDEX_SHARDS: every index partition's shards


# ----------------------------------------------------------------------------- call recorder

@dataclass
class Call:
    op: str
    request: dict[str, Any]
    response: dict[str, Any] = field(default_factory=dict)

    @property
    def index(self) -> str | None:
        return self.request.get('IndexName')

    @property
    def read(self) -> int:
        """Items DynamoDB read for this call (before any FilterExpression)."""
        if self.op == 'Query':
            return self.response.get('ScannedCount', self.response.get('Count', 0))
        if self.op == 'BatchGetItem':
            return sum(len(v) for v in self.response.get('Responses', {}).values())
        if self.op == 'GetItem':
            return int('Item' in self.response)
        return 0

    @property
    def key_values(self) -> list[str]:
        values = self.request.get('ExpressionAttributeValues', {})
        cond = self.request.get('KeyConditionExpression', '')
        return [v.get('S', '') for k, v in values.items() if k in cond]


class Recorder:
    """Records DynamoDB calls made inside the list service while ``recording()``."""

    def __init__(self) -> None:
        self.armed = False
        self.inside = False
        self.calls: list[Call] = []

    def attach(self, events) -> None:
        events.register('before-call.dynamodb', self._before)
        events.register('after-call.dynamodb', self._after)

    def _before(self, model, params, context, **_):
        if self.armed and self.inside:
            body = params.get('body') or b'{}'
            context['_recorded'] = call = Call(model.name, json.loads(body))
            self.calls.append(call)

    def _after(self, parsed, context, **_):
        call = context.get('_recorded')
        if call is not None:
            call.response = parsed

    def wrap(self, function):
        def inside(*args, **kwargs):
            self.inside = True
            try:
                return function(*args, **kwargs)
            finally:
                self.inside = False
        return inside

    def unwrap(self, function):
        """Calls of ``function`` inside the list service are not the list's own."""
        def outside(*args, **kwargs):
            was, self.inside = self.inside, False
            try:
                return function(*args, **kwargs)
            finally:
                self.inside = was
        return outside

    @contextlib.contextmanager
    def recording(self):
        self.calls = []
        self.armed = True
        try:
            yield self.calls
        finally:
            self.armed = False


@dataclass
class Env:
    api: Api
    org_id: str
    recorder: Recorder
    main: str = ''
    side: str = ''
    tasks: list[dict[str, Any]] = field(default_factory=list)

    def get(self, **params) -> tuple[dict[str, Any], list[Call]]:
        query = []
        for k, v in params.items():
            query += [(k, x) for x in v] if isinstance(v, list) else [(k, str(v))]
        with self.recorder.recording() as calls:
            r = self.api.get('/api/tasks?' + urllib.parse.urlencode(query))
        assert r.status == 200, r.body
        assert not [c for c in calls if c.op == 'Scan'], 'a list must never Scan'
        return r.json, _counts_as_one(list(calls))


def _counts_as_one(calls: list[Call]) -> list[Call]:
    """A count reads each counter's 16 partitions in one round (kernel/store/table.py
    ``counter_partition_pk``): checked here, then shown as one Query of the counter's own key
    reading what the partitions held, where the first of them was. Likewise an index read asks
    every shard of its partition (``spread_keys``): shown as one Query of the unspread key."""
    return _shards_as_one(_counters_as_one(calls))


def _shards_as_one(calls: list[Call]) -> list[Call]:
    from chalicelib.kernel.store import table
    groups: dict[tuple[str, str], list[Call]] = {}
    out: list[Call] = []
    for call in calls:
        values = call.key_values
        if call.op == 'Query' and call.index is not None and values:
            key = (call.index, table.index_base_pk(values[0]))
            if key not in groups:
                groups[key] = []
                request = {**call.request, 'ExpressionAttributeValues': {
                    **call.request.get('ExpressionAttributeValues', {}),
                    **{k: {'S': key[1]} for k, v in call.request.get('ExpressionAttributeValues', {}).items()
                       if v.get('S') == values[0]}}}
                out.append(Call('Query', request))
            groups[key].append(call)
            continue
        out.append(call)
    for call in out:
        group = groups.get((call.index, call.key_values[0])) if call.index and call.key_values else None
        if group is None:
            continue
        shards = table.spread_keys(call.key_values[0])
        first, again = group[:len(shards)], group[len(shards):]
        assert sorted(c.key_values[0] for c in first) == sorted(shards), group   # every shard, at once
        assert len({c.request.get('Limit') for c in first}) == 1, group          # each its share first
        assert all('ExclusiveStartKey' in c.request for c in again), group       # then more of a few
        call.response = {'ScannedCount': sum(c.read for c in group),
                         'Count': sum(c.response.get('Count', 0) for c in group),
                         'Items': [i for c in group for i in c.response.get('Items', [])]}
    return out


def _counters_as_one(calls: list[Call]) -> list[Call]:
    from chalicelib.kernel.store import table
    parts: dict[str, list[Call]] = {}
    out: list[Call] = []
    for call in calls:
        values = call.key_values
        if call.op == 'Query' and call.index is None and values and values[0].startswith('CNT'):
            base = table.counter_base_pk(values[0])
            if base not in parts:
                parts[base] = []
                out.append(Call('Query', {'KeyConditionExpression': 'pk = :pk',
                                          'ExpressionAttributeValues': {':pk': {'S': base}}}))
            parts[base].append(call)
            continue
        out.append(call)
    for call in out:
        if call.key_values and call.key_values[0] in parts:
            group = parts[call.key_values[0]]
            assert sorted(c.key_values[0] for c in group) == sorted(
                table.counter_partition_pk(call.key_values[0], p) for p in range(table.COUNTER_PARTITIONS)), group
            call.response = {'ScannedCount': sum(c.read for c in group)}
    return out


@pytest.fixture(scope='module')
def env():
    from chalicelib.core.config import reset_config
    from chalicelib.kernel import embedding, listing
    from chalicelib.kernel.store import model
    reset_config()
    model.reset()
    with mock_aws(), pytest.MonkeyPatch.context() as patch:
        from chalice.test import Client

        from app import app
        from chalicelib.features.identity.bootstrap import bootstrap
        platform = bootstrap(api_key=ADMIN_KEY)
        recorder = Recorder()
        recorder.attach(model.configure()._get_connection().connection.client.meta.events)
        recorder.attach(model.boto3_table().meta.client.meta.events)
        # the list route imports list_resources when called: only its own calls are recorded
        patch.setattr(listing, 'list_resources', recorder.wrap(listing.list_resources))
        patch.setattr(embedding, 'embed_page', recorder.unwrap(embedding.embed_page))
        with Client(app) as client:
            api = Api(client, ADMIN_KEY)
            e = Env(api, platform['organizationId'], recorder)
            e.main = api.post('/api/projects', {'organizationId': e.org_id, 'name': 'main'}).json['id']
            e.side = api.post('/api/projects', {'organizationId': e.org_id, 'name': 'side'}).json['id']
            task_statuses(api, e.org_id, 'open', 'done', 'blocked')
            for i in range(TOTAL):
                body = {'projectId': e.main if i < N_MAIN else e.side,
                        'statusSlug': ['open', 'done', 'blocked'][i % 3], 'priority': i % 7}
                if i % 10 != 3:  # some tasks without a title, some with an empty one (the same to a sort)
                    body['title'] = '' if i % 10 == 7 else f"{['Zeta', 'alpha', 'Mid', 'beta'][i % 4]} {i % 5}"
                r = api.post('/api/tasks', body)
                assert r.status == 201, r.json
                e.tasks.append(r.json)
            for t in e.tasks[::4]:  # updatedOn order differs from createdOn order
                assert api.put(f"/api/tasks/{t['id']}", {'description': 'touched'}).status == 200
            yield e
    model.reset()


def _first_round(want: int) -> int:
    from chalicelib.kernel.store import table
    return table._first_round(want)


def _ids(body) -> list[str]:
    return [t['id'] for t in body['content']]


INDEXED = [(None, 'by_created'), ('createdOn', 'by_created'), ('createdOn:desc', 'by_created'),
           ('updatedOn', 'by_updated'), ('updatedOn:desc', 'by_updated'), ('title', 'by_name'),
           ('title:desc', 'by_name')]


# ----------------------------------------------------------------------------- the index walk

@pytest.mark.parametrize('sort,index', INDEXED, ids=[str(s) for s, _ in INDEXED])
def test_unfiltered_page_zero_reads_the_page_from_a_keys_only_index(env, sort, index):
    params = {'pageSize': 5} | ({'sort': sort} if sort else {})
    body, calls = env.get(**params)
    assert [c.op for c in calls] == ['Query', 'Query', 'BatchGetItem'], [(c.op, c.index) for c in calls]
    counter, keys, batch = calls
    assert counter.index is None and counter.key_values == ['CNT#tasks#' + env.org_id]
    assert counter.read <= SHARDS
    # each of the 16 shards its share of the page first: the keys read do not depend on the tenant's size
    assert keys.index == index and keys.request.get('Limit') == _first_round(5) and keys.read <= 5 * INDEX_SHARDS
    assert all(set(item) <= {'pk', 'sk', 'tpk', 'csk', 'usk', 'nsk'} for item in keys.response['Items'])
    assert keys.request.get('ScanIndexForward', True) is not (sort or '').endswith(':desc')
    assert batch.read == 5 and len(batch.request['RequestItems']['platform-test']['Keys']) == 5
    assert body['totalElements'] == TOTAL and len(body['content']) == 5


@pytest.mark.parametrize('sort,index', INDEXED[1::2], ids=[s for s, _ in INDEXED[1::2]])
def test_deep_pages_walk_keys_and_fetch_only_the_page(env, sort, index):
    body, calls = env.get(pageSize=4, page=4, sort=sort)       # items 16..19
    counter, keys, batch = calls
    assert keys.index == index and keys.request.get('Limit') == _first_round(20)   # keys only, up to the page
    assert not any('data' in item for item in keys.response['Items'])
    assert batch.read == 4                                        # full items: the page only
    assert len(body['content']) == 4 and body['number'] == 4


def test_page_past_the_end_reads_only_the_counter(env):
    body, calls = env.get(pageSize=10, page=3)
    assert [c.op for c in calls] == ['Query'] and calls[0].read <= SHARDS
    assert body['content'] == [] and body['totalElements'] == TOTAL and body['totalPages'] == 3


def test_the_last_partial_page(env):
    body, calls = env.get(pageSize=10, page=2, sort='title:desc')
    assert calls[1].read == TOTAL and calls[1].request.get('Limit') == _first_round(30) and calls[2].read == TOTAL - 20
    assert len(body['content']) == TOTAL - 20 and body['last'] is True


@pytest.mark.parametrize('sort', [s for s, _ in INDEXED])
def test_walk_order_is_the_in_memory_order(env, sort):
    """The index walk and the in-memory sort agree (missing and empty titles, case, ties by
    id); paging is the property tests' business."""
    sort_param = {'sort': sort} if sort else {}
    walked, calls = env.get(pageSize=100, **sort_param)
    assert calls[1].op == 'Query' and calls[1].index in ('by_created', 'by_updated', 'by_name')
    in_memory, calls = env.get(pageSize=100, filter="organization.slug == 'default'", **sort_param)
    assert _tenant_reads(calls)
    assert _ids(walked) == _ids(in_memory)
    assert len(_ids(walked)) == TOTAL


def test_total_of_an_unfiltered_list_is_the_counter(env):
    from chalicelib.kernel.store import model
    tbl = model.boto3_table()
    key = {'pk': f'CNT#tasks#{env.org_id}', 'sk': '0'}
    tbl.update_item(Key=key, UpdateExpression='ADD cnt :n', ExpressionAttributeValues={':n': 1000})
    try:
        assert env.get(pageSize=10)[0]['totalElements'] == TOTAL + 1000
        assert env.get(pageSize=10, sort='title')[0]['totalPages'] == (TOTAL + 1000 + 9) // 10
        # a filtered list counts what it read
        assert env.get(filter="organization.slug == 'default'")[0]['totalElements'] == TOTAL
    finally:
        tbl.update_item(Key=key, UpdateExpression='ADD cnt :n', ExpressionAttributeValues={':n': -1000})
    assert env.get()[0]['totalElements'] == TOTAL


def test_organization_pin_alone_still_walks_the_index(env):
    body, calls = env.get(pageSize=5, filter=f"organizationId == '{env.org_id}'")
    assert [c.op for c in calls] == ['Query', 'Query', 'BatchGetItem'] and calls[1].index == 'by_created'
    assert body['totalElements'] == TOTAL


# ----------------------------------------------------------------------------- tenant reads

def _tenant_reads(calls: list[Call], index='by_created') -> list[Call]:
    """The whole partition's keys (no Limit: a page walk asks for its share), then its records."""
    reads = [c for c in calls if c.op == 'Query' and c.index == index and 'Limit' not in c.request]
    assert reads, [(c.op, c.index) for c in calls]
    assert not any('FilterExpression' in c.request for c in calls)   # nothing is decided in DynamoDB
    assert all(set(item) <= {'pk', 'sk', 'tpk', 'ppk', 'csk'} for c in reads for item in c.response['Items'])
    return reads


def _records_read(calls: list[Call]) -> int:
    return sum(c.read for c in calls if c.op == 'BatchGetItem')


def test_other_sorts_read_the_whole_tenant(env):
    body, calls = env.get(pageSize=5, sort='priority')
    reads = _tenant_reads(calls)
    assert sum(c.read for c in reads) == TOTAL == _records_read(calls)
    assert body['totalElements'] == TOTAL


def test_several_sort_fields_read_the_whole_tenant(env):
    _, calls = env.get(pageSize=5, sort='title;createdOn:desc')
    assert sum(c.read for c in _tenant_reads(calls)) == TOTAL


def test_equality_on_a_field_that_is_not_indexed_reads_the_tenant(env):
    body, calls = env.get(pageSize=100, filter='priority == 3')
    reads = _tenant_reads(calls)
    matching = sum(1 for t in env.tasks if t['priority'] == 3)
    assert sum(c.read for c in reads) == TOTAL == _records_read(calls)
    assert len(body['content']) == matching == body['totalElements']


@pytest.mark.parametrize('sort,index', [(None, 'x1_created'), ('createdOn', 'x1_created'),
                                        ('createdOn:desc', 'x1_created')])
def test_indexed_equality_walks_the_values_keys_and_fetches_only_the_page(env, sort, index):
    """statusSlug is the tasks' first indexed field: the value's counter, its keys up to the
    page, the page's items; nothing else, whatever the tenant's size."""
    params = {'pageSize': 3, 'filter': "statusSlug == 'done'", **({'sort': sort} if sort else {})}
    body, calls = env.get(**params)
    counter, keys, batch = calls
    current = [env.api.get(f"/api/tasks/{t['id']}").json for t in env.tasks]   # updatedOn moved since
    matching = sorted((t for t in current if t['statusSlug'] == 'done'),
                      key=lambda t: (t[(sort or 'createdOn').split(':')[0]], t['id']),
                      reverse=(sort or '').endswith(':desc'))
    assert counter.op == 'Query' and counter.index is None and counter.read <= SHARDS
    assert keys.index == index and keys.request.get('Limit') == _first_round(3) and keys.read <= 3 * INDEX_SHARDS
    assert batch.op == 'BatchGetItem' and batch.read == 3
    assert body['totalElements'] == len(matching)
    assert [t['id'] for t in body['content']] == [t['id'] for t in matching[:3]]


@pytest.mark.parametrize('sort', ['updatedOn', 'updatedOn:desc'])
def test_indexed_equality_sorted_by_updated_on_reads_only_the_values_records(env, sort):
    """No value index is kept in updatedOn order (docs/scale.md "Value indexes by createdOn
    only"): the value's keys by createdOn, its records, sorted in memory; never the tenant."""
    body, calls = env.get(pageSize=3, page=1, filter="statusSlug == 'done'", sort=sort)
    assert not [c for c in calls if c.op == 'Query' and c.index in ('by_created', 'by_updated', 'parent_keys')]
    current = [env.api.get(f"/api/tasks/{t['id']}").json for t in env.tasks]   # updatedOn moved since
    holding = [t for t in current if t['statusSlug'] == 'done']
    keys = [c for c in calls if c.op == 'Query' and c.index == 'x1_created']
    assert keys and sum(c.read for c in keys) == len(holding) == _records_read(calls)
    matching = sorted(holding, key=lambda t: (t['updatedOn'], t['id']), reverse=sort.endswith(':desc'))
    assert body['totalElements'] == len(matching) > 6
    assert [t['id'] for t in body['content']] == [t['id'] for t in matching[3:6]]


def test_indexed_equality_with_other_conditions_reads_only_the_values_records(env):
    body, calls = env.get(pageSize=100, filter="statusSlug =in= ('done', 'open') and priority >= 3")
    assert not [c for c in calls if c.op == 'Query' and c.index in ('by_created', 'parent_keys')]
    keys = [c for c in calls if c.op == 'Query' and c.index == 'x1_created']
    holding = [t for t in env.tasks if t['statusSlug'] in ('done', 'open')]
    assert len(keys) == 2 and sum(c.read for c in keys) == len(holding)
    assert sum(c.read for c in calls if c.op == 'BatchGetItem') == len(holding)
    expected = sorted(t['id'] for t in holding if t['priority'] >= 3)
    assert sorted(t['id'] for t in body['content']) == expected == sorted(t['id'] for t in body['content'])
    assert body['totalElements'] == len(expected)


def test_contains_filter_is_evaluated_in_memory(env):
    body, calls = env.get(pageSize=100, filter="title ~~ 'ALPHA'")
    reads = _tenant_reads(calls)
    assert sum(c.response['Count'] for c in reads) == TOTAL == _records_read(calls)
    assert body['totalElements'] == sum(1 for t in env.tasks if 'alpha' in t.get('title', '').lower())


def test_text_query_reads_the_tenant(env):
    body, calls = env.get(query='zeta')
    assert sum(c.read for c in _tenant_reads(calls)) == TOTAL
    assert body['totalElements'] == sum(1 for t in env.tasks if 'zeta' in t.get('title', '').lower())


def test_project_pin_reads_only_that_project(env):
    body, calls = env.get(pageSize=100, filter=f"projectId == '{env.side}' and priority >= 0")
    reads = _tenant_reads(calls, 'parent_keys')
    assert not [c for c in calls if c.index == 'by_created']
    assert sum(c.read for c in reads) == N_SIDE == _records_read(calls) and body['totalElements'] == N_SIDE
    assert reads[0].key_values == [f'tasks#P#{env.side}']


def test_no_key_value_ever_exceeds_dynamodb_limits(env):
    """A pinned id goes into a key condition; DynamoDB refuses a partition key over 2048 bytes
    (moto does not), so a pin that is no id must never get that far."""
    for name in ('organizationId', 'projectId'):
        body, calls = env.get(filter=f"{name} == '{'x' * 3000}' and priority >= 0")
        assert body['content'] == [] and body['totalElements'] == 0
        for c in calls:
            assert all(len(v.encode()) <= 2048 for v in c.key_values), c.request


def test_deep_document_paths_are_decided_on_the_records(env):
    """DynamoDB refuses document paths nested deeper than 32 levels (moto does not check): no
    filter reaches DynamoDB any more, so a deep path is just a path of the records read."""
    deep = 'metadata.' + '.'.join(['a'] * 40)
    threes = sum(1 for t in env.tasks if t['priority'] == 3)
    for text in (f'{deep} is null and priority == 3', f'{deep} == 1 or priority == 3'):
        body, calls = env.get(pageSize=100, filter=text)
        assert body['totalElements'] == threes == len(body['content'])
        assert _tenant_reads(calls)


def test_a_hooks_condition_on_the_indexed_field_alone_keeps_the_flat_plan(api, org_id, users, monkeypatch):
    """The events hook hides ui.* events from MEMBER users with not(eventType =like= 'ui.*');
    beside eventType == 'tasks.updated' that is decided by the value: the page still walks only
    the page's keys, and a ui.* value matches nothing without reading anything."""
    from chalicelib.kernel.store import table
    for _ in range(3):
        assert api.post('/api/events', {'organizationId': org_id, 'eventType': 'tasks.updated'}).status == 201
    manager = api.as_key(users['MANAGE'])
    batch = {'organizationId': org_id, 'events': [{'kind': 'ui.error', 'payload': {'m': 'x'}}]}
    assert manager.post('/api/events/ui/batch', batch).status == 200
    walks: list[int | None] = []
    real = table.walk_value

    def recorded(*args, **kwargs):
        walks.append(kwargs['limit'])
        return real(*args, **kwargs)
    monkeypatch.setattr(table, 'walk_value', recorded)
    member = api.as_key(users['MEMBER'])
    page = member.get("/api/events?pageSize=2&filter=eventType == 'tasks.updated'").json
    assert page['totalElements'] == 3 and len(page['content']) == 2 and walks == [2]
    walks.clear()
    assert member.get("/api/events?filter=eventType == 'ui.error'").json['totalElements'] == 0 and walks == []
    assert manager.get("/api/events?filter=eventType == 'ui.error'").json['totalElements'] == 1
