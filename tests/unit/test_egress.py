"""core/egress.py, the egress fence: internal targets are refused before any connection, the
connection goes to the address that was checked, redirects are re-checked, and the deadline and
body cap hold.

Nothing here may reach beyond this machine, even with a broken fence: the autouse ``net`` fixture
installs the network guard of tests/netguard.py (lookups from a table the test fills, sockets to
loopback only, anything else trips it and fails the test). Upstreams are http.server instances on
127.0.0.1 (tests/netguard.py ``Upstream``), reachable only through
``BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST``."""
from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from chalicelib.core import egress
from chalicelib.core.config import get_config, reset_config
from chalicelib.core.errors import BadRequest
from tests.netguard import GuardTripped, Net, Upstream, assert_untripped, install

ROOT = Path(__file__).resolve().parents[2]
ALLOWLIST = 'BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST'
PREFIX = 'service bridge egress denied: '


@pytest.fixture(autouse=True)
def net(monkeypatch: pytest.MonkeyPatch) -> Iterator[Net]:
    state = install(monkeypatch)
    yield state
    assert_untripped(state)


@pytest.fixture(autouse=True)
def no_allowlist(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(ALLOWLIST, raising=False)
    reset_config()
    yield
    reset_config()


@pytest.fixture
def allow(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    def allow_hosts(*hosts: str) -> None:
        monkeypatch.setenv(ALLOWLIST, ','.join(hosts))
        reset_config()
    return allow_hosts


def _on_new_socket(call: Callable[[socket.socket], Any], kind: int = socket.SOCK_STREAM) -> Any:
    with socket.socket(socket.AF_INET, kind) as sock:
        return call(sock)


def test_the_guard_refuses_everything_beyond_loopback(net: Net) -> None:
    attempts: list[Callable[[], Any]] = [
        lambda: socket.create_connection(('192.0.2.1', 80), timeout=1),
        lambda: _on_new_socket(lambda sock: sock.connect(('8.8.8.8', 53))),
        lambda: _on_new_socket(lambda sock: sock.connect_ex(('2001:4860:4860::8888', 53, 0, 0))),
        lambda: _on_new_socket(lambda sock: sock.sendto(b'x', ('8.8.8.8', 53)), socket.SOCK_DGRAM),
        lambda: _on_new_socket(lambda sock: sock.connect(('example.com', 80))),
        lambda: socket.getaddrinfo('example.com', 443),
        lambda: socket.gethostbyname('example.com'),
    ]
    for attempt in attempts:
        with pytest.raises(GuardTripped):
            attempt()
    assert len(net.tripped) == len(attempts)
    net.tripped.clear()   # tripped on purpose; the teardown check is for accidents


def test_the_guard_lets_loopback_through(net: Net) -> None:
    with socket.socket() as listener:
        listener.bind(('127.0.0.1', 0))
        listener.listen()
        address = listener.getsockname()
        with socket.create_connection(address, timeout=2):
            pass
    assert net.connects == [address]
    assert socket.getaddrinfo('127.0.0.1', 80)[0][4][0] == '127.0.0.1'


# --- every target of this table is denied before any connection ----------------------------

FIRST_AND_LAST_V4 = [
    ('0.0.0.0', 'unspecified'), ('0.255.255.255', 'this network'),
    ('10.0.0.0', 'private'), ('10.255.255.255', 'private'),
    ('100.64.0.0', 'CGNAT'), ('100.127.255.255', 'CGNAT'),
    ('127.0.0.0', 'loopback'), ('127.0.0.1', 'loopback'), ('127.255.255.255', 'loopback'),
    ('169.254.0.0', 'link-local'), ('169.254.169.254', 'link-local'),
    ('169.254.255.255', 'link-local'),
    ('172.16.0.0', 'private'), ('172.31.255.255', 'private'),
    ('192.0.0.0', 'IETF'), ('192.0.0.255', 'IETF'),
    ('192.0.2.0', 'documentation'), ('192.0.2.255', 'documentation'),
    ('192.168.0.0', 'private'), ('192.168.255.255', 'private'),
    ('198.18.0.0', 'benchmarking'), ('198.19.255.255', 'benchmarking'),
    ('198.51.100.0', 'documentation'), ('198.51.100.255', 'documentation'),
    ('203.0.113.0', 'documentation'), ('203.0.113.255', 'documentation'),
    ('224.0.0.0', 'multicast'), ('239.255.255.255', 'multicast'),
    ('240.0.0.0', 'reserved'), ('255.255.255.254', 'reserved'),
    ('255.255.255.255', 'broadcast'),
]
FIRST_AND_LAST_V6 = [
    ('::', 'unspecified'), ('::1', 'loopback'),
    ('64:ff9b:1::', 'NAT64'), ('64:ff9b:1:ffff:ffff:ffff:ffff:ffff', 'NAT64'),
    ('100::', 'discard'), ('100::ffff:ffff:ffff:ffff', 'discard'),
    ('2001::', 'Teredo'), ('2001:0:ffff:ffff:ffff:ffff:ffff:ffff', 'Teredo'),
    ('2001:db8::', 'documentation'), ('2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', 'documentation'),
    ('2001:100::', 'IETF'), ('2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff', 'IETF'),
    ('3fff::', 'documentation'), ('3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', 'documentation'),
    ('fc00::', 'unique local'), ('fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'unique local'),
    ('fd00:ec2::254', 'unique local'),
    ('fe80::', 'link-local'), ('febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'link-local'),
    ('fec0::', 'site-local'), ('feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'site-local'),
    ('ff00::', 'multicast'), ('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'multicast'),
]
V4_INSIDE_V6 = [
    ('::ffff:127.0.0.1', 'IPv4-mapped form of 127.0.0.1, a loopback'),
    ('::ffff:169.254.169.254', 'IPv4-mapped form of 169.254.169.254, a link-local'),
    ('::ffff:10.0.0.1', 'IPv4-mapped form of 10.0.0.1, a private'),
    ('::127.0.0.1', 'IPv4-compatible form of 127.0.0.1'),
    ('::169.254.169.254', 'IPv4-compatible form of 169.254.169.254'),
    ('2002:7f00:1::', '6to4 form of 127.0.0.1'),
    ('2002:a9fe:a9fe::1', '6to4 form of 169.254.169.254'),
    ('2002:c0a8:101::', '6to4 form of 192.168.1.1'),
    ('64:ff9b::127.0.0.1', 'NAT64 form of 127.0.0.1'),
    ('64:ff9b::169.254.169.254', 'NAT64 form of 169.254.169.254'),
    ('64:ff9b::10.1.2.3', 'NAT64 form of 10.1.2.3'),
    ('64:ff9b:1::7f00:1', 'NAT64 form of 127.0.0.1'),
    ('fe80::1%25eth0', 'link-local'),
]
SPELLINGS = [
    ('2130706433', '2130706433 is 127.0.0.1, a loopback'),
    ('0x7f000001', '0x7f000001 is 127.0.0.1'),
    ('0X7F000001', '0x7f000001 is 127.0.0.1'),
    ('017700000001', '017700000001 is 127.0.0.1'),
    ('0177.0.0.1', '0177.0.0.1 is 127.0.0.1'),
    ('0x7f.0.0.1', '0x7f.0.0.1 is 127.0.0.1'),
    ('127.1', '127.1 is 127.0.0.1'),
    ('127.0.1', '127.0.1 is 127.0.0.1'),
    ('0', '0 is 0.0.0.0, an unspecified'),
    ('2852039166', '2852039166 is 169.254.169.254, a link-local'),
    ('0xa9fea9fe', 'is 169.254.169.254'),
    ('0251.0376.0251.0376', 'is 169.254.169.254'),
    ('169.254.43518', 'is 169.254.169.254'),
    ('10.1', '10.1 is 10.0.0.1, a private'),
    ('127.0.0.1.', '127.0.0.1 is a loopback'),
]
LOCAL_NAMES = ['localhost', 'LOCALHOST', 'localhost.', 'api.localhost', 'localhost.localdomain',
               'localhost6', 'ip6-localhost', 'ip6-loopback']
# Names the test's DNS answers (see test_denied_before_any_connection).
NAMES = {
    'internal.example.test': ['10.20.30.40'],
    'metadata.example.test': ['169.254.169.254'],
    'one-bad-of-three.example.test': ['93.184.215.14', '2606:2800:21f:cb07::1', '127.0.0.1'],
    'v6-private.example.test': ['2606:2800:21f:cb07::1', 'fd00:ec2::254'],
    'mapped.example.test': ['::ffff:192.168.0.10'],
}
RESOLVED = [
    ('internal.example.test', 'internal.example.test resolves to 10.20.30.40, a private'),
    ('metadata.example.test', 'resolves to 169.254.169.254, a link-local'),
    ('one-bad-of-three.example.test', 'resolves to 127.0.0.1, a loopback'),
    ('v6-private.example.test', 'resolves to fd00:ec2::254, a unique local'),
    ('mapped.example.test', 'IPv4-mapped form of 192.168.0.10'),
]
NOT_HTTP = [
    ('ftp://example.com/file', "scheme 'ftp'"), ('file:///etc/passwd', "scheme 'file'"),
    ('gopher://example.com:70/_x', "scheme 'gopher'"), ('dict://example.com:11211/', "scheme 'dict'"),
    ('ws://example.com/socket', "scheme 'ws'"), ('example.com/path', "scheme 'none'"),
    ('//example.com/path', "scheme 'none'"),
]
MALFORMED = [
    ('http://user:secret@example.com/', 'credentials'),
    ('http://example.com@127.0.0.1/', 'credentials'),
    ('http:///only-a-path', 'no host'),
    ('http://[::1/', 'cannot be parsed'),
    ('http://example.com:99999/', 'cannot be parsed'),
    ('http://127.0.0.%31/', 'not a valid host name'),
    ('http://exa mple.com/', 'not a valid host name'),
    ('http://example.com/a b', 'spaces or control characters'),
]


def _url(host: str) -> str:
    return f'http://[{host}]/' if ':' in host else f'http://{host}/'


RESOLVED_TABLE = [(f'https://{name}/api', why) for name, why in RESOLVED]
TABLE = ([(_url(ip), why) for ip, why in FIRST_AND_LAST_V4 + FIRST_AND_LAST_V6 + V4_INSIDE_V6]
         + [(f'http://{spelled}:8080/x', why) for spelled, why in SPELLINGS]
         + [(f'https://{name}/', 'local host name') for name in LOCAL_NAMES]
         + RESOLVED_TABLE
         + NOT_HTTP + MALFORMED)


def test_the_table_is_large_enough() -> None:
    assert len(TABLE) >= 60
    assert len({url for url, _ in TABLE}) == len(TABLE)


@pytest.mark.parametrize('url,why', TABLE, ids=[url for url, _ in TABLE])
def test_denied_before_any_connection(net: Net, url: str, why: str) -> None:
    for name, addresses in NAMES.items():
        net.resolve(name, addresses)
    with pytest.raises(egress.EgressDenied) as denied:
        egress.request('GET', url)
    assert str(denied.value).startswith(PREFIX)
    assert denied.value.message == PREFIX + denied.value.reason
    assert why in denied.value.reason
    assert net.connects == []
    with pytest.raises(egress.EgressDenied):
        egress.check_url(url)


def test_literals_and_non_http_are_judged_without_any_lookup(net: Net) -> None:
    for entry in TABLE:
        if entry not in RESOLVED_TABLE:
            with pytest.raises(egress.EgressDenied):
                egress.check_url(entry[0])
    assert net.lookups == []


@pytest.mark.parametrize('address', [
    '8.8.8.8', '1.1.1.1', '93.184.215.14', '192.88.99.1', '2606:4700:4700::1111',
    '::ffff:8.8.8.8', '64:ff9b::8.8.8.8', '2002:808:808::1',
])
def test_public_addresses_pass(address: str) -> None:
    assert egress.classify(address) is None


def test_classify_names_the_address_and_what_it_is() -> None:
    assert egress.classify('169.254.169.254') == '169.254.169.254 is a link-local address'
    assert egress.classify(ipaddress.ip_address('::1')) == '::1 is a loopback address'
    with pytest.raises(ValueError):
        egress.classify('example.com')


def test_check_url_returns_every_checked_address_once(net: Net) -> None:
    net.resolve('public.example.test', ['93.184.215.14', '2606:2800:21f:cb07::1', '93.184.215.14'])
    assert egress.check_url('https://public.example.test/x') == [
        ('93.184.215.14', 443), ('2606:2800:21f:cb07::1', 443)]
    assert egress.check_url('http://[2606:4700::1111]:8443/') == [('2606:4700::1111', 8443)]
    assert net.lookups == ['public.example.test']


def test_an_unresolvable_name_is_a_bad_gateway(net: Net, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_such_name(*args: Any) -> list:
        net.lookups.append(args[0])
        raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')
    monkeypatch.setattr(socket, 'getaddrinfo', no_such_name)
    with pytest.raises(egress.EgressError) as failed:
        egress.request('GET', 'https://nowhere.example.test/')
    assert failed.value.status == 502
    assert 'nowhere.example.test could not be resolved' in failed.value.message


def test_errors_map_to_the_api_error_body() -> None:
    denied = egress.EgressDenied('169.254.169.254 is a link-local address')
    assert isinstance(denied, BadRequest)
    assert denied.body() == {'error': 'Bad Request', 'status': 400,
                             'message': PREFIX + '169.254.169.254 is a link-local address'}
    assert egress.EgressTimeout(30).body() == {
        'error': 'Gateway Timeout', 'status': 504, 'message': 'the upstream did not answer within 30 s'}
    assert egress.EgressError('x').status == 502


# --- the allowlist -------------------------------------------------------------------------

def test_allowlist_is_exact_case_insensitive_names(monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(ALLOWLIST, ' Upstream.Test. ,*.internal,10.0.0.0/8,,[::1], 127.0.0.1')
    reset_config()
    assert get_config().egress_private_host_allowlist == frozenset(
        {'upstream.test', '::1', '127.0.0.1'})
    assert '*.internal' in caplog.text and '10.0.0.0/8' in caplog.text


def test_allowlist_exempts_only_the_names_listed(net: Net, allow: Callable[..., None]) -> None:
    allow('upstream.test', '127.0.0.1')
    net.resolve('upstream.test', ['127.0.0.1'])
    net.resolve('sub.upstream.test', ['127.0.0.1'])
    assert egress.check_url('http://UPSTREAM.test:8080/') == [('127.0.0.1', 8080)]
    assert egress.check_url('http://127.0.0.1/') == [('127.0.0.1', 80)]
    for url in ('http://sub.upstream.test/', 'http://127.0.0.2/', 'http://2130706433/',
                'http://localhost/', 'ftp://upstream.test/', 'http://u:p@upstream.test/'):
        with pytest.raises(egress.EgressDenied):
            egress.check_url(url)


# --- an upstream on loopback ---------------------------------------------------------------

@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.close()


def test_loopback_upstream_is_denied_without_the_allowlist(net: Net, upstream: Upstream) -> None:
    with pytest.raises(egress.EgressDenied) as denied:
        egress.request('GET', upstream.url('/hello'))
    assert denied.value.reason == '127.0.0.1 is a loopback address'
    assert net.connects == [] and upstream.seen == []


def test_loopback_upstream_is_reachable_through_the_allowlist(
        net: Net, upstream: Upstream, allow: Callable[..., None]) -> None:
    allow('127.0.0.1')
    response = egress.request('GET', upstream.url('/hello'))
    assert (response.status, response.body, response.truncated) == (200, b'hello', False)
    assert response.headers['content-type'] == 'text/plain'
    assert response.url == upstream.url('/hello')
    assert net.connects == [('127.0.0.1', upstream.port)]


def test_host_header_headers_query_and_json_body_pass_through(
        net: Net, upstream: Upstream, allow: Callable[..., None]) -> None:
    allow('upstream.test')
    net.resolve('upstream.test', ['127.0.0.1'])
    response = egress.request(
        'post', upstream.url('/echo?a=1', host='upstream.test'),
        headers={'X-Api-Key': 'k-123', 'Host': 'evil.test', 'Accept': 'application/json'},
        params={'b': '2', 'c': ['3', '4']}, json_body={'name': 'é', 'n': 1})
    echo = json.loads(response.body)
    assert echo['method'] == 'POST'
    assert echo['path'] == '/echo?a=1&b=2&c=3&c=4'
    assert echo['headers']['host'] == f'upstream.test:{upstream.port}'
    assert echo['headers']['x-api-key'] == 'k-123'
    assert echo['headers']['content-type'] == 'application/json'
    assert echo['headers']['user-agent'] == egress.USER_AGENT
    assert json.loads(echo['body']) == {'name': 'é', 'n': 1}


def test_the_connection_goes_to_the_checked_address_without_a_second_lookup(
        net: Net, upstream: Upstream, allow: Callable[..., None]) -> None:
    allow('upstream.test')
    # Three hops get 127.0.0.1, where the upstream listens; a fourth lookup, which a second
    # resolution within a hop would make, gets 127.0.0.2, where nothing listens.
    net.resolve('upstream.test', ['127.0.0.1'], ['127.0.0.1'], ['127.0.0.1'], ['127.0.0.2'])
    response = egress.request('GET', upstream.url('/redirect?to=/hello&via=1', host='upstream.test'))
    assert response.body == b'hello'
    assert net.lookups == ['upstream.test'] * 3
    assert [seen.path for seen in upstream.seen] == [
        '/redirect?to=/hello&via=1', '/redirect?to=%2Fhello&via=0', '/hello']
    assert net.connects == [('127.0.0.1', upstream.port)] * 3


def test_one_hop_resolves_once_and_connects_to_that_answer(
        net: Net, upstream: Upstream, allow: Callable[..., None]) -> None:
    allow('upstream.test')
    # A rebinding resolver: the first answer passes the check, the next points elsewhere.
    net.resolve('upstream.test', ['127.0.0.1'], ['127.0.0.2'])
    egress.request('GET', upstream.url('/hello', host='upstream.test'))
    assert net.lookups == ['upstream.test']
    assert net.connects == [('127.0.0.1', upstream.port)]


@pytest.mark.parametrize('size,cap,truncated', [
    (100, 10, True), (100, 99, True), (100, 100, False), (100, 5 * 2 ** 20, False), (1, 0, True),
    (0, 0, False), (300_000, 200_000, True),
])
def test_body_cap(upstream: Upstream, allow: Callable[..., None],
                  size: int, cap: int, truncated: bool) -> None:
    allow('127.0.0.1')
    response = egress.request('GET', upstream.url(f'/bytes?n={size}'), max_bytes=cap)
    assert response.body == b'x' * min(size, cap)
    assert response.truncated is truncated


def test_an_endless_body_is_cut_at_the_cap(upstream: Upstream, allow: Callable[..., None]) -> None:
    allow('127.0.0.1')
    started = time.monotonic()
    response = egress.request('GET', upstream.url('/endless'), max_bytes=100_000, timeout=10)
    assert len(response.body) == 100_000 and response.truncated
    assert time.monotonic() - started < 5


@pytest.mark.parametrize('path', ['/sleep?s=5', '/drip', '/redirect?to=/sleep%3Fs%3D5&via=3&s=0.15'])
def test_the_deadline_covers_the_whole_call(upstream: Upstream, allow: Callable[..., None],
                                            path: str) -> None:
    allow('127.0.0.1')
    started = time.monotonic()
    with pytest.raises(egress.EgressTimeout) as timed_out:
        egress.request('GET', upstream.url(path), timeout=0.5)
    assert time.monotonic() - started < 3
    assert timed_out.value.status == 504
    assert timed_out.value.message == 'the upstream did not answer within 0.5 s'


def test_at_most_five_redirects(upstream: Upstream, allow: Callable[..., None]) -> None:
    allow('127.0.0.1')
    response = egress.request('GET', upstream.url('/redirect?to=/hello&via=4'))
    assert response.body == b'hello' and len(upstream.seen) == 6
    upstream.seen.clear()
    with pytest.raises(egress.EgressError) as failed:
        egress.request('GET', upstream.url('/redirect?to=/hello&via=5'))
    assert failed.value.message == 'the upstream redirected more than 5 times'
    assert len(upstream.seen) == 6


@pytest.mark.parametrize('status,method,body', [
    (301, 'GET', ''), (302, 'GET', ''), (303, 'GET', ''), (307, 'POST', '{"a":1}'),
    (308, 'POST', '{"a":1}'),
])
def test_redirect_methods(upstream: Upstream, allow: Callable[..., None],
                          status: int, method: str, body: str) -> None:
    allow('127.0.0.1')
    response = egress.request('POST', upstream.url(f'/redirect?to=/echo&status={status}'),
                              json_body={'a': 1})
    echo = json.loads(response.body)
    assert (echo['method'], echo['body']) == (method, body)
    assert ('content-type' in echo['headers']) is (method == 'POST')


def test_head_stays_head_across_a_redirect(upstream: Upstream, allow: Callable[..., None]) -> None:
    allow('127.0.0.1')
    response = egress.request('HEAD', upstream.url('/redirect?to=/hello&status=302'))
    assert response.status == 200 and response.body == b''
    assert [seen.method for seen in upstream.seen] == ['HEAD', 'HEAD']


@pytest.mark.parametrize('final,why', [
    ('http://127.0.0.1:{port}/hello', '127.0.0.1 is a loopback address'),
    ('http://169.254.169.254/latest/meta-data/', '169.254.169.254 is a link-local address'),
    ('http://[fd00:ec2::254]/latest/meta-data/', 'fd00:ec2::254 is a unique local address'),
    ('http://[::ffff:169.254.169.254]/latest/meta-data/', 'form of 169.254.169.254'),
    ('http://2130706433:{port}/hello', '2130706433 is 127.0.0.1'),
    ('http://localhost:{port}/hello', 'localhost is a local host name'),
    ('http://metadata.example.test/computeMetadata/v1/', 'resolves to 169.254.169.254'),
    ('file:///etc/passwd', "scheme 'file'"),
])
def test_a_redirect_chain_ending_on_an_internal_target_is_denied(
        net: Net, upstream: Upstream, allow: Callable[..., None], final: str, why: str) -> None:
    allow('upstream.test')
    net.resolve('upstream.test', ['127.0.0.1'])
    net.resolve('metadata.example.test', ['169.254.169.254'])
    target = quote(final.format(port=upstream.port), safe='')
    with pytest.raises(egress.EgressDenied) as denied:
        egress.request('GET', upstream.url(f'/redirect?to={target}&via=2', host='upstream.test'))
    assert why in denied.value.reason
    assert len(upstream.seen) == 3   # the chain was followed, then the last hop refused
    assert set(net.connects) == {('127.0.0.1', upstream.port)}


def test_a_redirect_to_another_origin_keeps_only_harmless_headers(
        net: Net, upstream: Upstream, allow: Callable[..., None]) -> None:
    allow('upstream.test', 'other.test')
    net.resolve('upstream.test', ['127.0.0.1'])
    net.resolve('other.test', ['127.0.0.1'])
    headers = {'Authorization': 'Bearer s3cr3t', 'X-Api-Key': 'k-123', 'Accept': 'application/json'}
    same = egress.request('GET', upstream.url('/redirect?to=/echo', host='upstream.test'),
                          headers=headers)
    assert json.loads(same.body)['headers']['x-api-key'] == 'k-123'
    other = quote(upstream.url('/echo', host='other.test'), safe='')
    moved = egress.request('GET', upstream.url(f'/redirect?to={other}', host='upstream.test'),
                           headers=headers)
    sent = json.loads(moved.body)['headers']
    assert sent['host'] == f'other.test:{upstream.port}'
    assert sent['accept'] == 'application/json'
    assert 'authorization' not in sent and 'x-api-key' not in sent
    assert upstream.seen[2].headers['x-api-key'] == 'k-123'   # the first hop had it


def test_a_refused_connection_is_a_bad_gateway(allow: Callable[..., None]) -> None:
    allow('127.0.0.1')
    with socket.socket() as closed:
        closed.bind(('127.0.0.1', 0))
        port = closed.getsockname()[1]
    with pytest.raises(egress.EgressError) as failed:
        egress.request('GET', f'http://127.0.0.1:{port}/')
    assert failed.value.status == 502
    assert failed.value.message == 'could not connect to 127.0.0.1: Connection refused'


def test_header_values_never_reach_an_error_message(allow: Callable[..., None]) -> None:
    allow('127.0.0.1')
    with pytest.raises(ValueError) as invalid:
        egress.request('GET', 'http://127.0.0.1:9/', headers={'X-Secret': 's3cr3t\r\nX-Injected: 1'})
    assert 's3cr3t' not in str(invalid.value) and 'X-Secret' in str(invalid.value)
    for bad in ({'method': 'TRACE'}, {'json_body': {}, 'data': b'x'}, {'timeout': 0}):
        with pytest.raises(ValueError):
            egress.request(bad.pop('method', 'GET'), 'http://127.0.0.1:9/', **bad)


# --- TLS: server name and certificate checked against the original host --------------------

def _certificates(tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'egress test CA')])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(1)
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(hours=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                         critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tmp_path / 'ca.pem', tmp_path / 'leaf.pem', tmp_path / 'leaf.key'
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@pytest.mark.parametrize('certified_name,ok', [('upstream.test', True), ('other.test', False)])
def test_tls_uses_the_original_host_for_sni_and_verification(
        net: Net, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allow: Callable[..., None],
        certified_name: str, ok: bool) -> None:
    ca, leaf, key = _certificates(tmp_path, certified_name)
    server_names: list[str | None] = []
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(leaf, key)
    server_tls.sni_callback = lambda sock, name, context: server_names.append(name)
    monkeypatch.setattr(egress, '_tls_context', lambda: ssl.create_default_context(cafile=str(ca)))
    allow('upstream.test')
    net.resolve('upstream.test', ['127.0.0.1'])
    server = Upstream(tls=server_tls)
    try:
        url = server.url('/echo', host='upstream.test', scheme='https')
        if ok:
            echo = json.loads(egress.request('GET', url).body)
            assert echo['headers']['host'] == f'upstream.test:{server.port}'
        else:
            with pytest.raises(egress.EgressError) as failed:
                egress.request('GET', url)
            assert 'CERTIFICATE_VERIFY_FAILED' in failed.value.message
    finally:
        server.close()
    assert server_names == ['upstream.test']
    assert net.connects == [('127.0.0.1', server.port)]


# --- cold start ----------------------------------------------------------------------------

def test_importing_the_fence_does_not_import_urllib3_or_ssl() -> None:
    code = ('import sys, chalicelib.core.egress; '
            'print(sorted(m for m in ("urllib3", "ssl") if m in sys.modules))')
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={'PYTHONPATH': str(ROOT)})
    assert out.stdout.strip() == '[]'
