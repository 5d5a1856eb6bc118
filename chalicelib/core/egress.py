"""The egress fence: the one outbound HTTP client of the platform.

Every call the platform makes to a URL that a tenant controls (the service-bridge proxy,
BRIDGE_CALL workflow steps, data-form lookups, and whatever follows) goes through
``request()``. A bridge is an SSRF primitive pointed at the cloud metadata endpoint unless the
client refuses internal targets, and refuses them for the address it actually connects to.

How one call goes, hop by hop (a redirect is a new hop):

1. The URL is parsed: only ``http`` and ``https``; no credentials (``user:pass@host``: secrets
   belong in headers through ``${secrets.NAME}``, where they are never stored or logged as part
   of a URL, and ``http://trusted@evil`` is a classic way to make a URL read as something it is
   not); a host name of ASCII letters, digits, dots, hyphens and underscores, or an IP literal.
2. ``localhost``-style names are refused outright, before any lookup.
3. The host is resolved once. An IP literal needs no lookup, including the decimal, hex, octal
   and short IPv4 spellings (``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``) that
   ``inet_aton`` and therefore ``getaddrinfo`` accept: they are decoded the same way here, so
   the check sees the address the OS would connect to. A name is resolved with
   ``socket.getaddrinfo``, and every address it returns is classified: if any is refused, the
   call is refused.
4. The connection goes to the addresses that were checked, never to the name: there is no second
   resolution, so a DNS answer that changes between check and connect (rebinding) changes
   nothing. The request carries the original ``Host`` header, and TLS uses the original host as
   server name (SNI) and for certificate verification.
5. A redirect (301, 302, 303, 307, 308 with a ``Location``) is followed by this module, at most
   ``MAX_REDIRECTS`` times, and the new URL goes through all of the above again. 307 and 308 keep
   the method and body; 301, 302 and 303 continue as a GET without body (HEAD stays HEAD), as
   browsers do. When a redirect leaves the origin (scheme, host or port change), only the
   headers in ``_HEADERS_KEPT_ACROSS_ORIGINS`` go along: a secret may sit in any header name.

Refused addresses (``classify``): loopback, unspecified, RFC 1918 private, link-local (which holds
169.254.169.254; fd00:ec2::254 is in the unique-local range), CGNAT 100.64/10, "this network"
0/8, IETF protocol assignments, documentation and benchmarking ranges, multicast, broadcast,
reserved; IPv6 loopback, unique-local fc00::/7, link-local, site-local, multicast, discard-only,
Teredo, IETF protocol assignments, documentation, local-use NAT64 64:ff9b:1::/48; the
IPv4-mapped, IPv4-compatible, 6to4 and NAT64 forms of any refused IPv4 address; and, as a net
under all of that, whatever ``ipaddress`` calls reserved or not global.
``BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST`` (read by core/config.py) names hosts, by exact name,
whose addresses are not classified: for development and tests only. The scheme and credential
rules still apply to them, and their hop is still resolved once and pinned.

Limits: a total deadline per call (``timeout``, default 30 s) covering connecting, sending and
reading across all hops, and a response body cap (``max_bytes``, default 5 MiB): at most
``max_bytes + 1`` bytes are read, the body is cut to ``max_bytes`` and ``truncated`` says so. The
body is returned decoded from its ``Content-Encoding`` (the request asks for ``identity``), so the
cap bounds what the caller holds. DNS resolution counts against the deadline but cannot be
interrupted: the OS resolver's own timeout applies to it.

Errors: ``EgressDenied`` (400, message ``service bridge egress denied: <reason>``; it subclasses
``BadRequest``, so the API's error mapping already renders it and a workflow step can record its
message as is), ``EgressTimeout`` (504) and ``EgressError`` (502: unresolvable name, refused
connection, TLS failure, broken HTTP, too many redirects). Messages name hosts and addresses,
never header values, bodies or query strings. Nothing here logs.

What is a library's and what is ours:

- Address classification is ``ipaddress``'s. Where it is incomplete or changes between Python
  releases (3.11 counts multicast and site-local as global and does not see through IPv4-mapped
  or NAT64 forms; the ``is_private``/``is_global`` lists were revised for CVE-2024-4032) an
  explicit table of refused networks decides first, so the verdict does not depend on the
  interpreter's patch level.
- HTTP/1.1, TLS (SNI, certificate and host name verification) and content decoding are urllib3's,
  already in every deployment through botocore and pinned in requirements.txt. It is used one
  connection per hop, not through a pool: a pooled connection is keyed by host name and would
  carry an address checked for an earlier call.
- Pinning is ours: urllib3, requests and http.client all resolve the name inside ``connect()``
  with no hook to check the address they picked. The narrowest seam is urllib3's
  ``HTTPConnection._new_conn``, which the connection classes built in ``_transport`` override to
  open the socket to the checked address; everything once the socket exists (TLS, framing)
  stays urllib3's. A test drives it over real TLS, so an urllib3 upgrade that moves the seam
  fails loudly.
- The deadline fuse is ours: urllib3's (and requests') timeouts bound each socket operation,
  not the call, so an upstream sending a byte a second never trips them. ``_Fuse`` is a
  watchdog that cuts the connection at the deadline.
- Redirects are ours because every hop must be re-resolved and re-checked before connecting.
- ``requests`` and ``requests-hardened`` were not taken: requests is a development dependency
  only and reads proxies and ``.netrc`` from the environment (a proxy would bypass the pin);
  requests-hardened checks the first resolved address only, refuses every NAT64 address (which
  breaks IPv6-only subnets using DNS64, where every IPv4 destination looks like one), and has
  no per-host allowlist and no total deadline.
"""
from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import re
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlencode, urljoin, urlsplit

from chalicelib.core import limits
from chalicelib.core.config import get_config
from chalicelib.core.errors import ApiError, BadRequest

if TYPE_CHECKING:
    import ssl

DENIED_PREFIX = 'service bridge egress denied: '
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_BYTES = limits.OUTBOUND_MAX_BYTES   # core/limits.py
MAX_REDIRECTS = 5
METHODS = frozenset({'GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'})
USER_AGENT = 'platform-egress/1'

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class EgressDenied(BadRequest):
    """The fence refused the target. ``reason`` is the part after the fixed prefix."""

    def __init__(self, reason: str) -> None:
        super().__init__(DENIED_PREFIX + reason)
        self.reason = reason


class EgressError(ApiError):
    """The upstream could not be reached or did not answer in HTTP (502)."""
    status = 502


class EgressTimeout(EgressError):
    """The call's total deadline passed (504)."""
    status = 504

    def __init__(self, seconds: float) -> None:
        super().__init__(f'the upstream did not answer within {seconds:g} s')


@dataclass(frozen=True)
class EgressResponse:
    status: int
    headers: dict[str, str]   # lower-case names; repeated headers joined with ', '
    body: bytes               # decoded, at most max_bytes
    truncated: bool           # the upstream sent more than max_bytes
    url: str                  # the URL that answered, after redirects


# --- classification ------------------------------------------------------------------------

def _networks(*pairs: tuple[str, str]) -> tuple[tuple[_Network, str], ...]:
    return tuple((ipaddress.ip_network(net), label) for net, label in pairs)


# First match wins (0.0.0.0 before 0/8, the broadcast address before 240/4).
_REFUSED_V4 = _networks(
    ('0.0.0.0/32', 'an unspecified address'),
    ('0.0.0.0/8', 'a "this network" address'),
    ('10.0.0.0/8', 'a private address (RFC 1918)'),
    ('100.64.0.0/10', 'a shared CGNAT address (RFC 6598)'),
    ('127.0.0.0/8', 'a loopback address'),
    ('169.254.0.0/16', 'a link-local address'),
    ('172.16.0.0/12', 'a private address (RFC 1918)'),
    ('192.0.0.0/24', 'an IETF protocol assignment address'),
    ('192.0.2.0/24', 'a documentation address'),
    ('192.168.0.0/16', 'a private address (RFC 1918)'),
    ('198.18.0.0/15', 'a benchmarking address'),
    ('198.51.100.0/24', 'a documentation address'),
    ('203.0.113.0/24', 'a documentation address'),
    ('224.0.0.0/4', 'a multicast address'),
    ('255.255.255.255/32', 'the broadcast address'),
    ('240.0.0.0/4', 'a reserved address'),
)
_REFUSED_V6 = _networks(
    ('::/128', 'an unspecified address'),
    ('::1/128', 'a loopback address'),
    ('64:ff9b:1::/48', 'a local-use NAT64 address'),
    ('100::/64', 'a discard-only address'),
    ('2001::/32', 'a Teredo address'),
    ('2001:db8::/32', 'a documentation address'),
    ('2001::/23', 'an IETF protocol assignment address'),
    ('3fff::/20', 'a documentation address'),
    ('fc00::/7', 'a unique local address'),
    ('fe80::/10', 'a link-local address'),
    ('fec0::/10', 'a site-local address'),
    ('ff00::/8', 'a multicast address'),
)
_V4_COMPATIBLE = ipaddress.IPv6Network('::/96')
_NAT64 = (ipaddress.IPv6Network('64:ff9b::/96'), ipaddress.IPv6Network('64:ff9b:1::/48'))


def _low_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def _refusal(ip: IPAddress) -> str | None:
    """What makes ``ip`` refused ('a loopback address', ...), or None when it may be reached."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split('%', 1)[0])
        if not (ip.is_unspecified or ip.is_loopback):
            # An IPv4-mapped or NAT64 (well-known prefix) address is that IPv4 address on the
            # wire: its verdict is the IPv4 one. 6to4, IPv4-compatible and local-use NAT64 forms
            # of a refused IPv4 address are refused; otherwise they are judged as IPv6 below.
            if ip.ipv4_mapped is not None:
                return _embedded('an IPv4-mapped form', ip.ipv4_mapped)
            if ip in _NAT64[0]:
                return _embedded('a NAT64 form', _low_v4(ip))
            compatible = _low_v4(ip) if ip in _V4_COMPATIBLE else None
            local_nat64 = _low_v4(ip) if ip in _NAT64[1] else None
            for form, v4 in (('a 6to4 form', ip.sixtofour),
                             ('an IPv4-compatible form', compatible),
                             ('a NAT64 form', local_nat64)):
                reason = _embedded(form, v4) if v4 is not None else None
                if reason is not None:
                    return reason
        table = _REFUSED_V6
    else:
        table = _REFUSED_V4
    for network, label in table:
        if ip in network:
            return label
    if ip.is_reserved:
        return 'a reserved address'
    if not ip.is_global:
        return 'not a globally routable address'
    return None


def _embedded(form: str, v4: ipaddress.IPv4Address) -> str | None:
    reason = _refusal(v4)
    return None if reason is None else f'{form} of {v4}, {reason}'


def classify(address: str | IPAddress) -> str | None:
    """The reason ``address`` (an IP address, not a name) is refused, or None.

    Pure: no lookup, no allowlist. ``classify('169.254.169.254')`` is
    ``'169.254.169.254 is a link-local address'``."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    reason = _refusal(ip)
    return None if reason is None else f'{ip} is {reason}'


# --- targets -------------------------------------------------------------------------------

_LOCAL_NAMES = frozenset({
    'localhost', 'localhost.localdomain', 'localhost4', 'localhost4.localdomain4', 'localhost6',
    'localhost6.localdomain6', 'ip6-localhost', 'ip6-loopback', 'ip6-localnet',
})
_HOST_NAME = re.compile(r'[a-z0-9_-]+(\.[a-z0-9_-]+)*')
_NUMERIC_V4 = re.compile(r'[0-9][0-9a-fx.]*')   # what inet_aton may read as a number
_URL_UNSAFE = re.compile(r'[\x00-\x20\x7f]')


@dataclass(frozen=True)
class _Target:
    url: str
    scheme: str
    host: str                               # lower case, no trailing dot, no brackets
    port: int
    host_header: str
    request_target: str                     # path and query, as sent on the request line
    addresses: tuple[tuple[str, int], ...]  # what the connection may use, checked

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_V4.fullmatch(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _target(url: str) -> _Target:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise EgressDenied('the URL cannot be parsed (bad host or port)') from None
    scheme = parts.scheme.lower()
    if scheme not in ('http', 'https'):
        shown = scheme[:20] or 'none'
        raise EgressDenied(f'scheme {shown!r} is not allowed (http and https only)')
    if '@' in parts.netloc:
        raise EgressDenied('URLs with credentials (user@host) are not allowed')
    host = (parts.hostname or '').rstrip('.')
    if not host:
        raise EgressDenied('the URL has no host')
    literal = _literal(host)
    if literal is None and not _HOST_NAME.fullmatch(host):
        raise EgressDenied(f'{host[:100]!r} is not a valid host name')
    request_target = (parts.path or '/') + (f'?{parts.query}' if parts.query else '')
    if _URL_UNSAFE.search(request_target):
        raise EgressDenied('the URL contains spaces or control characters')
    default_port = 443 if scheme == 'https' else 80
    port = default_port if port is None else port
    shown_host = f'[{host}]' if ':' in host else host
    host_header = shown_host if port == default_port else f'{shown_host}:{port}'
    allowed = host in get_config().egress_private_host_allowlist

    if literal is not None:
        reason = None if allowed else _refusal(literal)
        if reason is not None:
            canonical = str(literal)
            raise EgressDenied(f'{canonical} is {reason}' if host == canonical
                               else f'{host} is {canonical}, {reason}')
        addresses: tuple[tuple[str, int], ...] = ((str(literal), port),)
    else:
        if not allowed and (host in _LOCAL_NAMES or host.endswith('.localhost')):
            raise EgressDenied(f'{host} is a local host name')
        addresses = _resolve(host, port, allowed)
    return _Target(url=parts._replace(fragment='').geturl(), scheme=scheme, host=host, port=port,
                   host_header=host_header, request_target=request_target, addresses=addresses)


def _resolve(host: str, port: int, allowed: bool) -> tuple[tuple[str, int], ...]:
    """The one lookup of a hop; every address it returns must pass."""
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM,
                                   socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        raise EgressError(f'{host} could not be resolved') from None
    addresses: list[tuple[str, int]] = []
    for family, _, _, _, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        ip = ipaddress.ip_address(str(sockaddr[0]).split('%', 1)[0])
        reason = None if allowed else _refusal(ip)
        if reason is not None:
            raise EgressDenied(f'{host} resolves to {ip}, {reason}')
        if (str(ip), port) not in addresses:
            addresses.append((str(ip), port))
    if not addresses:
        raise EgressError(f'{host} could not be resolved')
    return tuple(addresses)


def check_url(url: str) -> list[tuple[str, int]]:
    """The (address, port) pairs a request to ``url`` would connect to, or ``EgressDenied``.

    Applies the scheme, credential, host name and address rules and the allowlist, for this URL
    only (redirects are checked when they happen). An IP literal needs no network; a name is
    resolved with ``socket.getaddrinfo`` (``EgressError`` when it does not resolve)."""
    return list(_target(url).addresses)


# --- the transport -------------------------------------------------------------------------

class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise EgressTimeout(self.seconds)
        return left


class _Fuse:
    """Cuts one hop's connection when the call's deadline passes.

    A timer thread shuts the socket down at the deadline: ``shutdown``, unlike ``close``, wakes
    a thread blocked in ``recv`` or in the TLS handshake. It holds a duplicate of the socket's
    descriptor, because TLS wrapping detaches the socket object it was armed with, and because
    the duplicate keeps the descriptor number from being reused by another socket before the
    fuse is disarmed."""

    def __init__(self, deadline: _Deadline) -> None:
        self._deadline = deadline
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._timer: threading.Timer | None = None
        self.blown = False

    def arm(self, sock: socket.socket) -> None:
        self._socket = sock.dup()
        self._timer = threading.Timer(max(self._deadline.at - time.monotonic(), 0.0), self._blow)
        self._timer.daemon = True
        self._timer.start()

    def _blow(self) -> None:
        with self._lock:
            if self._socket is None:
                return
            self.blown = True
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self._socket is not None:
                self._socket.close()
                self._socket = None


def _connect(target: _Target, deadline: _Deadline, fuse: _Fuse) -> socket.socket:
    """A TCP connection to the first of the checked addresses that accepts one."""
    failure: OSError | None = None
    for ip, port in target.addresses:
        timeout = deadline.remaining()
        sock = socket.socket(socket.AF_INET6 if ':' in ip else socket.AF_INET, socket.SOCK_STREAM)
        connected = False
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(timeout)
            sock.connect((ip, port))
            connected = True
        except TimeoutError:
            raise EgressTimeout(deadline.seconds) from None
        except OSError as exc:
            failure = exc
        finally:
            if not connected:
                sock.close()
        if connected:
            fuse.arm(sock)
            return sock
    detail = failure.strerror if failure is not None and failure.strerror else str(failure)
    raise EgressError(f'could not connect to {target.host}: {detail}')


class _Transport(NamedTuple):
    connection: dict[str, type]          # scheme -> connection class
    errors: tuple[type[BaseException], ...]
    timeouts: tuple[type[BaseException], ...]


@functools.cache
def _transport() -> _Transport:
    # urllib3 is imported on the first outbound call, not with this module: it costs ~60 ms of
    # import (python -X importtime; http.client and ssl included), more than the API's whole
    # cold start (~42 ms).
    import http.client  # noqa: PLC0415 - lazy: see above

    import urllib3.exceptions  # noqa: PLC0415 - lazy: see above
    from urllib3.connection import HTTPConnection, HTTPSConnection  # noqa: PLC0415 - lazy: see above

    class PinnedHTTPConnection(HTTPConnection):
        """urllib3's connection, opened to the checked addresses instead of a fresh lookup."""

        def __init__(self, target: _Target, deadline: _Deadline, fuse: _Fuse, **kw: Any) -> None:
            super().__init__(target.host, target.port, timeout=deadline.remaining(), **kw)
            self._egress = (target, deadline, fuse)

        def _new_conn(self) -> socket.socket:
            return _connect(*self._egress)

    class PinnedHTTPSConnection(PinnedHTTPConnection, HTTPSConnection):
        def __init__(self, target: _Target, deadline: _Deadline, fuse: _Fuse) -> None:
            super().__init__(target, deadline, fuse, server_hostname=target.host,
                             ssl_context=_tls_context())

    return _Transport(
        connection={'http': PinnedHTTPConnection, 'https': PinnedHTTPSConnection},
        errors=(OSError, http.client.HTTPException, urllib3.exceptions.HTTPError),
        timeouts=(TimeoutError, urllib3.exceptions.TimeoutError),
    )


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The system trust store, certificate and host name verification on; built once."""
    import ssl  # noqa: PLC0415 - lazy like urllib3: ~10 ms of import, paid by the first https call only
    return ssl.create_default_context()


def _exchange(target: _Target, method: str, headers: dict[str, str], body: bytes | None,
              deadline: _Deadline, max_bytes: int) -> tuple[int, dict[str, str], bytes, bool]:
    """One hop: a fresh connection to the checked address, one request, one response."""
    transport = _transport()
    fuse = _Fuse(deadline)
    connection = transport.connection[target.scheme](target, deadline, fuse)
    try:
        connection.connect()
        connection.request(method, target.request_target, body=body,
                           headers=_with_ours(headers, target), preload_content=False)
        response = connection.getresponse()
        response_headers = {name.lower(): ', '.join(response.headers.getlist(name))
                            for name in response.headers}
        if response.status in _REDIRECT_STATUSES and 'location' in response_headers:
            content, truncated = b'', False
        else:
            content, truncated = _read_capped(response, max_bytes)
        result = (response.status, response_headers, content, truncated)
    except transport.errors as exc:
        if fuse.blown or isinstance(exc, transport.timeouts):
            raise EgressTimeout(deadline.seconds) from None
        raise EgressError(f'the request to {target.host} failed: {str(exc)[:300]}') from None
    finally:
        fuse.disarm()
        connection.close()
    if fuse.blown:
        raise EgressTimeout(deadline.seconds)
    return result


def _read_capped(response: Any, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    received = 0
    while received <= max_bytes:
        chunk = response.read(min(64 * 1024, max_bytes + 1 - received))
        if not chunk:
            break
        chunks.append(chunk)
        received += len(chunk)
    body = b''.join(chunks)
    return body[:max_bytes], received > max_bytes


# --- requests ------------------------------------------------------------------------------

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Set by this module or meaningless across a proxy hop; a caller's value is dropped.
_HEADERS_OURS = frozenset({'host', 'content-length', 'transfer-encoding', 'connection',
                           'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'expect'})
_HEADERS_KEPT_ACROSS_ORIGINS = frozenset({'accept', 'accept-language', 'content-type',
                                          'user-agent'})


def _caller_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    out = {}
    for name, value in (headers or {}).items():
        if not _TOKEN.fullmatch(name):
            raise ValueError(f'invalid header name {name[:60]!r}')
        if any(c in value for c in '\r\n\0'):
            raise ValueError(f'header {name} has a value with a line break or NUL')
        if name.lower() not in _HEADERS_OURS:
            out[name] = value
    return out


def _with_ours(headers: dict[str, str], target: _Target) -> dict[str, str]:
    sent = dict(headers)
    if not any(name.lower() == 'user-agent' for name in sent):
        sent['User-Agent'] = USER_AGENT
    sent['Connection'] = 'close'
    sent['Host'] = target.host_header
    return sent


def _with_params(url: str, params: Mapping[str, str | Sequence[str]] | None) -> str:
    if not params:
        return url
    query = urlencode(params, doseq=True)
    base, _, fragment = url.partition('#')
    return base + ('&' if '?' in base else '?') + query + (f'#{fragment}' if fragment else '')


def request(method: str, url: str, *, headers: Mapping[str, str] | None = None,
            params: Mapping[str, str | Sequence[str]] | None = None, json_body: Any = None,
            data: bytes | str | None = None, timeout: float = DEFAULT_TIMEOUT_SECONDS,
            max_bytes: int = DEFAULT_MAX_BYTES) -> EgressResponse:
    """Send one HTTP request through the fence, following redirects (see the module docstring).

    ``params`` are appended to the URL's query; ``json_body`` (sent as JSON, ``None`` meaning no
    body) and ``data`` are exclusive. Raises ``EgressDenied``, ``EgressTimeout``, ``EgressError``,
    and ``ValueError`` for arguments no upstream should ever see (unknown method, a header value
    with a line break, both bodies, a non-positive timeout)."""
    method = method.upper()
    if method not in METHODS:
        raise ValueError(f'method {method[:20]!r} is not supported')
    if json_body is not None and data is not None:
        raise ValueError('pass json_body or data, not both')
    if not (timeout > 0 and max_bytes >= 0):
        raise ValueError('timeout must be positive and max_bytes not negative')
    deadline = _Deadline(timeout)
    sent_headers = _caller_headers(headers)
    body: bytes | None = data.encode() if isinstance(data, str) else data
    if json_body is not None:
        body = json.dumps(json_body, separators=(',', ':'), ensure_ascii=False).encode()
        if not any(name.lower() == 'content-type' for name in sent_headers):
            sent_headers['Content-Type'] = 'application/json'

    url = _with_params(url, params)
    origin: tuple[str, str, int] | None = None
    for _ in range(MAX_REDIRECTS + 1):
        deadline.remaining()
        target = _target(url)
        if origin is not None and target.origin != origin:
            sent_headers = {name: value for name, value in sent_headers.items()
                            if name.lower() in _HEADERS_KEPT_ACROSS_ORIGINS}
        origin = target.origin
        status, response_headers, content, truncated = _exchange(
            target, method, sent_headers, body, deadline, max_bytes)
        location = response_headers.get('location') if status in _REDIRECT_STATUSES else None
        if location is None:
            return EgressResponse(status=status, headers=response_headers, body=content,
                                  truncated=truncated, url=target.url)
        if status in (301, 302, 303) and method != 'HEAD':
            method, body = 'GET', None
            sent_headers = {name: value for name, value in sent_headers.items()
                            if name.lower() != 'content-type'}
        url = urljoin(target.url, location)
    raise EgressError(f'the upstream redirected more than {MAX_REDIRECTS} times')
