"""A domain event's record in its own shape (docs/scale.md "Events records"): a small item
with no updatedOn key until it is changed (the ``events`` family is ``sparse_updated``), so lists
in updatedOn order merge the changed records' updatedOn keys with the others' createdOn keys.
Checked through the API: the order, the totals, the body a client reads."""
from __future__ import annotations

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

