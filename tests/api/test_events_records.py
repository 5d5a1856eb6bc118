"""A domain event's record in its own shape (docs/scale.md "Events records"): a small item
with no updatedOn key until it is changed (the ``events`` family is ``sparse_updated``), so lists
in updatedOn order merge the changed records' updatedOn keys with the others' createdOn keys.
Checked through the API: the order, the totals, the body a client reads."""
from __future__ import annotations

import pytest

from tests.api.test_work_events import entity_item


def _events(api, query: str = '') -> dict:
    return api.get(f'/api/events?pageSize=100{query}').json


def _task_events(api, org_id, work, n: int) -> list[dict]:
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    for i in range(n):
        assert api.post('/api/tasks', {'projectId': project['id'], 'title': f't{i}'}).status == 201
    work.publish_outbox()
    page = _events(api, "&filter=eventType=='tasks.created'&sort=createdOn:asc")
    assert page['totalElements'] == n
    return page['content']


def test_a_domain_events_record_reads_as_every_event_does(api, org_id, work):
    created = _task_events(api, org_id, work, 1)[0]
    got = api.get(f"/api/events/{created['id']}").json
    assert got['uuid'] == got['id'] == created['id']
    assert got['name'] == got['eventType'] == 'tasks.created'
    assert got['source'] == 'platform-api' and got['payload']['family'] == 'tasks'
    item = entity_item('events', created['id'])
    assert 'usk' not in item and 'uuid' not in item['data'] and 'name' not in item['data']


def test_updated_on_order_places_a_changed_event_once_at_its_change(api, org_id, work):
    events = _task_events(api, org_id, work, 5)
    changed = events[1]
    assert api.put(f"/api/events/{changed['id']}", {'description': 'looked at'}).status == 200
    item = entity_item('events', changed['id'])
    assert item['csk'].endswith('#u') and item['usk'].startswith(item['data']['updatedOn'])
    ids = [e['id'] for e in events]
    expected = [i for i in ids if i != changed['id']] + [changed['id']]
    for query in ('&sort=updatedOn:asc', "&filter=eventType=='tasks.created'&sort=updatedOn:asc"):
        page = _events(api, query)
        got = [e['id'] for e in page['content'] if e['id'] in ids]
        assert got == expected, query
        assert len({e['id'] for e in page['content']}) == len(page['content']) == page['totalElements']
        desc = [e['id'] for e in _events(api, query.replace(':asc', ':desc'))['content'] if e['id'] in ids]
        assert desc == expected[::-1], query
    # createdOn order is untouched by the change; a page of one walks past the mark
    assert [e['id'] for e in _events(api, "&filter=eventType=='tasks.created'&sort=createdOn:asc")['content']] == ids
    second = api.get("/api/events?filter=eventType=='tasks.created'&sort=updatedOn:desc&pageSize=1&page=0").json
    assert second['content'][0]['id'] == changed['id'] and second['totalElements'] == 5
    last = api.get("/api/events?filter=eventType=='tasks.created'&sort=updatedOn:desc&pageSize=1&page=4").json
    assert last['content'][0]['id'] == ids[0]


def test_a_redelivered_batch_records_and_counts_each_event_once(api, org_id, work):
    import app
    from localdev.pollers import StreamReader
    _task_events(api, org_id, work, 3)
    again = StreamReader(app.outbox_publisher, work.cfg.table_name, region='us-east-1', endpoint_url=None)
    assert again.poll_once()['records'] > 0
    while again.poll_once()['records']:
        pass
    page = _events(api, "&filter=eventType=='tasks.created'")
    assert page['totalElements'] == len(page['content']) == 3


def test_records_of_the_old_shape_are_reported_then_migrated(api, org_id, work):
    """Events records written before this layout (an updatedOn key on a record never changed; an
    unmarked createdOn key on a changed one) are listed twice in updatedOn order: the checker
    reports them, migrate_scale sets their keys (once: a second run changes nothing)."""
    import boto3

    from chalicelib.core.config import get_config
    from chalicelib.kernel.store.table import ENTITY_SK, entity_pk
    from chalicelib.ops import check_table, migrate_scale
    events = _task_events(api, org_id, work, 3)
    changed = events[2]
    assert api.put(f"/api/events/{changed['id']}", {'description': 'seen'}).status == 200
    tbl = boto3.resource('dynamodb', region_name='us-east-1').Table(get_config().table_name)
    for event in events[:2]:   # the old shape: both keys, unmarked
        item = entity_item('events', event['id'])
        tbl.update_item(Key={'pk': entity_pk('events', event['id']), 'sk': ENTITY_SK},
                        UpdateExpression='SET usk = :u', ExpressionAttributeValues={':u': item['csk']})
    old = entity_item('events', changed['id'])
    tbl.update_item(Key={'pk': entity_pk('events', changed['id']), 'sk': ENTITY_SK},
                    UpdateExpression='SET csk = :c', ExpressionAttributeValues={':c': old['csk'][:-2]})
    query = "&filter=eventType=='tasks.created'&sort=updatedOn:asc"
    walk = '&sort=updatedOn:asc'   # the tenant's updatedOn walk (the index merge)
    listed = [e['id'] for e in _events(api, walk)['content']]
    assert len(listed) > len(set(listed))   # listed twice
    found, _ = check_table.run(only=['sorted-keys'])
    assert sorted(v.key for v in found) == sorted(entity_pk('events', e['id']) for e in events)
    assert migrate_scale.migrate(out=lambda *_: None)['sorted'] == 3
    assert migrate_scale.migrate(out=lambda *_: None)['sorted'] == 0
    assert check_table.run(only=['sorted-keys'])[0] == []
    assert [e['id'] for e in _events(api, query)['content']] == [e['id'] for e in events]
    listed = [e['id'] for e in _events(api, walk)['content']]
    assert len(listed) == len(set(listed)) and [i for i in listed if i in {e['id'] for e in events}] == \
        [e['id'] for e in events]


# ----------------------------------------------------------------------------- eventType from by_name (name_keyed)

def _post_events(api, org_id, types: list[str]) -> list[str]:
    ids = []
    for event_type in types:
        made = api.post('/api/events', {'organizationId': org_id, 'eventType': event_type, 'source': 'test'})
        assert made.status == 201, made.json
        ids.append(made.json['id'])
    return ids


def test_an_events_record_is_keyed_by_its_type_in_by_name_and_in_no_value_index(api, org_id, work):
    """Three index entries per events record, not four (docs/scale.md "Events records"): its
    eventType is the head of its name key, which serves eventType filters in createdOn order."""
    from chalicelib.kernel.store import table
    events = _task_events(api, org_id, work, 5)
    ids = [e['id'] for e in events]
    item = entity_item('events', ids[0])
    assert not any(k in item for k in ('x1', 'x2', 'x3', 'x4', 'x5'))
    assert item['nsk'] == table.name_prefix('tasks.created') + item['csk']
    query = "&filter=eventType=='tasks.created'"
    for direction, expected in (('asc', ids), ('desc', ids[::-1])):
        pages = [api.get(f'/api/events?pageSize=2&page={n}{query}&sort=createdOn:{direction}').json for n in range(3)]
        assert [e['id'] for page in pages for e in page['content']] == expected, direction
        assert {page['totalElements'] for page in pages} == {5}
    assert _events(api, "&filter=eventType=='tasks.updated'")['totalElements'] == 0
    assert _events(api, "&filter=eventType=='tasks.create'")['content'] == []   # a prefix of a type is not it


def test_event_types_equal_but_for_case_are_filtered_apart_and_sorted_by_type_then_created(api, org_id, work):
    """eventType filters are exact; a list sorted by eventType breaks ties by the exact type,
    then createdOn (docs/api/conventions.md), the same from the index and in memory."""
    ids = _post_events(api, org_id, ['deploy.done', 'Deploy.Done', 'alpha.x', 'deploy.done', 'Deploy.Done',
                                     'alpha.x'])
    for event_type, wanted in (('deploy.done', [ids[0], ids[3]]), ('Deploy.Done', [ids[1], ids[4]]),
                               ('alpha.x', [ids[2], ids[5]])):
        page = _events(api, f"&filter=eventType=='{event_type}'")
        assert [e['id'] for e in page['content']] == wanted and page['totalElements'] == 2, event_type
        both = _events(api, f"&filter=eventType=in=('{event_type}','nothing.else')&sort=createdOn:desc")
        assert [e['id'] for e in both['content']] == wanted[::-1]
    walked = [e['id'] for e in _events(api, '&sort=eventType:asc')['content']]   # the index walk
    in_memory = [e['id'] for e in _events(api, "&filter=source=='test'&sort=eventType:asc")['content']]
    assert in_memory == walked
    assert walked[:2] == [ids[2], ids[5]]   # alpha.x, by createdOn
    deploys = walked[2:]
    assert sorted([deploys[:2], deploys[2:]]) == sorted([[ids[0], ids[3]], [ids[1], ids[4]]])   # each type a run
    desc = [e['id'] for e in _events(api, '&sort=eventType:desc')['content']]
    assert desc == walked[::-1]
    assert [e['id'] for e in _events(api, "&filter=source=='test'&sort=eventType:desc")['content']] == desc


def test_a_type_made_to_start_like_another_types_key_is_not_listed_under_it(api, org_id, work):
    """A name holding \\x01 can make its key start as another type's run does (table.walk_name):
    the page keeps only the records holding the type asked for."""
    from chalicelib.kernel.store import table
    value = next(v for v in (f'kind.{n}' for n in range(10_000))
                 if table.name_hash(v) == table.name_hash(v).lower())
    forged = f'{value}\x01{table.name_hash(value)}\x01zzz'
    assert table.name_sort_key(forged, 'i', created='c').startswith(table.name_prefix(value))
    real, _ = _post_events(api, org_id, [value, forged])
    page = _events(api, f"&filter=eventType=='{value}'")
    assert [e['id'] for e in page['content']] == [real] and page['totalElements'] == 1


def test_events_records_keyed_before_by_their_value_index_are_listed_then_migrated(api, org_id, work):
    """Records written before events were name_keyed (an x1 key, a name key ending in the id)
    are still listed by eventType (both are read, kernel/store/table.py walk_name); the checker
    reports them, migrate_scale moves them (once)."""
    import boto3

    from chalicelib.core.config import get_config
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family as family_of
    from chalicelib.kernel.store import table
    from chalicelib.ops import check_table, migrate_scale
    events = _task_events(api, org_id, work, 4)
    ids = [e['id'] for e in events]
    tbl = boto3.resource('dynamodb', region_name='us-east-1').Table(get_config().table_name)
    for event in events[::2]:   # the old shape
        key = table.spread_pk(table.value_pk('events', org_id, 'eventType', 'tasks.created'), event['id'])
        tbl.update_item(Key={'pk': table.entity_pk('events', event['id']), 'sk': table.ENTITY_SK},
                        UpdateExpression='SET nsk = :n, x1 = :x',
                        ExpressionAttributeValues={':n': table.name_sort_key('tasks.created', event['id']), ':x': key})
    query = "&filter=eventType=='tasks.created'"
    for direction, expected in (('asc', ids), ('desc', ids[::-1])):
        got = [e['id'] for e in _events(api, f'{query}&sort=createdOn:{direction}')['content']]
        assert got == expected, direction
        paged = [api.get(f'/api/events?pageSize=3&page={n}{query}&sort=createdOn:{direction}').json['content']
                 for n in range(2)]
        assert [e['id'] for page in paged for e in page] == expected, direction
    found, _ = check_table.run(only=['sorted-keys'])
    assert sorted(v.key for v in found) == sorted(table.entity_pk('events', i) for i in ids[::2])
    assert migrate_scale.migrate(out=lambda *_: None)['sorted'] == 2
    assert migrate_scale.migrate(out=lambda *_: None)['sorted'] == 0
    assert check_table.run(only=['sorted-keys', 'value-counters', 'index-keys'])[0] == []
    item = entity_item('events', ids[0])
    assert 'x1' not in item and item['nsk'] == records.name_key(family_of('events'), item['data'])
    assert [e['id'] for e in _events(api, f'{query}&sort=createdOn:asc')['content']] == ids


# ----------------------------------------------------------------------------- tallies (features/events/tally.py)

def _tallies() -> list[dict]:
    import boto3

    from chalicelib.core.config import get_config
    tbl = boto3.resource('dynamodb', region_name='us-east-1').Table(get_config().table_name)
    return [i for i in tbl.scan()['Items'] if i['pk'].startswith('TALLY#') and 'dead' not in i]   # open ones


def _created_total(api) -> tuple[int, int]:
    page = _events(api, "&filter=eventType=='tasks.created'")
    return page['totalElements'], len(page['content'])


def _three_tasks(api, org_id) -> None:
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    for i in range(3):
        assert api.post('/api/tasks', {'projectId': project['id'], 'title': f't{i}'}).status == 201


def _redeliver(work) -> None:
    """The stream delivers everything again, from its start (a mapping re-created at TRIM_HORIZON)."""
    import app
    from localdev.pollers import StreamReader
    again = StreamReader(app.outbox_publisher, work.cfg.table_name, region='us-east-1', endpoint_url=None)
    while again.poll_once()['records']:
        pass


def test_events_records_are_put_one_by_one_and_counted_once(api, org_id, work):
    """Each record is its own PutItem (1 WCU under 1 KB), marked with its tally's token; the
    tally is gone once counted, and a redelivery counts nothing twice."""
    from tests import faults
    _three_tasks(api, org_id)
    calls: list[tuple[str, dict]] = []
    with faults.inject(lambda op, params: calls.append((op, params))):   # records, answers nothing
        work.publish_outbox()
    puts = [params['Item'] for op, params in calls
            if op == 'PutItem' and params['Item']['pk']['S'].startswith('events#')]
    assert all(item['kind']['S'] == 'events' and item['tb']['S'] for item in puts)
    assert sum(item['data']['M']['eventType']['S'] == 'tasks.created' for item in puts) == 3
    assert not [params for op, params in calls if op == 'TransactWriteItems'
                and any('Put' in i for i in params['TransactItems'])]
    tokens = {item['tb']['S'] for item in puts}
    assert len(tokens) == 1 and entity_item('events', puts[0]['pk']['S'].split('#', 1)[1])['tb'] in tokens
    assert _created_total(api) == (3, 3) and _tallies() == []
    _redeliver(work)
    assert _created_total(api) == (3, 3) and _tallies() == []


def test_a_writer_that_dies_before_counting_is_settled_by_the_redelivery(api, org_id, work, monkeypatch):
    from chalicelib.features.events import outbox
    _three_tasks(api, org_id)
    real = outbox._count

    def dies(datas, token):
        raise RuntimeError('the handler was stopped here')
    monkeypatch.setattr(outbox, '_count', dies)
    assert work.stream.poll_once()['failed'] == 1   # the batch failed: the stream delivers it again
    assert len(_tallies()) == 1
    assert _created_total(api)[0] == 0      # recorded, not counted yet:
    assert len(_events(api, "&filter=eventType=='tasks.created' and source=='platform-api'")['content']) == 3
    monkeypatch.setattr(outbox, '_count', real)
    work.publish_outbox()                  # the redelivery
    assert _created_total(api) == (3, 3) and _tallies() == []


def test_a_redelivery_split_otherwise_settles_the_dead_writers_tally_once(api, org_id, work, monkeypatch):
    """The batch comes again in two halves (the stream bisects a failed batch): the first half
    settles the dead writer's tally, counting all three; the second counts nothing more."""
    from chalicelib.features.events import outbox
    _three_tasks(api, org_id)
    seen: list[dict] = []
    real_count, real_record = outbox._count, outbox.record_all

    def dies(datas, token):
        raise RuntimeError('stopped')

    def keep(events):
        seen.extend(events)
        return real_record(events)
    monkeypatch.setattr(outbox, '_count', dies)
    monkeypatch.setattr(outbox, 'record_all', keep)
    assert work.stream.poll_once()['failed'] == 1
    monkeypatch.setattr(outbox, '_count', real_count)
    created = [e for e in seen if e['eventType'] == 'tasks.created']
    assert len(created) == 3
    assert real_record(created[:1]) == set()
    assert _created_total(api) == (3, 3)
    assert real_record(created[1:]) == set()
    assert _created_total(api) == (3, 3) and _tallies() == []


def test_a_put_that_landed_but_was_not_answered_is_counted_once(api, org_id, work):
    """A record put whose answer (and every retry's) was lost: the chunk is left to its
    redelivery, which counts the landed record through the tally, once."""
    from tests import faults
    _three_tasks(api, org_id)
    rule = faults.lands_then_lost(('PutItem',), when=lambda params: params['Item']['pk']['S'].startswith('events#'))
    with faults.inject(rule):
        assert work.stream.poll_once()['failed'] == 1
    assert len(_tallies()) == 1
    work.publish_outbox()   # the redelivery
    assert _created_total(api) == (3, 3) and _tallies() == []


def test_the_checker_reports_a_tally_left_unsettled_and_the_repair_settles_it(api, org_id, work, monkeypatch):
    from chalicelib.features.events import outbox
    from chalicelib.ops import check_table, settle_tallies
    _three_tasks(api, org_id)
    monkeypatch.setattr(outbox, '_count', lambda datas, token: (_ for _ in ()).throw(RuntimeError('stopped')))
    assert work.stream.poll_once()['failed'] == 1   # and the stream gives the batch up: no redelivery
    monkeypatch.undo()
    assert check_table.run(only=['tallies'])[0] == []            # its writer may still be running
    check_table.OPTIONS['tally-minutes'] = 0
    try:
        found, _ = check_table.run(only=['tallies'])
        assert [v.key for v in found] == [t['pk'] for t in _tallies()] and len(found) == 1
        assert settle_tallies.settle_stale(older_than_minutes=0, out=lambda *_: None) == 1
        assert check_table.run(only=['tallies'])[0] == []
    finally:
        check_table.OPTIONS['tally-minutes'] = 30
    assert _created_total(api) == (3, 3) and _tallies() == []


def test_a_batch_of_a_few_events_is_recorded_in_one_transaction_without_a_tally(api, org_id, work):
    """Under TALLY_FROM records a tally costs more than it saves (3 WCU against 1 per record):
    the records and their counter moves go in one transaction, exact by itself; a redelivery
    counts nothing twice."""
    from tests import faults
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    work.publish_outbox()
    assert api.post('/api/tasks', {'projectId': project['id'], 'title': 'one'}).status == 201
    calls: list[tuple[str, dict]] = []
    with faults.inject(lambda op, params: calls.append((op, params))):
        work.publish_outbox()
    assert not [p for op, p in calls if op == 'PutItem' and p['Item']['pk']['S'].startswith(('events#', 'TALLY#'))]
    recorded = [p for op, p in calls if op == 'TransactWriteItems'
                and any(i.get('Put', {}).get('Item', {}).get('pk', {}).get('S', '').startswith('events#')
                        for i in p['TransactItems'])]
    assert len(recorded) == 1 and any('Update' in i for i in recorded[0]['TransactItems'])   # its counters
    assert _created_total(api) == (1, 1) and _tallies() == []
    _redeliver(work)
    assert _created_total(api) == (1, 1) and _tallies() == []


def test_a_tally_refused_its_token_takes_another(api, org_id, work):
    """The tally's put is conditional on its key being free (no two tallies share a token): a
    refusal (a token taken, or our own put landed with its answer lost) takes a new token."""
    from tests import faults
    _three_tasks(api, org_id)
    state = {'refused': 0}

    def refuse_first(op, params):
        if op == 'PutItem' and params['Item']['pk']['S'].startswith('TALLY#') and not state['refused']:
            state['refused'] += 1
            return faults.error('ConditionalCheckFailedException', 'The conditional request failed')
        return None
    with faults.inject(refuse_first):
        assert work.stream.poll_once()['failed'] == 0   # recorded at the first delivery
    assert state['refused'] == 1
    assert _created_total(api) == (3, 3) and _tallies() == []


def test_a_tally_put_landing_late_does_not_open_it_again(api, org_id, work):
    """The tally's put, answered late and retried, may land after the chunk closed the tally (a
    slow call the client gave up on; localdev/chaos.py). A closed tally stays (until its TTL), so
    that put is refused, and a redelivery counts nothing twice. (Found by the chaos run: a
    deleted tally came back open and was settled a second time.)"""
    import boto3
    from botocore.exceptions import ClientError

    from tests import faults
    _three_tasks(api, org_id)
    calls: list[tuple[str, dict]] = []
    with faults.inject(lambda op, params: calls.append((op, params))):
        work.publish_outbox()
    put, = [p for op, p in calls if op == 'PutItem' and p['Item']['pk']['S'].startswith('TALLY#')]
    late = {k: v for k, v in put.items() if k != '_path'}
    with pytest.raises(ClientError, match='ConditionalCheckFailed'):
        boto3.client('dynamodb', region_name='us-east-1').put_item(**late)
    _redeliver(work)
    assert _created_total(api) == (3, 3) and _tallies() == []


def test_a_record_landing_after_its_tally_was_settled_is_counted_by_its_redelivery(api, org_id, work,
                                                                                  monkeypatch):
    """A writer stopped before counting; one of its puts was slow and lands only after a
    redelivery settled its tally without that record (localdev/chaos.py's slow answers). That
    record's own redelivery finds it under a closed tally that did not count it, and counts it
    then, once."""
    import boto3

    from chalicelib.core.config import get_config
    from chalicelib.features.events import outbox
    from chalicelib.kernel.store.table import ENTITY_SK, entity_pk
    _three_tasks(api, org_id)
    seen: list[dict] = []
    real_count, real_record = outbox._count, outbox.record_all

    def keep(events):
        seen.extend(events)
        return real_record(events)
    monkeypatch.setattr(outbox, '_count', lambda *a: (_ for _ in ()).throw(RuntimeError('stopped')))
    monkeypatch.setattr(outbox, 'record_all', keep)
    assert work.stream.poll_once()['failed'] == 1
    monkeypatch.setattr(outbox, '_count', real_count)
    created = [e for e in seen if e['eventType'] == 'tasks.created']
    tbl = boto3.resource('dynamodb', region_name='us-east-1').Table(get_config().table_name)
    key = {'pk': entity_pk('events', created[0]['id']), 'sk': ENTITY_SK}
    slow = tbl.get_item(Key=key, ConsistentRead=True)['Item']
    tbl.delete_item(Key=key)                      # its put has not landed yet
    assert real_record(created[1:]) == set()      # settles the tally: counts the two there
    assert _created_total(api)[0] == 2 and _tallies() == []
    tbl.put_item(Item=slow)                       # the slow put lands, under the closed tally
    assert real_record(created[:1]) == set()      # its redelivery
    assert _created_total(api) == (3, 3)
    assert real_record(created) == set()          # and once more: nothing counted twice
    assert _created_total(api) == (3, 3)
