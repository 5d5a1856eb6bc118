"""Issue 24, finding 5: a 2025-03-26 JSON-RPC batch counts every call against the rate limit
(features/identity/ratelimit.py ``count_more``); the calls past it are not run and each gets its
own JSON-RPC error naming the limit. Through HTTP on loopback (the served app of test_mcp.py)."""
from __future__ import annotations

import time

import pytest

from tests.integration.test_mcp import served  # noqa: F401 - fixture


@pytest.fixture
def limited(monkeypatch):
    from chalicelib.core.config import reset_config
    monkeypatch.setenv('RATE_LIMIT_PER_MINUTE', '100')
    monkeypatch.setenv('RATE_LIMIT_BURST_PER_SECOND', '1000')
    monkeypatch.setenv('RATE_LIMIT_USER_PER_MINUTE', '1000')
    monkeypatch.setenv('RATE_LIMIT_USER_BURST_PER_SECOND', '1000')
    reset_config()
    yield
    monkeypatch.setenv('RATE_LIMIT_PER_MINUTE', '100000')
    monkeypatch.setenv('RATE_LIMIT_BURST_PER_SECOND', '100000')
    reset_config()


def test_a_batch_of_150_calls_counts_150_and_refuses_past_the_limit(limited, served):  # noqa: F811
    if time.time() % 60 > 45:   # the whole test inside one minute window
        time.sleep(61 - time.time() % 60)
    batch = [{'jsonrpc': '2.0', 'id': i, 'method': 'tools/call', 'params': {'name': 'whoami', 'arguments': {}}}
             for i in range(150)]
    status, _, answers = served.rpc(batch, version='2025-03-26')
    assert status == 200 and len(answers) == 150
    ran = [a['id'] for a in answers if 'result' in a]
    refused = [a for a in answers if 'error' in a]
    assert ran == list(range(len(ran))) and 90 <= len(ran) <= 100   # the first ones, up to the limit
    assert [a['id'] for a in refused] == list(range(len(ran), 150))   # each refused call, by its id
    first = refused[0]['error']
    assert first['code'] == -32029 and first['data']['status'] == 429 and first['data']['limit'] == 100
    assert f'request {len(ran) + 1} of 150 in this batch was not run' in first['message']
    # every call was counted: the credential's minute is used up
    status, headers, body = served.http('GET', '/api/account/me')
    assert status == 429 and headers['x-ratelimit-remaining'] == '0', body


def test_a_small_batch_runs_whole(limited, served):  # noqa: F811
    batch = [{'jsonrpc': '2.0', 'id': i, 'method': 'tools/call', 'params': {'name': 'whoami', 'arguments': {}}}
             for i in range(3)] + [{'jsonrpc': '2.0', 'method': 'notifications/initialized'}]
    status, _, answers = served.rpc(batch, version='2025-03-26')
    assert status == 200 and [a['id'] for a in answers if 'result' in a] == [0, 1, 2]
