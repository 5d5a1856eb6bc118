"""Loaded at start-up by the SDK and CLI subprocesses of tests/integration/test_sdk_client.py
(their PYTHONPATH names this folder): the network guard for a process the in-process guard
(tests/netguard.py) cannot reach. Sockets may connect to loopback only and names resolve only
when they are numeric loopback addresses or ``localhost``; anything else prints
``NETGUARD TRIPPED <what>`` on stderr and raises, and the test fails on that line."""
import ipaddress
import socket
import sys

_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_getaddrinfo = socket.getaddrinfo


def _loopback(host) -> bool:
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(str(host).split('%', 1)[0]).is_loopback
    except ValueError:
        return False


def _trip(what: str):
    print(f'NETGUARD TRIPPED {what}', file=sys.stderr, flush=True)
    raise OSError(f'network guard: {what} is beyond loopback')


def _check(address) -> None:
    if isinstance(address, tuple) and not _loopback(address[0]):
        _trip(f'connect {address[0]}:{address[1]}')


def connect(self, address):
    _check(address)
    return _connect(self, address)


def connect_ex(self, address):
    _check(address)
    return _connect_ex(self, address)


def getaddrinfo(host, *args, **kwargs):
    if host is not None and not _loopback(host if isinstance(host, str) else host.decode()):
        _trip(f'lookup {host}')
    return _getaddrinfo(host, *args, **kwargs)


socket.socket.connect = connect
socket.socket.connect_ex = connect_ex
socket.getaddrinfo = getaddrinfo
