"""Agent tools: list_service_bridges and call_service_bridge, allowed only for agent-callable
bridges of the project the call is tied to (an agent's own project, or the project of a running
execution named by executionId); a call that cannot be tied to a project is 403."""
from __future__ import annotations

import uuid

import pytest

from tests.bridging import endpoint, make_bridge, project
from tests.conftest import make_org, make_user

TOOLS = '/api/service-bridges/agent-tools'


pytestmark = pytest.mark.usefixtures('net')   # tests/api/conftest.py: no packet leaves this machine


@pytest.fixture
def setup(api, org_id, reach):
    """Two projects of the default organization; in the first a callable and a non-callable
    bridge, in the second a callable one; a running execution in the first."""
    first, second = project(api, org_id, 'first'), project(api, org_id, 'second')
    callable_ = make_bridge(api, first['id'], reach, [endpoint('echo', '/echo', 'POST'),
                                                       endpoint('find', '/echo', required=['id'])],
                            name='Callable', slug='callable', agentCallable=True, description='the one')
    hidden = make_bridge(api, first['id'], reach, [endpoint('echo', '/echo')], name='Hidden', slug='hidden')
    elsewhere = make_bridge(api, second['id'], reach, [endpoint('echo', '/echo')], name='Elsewhere',
                            slug='elsewhere', agentCallable=True)
    execution = api.post('/api/executions', {'projectId': first['id'], 'name': 'run', 'status': 'RUNNING'}).json
    return {'first': first, 'second': second, 'callable': callable_, 'hidden': hidden, 'elsewhere': elsewhere,
            'execution': execution}


def test_the_literal_route_wins_over_the_bridge_id(api, setup):
    r = api.get(f"{TOOLS}?projectId={setup['first']['id']}")
    assert r.status == 200 and 'bridges' in r.json
    assert api.get(f"/api/service-bridges/{setup['callable']['id']}").json['name'] == 'Callable'
    assert api.get(f'{TOOLS}/call').status == 405                   # only POST there
    assert api.get('/api/service-bridges/agent-tools/sequence').status == 400   # /{id}/sequence, a bad id


def test_list_shows_the_agent_callable_bridges_of_the_tied_project(api, setup):
    listed = api.get(f"{TOOLS}?projectId={setup['first']['id']}").json
    assert listed['projectId'] == setup['first']['id']
    assert [b['name'] for b in listed['bridges']] == ['Callable']
    bridge = listed['bridges'][0]
    assert bridge['id'] == setup['callable']['id'] and bridge['slug'] == 'callable'
    assert bridge['description'] == 'the one'
    assert bridge['endpoints'] == [
        {'name': 'echo', 'method': 'POST'},
        {'name': 'find', 'method': 'GET', 'requestSchema': {'type': 'object', 'required': ['id'], 'properties': {}}}]
    assert 'defaultHeaders' not in bridge and 'baseUrl' not in bridge
    by_execution = api.get(f"{TOOLS}?executionId={setup['execution']['id']}").json
    assert by_execution['executionId'] == setup['execution']['id']
    assert [b['name'] for b in by_execution['bridges']] == ['Callable']
    second = api.get(f"{TOOLS}?projectId={setup['second']['id']}").json
    assert [b['name'] for b in second['bridges']] == ['Elsewhere']


def test_a_list_that_cannot_be_tied_is_403(api, setup):
    r = api.get(TOOLS)
    assert r.status == 403 and 'cannot be tied to a project' in r.json['message']
    assert api.get(f'{TOOLS}?projectId={uuid.uuid4()}').status == 404
    assert api.get(f'{TOOLS}?projectId=nope').status == 400
    mismatch = api.get(f"{TOOLS}?executionId={setup['execution']['id']}&projectId={setup['second']['id']}")
    assert mismatch.status == 400


def test_call_service_bridge_answers_status_ok_body_truncated(api, setup, upstream):
    r = api.post(f'{TOOLS}/call', {'bridge': setup['callable']['id'], 'endpoint_name': 'echo',
                                   'query': {'q': 'x', 'n': 2, 'flag': False, 'many': ['a', 'b'], 'none': None},
                                   'body': {'k': 'v'}, 'executionId': setup['execution']['id']})
    assert r.status == 200, r.json
    assert set(r.json) == {'status', 'ok', 'body', 'truncated'}
    assert (r.json['status'], r.json['ok'], r.json['truncated']) == (200, True, False)
    assert r.json['body']['method'] == 'POST'
    assert r.json['body']['path'] == '/echo?q=x&n=2&flag=false&many=a&many=b'
    assert r.json['body']['body'] == '{"k":"v"}'
    # by slug and by name; required fields missing: [] without a call
    for ref in ('callable', 'Callable'):
        got = api.post(f'{TOOLS}/call', {'bridge': ref, 'endpoint_name': 'find',
                                         'executionId': setup['execution']['id']})
        assert got.json == {'status': 200, 'ok': True, 'body': [], 'truncated': False}
    assert len(upstream.seen) == 1


def test_an_upstream_error_is_a_result_not_a_failure(api, setup, reach):
    bridge = make_bridge(api, setup['first']['id'], reach, [endpoint('s', '/status')], agentCallable=True, name='s')
    r = api.post(f'{TOOLS}/call', {'bridge': bridge['id'], 'endpoint_name': 's',
                                   'executionId': setup['execution']['id'],
                                   'query': {'code': '404', 'type': 'text/plain', 'body': 'gone'}})
    assert r.json == {'status': 404, 'ok': False, 'body': 'gone', 'truncated': False}


def test_a_call_that_cannot_be_tied_to_a_project_is_403(api, setup, org_id, upstream):
    body = {'bridge': setup['callable']['id'], 'endpoint_name': 'echo'}
    r = api.post(f'{TOOLS}/call', body)
    assert r.status == 403 and 'cannot be tied to a project' in r.json['message']
    r = api.post(f'{TOOLS}/call', {**body, 'projectId': setup['first']['id']})   # a project alone is not a tie
    assert r.status == 403
    ended = api.post('/api/executions', {'projectId': setup['first']['id'], 'status': 'SUCCEEDED'}).json
    r = api.post(f'{TOOLS}/call', {**body, 'executionId': ended['id']})
    assert r.status == 403 and 'SUCCEEDED' in r.json['message']
    cancelled = api.post('/api/executions', {'projectId': setup['first']['id']}).json
    api.post(f"/api/executions/{cancelled['id']}/cancel")
    assert api.post(f'{TOOLS}/call', {**body, 'executionId': cancelled['id']}).status == 403
    assert api.post(f'{TOOLS}/call', {**body, 'executionId': str(uuid.uuid4())}).status == 404
    assert upstream.seen == []


def test_only_agent_callable_bridges_of_the_tied_project(api, setup, upstream):
    run = setup['execution']['id']
    for bridge in (setup['hidden']['id'], 'hidden', setup['elsewhere']['id'], 'elsewhere', str(uuid.uuid4())):
        r = api.post(f'{TOOLS}/call', {'bridge': bridge, 'endpoint_name': 'echo', 'executionId': run})
        assert r.status == 403, (bridge, r.json)
        assert 'not an agent-callable bridge of this project' in r.json['message']
    assert upstream.seen == []


def test_another_organizations_execution_is_404(api, setup, upstream):
    other = make_org(api)
    _, outsider = make_user(api, other['id'], 'MANAGE')
    r = api.post(f'{TOOLS}/call', {'bridge': setup['callable']['id'], 'endpoint_name': 'echo',
                                   'executionId': setup['execution']['id']}, key=outsider)
    assert r.status == 404
    assert api.get(f"{TOOLS}?projectId={setup['first']['id']}", key=outsider).status == 404
    assert upstream.seen == []


def test_tool_calls_are_writes_for_users(api, setup, users, upstream):
    body = {'bridge': 'callable', 'endpoint_name': 'echo', 'executionId': setup['execution']['id']}
    assert api.post(f'{TOOLS}/call', body, key=users['VIEWER']).status == 403
    assert api.get(f"{TOOLS}?executionId={setup['execution']['id']}", key=users['VIEWER']).status == 200
    assert api.post(f'{TOOLS}/call', body, key=users['MEMBER']).status == 200


@pytest.mark.parametrize('body,says', [
    ({}, "'bridge' is required"),
    ({'bridge': 'x'}, "'endpoint_name' is required"),
    ({'bridge': 'x', 'endpoint_name': 'e', 'query': ['a']}, "'query' must be an object"),
    ({'bridge': 'x', 'endpoint_name': 'e', 'query': {'a': {'b': 1}}}, "Query parameter 'a'"),
    ({'bridge': 'x', 'endpoint_name': 'e', 'executionId': 5}, "'executionId' must be a string"),
])
def test_bad_tool_arguments_are_400(api, setup, body, says):
    r = api.post(f'{TOOLS}/call', body)
    assert r.status == 400 and says in r.json['message']


# ----------------------------------------------------------------------------- agents, in process

def test_an_agent_calls_the_agent_callable_bridges_of_its_own_project(api, setup, upstream):
    from chalicelib.core.errors import Forbidden, NotFound
    from chalicelib.features.bridges import agent_tools
    from chalicelib.kernel import crud
    agent = api.post('/api/agents', {'projectId': setup['first']['id'], 'name': 'helper'}).json
    me = agent_tools.agent_principal(agent['id'])
    assert (me.credential, me.project_id, me.memberships) == ('agent', setup['first']['id'], {})
    listed = agent_tools.list_service_bridges(principal=me)
    assert [b['name'] for b in listed['bridges']] == ['Callable']
    result = agent_tools.call_service_bridge(principal=me, bridge='callable', endpoint_name='echo', body={'a': 1})
    assert result['status'] == 200 and result['body']['method'] == 'POST'
    for other in ('hidden', 'elsewhere'):
        with pytest.raises(Forbidden):
            agent_tools.call_service_bridge(principal=me, bridge=other, endpoint_name='echo')
    with pytest.raises(NotFound):                 # an agent sees nothing through the generic rules
        crud.get('service-bridges', setup['callable']['id'], me)
    other_run = api.post('/api/executions', {'projectId': setup['second']['id'], 'status': 'RUNNING'}).json
    with pytest.raises(NotFound):
        agent_tools.list_service_bridges(principal=me, execution_id=other_run['id'])
    assert agent_tools.list_service_bridges(principal=me, execution_id=setup['execution']['id'])['bridges']
    assert len(upstream.seen) == 1


def test_an_agent_whose_project_is_gone_cannot_call(api, setup):
    from chalicelib.core.errors import Forbidden
    from chalicelib.features.bridges import agent_tools
    gone = project(api, setup['first']['organizationId'], 'gone')
    agent = api.post('/api/agents', {'projectId': gone['id'], 'name': 'orphan'}).json
    me = agent_tools.agent_principal(agent['id'])
    # the API refuses to delete a project that holds agents (docs/reliability.md: no orphans);
    # a project removed behind its back (data older than that rule) must still stop the agent
    from chalicelib.kernel.store import model
    model.boto3_table().delete_item(Key={'pk': f"projects#{gone['id']}", 'sk': '#'})
    with pytest.raises(Forbidden):
        agent_tools.list_service_bridges(principal=me)


def test_the_proxy_refuses_an_agent_outside_its_project(api, setup):
    from chalicelib.core.errors import NotFound
    from chalicelib.features.bridges import agent_tools
    from chalicelib.features.bridges import proxy as bridges
    from chalicelib.kernel.store import table
    agent = api.post('/api/agents', {'projectId': setup['second']['id'], 'name': 'x'}).json
    me = agent_tools.agent_principal(agent['id'])
    with pytest.raises(NotFound):
        bridges.call_endpoint(table.get('service-bridges', setup['callable']['id']).data, 'echo', principal=me)
