"""The dense pure rules of service bridges and UI telemetry, table-driven: bridge shapes
(features/bridges/shapes.py), secret templates, endpoint selection and required fields, the scrubbing
of echoed secrets, and the privacy filter of UI payloads (features/events/ui_events.py)."""
from __future__ import annotations

import pytest

from chalicelib.features.bridges import proxy as calls
from chalicelib.features.bridges import shapes
from chalicelib.features.events import ui_events

# ----------------------------------------------------------------------------- base URLs


@pytest.mark.parametrize('url', [
    'https://api.example.com', 'http://api.example.com:8080/v1/', 'HTTPS://API.EXAMPLE.COM/v1',
    'http://[2606:4700::1111]/x', 'http://10.0.0.1/internal',   # addresses are the fence's, at call time
])
def test_base_urls_accepted(url):
    assert shapes.check_base_url(url) == url


@pytest.mark.parametrize('url', [
    'ftp://example.com', 'file:///etc/passwd', 'example.com', '//example.com/x', 'https://',
    'https://u:p@example.com', 'https://example.com@evil.example', 'https://example.com/?a=1',
    'https://example.com/#frag', 'https://example.com/a b', 'https://example.com\n', 'https://example.com:99999',
    'https://example.com/${secrets.A}', 'https://' + 'a' * 2050, 'https://bücher.example', 'https://h/café',
])
def test_base_urls_refused(url):
    with pytest.raises(ValueError):
        shapes.check_base_url(url)


@pytest.mark.parametrize('base,path,joined', [
    ('https://h/api', '/x', 'https://h/api/x'), ('https://h/api/', '/x', 'https://h/api/x'),
    ('https://h', '', 'https://h'), ('https://h/api/', '', 'https://h/api/'),
    ('https://h', '/x?y=1', 'https://h/x?y=1'),
])
def test_join_url(base, path, joined):
    assert shapes.join_url(base, path) == joined


# ----------------------------------------------------------------------------- header templates

@pytest.mark.parametrize('value,names', [
    ('plain', []), ('Bearer ${secrets.TOKEN}', ['TOKEN']),
    ('${secrets.A}:${secrets.b-2}', ['A', 'b-2']), ('${secrets.stripe/live_key}', ['stripe/live_key']),
    ('$secrets.A', []), ('cost: $5 {x}', []),
])
def test_template_secrets(value, names):
    assert shapes.template_secrets(value) == names


@pytest.mark.parametrize('value', [
    '${env.HOME}', '${secrets.}', '${secrets.a b}', '${secrets../x}', '${secrets.a/../b}', '${secrets./a}',
    '${secrets.A', 'x ${', '${secrets.' + 'a' * 300 + '}', '${}',
])
def test_template_refusals(value):
    with pytest.raises(ValueError):
        shapes.template_secrets(value)


def test_render_replaces_every_template():
    values = {'A': 'one', 'B': 'two'}
    assert shapes.render('${secrets.A}-${secrets.B}-${secrets.A}', values.__getitem__) == 'one-two-one'


@pytest.mark.parametrize('headers,says', [
    ({'X-A': {'secretRef': 'k'}}, "header 'X-A' is configured with secretRef"),
    ({'Content-Length': '1'}, 'set by the platform'), ({'connection': 'close'}, 'set by the platform'),
    ({'X-A': 'a', 'x-a': 'b'}, 'appears more than once'), ({'': 'x'}, 'not a valid header name'),
    ({'X:A': 'x'}, 'not a valid header name'), ({'X-A': 'é€'}, 'HTTP headers cannot carry'),
    ({'X-A': 'tab\tis fine', 'X-B': 'nul\x00'}, "header 'X-B'"), ({'X-A': 'x' * 9000}, 'longer than'),
    ({f'X-{i}': 'v' for i in range(51)}, 'at most 50'),
])
def test_header_refusals(headers, says):
    with pytest.raises(ValueError) as refused:
        shapes.check_headers(headers)
    assert says in str(refused.value)


def test_header_values_never_appear_in_refusals():
    with pytest.raises(ValueError) as refused:
        shapes.check_headers({'Authorization': 'Bearer s3cr3t-value\r\n'})
    assert 's3cr3t' not in str(refused.value)


# ----------------------------------------------------------------------------- endpoints

def test_an_endpoint_gets_its_defaults_and_keeps_what_it_declares():
    assert shapes.check_endpoint({'name': 'a'}) == {'name': 'a', 'method': 'GET', 'path': '', 'defaultHeaders': {}}
    full = {'name': 'a.b~c_d-1', 'method': 'PATCH', 'path': '/x/{id}?v=2', 'description': 'd',
            'requestSchema': {'required': ['id'], 'properties': {'id': {}}, 'title': 'kept'},
            'defaultHeaders': {'X-A': 'b'}}
    assert shapes.check_endpoint(full) == full


@pytest.mark.parametrize('endpoint', [
    {'name': ''}, {'name': '-a'}, {'name': 'a/b'}, {'name': 'a' * 101}, {'method': 'GET'},
    {'name': 'a', 'method': 'HEAD'}, {'name': 'a', 'path': 'x'}, {'name': 'a', 'path': '/a#b'},
    {'name': 'a', 'path': '/a b'}, {'name': 'a', 'path': '/café'}, {'name': 'a', 'path': 5},
    {'name': 'a', 'description': 1},
    {'name': 'a', 'requestSchema': []}, {'name': 'a', 'requestSchema': {'type': 'array'}},
    {'name': 'a', 'requestSchema': {'required': ['x', 'x']}}, {'name': 'a', 'requestSchema': {'required': ['']}},
    {'name': 'a', 'requestSchema': {'properties': []}}, {'name': 'a', 'defaultHeaders': []},
    {'name': 'a', 'extra': 1},
])
def test_endpoint_refusals(endpoint):
    with pytest.raises(ValueError):
        shapes.check_endpoint(endpoint)


def test_endpoint_names_are_unique_ignoring_case():
    with pytest.raises(ValueError, match="duplicate endpoint name 'Find'"):
        shapes.check_endpoints([{'name': 'find'}, {'name': 'Find'}])
    with pytest.raises(ValueError, match='at most 100'):
        shapes.check_endpoints([{'name': f'e{i}'} for i in range(101)])


def test_select_endpoint():
    two = {'endpoints': [{'name': 'a'}, {'name': 'b'}]}
    assert shapes.select_endpoint(two, 'b') == {'name': 'b'}
    with pytest.raises(ValueError, match="unknown endpoint 'c': this bridge's endpoints are 'a', 'b'"):
        shapes.select_endpoint(two, 'c')
    with pytest.raises(ValueError, match="this bridge has 2 endpoints \\('a', 'b'\\)"):
        shapes.select_endpoint(two, None)
    assert shapes.select_endpoint({'endpoints': [{'name': 'only'}]}, None) == {'name': 'only'}
    with pytest.raises(ValueError, match='none'):
        shapes.select_endpoint({}, None)


@pytest.mark.parametrize('body,query,missing', [
    (None, {}, ['a', 'b']), ({'a': 1}, {}, ['b']), ({'a': '', 'b': 0}, {}, []), ({'a': False}, {'b': ['']}, []),
    ({'a': None}, {'b': ['x']}, ['a']), ([1, 2], {'a': ['1']}, ['b']), ('text', {}, ['a', 'b']),
])
def test_missing_required(body, query, missing):
    endpoint = {'requestSchema': {'required': ['a', 'b']}}
    assert shapes.missing_required(endpoint, body, query) == missing
    assert shapes.missing_required({}, None, {}) == []


# ----------------------------------------------------------------------------- echoed secrets

@pytest.mark.parametrize('body,truncated,out', [
    (b'{"h": "Bearer abcdef123456"}', False, b'{"h": "Bearer [secret T]"}'),
    (b'abcdef123456abcdef123456', False, b'[secret T][secret T]'),
    (b'x: abcdef12', True, b'x: [secret T]'),                    # cut inside the value
    (b'x: abc', True, b'x: abc'),                                 # too little of it to tell
    (b'{"v": "q\\"u\\"ote-secret"}', False, b'{"v": "[secret Q]"}'),   # its JSON-escaped form
])
def test_scrub(body, truncated, out):
    assert calls._scrub(body, {'T': 'abcdef123456', 'Q': 'q"u"ote-secret', 'S': 'short'}, truncated) == out


def test_short_secrets_are_not_scrubbed():
    assert calls._scrub(b'a short word', {'S': 'short'}, False) == b'a short word'


# ----------------------------------------------------------------------------- UI payload privacy

@pytest.mark.parametrize('key', [
    'ip', 'IP', 'clientIp', 'client_ip', 'ipAddress', 'IPAddress', 'ipv4', 'ipv6', 'remoteAddr', 'remote_address',
    'X-Forwarded-For', 'forwardedFor', 'address', 'emailAddress', 'key', 'keys', 'keyCode', 'keycode', 'keystroke',
    'keystrokes', 'keyPress', 'onKeyDown', 'charCode', 'which', 'typed', 'keyboardLayout', 'x', 'Y', 'clientX',
    'pageY', 'screenX', 'offsetY', 'movementX', 'mousePosition', 'pointerType', 'cursor', 'coords', 'touches',
    'positionX', 'scrollTop', 'scroll_y', 'scrollPercent', 'windowScrollY',
])
def test_dropped_keys(key):
    assert ui_events.dropped_key(key)


@pytest.mark.parametrize('key', [
    'message', 'active', 'visibility', 'interval', 'durationMs', 'loadTime', 'taskId', 'zip', 'tip', 'script',
    'status', 'kind', 'route', 'component', 'width', 'index', 'monkey',
])
def test_kept_keys(key):
    assert not ui_events.dropped_key(key)


@pytest.mark.parametrize('value,address', [
    ('10.0.0.1', True), ('10.0.0.1:443', True), ('::1', True), ('[2001:db8::1]:80', True), ('fe80::1%eth0', True),
    ('1.2', False), ('12:30', False), ('hello', False), ('', False), (5, False), ('2026-11-20', False),
])
def test_looks_like_address(value, address):
    assert ui_events.looks_like_address(value) is address


@pytest.mark.parametrize('address,normalised', [
    ('198.51.100.7', '198.51.100.7'), (' 198.51.100.7 ', '198.51.100.7'), ('198.51.100.7:5555', '198.51.100.7'),
    ('::ffff:198.51.100.7', '198.51.100.7'), ('[2001:DB8::1]:443', '2001:db8::1'), ('2001:db8:0::1', '2001:db8::1'),
])
def test_client_ip_hash_normalises_the_address(monkeypatch, address, normalised):
    from chalicelib.core.config import reset_config
    monkeypatch.setenv('CLIENT_IP_HASH_KEY', 'k')
    reset_config()
    assert ui_events.client_ip_hash(address) == ui_events.client_ip_hash(normalised)
    assert ui_events.client_ip_hash(address) != ui_events.client_ip_hash('203.0.113.1')
    reset_config()


@pytest.mark.parametrize('address', [None, '', 'unknown', 'example.com', '999.1.1.1'])
def test_client_ip_hash_of_no_address_is_none(address):
    assert ui_events.client_ip_hash(address) is None


def test_the_published_patterns_agree_with_the_rules():
    """What /v3/api-docs promises a client (and the fuzzer generates) matches what is accepted."""
    import re

    SHAPES = {s.name: s for s in shapes.SHAPES}
    base = re.compile(SHAPES['ServiceBridgeBaseUrl'].schema['pattern'])
    path = re.compile(SHAPES['ServiceBridgeEndpoint'].schema['properties']['path']['pattern'])
    name = re.compile(SHAPES['ServiceBridgeEndpoint'].schema['properties']['name']['pattern'])
    for url in ('https://api.example.com', 'http://h:8080/v1/x', 'HTTP://[::1]:80/a'):
        assert base.search(url) and shapes.check_base_url(url)
    for url in ('https://u@h', 'https://h?x', 'https://h/#f', 'https://h/a b', 'ftp://h', 'https://bücher.example'):
        assert not base.search(url)
        with pytest.raises(ValueError):
            shapes.check_base_url(url)
    for value in ('', '/x', '/x/{id}?a=1&b=$c'):
        assert path.search(value) and shapes.check_endpoint({'name': 'n', 'path': value})
    for value in ('x', '/a b', '/a#b', '/é'):
        assert not path.search(value)
        with pytest.raises(ValueError):
            shapes.check_endpoint({'name': 'n', 'path': value})
    for value in ('a', 'A.b~c_d-9'):
        assert name.search(value) and shapes.check_endpoint({'name': value})
