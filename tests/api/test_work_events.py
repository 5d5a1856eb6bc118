"""Domain events (issue 12): every service write carries its event in its own write (on the
record's item, or an outbox item in its transaction: kernel/records.py ``outbox_ops``); the
table-stream handler publishes them to EventBridge in batches and records them in the
events family, once, whatever the redeliveries."""
from __future__ import annotations

import json


def events_since(marker):
    return sorted((i['data'] for i in outbox_items() if i['data']['occurredOn'] >= marker),
                  key=lambda e: e['occurredOn'])


def outbox_items():
    import boto3

    from chalicelib.core.config import get_config
    tbl = boto3.resource('dynamodb', region_name='us-east-1').Table(get_config().table_name)
    return [i for i in tbl.scan()['Items'] if i['pk'].startswith('EVT#')]


def entity_item(family, id_):
    import boto3

    from chalicelib.core.config import get_config
    from chalicelib.kernel.store.table import ENTITY_SK, entity_pk
    tbl = boto3.resource('dynamodb', region_name='us-east-1').Table(get_config().table_name)
    return tbl.get_item(Key={'pk': entity_pk(family, id_), 'sk': ENTITY_SK}, ConsistentRead=True)['Item']


def test_every_write_has_one_event_on_its_record_or_in_an_outbox_item(api, org_id, work):
    """A create and a locked update carry their event on the record's own item (``obx``, in the
    same transaction: no outbox item, 2 WCU less); a delete, whose item is gone, puts an outbox
    item. The stream handler publishes and records all of them."""
    from chalicelib.core.clock import now_iso
    marker = now_iso()
    before = len(outbox_items())
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't'}).json
    created = entity_item('tasks', task['id'])['obx']
    assert created['eventType'] == 'tasks.created' and created['resourceId'] == task['id']
    api.put(f"/api/tasks/{task['id']}", {'title': 'u', 'description': 'd', 'changeSequence': task['changeSequence']})
    updated = entity_item('tasks', task['id'])['obx']
    assert updated['eventType'] == 'tasks.updated' and updated['id'] != created['id']
    assert updated['resourceId'] == task['id'] and updated['organizationId'] == org_id
    assert updated['projectId'] == project['id'] and updated['changedFields'] == ['description', 'title']
    assert updated['actorId'] and updated['correlationId'] and updated['family'] == 'tasks'
    assert len(outbox_items()) == before
    api.delete(f"/api/tasks/{task['id']}")
    assert [e['eventType'] for e in events_since(marker)] == ['tasks.deleted']
    assert all(int(i['ttl']) > 0 and i['kind'] == 'outbox' for i in outbox_items())
    work.publish_outbox()
    mine = {project['id'], task['id']}
    recorded = [e for e in api.get('/api/events?pageSize=100').json['content']
                if e['payload'].get('resourceId') in mine]
    assert [e['eventType'] for e in sorted(recorded, key=lambda e: e['occurredOn'])] == [
        'projects.created', 'tasks.created', 'tasks.updated', 'tasks.deleted']
    assert {e['id'] for e in recorded} >= {created['id'], updated['id']}


def test_an_unlocked_put_carries_its_event_on_the_same_update(api, org_id):
    """A PUT without changeSequence of plain fields is one UpdateItem (kernel/unlocked.py): its
    event rides on the item's ``obx`` attribute, which the stream handler publishes."""
    import boto3

    from chalicelib.core.config import get_config
    from chalicelib.kernel.store.table import ENTITY_SK, entity_pk
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't'}).json
    before = len(outbox_items())
    assert api.put(f"/api/tasks/{task['id']}", {'description': 'd'}).status == 200
    assert len(outbox_items()) == before      # no transaction, no outbox item
    tbl = boto3.resource('dynamodb', region_name='us-east-1').Table(get_config().table_name)
    item = tbl.get_item(Key={'pk': entity_pk('tasks', task['id']), 'sk': ENTITY_SK}, ConsistentRead=True)['Item']
    event = item['obx']
    event = json.loads(event) if isinstance(event, str) else event
    assert event['eventType'] == 'tasks.updated' and event['resourceId'] == task['id']
    assert event['changedFields'] == ['description'] and event['organizationId'] == org_id


def test_a_write_that_fails_leaves_no_outbox_item(api, org_id):
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't'}).json
    before, carried = len(outbox_items()), entity_item('tasks', task['id'])['obx']
    stale = api.put(f"/api/tasks/{task['id']}", {'title': 'x', 'changeSequence': 99})
    assert stale.status == 409
    bad_ref = api.put(f"/api/tasks/{task['id']}", {'teamId': '00000000-0000-4000-8000-000000000000'})
    assert bad_ref.status == 400
    assert len(outbox_items()) == before
    assert entity_item('tasks', task['id'])['obx'] == carried   # still the create's event


def test_the_stream_handler_publishes_and_records_events_once(api, org_id, work, monkeypatch):
    from chalicelib.features.work import store as work_store
    sent = []
    real = work_store.events_client()
    original = real.put_events

    def spy(**kwargs):
        sent.append(kwargs['Entries'])
        return original(**kwargs)
    monkeypatch.setattr(real, 'put_events', spy)
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't'}).json
    for n in range(12):
        assert api.put(f"/api/tasks/{task['id']}", {'title': f't{n}'}).status == 200
    work.publish_outbox()
    assert all(len(batch) <= 10 for batch in sent) and any(len(batch) == 10 for batch in sent)
    detail = [json.loads(e['Detail']) for batch in sent for e in batch]
    assert all(e['EventBusName'] == 'platform-local' for batch in sent for e in batch)
    assert sum(1 for d in detail if d['eventType'] == 'tasks.updated') == 12
    page = api.get("/api/events?filter=eventType=='tasks.updated'&pageSize=100").json
    assert page['totalElements'] == 12
    first = page['content'][0]
    assert first['payload']['resourceId'] == task['id'] and first['payload']['changedFields'] == ['title']
    assert first['source'] == 'platform-api' and first['organizationId'] == org_id
    # the stream delivers again from the start: nothing is recorded twice
    import app
    from localdev.pollers import StreamReader
    again = StreamReader(app.outbox_publisher, work.cfg.table_name, region='us-east-1', endpoint_url=None)
    assert again.poll_once()['records'] > 0
    assert api.get("/api/events?filter=eventType=='tasks.updated'").json['totalElements'] == 12


def test_a_stream_batch_records_its_events_together_and_moves_each_counter_once(api, org_id, work):
    """12 events of one kind in one stream batch: each record is its own PutItem, and one
    transaction (its tally's, features/events/tally.py) moves the family's counter and the kind's
    once for all of them (docs/scale.md "Events records"), not 12 times each; a redelivery of the
    batch records and counts nothing twice: still 12."""
    from chalicelib.kernel.store import model
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't'}).json
    work.publish_outbox()
    for n in range(12):
        assert api.put(f"/api/tasks/{task['id']}", {'title': f't{n}'}).status == 200
    client = model.configure()._get_connection().connection.client
    seen: list[list[str]] = []
    puts: list[str] = []

    def capture(params, **_):
        seen.append([next(iter(e.values()))['Key' if 'Key' in next(iter(e.values())) else 'Item']['pk']['S']
                     for e in params['TransactItems']])

    def capture_put(params, **_):
        puts.append(params['Item']['pk']['S'])
    client.meta.events.register('provide-client-params.dynamodb.TransactWriteItems', capture)
    client.meta.events.register('provide-client-params.dynamodb.PutItem', capture_put)
    try:
        work.publish_outbox()
    finally:
        client.meta.events.unregister('provide-client-params.dynamodb.TransactWriteItems', capture)
        client.meta.events.unregister('provide-client-params.dynamodb.PutItem', capture_put)
    assert sum(pk.startswith('events#') for pk in puts) == 12
    tallies = [pks for pks in seen if any(pk.startswith('TALLY#') for pk in pks)]
    assert tallies and not [pk for pks in seen for pk in pks if pk.startswith('events#')], seen
    counters = [pk for pks in tallies for pk in pks if pk.startswith('CNT')]
    assert len(counters) <= 2 * len(tallies) < 12, tallies
    assert api.get("/api/events?filter=eventType=='tasks.updated'").json['totalElements'] == 12
    import app
    from localdev.pollers import StreamReader
    again = StreamReader(app.outbox_publisher, work.cfg.table_name, region='us-east-1', endpoint_url=None)
    assert again.poll_once()['records'] > 0
    assert api.get("/api/events?filter=eventType=='tasks.updated'").json['totalElements'] == 12
    from chalicelib.ops import check_table
    violations, snap = check_table.run()   # every counter equals the records it counts
    assert not violations, check_table.report(violations, snap, check_table.CHECKS)


def test_events_refused_by_eventbridge_are_retried_then_reported_as_the_batch_item_failure(api, org_id, work,
                                                                                         monkeypatch):
    from chalicelib.features.work import store as work_store
    real = work_store.events_client()
    calls = []

    def refuse(**kwargs):
        calls.append(len(kwargs['Entries']))
        return {'FailedEntryCount': len(kwargs['Entries']),
                'Entries': [{'ErrorCode': 'ThrottlingException'} for _ in kwargs['Entries']]}
    monkeypatch.setattr(real, 'put_events', refuse)
    monkeypatch.setattr(work_store.time, 'sleep', lambda s: None)
    api.post('/api/projects', {'name': 'p', 'organizationId': org_id})
    stats = work.stream.poll_once()
    assert stats['failed'] == 1 and len(calls) >= 3            # three tries, then reported
    assert api.get("/api/events?filter=eventType=='projects.created'").json['totalElements'] == 0
    monkeypatch.undo()
    work.publish_outbox()                                      # read again from the failed record
    assert api.get("/api/events?filter=eventType=='projects.created'").json['totalElements'] >= 1


def test_recorded_events_publish_nothing_themselves(api, org_id, work):
    api.post('/api/projects', {'name': 'p', 'organizationId': org_id})
    work.publish_outbox()
    assert api.get("/api/events?filter=eventType=='projects.created'").json['totalElements'] >= 1
    types = [i['data']['eventType'] for i in outbox_items()]
    assert not any(t.startswith('events.') for t in types)


def test_actions_publish_their_own_names(api, org_id, work):
    from chalicelib.core.clock import now_iso
    api.post('/api/task-statuses', {'organizationId': org_id, 'label': 'Open', 'slug': 'open', 'statusType': 'OPEN'})
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't'}).json
    execution = api.post('/api/executions', {'projectId': project['id'], 'name': 'e'}).json
    marker = now_iso()
    assert api.put(f"/api/tasks/{task['id']}/status", {'statusSlug': 'open'}).status == 200
    assert api.post(f"/api/executions/{execution['id']}/cancel").status == 200
    assert api.post('/api/tasks/take-next', {'projectId': project['id']}).status == 200
    work.publish_outbox()   # the events ride on the records' own items (obx): published from the stream
    recorded = [e for e in api.get('/api/events?pageSize=100').json['content'] if e['occurredOn'] >= marker]
    assert [e['eventType'] for e in sorted(recorded, key=lambda e: e['occurredOn'])] == [
        'tasks.statusChanged', 'executions.cancelled', 'tasks.taken']
    assert api.get("/api/events?filter=eventType=='tasks.taken'").json['totalElements'] == 1


def test_an_update_names_its_action_by_a_parameter_on_both_update_paths(api, org_id, work):
    """The event name is an explicit parameter of kernel/crud.py ``update`` (issue 40: before, a
    context variable carried it): the one-UpdateItem path (a plain field) and the locked path
    (changeSequence) publish the action they are given, a plain PUT ``updated``."""
    from chalicelib.core.clock import now_iso
    from chalicelib.features.identity.bootstrap import SYSTEM
    from chalicelib.kernel import crud
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't'}).json
    marker = now_iso()
    crud.update('tasks', task['id'], {'description': 'plain'}, principal=SYSTEM, action='reviewed')
    crud.update('tasks', task['id'], {'description': 'locked', 'changeSequence': 2}, principal=SYSTEM,
                action='approved')
    assert api.put(f"/api/tasks/{task['id']}", {'description': 'by REST'}).status == 200
    work.publish_outbox()
    recorded = [e for e in api.get('/api/events?pageSize=100').json['content'] if e['occurredOn'] >= marker]
    assert [e['eventType'] for e in sorted(recorded, key=lambda e: e['occurredOn'])] == [
        'tasks.reviewed', 'tasks.approved', 'tasks.updated']
