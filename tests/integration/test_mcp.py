"""The MCP tool connector through the official MCP Python SDK client (``streamable_http_client``
+ ``ClientSession``) over HTTP, against the app served on a loopback port (localdev/server.py,
the `make run` front door) with moto in process: both protocol eras (the 2025 ``initialize``
handshake and the 2026-07-28 ``server/discover`` envelope), the 20 tools, each read, each write
verified through REST on the same server, the same permission, tenancy, locking and group rules
as REST; the 401 challenge and the RFC 9728 metadata; version negotiation; transport edges.
Every address is 127.0.0.1."""
from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
import uuid
from contextlib import asynccontextmanager

import anyio
import pytest

from tests.conftest import ADMIN_KEY, make_org, make_user
from tests.support import create

READS = {'whoami', 'list_organizations', 'list_projects', 'list_teams', 'list_organization_members',
         'list_activities', 'get_activity', 'list_tasks', 'get_task', 'list_task_groups', 'get_task_group',
         'list_task_statuses', 'get_document_text'}
WRITES = {'assign_task', 'unassign_task', 'assign_task_group', 'unassign_task_group', 'update_task_status',
          'add_tasks_to_group', 'remove_task_from_group'}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, base: str) -> None:
        self.base = base
        self.url = base + '/mcp'

    def http(self, method, path, body=None, key=ADMIN_KEY, headers=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header('content-type', 'application/json')
        if key:
            req.add_header('x-api-key', key)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, hdrs, payload = resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as err:
            status, hdrs, payload = err.code, err.headers, err.read()
        return status, {k.lower(): v for k, v in hdrs.items()}, (json.loads(payload) if payload else None)

    def rest(self, method, path, body=None, key=ADMIN_KEY):
        status, _, payload = self.http(method, path, body, key)
        return status, payload

    def rpc(self, message, *, key=ADMIN_KEY, version='2025-11-25', headers=None):
        hdrs = {'accept': 'application/json, text/event-stream', **(headers or {})}
        if version:
            hdrs['mcp-protocol-version'] = version
        return self.http('POST', '/mcp', message, key=key, headers=hdrs)


@pytest.fixture
def served(platform, monkeypatch):
    from app import app
    from chalicelib.core.config import get_config, reset_config
    from localdev.server import serve
    port = _free_port()
    monkeypatch.setenv('MCP_ENABLED', 'true')
    monkeypatch.setenv('MCP_PUBLIC_URL', f'http://127.0.0.1:{port}/mcp')
    monkeypatch.setenv('AUTH_JWT_ISSUER', 'https://idp.example.test/')
    reset_config()
    get_config()
    app_class = type(app)
    server = serve(app, '127.0.0.1', port)   # (makes the app a LocalChalice: undone below)
    import threading
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(f'http://127.0.0.1:{port}')
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        app.__class__ = app_class
        monkeypatch.delenv('MCP_ENABLED')
        reset_config()


@asynccontextmanager
async def session_for(served: Served, key: str = ADMIN_KEY, *, modern: bool = False, headers=None):
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    async with create_mcp_http_client(headers={'x-api-key': key, **(headers or {})}) as http, \
            streamable_http_client(served.url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        if modern:
            await session.discover()
        else:
            await session.initialize()
        yield session


def run(coro_fn, *args):
    return anyio.run(coro_fn, *args)


class World:
    """An organization with a project, people of every role, statuses, tasks and a group."""

    def __init__(self, served: Served, api, org_id: str) -> None:
        self.org = org_id
        self.project = create(api, 'projects', org_id, name='Queue')
        self.team = create(api, 'teams', org_id, name='Reviewers')
        self.alice, self.alice_key = make_user(api, org_id, 'MEMBER')
        self.bob, self.bob_key = make_user(api, org_id, 'MEMBER')
        self.viewer, self.viewer_key = make_user(api, org_id, 'VIEWER')
        create(api, 'task-statuses', org_id, slug='open', label='Open', statusType='OPEN', sortOrder=1)
        create(api, 'task-statuses', org_id, slug='done', label='Done', statusType='DONE', sortOrder=2)
        self.group = create(api, 'task-groups', org_id, projectId=self.project['id'], name='Batch 7')
        self.grouped = [create(api, 'tasks', org_id, projectId=self.project['id'], title=f'g{i}',
                               statusSlug='open', taskGroupId=self.group['id']) for i in range(2)]
        self.loose = [create(api, 'tasks', org_id, projectId=self.project['id'], title=f'l{i}', statusSlug='open',
                             teamId=self.team['id']) for i in range(3)]
        self.activity = create(api, 'activities', org_id, projectId=self.project['id'], name='Nightly import')


@pytest.fixture
def world(served, api, org_id):
    return World(served, api, org_id)


def _ok(result):
    assert not result.is_error, result.content
    return result.structured_content


def _refused(result, status):
    assert result.is_error, result.structured_content
    error = result.structured_content['error']
    assert error['status'] == status, error
    return error


# ----------------------------------------------------------------------------- transport, versions

def test_initialize_and_the_19_tools_in_both_protocol_eras(served):
    async def main():
        for modern in (False, True):
            async with session_for(served, modern=modern) as session:
                assert session.protocol_version == ('2026-07-28' if modern else '2025-11-25')
                listed = await session.list_tools()
                assert {t.name for t in listed.tools} == READS | WRITES and len(listed.tools) == 20
                for tool in listed.tools:
                    assert tool.input_schema['type'] == 'object' and tool.output_schema['type'] == 'object'
                    assert tool.input_schema.get('additionalProperties') is False
                    assert tool.annotations.read_only_hint is (tool.name in READS)
                    assert tool.description
                assert (await session.send_ping()) is not None
    run(main)


def test_version_negotiation_and_unsupported_versions(served):
    init = {'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
            'params': {'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}}}
    for offered, answered in (('2025-11-25', '2025-11-25'), ('2025-06-18', '2025-06-18'),
                              ('2025-03-26', '2025-03-26'), ('2024-11-05', '2025-11-25'), ('1999-01-01', '2025-11-25')):
        msg = {**init, 'params': {**init['params'], 'protocolVersion': offered}}
        status, headers, body = served.rpc(msg, version=None)
        assert status == 200 and headers['content-type'].startswith('application/json')
        assert body['result']['protocolVersion'] == answered, offered
        assert body['result']['capabilities'] == {'tools': {'listChanged': False}}
        assert 'mcp-session-id' not in headers   # stateless: no session
    # an unsupported MCP-Protocol-Version header: 400, JSON-RPC -32022 naming what is served
    status, _, body = served.rpc({'jsonrpc': '2.0', 'id': 2, 'method': 'tools/list'}, version='2024-11-05')
    assert status == 400 and body['error']['code'] == -32022
    assert body['error']['data']['supported'] == ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26']
    assert served.rpc({'jsonrpc': '2.0', 'id': 3, 'method': 'tools/list'}, version='nonsense')[0] == 400
    # each supported version lists the tools; no header means 2025-03-26
    for version in ('2025-11-25', '2025-06-18', '2025-03-26', None):
        status, _, body = served.rpc({'jsonrpc': '2.0', 'id': 4, 'method': 'tools/list'}, version=version)
        assert status == 200 and len(body['result']['tools']) == 20 and 'resultType' not in body['result']
    # 2026-07-28 without its envelope, or with headers that disagree with it, is refused
    status, _, body = served.rpc({'jsonrpc': '2.0', 'id': 5, 'method': 'tools/list'}, version='2026-07-28',
                                 headers={'mcp-method': 'tools/list'})
    assert status == 400 and body['error']['code'] == -32602
    envelope = {'_meta': {'io.modelcontextprotocol/protocolVersion': '2026-07-28',
                          'io.modelcontextprotocol/clientCapabilities': {}}}
    status, _, body = served.rpc({'jsonrpc': '2.0', 'id': 6, 'method': 'tools/list', 'params': envelope},
                                 version='2026-07-28', headers={'mcp-method': 'tools/call'})
    assert status == 400 and body['error']['code'] == -32020
    status, _, body = served.rpc({'jsonrpc': '2.0', 'id': 7, 'method': 'tools/list', 'params': envelope},
                                 version='2026-07-28', headers={'mcp-method': 'tools/list'})
    assert status == 200 and body['result']['resultType'] == 'complete' and len(body['result']['tools']) == 20
    status, _, body = served.rpc({**init, 'params': {**init['params'], 'protocolVersion': '2026-07-28'}},
                                 version='2026-07-28')
    assert status == 400 and body['error']['code'] == -32022


def test_transport_edges_are_never_500(served):
    # notifications (and client responses) are accepted with 202 and no body
    status, _, body = served.rpc({'jsonrpc': '2.0', 'method': 'notifications/initialized'})
    assert status == 202 and body is None
    assert served.rpc({'jsonrpc': '2.0', 'id': 9, 'result': {}})[0] == 202
    # GET (no SSE stream) and DELETE (no session) are 405
    for method in ('GET', 'DELETE'):
        status, headers, body = served.http(method, '/mcp')
        assert status == 405 and headers['allow'] == 'POST' and body['status'] == 405
    # protocol errors are JSON-RPC errors
    status, _, body = served.http(
        'POST', '/mcp', raw=b'{"jsonrpc": "2.0", "id": 1, "method": ', headers={'mcp-protocol-version': '2025-11-25'})
    assert status == 400 and body['error']['code'] == -32700 and body['id'] is None
    assert served.rpc({'jsonrpc': '2.0', 'id': 1, 'method': 'resources/list'})[2]['error']['code'] == -32601
    for bad in ([], 7, {'jsonrpc': '1.0', 'id': 1, 'method': 'ping'}, {'jsonrpc': '2.0', 'id': True, 'method': 'ping'},
                {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call', 'params': []},
                {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call', 'params': {'name': 'nope'}},
                {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call', 'params': {'arguments': {}}}):
        status, _, body = served.rpc(bad)
        assert status == 400 and body['error']['code'] in (-32600, -32602), (bad, body)
    # a batch (2025-03-26) answers each request, in order
    status, _, body = served.rpc([{'jsonrpc': '2.0', 'id': 'a', 'method': 'ping'},
                                  {'jsonrpc': '2.0', 'method': 'notifications/initialized'},
                                  {'jsonrpc': '2.0', 'id': 'b', 'method': 'tools/list'}], version='2025-03-26')
    assert status == 200 and [m['id'] for m in body] == ['a', 'b']
    # bad arguments are tool errors the model can read
    status, _, body = served.rpc({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call',
                                  'params': {'name': 'get_task', 'arguments': {'taskId': 1, 'x': 2}}})
    assert status == 200 and body['result']['isError'] is True
    assert "unknown argument 'x'" in body['result']['content'][0]['text']


def test_disabled_connector_is_404(api, monkeypatch):
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.delenv('MCP_ENABLED', raising=False)
    reset_config()
    get_config()
    for path in ('/mcp', '/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp'):
        assert api.get(path).status == 404
    assert api.post('/mcp', {'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}).status == 404
    assert api.post('/mcp', {'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}, key=None).status == 404


# ----------------------------------------------------------------------------- authentication

def test_unauthenticated_gets_401_with_resource_metadata_per_rfc_9728(served):
    status, headers, body = served.rpc({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'}, key=None)
    assert status == 401 and body['status'] == 401
    challenge = headers['www-authenticate']
    assert challenge.startswith('Bearer ') and 'resource_metadata="' in challenge
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    assert metadata_url == served.base + '/.well-known/oauth-protected-resource/mcp'
    status, _, doc = served.http('GET', metadata_url[len(served.base):], key=None)
    assert status == 200
    # RFC 9728 section 2: resource (REQUIRED) is the protected resource's identifier, the URL the
    # metadata was derived from (section 3.3); authorization_servers lists issuer identifiers;
    # bearer_methods_supported / scopes_supported as declared
    assert doc['resource'] == served.url
    assert doc['authorization_servers'] == ['https://idp.example.test/']
    assert doc['bearer_methods_supported'] == ['header'] and doc['scopes_supported']
    assert all(isinstance(v, str) for v in doc['scopes_supported'] + doc['authorization_servers'])
    assert served.http('GET', '/.well-known/oauth-protected-resource', key=None)[2] == doc
    # an invalid key: 401 too, naming the token error and the metadata
    status, headers, _ = served.rpc({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list'}, key='pk_wrong')
    assert status == 401 and 'error="invalid_token"' in headers['www-authenticate']


def test_bearer_tokens_must_carry_the_resource_in_their_audience(served, api, org_id, monkeypatch):
    from chalicelib.core import jwt_verify
    from chalicelib.core.config import get_config, reset_config
    from tests.unit.test_jwt_verify import ISSUER, JwksServer, Signer
    signer = Signer('RS256')
    jwks = JwksServer(signer)
    try:
        monkeypatch.setenv('AUTH_JWT_ISSUER', ISSUER)
        monkeypatch.setenv('AUTH_JWT_AUDIENCE', 'platform-api')
        monkeypatch.setenv('AUTH_JWT_JWKS_URL', jwks.url)
        reset_config()
        get_config()
        jwt_verify.reset_caches()
        user, _ = make_user(api, org_id, 'MEMBER')
        ping = {'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}

        def call(token):
            return served.rpc(ping, key=None, headers={'authorization': f'Bearer {token}'})
        # a token for the REST API (audience platform-api) is not one for this resource
        status, headers, _ = call(signer.token(user['email']))
        assert status == 401 and 'resource_metadata=' in headers['www-authenticate']
        assert call(signer.token(user['email'], aud='https://elsewhere.example/mcp'))[0] == 401
        assert call(signer.token(user['email'], aud=served.url))[0] == 200
        assert call(signer.token(user['email'], aud=['platform-api', served.url]))[0] == 200

        async def whoami():
            from mcp.client.session import ClientSession
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client
            token = signer.token(user['email'], aud=served.url)
            async with create_mcp_http_client(headers={'authorization': f'Bearer {token}'}) as http, \
                    streamable_http_client(served.url, http_client=http) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                return _ok(await session.call_tool('whoami', {}))
        me = run(whoami)
        assert me['userId'] == user['id'] and me['credential'] == 'jwt'
    finally:
        jwks.close()
        jwt_verify.reset_caches()


def test_origin_is_checked_when_present(served, monkeypatch):
    ping = {'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}
    assert served.rpc(ping, headers={'origin': 'https://evil.example'})[0] == 403
    assert served.rpc(ping, headers={'origin': 'null'})[0] == 403
    assert served.rpc(ping, headers={'origin': served.base})[0] == 200
    assert served.rpc(ping)[0] == 200   # no Origin: not a browser


# ----------------------------------------------------------------------------- tools

def test_every_read_tool(served, world):
    w = world

    async def main():
        async with session_for(served) as s:
            me = _ok(await s.call_tool('whoami', {}))
            assert me['platformAdmin'] is True and me['email'] == 'admin@example.com'
            orgs = _ok(await s.call_tool('list_organizations', {}))
            assert w.org in {o['id'] for o in orgs['content']}
            projects = _ok(await s.call_tool('list_projects', {'organizationId': w.org, 'query': 'queue'}))
            assert [p['id'] for p in projects['content']] == [w.project['id']]
            everything = _ok(await s.call_tool('list_projects', {'organizationId': w.org, 'pageSize': 100}))
            assert {p['organizationId'] for p in everything['content']} == {w.org}
            teams = _ok(await s.call_tool('list_teams', {'organizationId': w.org, 'query': 'review'}))
            assert [t['id'] for t in teams['content']] == [w.team['id']]
            members = _ok(await s.call_tool('list_organization_members', {'organizationId': w.org, 'pageSize': 100}))
            roles = {m['email']: m['role'] for m in members['content']}
            assert roles[w.alice['email']] == 'MEMBER' and roles[w.viewer['email']] == 'VIEWER'
            activities = _ok(await s.call_tool('list_activities', {'projectId': w.project['id']}))
            assert [a['id'] for a in activities['content']] == [w.activity['id']]
            got = _ok(await s.call_tool('get_activity', {'activityId': w.activity['id']}))
            assert got['name'] == 'Nightly import' and got['status'] == 'PENDING'
            tasks = _ok(await s.call_tool('list_tasks', {'projectId': w.project['id'], 'pageSize': 3}))
            assert tasks['totalElements'] == 5 and len(tasks['content']) == 3 and tasks['totalPages'] == 2
            grouped = _ok(await s.call_tool('list_tasks', {'taskGroupId': w.group['id']}))
            assert {t['id'] for t in grouped['content']} == {t['id'] for t in w.grouped}
            teamed = _ok(await s.call_tool('list_tasks', {'teamId': w.team['id'], 'statusSlug': 'open'}))
            assert teamed['totalElements'] == 3
            task = _ok(await s.call_tool('get_task', {'taskId': w.loose[0]['id']}))
            assert task['title'] == 'l0' and task['changeSequence'] == 1
            groups = _ok(await s.call_tool('list_task_groups', {'projectId': w.project['id']}))
            assert [g['name'] for g in groups['content']] == ['Batch 7']
            group = _ok(await s.call_tool('get_task_group', {'taskGroupId': w.group['id']}))
            assert group['taskGroup']['name'] == 'Batch 7' and group['totalTasks'] == 2
            statuses = _ok(await s.call_tool('list_task_statuses', {'organizationId': w.org}))
            assert [st['slug'] for st in statuses['content']][-2:] == ['open', 'done']
            # the text content carries the same JSON for clients that read only text
            raw = await s.call_tool('get_task', {'taskId': w.loose[0]['id']})
            assert json.loads(raw.content[0].text) == raw.structured_content
    run(main)


def test_every_write_tool_changes_what_rest_shows(served, world):
    w = world
    alice, bob = w.alice['id'], w.bob['id']

    async def main():
        async with session_for(served) as s:
            t = w.loose[0]['id']
            # assign_task / unassign_task (with and without changeSequence)
            done = _ok(await s.call_tool('assign_task', {'taskId': t, 'assigneeId': alice, 'changeSequence': 1}))
            assert done['assigneeId'] == alice and done['changeSequence'] == 2
            assert served.rest('GET', f'/api/tasks/{t}')[1]['assigneeId'] == alice
            _ok(await s.call_tool('unassign_task', {'taskId': t}))
            assert 'assigneeId' not in served.rest('GET', f'/api/tasks/{t}')[1]
            # update_task_status
            _ok(await s.call_tool('update_task_status', {'taskId': t, 'statusSlug': 'done', 'changeSequence': 3}))
            assert served.rest('GET', f'/api/tasks/{t}')[1]['statusSlug'] == 'done'
            _refused(await s.call_tool('update_task_status', {'taskId': t, 'statusSlug': 'nope'}), 400)
            # assign_task_group: every member takes the assignee in the same write
            out = _ok(await s.call_tool('assign_task_group', {'taskGroupId': w.group['id'], 'assigneeId': bob}))
            assert out['taskGroup']['assigneeId'] == bob and {x['assigneeId'] for x in out['tasks']} == {bob}
            for member in w.grouped:
                assert served.rest('GET', f"/api/tasks/{member['id']}")[1]['assigneeId'] == bob
            # add_tasks_to_group: the joining tasks take the group's assignee, in one write
            joined = _ok(await s.call_tool('add_tasks_to_group', {'taskGroupId': w.group['id'],
                                                                  'taskIds': [w.loose[1]['id'], w.loose[2]['id']]}))
            assert {x['assigneeId'] for x in joined['tasks']} == {bob}
            for loose in w.loose[1:]:
                rest = served.rest('GET', f"/api/tasks/{loose['id']}")[1]
                assert rest['taskGroupId'] == w.group['id'] and rest['assigneeId'] == bob
            # assign_task on a grouped task is refused, naming its group
            error = _refused(await s.call_tool('assign_task', {'taskId': w.loose[1]['id'], 'assigneeId': alice}), 400)
            assert w.group['id'] in error['message'] and 'Batch 7' in error['message']
            # remove_task_from_group: it keeps its assignee, now its own
            _ok(await s.call_tool('remove_task_from_group', {'taskId': w.loose[2]['id']}))
            rest = served.rest('GET', f"/api/tasks/{w.loose[2]['id']}")[1]
            assert 'taskGroupId' not in rest and rest['assigneeId'] == bob
            _refused(await s.call_tool('remove_task_from_group', {'taskId': w.loose[2]['id']}), 409)
            # unassign_task_group clears the group and its members
            _ok(await s.call_tool('unassign_task_group', {'taskGroupId': w.group['id']}))
            for member in [*w.grouped, w.loose[1]]:
                assert 'assigneeId' not in served.rest('GET', f"/api/tasks/{member['id']}")[1]
            # the group's history (REST) recorded the tool writes, by the caller
            history = served.rest('GET', f"/api/task-groups/{w.group['id']}/history?pageSize=100")[1]['content']
            changes = [h['changes'] for h in history]
            assert {'assigneeId': bob} in [{k: v for k, v in c.items() if k == 'assigneeId'} for c in changes]
            assert {'taskAdded': w.loose[1]['id']} in changes and {'taskRemoved': w.loose[2]['id']} in changes
            assert {h['userEmail'] for h in history} == {'admin@example.com'}
    run(main)


def test_a_viewers_write_is_refused_and_changes_nothing(served, world):
    w = world

    async def main():
        async with session_for(served, w.viewer_key) as s:
            task = _ok(await s.call_tool('get_task', {'taskId': w.loose[0]['id']}))   # reads are fine
            for name, args in (('assign_task', {'taskId': w.loose[0]['id'], 'assigneeId': 'me'}),
                               ('update_task_status', {'taskId': w.loose[0]['id'], 'statusSlug': 'done'}),
                               ('assign_task_group', {'taskGroupId': w.group['id'], 'assigneeId': 'me'}),
                               ('add_tasks_to_group', {'taskGroupId': w.group['id'], 'taskIds': [w.loose[0]['id']]})):
                _refused(await s.call_tool(name, args), 403)
            return task
    task = run(main)
    after = served.rest('GET', f"/api/tasks/{w.loose[0]['id']}")[1]
    assert after == task and 'assigneeId' not in after and 'taskGroupId' not in after
    # a member may: the same call goes through
    async def member():
        async with session_for(served, w.alice_key, modern=True) as s:
            return _ok(await s.call_tool('assign_task', {'taskId': w.loose[0]['id'], 'assigneeId': 'me'}))
    assert run(member)['assigneeId'] == w.alice['id']


def test_another_organizations_records_are_not_found(served, world, api):
    other = make_org(api)
    project = create(api, 'projects', other['id'])
    foreign = create(api, 'tasks', other['id'], projectId=project['id'], title='secret')
    group = create(api, 'task-groups', other['id'], projectId=project['id'], name='theirs')

    async def main():
        async with session_for(served, world.alice_key) as s:
            for name, args in (('get_task', {'taskId': foreign['id']}),
                               ('assign_task', {'taskId': foreign['id'], 'assigneeId': 'me'}),
                               ('get_task_group', {'taskGroupId': group['id']}),
                               ('list_tasks', {'projectId': project['id']}),
                               ('list_organization_members', {'organizationId': other['id']}),
                               ('add_tasks_to_group', {'taskGroupId': world.group['id'], 'taskIds': [foreign['id']]})):
                error = _refused(await s.call_tool(name, args), 404)
                assert 'secret' not in json.dumps(error)
            listed = _ok(await s.call_tool('list_tasks', {'query': 'secret'}))
            assert listed['totalElements'] == 0
            random_id = _refused(await s.call_tool('get_task', {'taskId': str(uuid.uuid4())}), 404)
            return random_id
    run(main)


def test_a_stale_change_sequence_is_refused_with_the_current_one(served, world):
    w = world
    t = w.loose[0]['id']
    assert served.rest('PUT', f'/api/tasks/{t}', {'title': 'renamed elsewhere'})[0] == 200   # now at 2

    async def main():
        async with session_for(served, modern=True) as s:
            for name, args in (('assign_task', {'taskId': t, 'assigneeId': 'me', 'changeSequence': 1}),
                               ('unassign_task', {'taskId': t, 'changeSequence': 1}),
                               ('update_task_status', {'taskId': t, 'statusSlug': 'done', 'changeSequence': 1}),
                               ('remove_task_from_group', {'taskId': w.grouped[0]['id'], 'changeSequence': 9})):
                result = await s.call_tool(name, args)
                error = _refused(result, 409)
                assert error['changeSequence'] == (2 if name != 'remove_task_from_group' else 1)
                assert 'current changeSequence' in result.content[0].text
            for name, args in (('assign_task_group', {'taskGroupId': w.group['id'], 'assigneeId': 'me',
                                                      'changeSequence': 5}),
                               ('add_tasks_to_group', {'taskGroupId': w.group['id'], 'taskIds': [t],
                                                       'changeSequence': 5})):
                assert _refused(await s.call_tool(name, args), 409)['changeSequence'] == 1
    run(main)
    rest = served.rest('GET', f'/api/tasks/{t}')[1]
    assert rest['changeSequence'] == 2 and 'assigneeId' not in rest and rest['statusSlug'] == 'open'


def test_an_unexpected_failure_inside_a_tool_is_a_tool_error_not_a_500(served, monkeypatch):
    import dataclasses

    from chalicelib.features.mcp import tools

    def boom(args, principal):
        raise RuntimeError('disk on fire')
    monkeypatch.setitem(tools.BY_NAME, 'whoami', dataclasses.replace(tools.BY_NAME['whoami'], run=boom))
    status, headers, body = served.rpc({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call',
                                        'params': {'name': 'whoami', 'arguments': {}}})
    assert status == 200 and body['result']['isError'] is True
    error = body['result']['structuredContent']['error']
    assert error['status'] == 500 and headers['x-request-id'] in error['message']
    assert 'disk on fire' not in json.dumps(body)
