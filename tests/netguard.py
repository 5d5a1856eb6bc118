"""The network guard and the loopback upstream shared by the tests that make outbound calls
(tests/unit/test_egress.py, tests/api/test_bridges_*.py).

``install(monkeypatch)`` makes sure nothing reaches beyond this machine, even with a broken
fence: name lookups are answered from a table the test fills (numeric hosts only otherwise, never
DNS), and sockets may connect or send to loopback only; anything else raises ``GuardTripped``,
a BaseException that no ``except Exception`` in the code under test can swallow, and is recorded
in ``Net.tripped`` so the test's teardown fails the test anyway (``assert_untripped``).

``Upstream`` is an http.server on 127.0.0.1 in a thread, recording what it was sent; the egress
fence refuses it unless ``BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST`` names its host."""
from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import socketserver
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NoReturn
from urllib.parse import parse_qsl, quote, urlsplit

import pytest

LOOPBACK = (ipaddress.ip_network('127.0.0.0/8'), ipaddress.ip_network('::1/128'))


# --- the network guard ---------------------------------------------------------------------

class GuardTripped(BaseException):
    """A test tried to reach beyond loopback."""


@dataclass
class Net:
    """What tests may do on the network, and what they tried."""
    answers: dict[str, list[list[str]]] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)
    connects: list[tuple[str, int]] = field(default_factory=list)
    tripped: list[str] = field(default_factory=list)

    def resolve(self, name: str, *answers: list[str]) -> None:
        """Successive lookups of ``name`` get successive answers; the last one repeats."""
        self.answers[name] = list(answers)

    def trip(self, what: str) -> NoReturn:
        self.tripped.append(what)
        raise GuardTripped(what)


def _is_loopback(host: Any) -> bool:
    try:
        ip = ipaddress.ip_address(str(host).split('%', 1)[0])
    except ValueError:
        return False
    return any(ip in network for network in LOOPBACK)


def install(monkeypatch: pytest.MonkeyPatch) -> Net:
    """Guard the network for the rest of the test (undone with ``monkeypatch``)."""
    state = Net()
    real_getaddrinfo = socket.getaddrinfo
    real_connect, real_connect_ex, real_sendto = (socket.socket.connect, socket.socket.connect_ex,
                                                  socket.socket.sendto)
    real_create_connection = socket.create_connection

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                    flags: int = 0) -> list:
        state.lookups.append(str(host))
        name = str(host).lower()
        if name in state.answers:
            answers = state.answers[name]
            current = answers.pop(0) if len(answers) > 1 else answers[0]
            return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, '', (ip, port, 0, 0))
                    if ':' in ip else
                    (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, '', (ip, port))
                    for ip in current]
        try:   # a numeric host, decoded by the C library; a name would need DNS: refused
            return real_getaddrinfo(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        except socket.gaierror:
            state.trip(f'name lookup of {host!r}')

    def check(address: Any) -> None:
        if isinstance(address, (str, bytes)):   # AF_UNIX
            return
        if not _is_loopback(address[0]):
            state.trip(f'connection to {address!r}')

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        if not isinstance(address, (str, bytes)):
            state.connects.append((address[0], address[1]))
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    def sendto(self: socket.socket, data: bytes, *args: Any) -> int:
        check(args[-1])
        return real_sendto(self, data, *args)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        check(address)
        return real_create_connection(address, *args, **kwargs)

    def refuse_lookup(name: Any, *args: Any) -> NoReturn:
        state.trip(f'lookup of {name!r}')

    monkeypatch.setattr(socket, 'getaddrinfo', getaddrinfo)
    monkeypatch.setattr(socket.socket, 'connect', connect)
    monkeypatch.setattr(socket.socket, 'connect_ex', connect_ex)
    monkeypatch.setattr(socket.socket, 'sendto', sendto)
    monkeypatch.setattr(socket, 'create_connection', create_connection)
    for name in ('gethostbyname', 'gethostbyname_ex', 'gethostbyaddr'):
        monkeypatch.setattr(socket, name, refuse_lookup)
    return state


def assert_untripped(state: Net) -> None:
    assert not state.tripped, f'the network guard was tripped: {state.tripped}'


# --- an upstream on loopback ---------------------------------------------------------------

@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN; the guard (rightly) refuses that.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = '127.0.0.1', self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass   # clients that hang up on purpose (cap, deadline) are expected


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = 'HTTP/1.1'

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        upstream: Upstream = self.server.upstream  # type: ignore[attr-defined]
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length) if length else b''
        upstream.seen.append(Seen(self.command, self.path,
                                  {k.lower(): v for k, v in self.headers.items()}, body))
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query))
        getattr(self, 'route_' + parts.path.strip('/').split('/')[0])(query)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

    def _reply(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name.replace('_', '-'), value)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    def route_hello(self, query: dict[str, str]) -> None:
        self._reply(200, b'hello', Content_Type='text/plain')

    def route_echo(self, query: dict[str, str]) -> None:
        seen = self.server.upstream.seen[-1]  # type: ignore[attr-defined]
        self._reply(200, json.dumps({'method': seen.method, 'path': seen.path,
                                     'headers': seen.headers, 'body': seen.body.decode()}).encode(),
                    Content_Type='application/json')

    def route_status(self, query: dict[str, str]) -> None:
        """Answers ``code`` with ``body`` as ``type`` (defaults: 200, {}, application/json)."""
        self._reply(int(query.get('code', 200)), query.get('body', '{}').encode(),
                    Content_Type=query.get('type', 'application/json'))

    def route_bytes(self, query: dict[str, str]) -> None:
        self._reply(200, b'x' * int(query['n']))

    def route_endless(self, query: dict[str, str]) -> None:
        """A body without a length that never ends: only the cap stops a reader."""
        self.send_response(200)
        self.send_header('Connection', 'close')
        self.end_headers()
        self.close_connection = True
        with contextlib.suppress(OSError):
            while True:
                self.wfile.write(b'y' * 65536)

    def route_sleep(self, query: dict[str, str]) -> None:
        time.sleep(float(query['s']))
        self._reply(200, b'late')

    def route_drip(self, query: dict[str, str]) -> None:
        """Headers at once, then a byte every 50 ms: no single read ever waits long."""
        self.send_response(200)
        self.send_header('Content-Length', '1000')
        self.end_headers()
        with contextlib.suppress(OSError):
            for _ in range(1000):
                self.wfile.write(b'z')
                time.sleep(0.05)

    def route_redirect(self, query: dict[str, str]) -> None:
        """To ``to`` after ``via`` more hops on this server, pausing ``s`` seconds per hop."""
        time.sleep(float(query.get('s', 0)))
        via = int(query.get('via', 0))
        location = query['to'] if via == 0 else '/redirect?' + '&'.join(
            f'{k}={quote(v, safe="")}' for k, v in {**query, 'via': str(via - 1)}.items())
        self._reply(int(query.get('status', 302)), b'moved', Location=location)


class Upstream:
    """An HTTP(S) server on 127.0.0.1 in a thread, recording what it was sent."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.seen: list[Seen] = []
        self.server = _Server(('127.0.0.1', 0), _Handler)
        self.server.upstream = self  # type: ignore[attr-defined]
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={'poll_interval': 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = '127.0.0.1', scheme: str = 'http') -> str:
        return f'{scheme}://{host}:{self.port}{path}'

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
