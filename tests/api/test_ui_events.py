"""POST /api/events/ui/batch: limits, the presence gate and its 60 s cache, what is stamped and
what is dropped (never a raw address, keystrokes, pointer coordinates or scroll positions), and
who reads the stored events (MANAGE only, by id and in lists; domain events unchanged)."""
from __future__ import annotations

import hashlib
import hmac
import json

import boto3
import pytest

from tests.bridging import configure
from tests.conftest import make_org, make_user

BATCH = '/api/events/ui/batch'
HASH_KEY = 'test-client-ip-hash-key-0123456789'


@pytest.fixture(autouse=True)
def hash_key(api, monkeypatch):
    configure(monkeypatch, CLIENT_IP_HASH_KEY=HASH_KEY)


def ev(kind='ui.error', payload=None, occurred='2026-11-20T10:00:00Z'):
    out = {'kind': kind, 'payload': payload if payload is not None else {'code': 'E1'}}
    if occurred is not None:
        out['occurredAt'] = occurred
    return out


def ui_events(api, **kw) -> list[dict]:
    r = api.get("/api/events?pageSize=100&filter=eventType=like='ui.*'", **kw)
    assert r.status == 200, r.json
    return r.json['content']


def set_presence(api, org_id, enabled) -> None:
    assert api.put(f'/api/organizations/{org_id}', {'features': {'presenceTrackingEnabled': enabled}}).status == 200


def scan_table() -> str:
    from chalicelib.core.config import get_config
    pages = boto3.client('dynamodb', region_name='us-east-1').get_paginator('scan').paginate(
        TableName=get_config().table_name)
    return json.dumps([page['Items'] for page in pages])


def test_a_batch_is_stored_stamped_and_hashed(api, org_id):
    r = api.post(BATCH, {'events': [ev('ui.error', {'message': 'boom', 'stack': ['a', 'b']}), ev('ui.route.changed')]},
                 headers={'X-Forwarded-For': '198.51.100.23, 10.0.0.1'})
    assert r.status == 200 and r.json == {'accepted': 2, 'dropped': 0}
    stored = sorted(ui_events(api), key=lambda e: e['eventType'])
    assert [e['eventType'] for e in stored] == ['ui.error', 'ui.route.changed']
    first = stored[0]
    assert first['payload'] == {'message': 'boom', 'stack': ['a', 'b']}
    assert first['occurredOn'] == '2026-11-20T10:00:00.000000Z'
    assert first['userEmail'] == 'admin@example.com' and first['source'] == 'ui'
    assert first['organizationId'] == org_id
    expected = hmac.new(HASH_KEY.encode(), b'198.51.100.23', hashlib.sha256).hexdigest()
    assert first['clientIpHash'] == expected
    table = scan_table()
    assert '198.51.100.23' not in table and '10.0.0.1' not in table


def test_without_a_forwarded_address_the_source_address_is_hashed(api):
    api.post(BATCH, {'events': [ev()]})
    (event,) = ui_events(api)
    assert event['clientIpHash'] == hmac.new(HASH_KEY.encode(), b'127.0.0.1', hashlib.sha256).hexdigest()


def test_an_address_of_api_gateway_is_never_replaced_by_x_forwarded_for():
    from chalicelib.kernel.http import request as http

    class Req:
        context = {'identity': {'sourceIp': '203.0.113.7'}}
        headers = {'x-forwarded-for': '198.51.100.1'}

    class App:
        current_request = Req()
    http.bind(App())
    try:
        assert http.client_address() == '203.0.113.7'
        Req.context = {'identity': {'sourceIp': '127.0.0.1'}}
        assert http.client_address() == '198.51.100.1'
        Req.headers = {}
        assert http.client_address() == '127.0.0.1'
    finally:
        import app
        http.bind(app.app)


def test_occurred_at_defaults_to_receipt_and_payload_to_empty(api):
    assert api.post(BATCH, {'events': [{'kind': 'ui.opened'}]}).json == {'accepted': 1, 'dropped': 0}
    (event,) = ui_events(api)
    assert event['payload'] == {} and event['occurredOn'] <= event['createdOn']


@pytest.mark.parametrize('body,says', [
    ({'events': [ev()] * 101}, 'at most 100 events (101 sent)'),
    ({'events': [ev(), ev('task.opened')]}, "events[1].kind must start with 'ui.'"),
    ({'events': [ev('UI.error')]}, "must start with 'ui.'"),
    ({'events': [ev('ui.')]}, "events[0].kind must be 'ui.'"),
    ({'events': [ev('ui.a b')]}, "events[0].kind must be 'ui.'"),
    ({'events': [{'kind': 5}]}, "must start with 'ui.'"),
    ({'events': [ev(occurred='yesterday')]}, 'events[0].occurredAt must be an ISO 8601 date-time'),
    ({'events': [ev(payload=[1, 2])]}, 'events[0].payload must be an object'),
    ({'events': ['ui.error']}, 'events[0] must be an object'),
    ({'events': {'kind': 'ui.error'}}, "Field 'events' is required"),
    ({}, "Field 'events' is required"),
    ({'events': [ev()], 'organizationId': 'nope'}, "'organizationId' refers to an organization that does not exist"),
])
def test_a_bad_batch_is_400_and_stores_nothing(api, body, says):
    r = api.post(BATCH, body)
    assert r.status == 400 and says in r.json['message'], r.json
    assert ui_events(api) == []


def test_exactly_100_events_are_stored_in_chunks_and_counted(api):
    r = api.post(BATCH, {'events': [ev(payload={'n': i}) for i in range(100)]})
    assert r.json == {'accepted': 100, 'dropped': 0}
    page = api.get('/api/events?pageSize=10').json
    assert page['totalElements'] == 100
    assert sorted(e['payload']['n'] for e in ui_events(api)) == list(range(100))


def test_a_retried_batch_is_stored_once(api):
    batch = {'events': [ev(payload={'n': i}) for i in range(60)]}
    assert api.post(BATCH, batch).json == {'accepted': 60, 'dropped': 0}
    assert api.post(BATCH, batch).json == {'accepted': 60, 'dropped': 0}
    assert len(ui_events(api)) == 60
    assert api.get('/api/events').json['totalElements'] == 60
    assert api.post(BATCH, {'events': [ev(payload={'n': 999})]}).json['accepted'] == 1
    assert len(ui_events(api)) == 61


def test_a_half_written_batch_is_finished_by_its_retry(api, monkeypatch):
    from chalicelib.features.events import ui_events as service
    from chalicelib.kernel import records
    real, calls = records.commit, []

    def second_chunk_fails(ops):
        calls.append(len(ops))
        if len(calls) == 2:
            raise RuntimeError('the second transaction is lost')
        real(ops)
    monkeypatch.setattr(service.records, 'commit', second_chunk_fails)
    batch = {'events': [ev(payload={'n': i}) for i in range(80)]}
    assert api.post(BATCH, batch).status == 500
    assert len(ui_events(api)) == service.CHUNK                       # the first chunk only
    assert api.post(BATCH, batch).json == {'accepted': 80, 'dropped': 0}
    assert len(ui_events(api)) == 80 and api.get('/api/events').json['totalElements'] == 80


GATED = ['ui.presence.heartbeat', 'ui.task.opened', 'ui.task_group.opened']


def test_presence_and_task_kinds_need_the_organizations_flag(api, org_id):
    batch = {'events': [ev(kind, {'active': True}) for kind in GATED] + [ev('ui.error')]}
    assert api.post(BATCH, batch).json == {'accepted': 1, 'dropped': 3}
    assert [e['eventType'] for e in ui_events(api)] == ['ui.error']


@pytest.mark.parametrize('flag', [False, 'true', 1, None, {'on': True}])
def test_only_a_true_flag_enables_them(api, org_id, flag):
    if flag is not None:
        set_presence(api, org_id, flag)
    r = api.post(BATCH, {'events': [ev('ui.presence.heartbeat')]})
    assert (r.status, r.json) == (200, {'accepted': 0, 'dropped': 1})


def test_the_flag_is_read_through_a_60_second_cache(api, org_id, monkeypatch):
    from chalicelib.features.events import ui_events as service
    now = [1000.0]
    monkeypatch.setattr(service.presence_cache, 'clock', lambda: now[0])
    set_presence(api, org_id, True)

    def heartbeat(minute):   # a new beat each time (the same batch twice is stored once)
        return {'events': [ev('ui.presence.heartbeat', {'active': True, 'visibility': 'visible', 'interval': 120},
                              occurred=f'2026-11-20T10:{minute:02d}:00Z')]}
    assert api.post(BATCH, heartbeat(1)).json == {'accepted': 1, 'dropped': 0}
    set_presence(api, org_id, False)
    now[0] += 59
    assert api.post(BATCH, heartbeat(2)).json == {'accepted': 1, 'dropped': 0}   # still the cached true
    now[0] += 2
    assert api.post(BATCH, heartbeat(3)).json == {'accepted': 0, 'dropped': 1}
    set_presence(api, org_id, True)
    assert api.post(BATCH, heartbeat(4)).json == {'accepted': 0, 'dropped': 1}   # the cached false
    stored = [e for e in ui_events(api) if e['eventType'] == 'ui.presence.heartbeat']
    assert len(stored) == 2 and stored[0]['payload'] == {'active': True, 'visibility': 'visible', 'interval': 120}


def test_a_failed_flag_lookup_counts_as_disabled(api, org_id, monkeypatch):
    from chalicelib.features.events import ui_events as service
    set_presence(api, org_id, True)

    def broken(*args, **kwargs):
        raise RuntimeError('DynamoDB is unreachable')
    monkeypatch.setattr(service.table, 'get', broken)
    assert service.presence_enabled(org_id) is False
    assert service.presence_enabled('') is False and service.presence_enabled(None) is False
    monkeypatch.undo()
    configure(monkeypatch, CLIENT_IP_HASH_KEY=HASH_KEY)
    assert service.presence_enabled(org_id) is True        # the failure was not cached


def test_payloads_lose_addresses_keystrokes_pointers_and_scrolls(api):
    payload = {
        'message': 'kept', 'durationMs': 120, 'visibility': 'hidden', 'active': True,
        'ip': '1.2.3.4', 'clientIp': 'x', 'ipAddress': 'x', 'remote_addr': 'x', 'X-Forwarded-For': 'x',
        'peer': '203.0.113.5', 'server': '[2001:db8::1]:443', 'clientIpHash': 'forged',
        'key': 'a', 'keyCode': 65, 'keystrokes': ['h', 'i'], 'typed': 'secret text',
        'clientX': 10, 'pageY': 20, 'x': 1, 'y': 2, 'mousePosition': {'a': 1}, 'cursor': 'pointer',
        'scrollTop': 300, 'scroll_y': 4, 'scrollPercent': 0.5,
        'nested': {'list': [{'screenX': 1, 'label': 'ok'}, '10.0.0.8', 'text'], 'remoteAddress': '::1'},
    }
    api.post(BATCH, {'events': [ev('ui.error', payload)]})
    (event,) = ui_events(api)
    assert event['payload'] == {'message': 'kept', 'durationMs': 120, 'visibility': 'hidden', 'active': True,
                                'nested': {'list': [{'label': 'ok'}, 'text']}}
    assert event['clientIpHash'] != 'forged'
    assert '203.0.113.5' not in scan_table()


def test_a_caller_of_several_organizations_names_one(api, org_id):
    other = make_org(api)      # the admin now manages two organizations
    r = api.post(BATCH, {'events': [ev()]})
    assert r.status == 400 and "'organizationId' is required" in r.json['message']
    assert api.post(BATCH, {'events': [ev()], 'organizationId': other['id']}).json['accepted'] == 1
    (event,) = ui_events(api)
    assert event['organizationId'] == other['id']


def test_an_organization_the_caller_is_not_in_is_refused(api, org_id, users):
    other = make_org(api)
    r = api.post(BATCH, {'events': [ev()], 'organizationId': other['id']}, key=users['MEMBER'])
    assert r.status == 400


def test_a_caller_without_organization_has_everything_dropped(api):
    from chalicelib.core.principal import Principal
    from chalicelib.features.events import ui_events as service
    lonely = Principal(user_id='u', email='lonely@example.com', memberships={}, platform_admin=False)
    assert service.record_batch({'events': [ev(), ev('ui.task.opened')]}, principal=lonely,
                                client_address='198.51.100.1') == {'accepted': 0, 'dropped': 2}


def test_every_member_sends_and_only_managers_read(api, org_id, users):
    for role in ('VIEWER', 'MEMBER', 'MANAGE'):
        r = api.post(BATCH, {'events': [ev('ui.error', {'by': role})]}, key=users[role])
        assert r.json == {'accepted': 1, 'dropped': 0}, role
    domain = api.post('/api/events', {'organizationId': org_id, 'eventType': 'tasks.updated', 'payload': {'k': 1}})
    assert domain.status == 201
    managed = api.get('/api/events?pageSize=100', key=users['MANAGE']).json
    assert managed['totalElements'] == 4
    assert {e['payload'].get('by') for e in managed['content'] if e['eventType'] == 'ui.error'} == {
        'VIEWER', 'MEMBER', 'MANAGE'}
    some_ui = next(e for e in managed['content'] if e['eventType'] == 'ui.error')
    filtered = api.get("/api/events?filter=eventType=='ui.error'", key=users['MANAGE']).json
    assert filtered['totalElements'] == 3
    for role in ('VIEWER', 'MEMBER'):
        listed = api.get('/api/events?pageSize=100', key=users[role]).json
        assert [e['eventType'] for e in listed['content']] == ['tasks.updated'], role
        assert listed['totalElements'] == 1
        assert api.get(f"/api/events/{some_ui['id']}", key=users[role]).status == 404
        assert api.get(f"/api/events/{domain.json['id']}", key=users[role]).status == 200
    assert api.get(f"/api/events/{some_ui['id']}", key=users['MANAGE']).json['userEmail']


def test_a_manager_of_one_organization_reads_only_its_ui_events(api, org_id, users):
    other = make_org(api)
    member_here, key = make_user(api, org_id, 'MEMBER')
    assert api.post('/api/memberships', {'organizationId': other['id'], 'userId': member_here['id'],
                                         'role': 'MANAGE'}).status == 201
    api.post(BATCH, {'events': [ev('ui.here')], 'organizationId': org_id})
    api.post(BATCH, {'events': [ev('ui.there')], 'organizationId': other['id']})
    seen = api.get('/api/events?pageSize=100', key=key).json['content']
    assert [e['eventType'] for e in seen] == ['ui.there']


def test_ui_events_are_written_only_by_the_batch_route(api, org_id, users):
    r = api.post('/api/events', {'organizationId': org_id, 'eventType': 'ui.error', 'payload': {}})
    assert r.status == 400 and 'POST /api/events/ui/batch' in r.json['message']
    domain = api.post('/api/events', {'organizationId': org_id, 'eventType': 'tasks.created'}).json
    assert api.put(f"/api/events/{domain['id']}", {'eventType': 'ui.fake'}).status == 400
    api.post(BATCH, {'events': [ev()]})
    (event,) = ui_events(api)
    r = api.put(f"/api/events/{event['id']}", {'payload': {'changed': True}})
    assert r.status == 403
    assert api.delete(f"/api/events/{event['id']}", key=users['MEMBER']).status == 404
    assert api.delete(f"/api/events/{event['id']}", key=users['MANAGE']).status == 204
    assert ui_events(api) == []
    created = api.post('/api/events', {'organizationId': org_id, 'eventType': 'x', 'clientIpHash': 'forged',
                                       'userEmail': 'forged@example.com'}).json
    assert 'clientIpHash' not in created and 'userEmail' not in created
