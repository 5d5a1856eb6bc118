"""The service bridge proxy end to end: /api/service-bridges/{id}/proxy[/{endpointName}] through
the egress fence to an upstream on loopback that only the allowlist makes reachable.

Every test runs under the network guard (tests/netguard.py): a lookup the test did not answer,
or a connection anywhere but loopback, fails the test, so no case can send a packet off this
machine even if the fence were broken."""
from __future__ import annotations

import json
import logging
import time
import uuid
from urllib.parse import quote

import pytest

from tests.bridging import UPSTREAM_HOST, configure, endpoint, make_bridge, project
from tests.conftest import make_org, make_user

PREFIX = 'service bridge egress denied: '


pytestmark = pytest.mark.usefixtures('net')   # tests/api/conftest.py: no packet leaves this machine


@pytest.fixture
def prj(api, org_id):
    return project(api, org_id)


def proxy(api, bridge, name=None, method='GET', query='', body=None, **kw):
    path = f"/api/service-bridges/{bridge['id']}/proxy" + (f'/{name}' if name is not None else '') + query
    return api.call(method, path, body, **kw)


# ----------------------------------------------------------------------------- the fence, end to end

def test_a_loopback_upstream_is_reachable_only_through_the_allowlist(api, prj, upstream, net, monkeypatch):
    bridge = make_bridge(api, prj['id'], upstream.url(''), [endpoint('hello', '/hello')])
    denied = proxy(api, bridge, 'hello')
    assert denied.status == 400
    assert denied.json == {'error': 'Bad Request', 'status': 400,
                           'message': PREFIX + '127.0.0.1 is a loopback address'}
    assert upstream.seen == [] and net.connects == []

    configure(monkeypatch, BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST='127.0.0.1')
    ok = proxy(api, bridge, 'hello')
    assert (ok.status, ok.body) == (200, b'hello')
    assert ok.headers['content-type'].startswith('text/plain')
    assert ok.headers['x-bridge-upstream-status'] == '200'
    assert net.connects == [('127.0.0.1', upstream.port)]


@pytest.mark.parametrize('final,why', [
    ('http://127.0.0.1:{port}/hello', '127.0.0.1 is a loopback address'),
    ('http://169.254.169.254/latest/meta-data/iam/', '169.254.169.254 is a link-local address'),
    ('http://[fd00:ec2::254]/latest/meta-data/', 'fd00:ec2::254 is a unique local address'),
    ('http://metadata.example.test/computeMetadata/v1/', 'resolves to 169.254.169.254, a link-local'),
    ('http://0x7f000001:{port}/hello', '0x7f000001 is 127.0.0.1, a loopback'),
    ('http://localhost:{port}/hello', 'localhost is a local host name'),
])
def test_a_redirect_to_an_internal_target_is_denied(api, prj, reach, upstream, net, final, why, caplog,
                                                     monkeypatch):
    from chalicelib.core import observability
    counted = []
    monkeypatch.setattr(observability, 'count', lambda name, *a, **kw: counted.append(name))
    net.resolve('metadata.example.test', ['169.254.169.254'])
    target = quote(final.format(port=upstream.port), safe='')
    bridge = make_bridge(api, prj['id'], reach, [endpoint('go', f'/redirect?via=2&to={target}')])
    with caplog.at_level(logging.WARNING, logger='platform-api.bridges'):
        r = proxy(api, bridge, 'go')
    assert r.status == 400, r.json
    assert r.json['message'].startswith(PREFIX) and why in r.json['message']
    assert len(upstream.seen) == 3                    # three hops on the allowed host, the fourth refused
    assert set(net.connects) == {('127.0.0.1', upstream.port)}
    denials = [rec for rec in caplog.records if rec.name == 'platform-api.bridges']
    assert len(denials) == 1 and bridge['id'] in denials[0].getMessage() and why in denials[0].getMessage()
    assert counted.count('EgressDenied') == 1


@pytest.mark.parametrize('base_url,why', [
    ('http://169.254.169.254', '169.254.169.254 is a link-local address'),
    ('http://[::ffff:10.0.0.1]:8080', 'IPv4-mapped form of 10.0.0.1'),
    ('http://2130706433', '2130706433 is 127.0.0.1'),
    ('https://internal.example.test', 'internal.example.test resolves to 10.1.2.3, a private address'),
    ('https://192.0.2.10/v1', '192.0.2.10 is a documentation address'),
])
def test_internal_base_urls_are_denied_before_any_connection(api, prj, net, base_url, why):
    net.resolve('internal.example.test', ['93.184.215.14', '10.1.2.3'])
    bridge = make_bridge(api, prj['id'], base_url, [endpoint('x', '/x')])
    r = proxy(api, bridge, 'x')
    assert r.status == 400 and r.json['message'].startswith(PREFIX)
    assert why in r.json['message']
    assert net.connects == []


def test_the_deadline_is_a_504_with_our_error_body(api, prj, reach, monkeypatch):
    configure(monkeypatch, BRIDGE_PROXY_TIMEOUT_SECONDS='0.5')
    bridge = make_bridge(api, prj['id'], reach, [endpoint('slow', '/sleep?s=5'), endpoint('drip', '/drip')])
    for name in ('slow', 'drip'):
        started = time.monotonic()
        r = proxy(api, bridge, name)
        assert time.monotonic() - started < 3
        assert r.status == 504
        assert r.json == {'error': 'Gateway Timeout', 'status': 504,
                          'message': 'the upstream did not answer within 0.5 s'}


def test_the_default_deadline_is_30_seconds():
    from chalicelib.core.config import get_config, reset_config
    reset_config()
    assert get_config().bridge_timeout_seconds == 30.0
    assert get_config().bridge_max_bytes == 5 * 2 ** 20


def test_an_answer_over_the_cap_is_cut_and_marked_truncated(api, prj, reach, monkeypatch):
    configure(monkeypatch, BRIDGE_PROXY_MAX_BYTES='1000')
    bridge = make_bridge(api, prj['id'], reach, [endpoint('big', '/bytes?n=5000'), endpoint('small', '/bytes?n=1000'),
                                                endpoint('endless', '/endless')])
    big = proxy(api, bridge, 'big')
    assert big.status == 200 and big.body == b'x' * 1000
    assert big.headers['x-bridge-truncated'] == 'true'
    assert big.headers['content-type'].startswith('text/plain')
    small = proxy(api, bridge, 'small')
    assert small.body == b'x' * 1000 and 'x-bridge-truncated' not in small.headers
    endless = proxy(api, bridge, 'endless')
    assert len(endless.body) == 1000 and endless.headers['x-bridge-truncated'] == 'true'


def test_json_cut_by_the_cap_comes_back_as_text(api, prj, reach, monkeypatch):
    configure(monkeypatch, BRIDGE_PROXY_MAX_BYTES='10')
    body = quote(json.dumps({'items': list(range(20))}), safe='')
    bridge = make_bridge(api, prj['id'], reach, [endpoint('list', f'/status?body={body}')])
    r = proxy(api, bridge, 'list')
    assert r.status == 200 and r.body == b'{"items": '
    assert r.headers['content-type'].startswith('text/plain') and r.headers['x-bridge-truncated'] == 'true'


def test_an_unreachable_upstream_is_a_502(api, prj, net, monkeypatch):
    import socket
    with socket.socket() as closed:
        closed.bind(('127.0.0.1', 0))
        port = closed.getsockname()[1]
    configure(monkeypatch, BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST='127.0.0.1')
    bridge = make_bridge(api, prj['id'], f'http://127.0.0.1:{port}', [endpoint('x', '/x')])
    r = proxy(api, bridge, 'x')
    assert r.status == 502 and r.json['message'] == 'could not connect to 127.0.0.1: Connection refused'


# ----------------------------------------------------------------------------- what is sent and what comes back

def test_the_declared_method_path_query_body_and_headers_reach_the_upstream(api, prj, reach, upstream):
    bridge = make_bridge(api, prj['id'], reach + '/echo/', [
        endpoint('create', '/tickets', 'POST', headers={'X-Trace': 'endpoint', 'Accept': 'application/json'})],
        defaultHeaders={'X-Trace': 'bridge', 'X-Tenant': 'acme'})
    r = proxy(api, bridge, 'create', method='PUT', query='?a=1&b=x&b=y&empty=', body={'title': 't', 'n': 0},
              headers={'X-Forwarded-For': '203.0.113.9', 'Authorization': 'Bearer caller-token'})
    assert r.status == 200 and r.headers['content-type'] == 'application/json'
    echo = r.json
    assert echo['method'] == 'POST'                               # the endpoint's method, not the caller's
    assert echo['path'] == '/echo/tickets?a=1&b=x&b=y&empty='
    assert json.loads(echo['body']) == {'title': 't', 'n': 0}
    sent = echo['headers']
    assert sent['x-trace'] == 'endpoint' and sent['x-tenant'] == 'acme'   # the endpoint's header wins
    assert sent['host'] == f'{UPSTREAM_HOST}:{upstream.port}' and sent['accept'] == 'application/json'
    assert sent['content-type'] == 'application/json'
    for caller_header in ('x-api-key', 'authorization', 'x-forwarded-for'):
        assert caller_header not in sent                          # nothing of the caller's request


def test_a_get_endpoint_is_sent_no_body(api, prj, reach, upstream):
    bridge = make_bridge(api, prj['id'], reach, [endpoint('read', '/echo', 'GET')])
    r = proxy(api, bridge, 'read', method='POST', body={'ignored': True})
    assert r.json['method'] == 'GET' and r.json['body'] == ''


@pytest.mark.parametrize('code,kind,body', [
    (404, 'application/json', '{"detail": "no such customer"}'),
    (418, 'text/plain', "I'm a teapot"),
    (503, 'application/problem+json', '{"title": "down"}'),
    (201, 'text/csv', 'a,b\n1,2'),
])
def test_the_upstream_status_and_body_pass_through(api, prj, reach, code, kind, body):
    bridge = make_bridge(api, prj['id'], reach, [endpoint('s', '/status')])
    r = proxy(api, bridge, 's', query=f'?code={code}&type={quote(kind)}&body={quote(body)}')
    assert r.status == code and r.body.decode() == body
    assert r.headers['x-bridge-upstream-status'] == str(code)
    assert r.headers['content-type'] == ('application/json' if 'json' in kind else f'{kind}; charset=utf-8')


# ----------------------------------------------------------------------------- endpoints and required fields

def test_missing_required_fields_answer_an_empty_list_without_calling(api, prj, reach, upstream):
    bridge = make_bridge(api, prj['id'], reach, [endpoint('find', '/echo', 'POST', required=['customerId', 'kind'])])
    for query, body in (('', None), ('', {'customerId': 'c1'}), ('?kind=a', None),
                        ('?customerId=c1', {'kind': None}), ('', {'customerId': 'c', 'other': 1})):
        r = proxy(api, bridge, 'find', method='POST', query=query, body=body)
        assert (r.status, r.json) == (200, []), (query, body)
        assert 'x-bridge-upstream-status' not in r.headers
    assert upstream.seen == []
    # presence counts: "", 0 and false satisfy, from the body or the query string
    for query, body in (('?customerId=&kind=', None), ('', {'customerId': 0, 'kind': False}),
                        ('?kind=a', {'customerId': ''})):
        r = proxy(api, bridge, 'find', method='POST', query=query, body=body)
        assert r.status == 200 and r.json['method'] == 'POST', (query, body)
    assert len(upstream.seen) == 3


def test_unknown_endpoint_names_are_400_listing_the_names(api, prj, reach, upstream):
    bridge = make_bridge(api, prj['id'], reach, [endpoint('alpha', '/hello'), endpoint('beta', '/hello')])
    r = proxy(api, bridge, 'gamma')
    assert r.status == 400 and "'alpha'" in r.json['message'] and "'beta'" in r.json['message']
    assert 'gamma' in r.json['message']
    r = proxy(api, bridge)
    assert r.status == 400 and "'alpha', 'beta'" in r.json['message']
    assert proxy(api, bridge, 'ALPHA').status == 400                 # names are matched exactly
    single = make_bridge(api, prj['id'], reach, [endpoint('only', '/hello')], name='single')
    for method in ('GET', 'POST', 'PUT', 'PATCH', 'DELETE'):
        r = proxy(api, single, method=method)
        assert (r.status, r.body) == (200, b'hello'), method
    empty = make_bridge(api, prj['id'], reach, [], name='empty')
    r = proxy(api, empty)
    assert r.status == 400 and 'none' in r.json['message']


def test_a_missing_or_foreign_bridge_is_404(api, prj, reach):
    assert proxy(api, {'id': str(uuid.uuid4())}, 'x').status == 404
    assert proxy(api, {'id': 'not-a-uuid'}, 'x').status == 400
    other = make_org(api)
    bridge = make_bridge(api, project(api, other['id'])['id'], reach, [endpoint('x', '/hello')])
    _, outsider = make_user(api, make_org(api)['id'], 'MANAGE')
    r = proxy(api, bridge, 'x', key=outsider)
    assert r.status == 404


def test_calling_needs_read_for_get_and_write_for_everything_else(api, prj, org_id, reach, users, upstream):
    bridge = make_bridge(api, prj['id'], reach, [endpoint('read', '/hello', 'GET'),
                                                endpoint('write', '/hello', 'POST')])
    viewer, member = users['VIEWER'], users['MEMBER']
    assert proxy(api, bridge, 'read', key=viewer).status == 200
    for name, method in (('write', 'GET'), ('read', 'POST'), ('read', 'DELETE'), ('write', 'PUT')):
        r = proxy(api, bridge, name, method=method, key=viewer)
        assert r.status == 403, (name, method, r.json)
    assert proxy(api, bridge, 'nope', method='POST', key=viewer).status == 403   # before naming endpoints
    for name, method in (('write', 'GET'), ('read', 'POST'), ('write', 'PATCH')):
        assert proxy(api, bridge, name, method=method, key=member).status == 200
    assert len(upstream.seen) == 4


# ----------------------------------------------------------------------------- the shapes, on write

@pytest.mark.parametrize('change,says', [
    ({'baseUrl': 'ftp://files.example.com'}, 'http or https'),
    ({'baseUrl': 'example.com/api'}, 'http or https'),
    ({'baseUrl': 'https://user:pw@example.com'}, 'credentials'),
    ({'baseUrl': 'https://example.com/api?key=1'}, 'query'),
    ({'baseUrl': 'https://exa mple.com'}, 'spaces'),
    ({'baseUrl': 'https://example.com/${secrets.X}'}, 'secrets go in defaultHeaders'),
    ({'endpoints': [{'name': 'a', 'method': 'TRACE'}]}, 'method must be one of GET, POST, PUT, PATCH, DELETE'),
    ({'endpoints': [{'name': 'a', 'method': 'get'}]}, 'method must be one of'),
    ({'endpoints': [{'name': 'a'}, {'name': 'b'}, {'name': 'A'}]}, "duplicate endpoint name 'A'"),
    ({'endpoints': [{'name': 'a', 'path': '.evil.example/x'}]}, "path must be empty or start with '/'"),
    ({'endpoints': [{'name': 'a b'}]}, 'name of letters'),
    ({'endpoints': [{'name': 'a', 'verb': 'GET'}]}, "unknown field 'verb'"),
    ({'endpoints': [{'name': 'a', 'requestSchema': {'required': 'id'}}]}, 'requestSchema.required'),
    ({'endpoints': ['lookup']}, 'must be an object'),
    ({'defaultHeaders': {'Authorization': {'secretRef': 'stripe'}}},
     "header 'Authorization' is configured with secretRef"),
    ({'endpoints': [{'name': 'a', 'defaultHeaders': {'X-Key': {'secretRef': 'k'}}}]},
     "endpoint 'a': header 'X-Key' is configured with secretRef"),
    ({'defaultHeaders': {'X-Key': '${env.HOME}'}}, 'only ${secrets.NAME} can be interpolated'),
    ({'defaultHeaders': {'X-Key': '${secrets.a/../b}'}}, 'not a valid secret name'),
    ({'defaultHeaders': {'Host': 'evil.example'}}, "header 'Host' is set by the platform"),
    ({'defaultHeaders': {'Bad Name': 'x'}}, 'not a valid header name'),
    ({'defaultHeaders': {'X-A': 'line\r\nX-Injected: 1'}}, "header 'X-A' has a value with control characters"),
    ({'defaultHeaders': {'X-A': 3}}, "header 'X-A' must have a string value"),
])
def test_bridges_are_validated_on_write(api, prj, change, says):
    body = {'projectId': prj['id'], 'name': 'b', 'baseUrl': 'https://api.example.com', **change}
    r = api.post('/api/service-bridges', body)
    assert r.status == 400, r.json
    assert says in r.json['message'], r.json['message']
    good = api.post('/api/service-bridges', {'projectId': prj['id'], 'name': 'g', 'baseUrl': 'https://api.example.com',
                                             'slug': f's-{uuid.uuid4().hex[:8]}'})
    assert good.status == 201
    r = api.put(f"/api/service-bridges/{good.json['id']}", change)
    assert r.status == 400 and says in r.json['message']


def test_endpoints_are_stored_with_their_defaults(api, prj):
    made = api.post('/api/service-bridges', {'projectId': prj['id'], 'name': 'b', 'baseUrl': 'https://api.example.com',
                                             'endpoints': [{'name': 'lookup'}]}).json
    assert made['endpoints'] == [{'name': 'lookup', 'method': 'GET', 'path': '', 'defaultHeaders': {}}]
    assert made['agentCallable'] is False
    again = api.put(f"/api/service-bridges/{made['id']}", api.get(f"/api/service-bridges/{made['id']}").json)
    assert again.status == 200 and again.json['endpoints'] == made['endpoints']


def test_a_header_stored_with_secret_ref_is_refused_on_call_too(api, prj, reach, upstream):
    """A record written around the API (an older version, a migration) is still not sent."""
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family
    from chalicelib.kernel.store import table
    bridge = make_bridge(api, prj['id'], reach, [endpoint('x', '/hello')])
    stored = table.get('service-bridges', bridge['id'])
    legacy = {**stored.data, 'defaultHeaders': {'X-Api-Key': {'secretRef': 'legacy-key'}},
              'changeSequence': stored.seq + 1}
    from chalicelib.features.identity.bootstrap import SYSTEM
    records.commit(records.update_ops(family('service-bridges'), legacy, stored, principal=SYSTEM))
    r = proxy(api, bridge, 'x')
    assert r.status == 400 and "header 'X-Api-Key' is configured with secretRef" in r.json['message']
    assert upstream.seen == []


def test_the_openapi_document_declares_the_bridge_shapes(api):
    doc = api.get('/v3/api-docs').json
    schemas = doc['components']['schemas']
    bridge = schemas['ServiceBridge']['properties']
    assert bridge['endpoints'] == {'type': 'array', 'items': {'$ref': '#/components/schemas/ServiceBridgeEndpoint'}}
    assert bridge['defaultHeaders'] == {'$ref': '#/components/schemas/ServiceBridgeHeaders'}
    assert bridge['baseUrl'] == {'$ref': '#/components/schemas/ServiceBridgeBaseUrl'}
    assert bridge['agentCallable'] == {'type': 'boolean', 'default': False}
    endpoint_schema = schemas['ServiceBridgeEndpoint']
    assert endpoint_schema['additionalProperties'] is False and endpoint_schema['required'] == ['name']
    assert schemas['ServiceBridgeMethod'] == {'type': 'string', 'enum': ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']}
    assert 'secretRef' in schemas['ServiceBridgeHeaders']['description']
    assert 'baseUrl' in schemas['ServiceBridgeCreateRequest']['required']
    ops = {op['operationId'] for path, item in doc['paths'].items() if '/proxy' in path for op in item.values()}
    assert ops == {f'proxyServiceBridge{e}{m}' for e in ('', 'Endpoint')
                   for m in ('Get', 'Post', 'Put', 'Patch', 'Delete')}
    get = doc['paths']['/api/service-bridges/{id}/proxy/{endpointName}']['get']
    assert {'502', '504'} <= set(get['responses']) and 'requestBody' not in get
