"""Fixtures the API tests share (before issue 40 each module kept its own copy).

* ``bucket``: the documents bucket on the test's moto (features/documents/blobs.py).
* ``net``: the network guard (tests/netguard.py) installed for the test, checked untripped after
  it: a lookup the test did not answer, or a connection anywhere but loopback, fails the test.
  Modules that must never send a packet off this machine use it for every test
  (``pytestmark = pytest.mark.usefixtures('net')``).
* ``upstream``: an HTTP server on loopback standing in for a service bridge's upstream.
* ``reach``: the upstream's base URL by a name the egress fence may reach (allowlisted,
  resolving to 127.0.0.1).
"""
from __future__ import annotations

import pytest

from tests.bridging import UPSTREAM_HOST, configure
from tests.netguard import Net, Upstream, assert_untripped, install


@pytest.fixture
def bucket(aws):
    from chalicelib.core.config import get_config
    from chalicelib.features.documents import blobs
    blobs.reset()
    blobs.client().create_bucket(Bucket=get_config().bucket_name)
    yield blobs.client()
    blobs.reset()


@pytest.fixture
def net(monkeypatch) -> Net:
    state = install(monkeypatch)
    yield state
    assert_untripped(state)


@pytest.fixture
def upstream() -> Upstream:
    server = Upstream()
    yield server
    server.close()


@pytest.fixture
def reach(net: Net, monkeypatch, upstream: Upstream) -> str:
    net.resolve(UPSTREAM_HOST, ['127.0.0.1'])
    configure(monkeypatch, BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST=UPSTREAM_HOST)
    return f'http://{UPSTREAM_HOST}:{upstream.port}'
