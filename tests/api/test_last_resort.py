"""One last-resort mapping (core/last_resort.py) behind both front doors: an exception nothing
else answered is the same answer through REST and through an MCP tool call: a 503 with
Retry-After for an AWS dependency that cannot answer now, else a 500 naming the request id
(the X-Request-Id header) and nothing of the failure."""
from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from tests.faults import error

BUG = 'a secret detail of a bug'


def _raise(exc):
    def boom(*args, **kwargs):
        raise exc
    return boom


@pytest.fixture
def mcp_on(monkeypatch):
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('MCP_ENABLED', 'true')
    monkeypatch.setenv('MCP_PUBLIC_URL', 'https://api.example.com/mcp')
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests
    yield
    monkeypatch.undo()
    reset_config()


def _mcp_call(api, org_id):
    body = {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call',
            'params': {'name': 'list_tasks', 'arguments': {'organizationId': org_id}}}
    reply = api.post('/mcp', body, headers={'accept': 'application/json, text/event-stream'})
    assert reply.status == 200, reply.json
    result = reply.json['result']
    assert result['isError'] is True
    return reply, result['structuredContent']['error']


@pytest.mark.parametrize('exc, status', [(RuntimeError(BUG), 500),
                                         (ClientError(error('ThrottlingException'), 'Query'), 503)])
def test_rest_and_mcp_answer_an_unexpected_failure_alike(mcp_on, api, org_id, monkeypatch, exc, status):
    from chalicelib.features.mcp import tools
    from chalicelib.kernel import crud
    label = api.post('/api/labels', {'name': 'l', 'organizationId': org_id}).json
    monkeypatch.setattr(crud, 'get', _raise(exc))
    rest = api.get(f"/api/labels/{label['id']}")
    monkeypatch.setattr(tools, 'validate', _raise(exc))
    reply, tool = _mcp_call(api, org_id)
    assert rest.status == tool['status'] == status
    assert rest.json['error'] == tool['error']
    if status == 500:
        assert rest.json['message'] == f"An internal error occurred (request {rest.headers['x-request-id']})"
        assert tool['message'] == f"An internal error occurred (request {reply.headers['x-request-id']})"
    else:
        assert rest.json['message'] == tool['message'] and int(rest.headers['retry-after']) >= 1
    assert BUG not in json.dumps(rest.json) + json.dumps(reply.json)
