"""Organization secrets in bridge headers: a value set in Secrets Manager (moto) reaches the
upstream and nothing else: no response, error, log record (captured at DEBUG, AWS clients
included) or table item (the test scans the whole table) holds it."""
from __future__ import annotations

import json
import logging
import time

import boto3
import pytest

from tests.bridging import configure, endpoint, make_bridge, project
from tests.conftest import make_org, make_user

SECRET = 'sk_live_7Hq2' + 'vX9pL3mK' * 4          # what must never be seen outside the upstream
BEARER = 'Bearer ${secrets.API_TOKEN}'


pytestmark = pytest.mark.usefixtures('net')   # tests/api/conftest.py: no packet leaves this machine


@pytest.fixture
def prj(api, org_id):
    return project(api, org_id)


def secret_name(org_id: str, name: str) -> str:
    from chalicelib.core.config import get_config
    return f'{get_config().org_secrets_prefix}{org_id}/{name}'


def set_secret(org_id: str, name: str, value: str) -> None:
    """Straight into Secrets Manager, as an operator would."""
    client = boto3.client('secretsmanager', region_name='us-east-1')
    try:
        client.create_secret(Name=secret_name(org_id, name), SecretString=value)
    except client.exceptions.ResourceExistsException:
        client.put_secret_value(SecretId=secret_name(org_id, name), SecretString=value)


def scan_table() -> str:
    from chalicelib.core.config import get_config
    pages = boto3.client('dynamodb', region_name='us-east-1').get_paginator('scan').paginate(
        TableName=get_config().table_name)
    return json.dumps([page['Items'] for page in pages])


def proxy(api, bridge, name, **kw):
    return api.get(f"/api/service-bridges/{bridge['id']}/proxy/{name}", **kw)


def test_names_follow_the_stage_prefix_and_the_organization():
    from chalicelib.core.config import reset_config
    from chalicelib.features.bridges import secrets
    reset_config()
    assert secrets.secret_id('org-1', 'API_TOKEN') == 'platform/local/org/org-1/API_TOKEN'


def test_a_secret_reaches_the_upstream_and_no_response_log_or_item(api, org_id, prj, reach, upstream, caplog):
    set_secret(org_id, 'API_TOKEN', SECRET)       # the operator's write is not the platform's logging
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    bridge = make_bridge(api, prj['id'], reach, [endpoint('echo', '/echo')], defaultHeaders={'Authorization': BEARER})
    r = proxy(api, bridge, 'echo')
    assert r.status == 200
    assert upstream.seen[-1].headers['authorization'] == f'Bearer {SECRET}'
    assert r.json['headers']['authorization'] == 'Bearer [secret API_TOKEN]'   # the echo, scrubbed
    seen = [r.body, json.dumps(r.headers).encode()]
    for path in (f"/api/service-bridges/{bridge['id']}", '/api/service-bridges', '/v3/api-docs'):
        got = api.get(path)
        assert got.status == 200
        seen.append(got.body)
    assert api.get(f"/api/service-bridges/{bridge['id']}").json['defaultHeaders'] == {'Authorization': BEARER}
    assert all(SECRET.encode() not in body for body in seen)
    assert SECRET not in scan_table()
    assert any(rec.name.startswith('botocore') for rec in caplog.records)     # AWS DEBUG logs were captured
    assert SECRET not in caplog.text
    assert all(SECRET not in rec.getMessage() for rec in caplog.records)


def test_an_echo_cut_inside_a_secret_loses_the_partial_value(api, org_id, prj, reach, upstream, monkeypatch):
    set_secret(org_id, 'API_TOKEN', SECRET)
    bridge = make_bridge(api, prj['id'], reach, [endpoint('echo', '/echo')],
                         defaultHeaders={'X-Token': '${secrets.API_TOKEN}'})
    full = proxy(api, bridge, 'echo').body
    # the upstream's echo holds the raw value where the scrubbed answer holds the mark: cut 10
    # characters into it
    configure(monkeypatch, BRIDGE_PROXY_MAX_BYTES=str(full.index(b'[secret API_TOKEN]') + 10))
    r = proxy(api, bridge, 'echo')
    assert r.headers['x-bridge-truncated'] == 'true'
    assert SECRET[:6].encode() not in r.body and r.body.endswith(b'[secret API_TOKEN]')


def test_a_missing_secret_is_400_naming_it(api, org_id, prj, reach, upstream):
    bridge = make_bridge(api, prj['id'], reach, [endpoint('echo', '/echo', headers={'X-Key': 'k=${secrets.NOPE}'})])
    r = proxy(api, bridge, 'echo')
    assert r.status == 400 and r.json['message'] == "secret 'NOPE' does not exist in this organization"
    assert upstream.seen == []


def test_secrets_belong_to_the_bridges_organization(api, org_id, prj, reach, upstream):
    other = make_org(api)
    set_secret(other['id'], 'API_TOKEN', 'value-of-another-organization')
    mine = make_bridge(api, prj['id'], reach, [endpoint('echo', '/echo')], defaultHeaders={'Authorization': BEARER})
    assert proxy(api, mine, 'echo').status == 400                   # the other organization's is not ours
    theirs = make_bridge(api, project(api, other['id'])['id'], reach, [endpoint('echo', '/echo')],
                         defaultHeaders={'Authorization': BEARER})
    assert proxy(api, theirs, 'echo').status == 200
    assert upstream.seen[-1].headers['authorization'] == 'Bearer value-of-another-organization'


def test_secret_values_are_cached_briefly(api, org_id, prj, reach, upstream, monkeypatch):
    from chalicelib.features.bridges import secrets
    configure(monkeypatch, ORG_SECRET_CACHE_SECONDS='0.5')
    reads = []
    secrets._client().meta.events.register('before-call.secrets-manager.GetSecretValue',
                                           lambda **kw: reads.append(1))
    set_secret(org_id, 'API_TOKEN', 'first-value')
    bridge = make_bridge(api, prj['id'], reach, [endpoint('echo', '/echo')], defaultHeaders={'Authorization': BEARER})
    for _ in range(3):
        assert proxy(api, bridge, 'echo').status == 200
    assert len(reads) == 1
    set_secret(org_id, 'API_TOKEN', 'second-value')
    proxy(api, bridge, 'echo')
    assert upstream.seen[-1].headers['authorization'] == 'Bearer first-value'     # still cached
    time.sleep(0.6)
    proxy(api, bridge, 'echo')
    assert upstream.seen[-1].headers['authorization'] == 'Bearer second-value'
    assert len(reads) == 2


def test_a_value_a_header_cannot_carry_is_400_without_the_value(api, org_id, prj, reach, upstream):
    set_secret(org_id, 'API_TOKEN', 'abc123\r\nX-Injected: yes')
    bridge = make_bridge(api, prj['id'], reach, [endpoint('echo', '/echo')], defaultHeaders={'Authorization': BEARER})
    r = proxy(api, bridge, 'echo')
    assert r.status == 400 and "header 'Authorization' cannot be sent" in r.json['message']
    assert 'abc123' not in r.body.decode() and upstream.seen == []


def test_an_unavailable_secrets_manager_is_503(api, org_id, prj, reach, upstream, monkeypatch):
    from botocore.exceptions import ClientError

    from chalicelib.features.bridges import secrets

    def throttled(**kw):
        raise ClientError({'Error': {'Code': 'ThrottlingException', 'Message': 'slow down'}}, 'GetSecretValue')
    monkeypatch.setattr(secrets._client(), 'get_secret_value', throttled)
    bridge = make_bridge(api, prj['id'], reach, [endpoint('echo', '/echo')], defaultHeaders={'Authorization': BEARER})
    r = proxy(api, bridge, 'echo')
    assert r.status == 503
    assert r.json['message'] == 'secret API_TOKEN could not be read (ThrottlingException); retry later'
    assert upstream.seen == []


def test_only_managers_decide_where_a_secret_goes(api, org_id, prj, users):
    member = api.as_key(users['MEMBER'])
    manager = api.as_key(users['MANAGE'])
    body = {'projectId': prj['id'], 'name': 'pay', 'baseUrl': 'https://pay.example.com',
            'defaultHeaders': {'Authorization': BEARER}, 'endpoints': [{'name': 'charge', 'method': 'POST'}]}
    refused = member.post('/api/service-bridges', body)
    assert refused.status == 403 and 'organization:manage' in refused.json['message']
    made = manager.post('/api/service-bridges', body)
    assert made.status == 201
    path = f"/api/service-bridges/{made.json['id']}"
    assert member.put(path, {'baseUrl': 'https://attacker.example'}).status == 403
    assert member.put(path, {'endpoints': [{'name': 'x', 'defaultHeaders': {'X-K': '${secrets.OTHER}'}}]}).status == 403
    assert member.put(path, {'name': 'payments', 'agentCallable': True,
                             'endpoints': [{'name': 'refund', 'method': 'POST', 'path': '/refunds'}]}).status == 200
    assert member.put(path, {'defaultHeaders': {}}).status == 200       # taking the secret out is fine
    assert member.put(path, {'baseUrl': 'https://elsewhere.example'}).status == 200   # nothing to leak now
    # plain bridges are everyone's to write
    assert member.post('/api/service-bridges', {**body, 'name': 'plain', 'defaultHeaders': {'X-A': 'b'}}).status == 201


def test_debug_logging_of_a_secret_write_and_read_prints_no_value(aws, caplog):
    from chalicelib.features.bridges import secrets
    caplog.set_level(logging.DEBUG)
    secrets.put_org_secret('org-9', 'K', SECRET)
    assert secrets.read_org_secret('org-9', 'K') == SECRET
    secrets.reset()
    assert secrets.read_org_secret('org-9', 'K') == SECRET
    assert secrets.read_org_secret('org-9', 'MISSING') is None
    logging.getLogger('botocore.endpoint').debug('still logging after the call')
    assert 'still logging after the call' in caplog.text
    assert SECRET not in caplog.text


def test_the_member_of_another_organization_cannot_use_our_secrets(api, org_id, prj, reach, upstream):
    set_secret(org_id, 'API_TOKEN', SECRET)
    bridge = make_bridge(api, prj['id'], reach, [endpoint('echo', '/echo')], defaultHeaders={'Authorization': BEARER})
    other = make_org(api)
    _, key = make_user(api, other['id'], 'MANAGE')
    assert proxy(api, bridge, 'echo', key=key).status == 404
    # a bridge of their own naming our secret finds nothing: names are scoped to the bridge's organization
    theirs = make_bridge(api.as_key(key), project(api.as_key(key), other['id'])['id'], reach,
                         [endpoint('echo', '/echo')], defaultHeaders={'Authorization': BEARER})
    assert proxy(api, theirs, 'echo', key=key).status == 400
    assert upstream.seen == []
