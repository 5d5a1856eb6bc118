"""Service bridge routes beyond CRUD (which the registry generates):

  GET|POST|PUT|PATCH|DELETE /api/service-bridges/{id}/proxy/{endpointName}
  GET|POST|PUT|PATCH|DELETE /api/service-bridges/{id}/proxy     the only endpoint of the bridge
        call the endpoint's declared method upstream with the query string and JSON body;
        the upstream status and body come back (features/bridges/proxy.py)
  GET  /api/service-bridges/agent-tools?projectId=|executionId=   list_service_bridges
  POST /api/service-bridges/agent-tools/call                        call_service_bridge

``agent-tools`` is a literal segment where the registry has ``{id}``: API Gateway and Chalice's
local router both prefer the literal path (tests/api/test_bridges_agent_tools.py checks it).
"""
from __future__ import annotations

from chalice import Blueprint, Response

from chalicelib.kernel.http.docmeta import describe, ref, schema
from chalicelib.kernel.http.request import (
    ANY_CONTENT,
    JSON_CONTENT,
    body,
    caller,
    optional_body,
    params,
    query_value,
    time_left,
)

bp = Blueprint(__name__)

PROXY_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']


def _proxy(bridge_id: str, endpoint_name: str | None, method: str) -> Response:
    from chalicelib.features.bridges import proxy as bridges  # noqa: PLC0415 - lazy: cold start
    result = bridges.call(bridge_id, endpoint_name, query=params(), body=optional_body(), principal=caller(),
                          write=method != 'GET', timeout=time_left())
    headers = {'Content-Type': result.content_type}
    if result.called:
        headers['X-Bridge-Upstream-Status'] = str(result.status)
    if result.truncated:
        headers['X-Bridge-Truncated'] = 'true'
    return Response(body=result.text, status_code=result.status, headers=headers)


def proxy_view_name(method: str, named: bool) -> str:
    """One view (and operation id) per method: proxyServiceBridgeEndpointGet, proxyServiceBridgePost..."""
    return f"proxyServiceBridge{'Endpoint' if named else ''}{method.capitalize()}"


def _register_proxy(method: str) -> None:
    def proxy_endpoint(id, endpointName):
        return _proxy(id, endpointName, method)

    def proxy(id):
        return _proxy(id, None, method)

    bp.route('/api/service-bridges/{id}/proxy/{endpointName}', methods=[method],
             name=proxy_view_name(method, True), content_types=ANY_CONTENT)(proxy_endpoint)
    bp.route('/api/service-bridges/{id}/proxy', methods=[method],
             name=proxy_view_name(method, False), content_types=ANY_CONTENT)(proxy)


for _method in PROXY_METHODS:
    _register_proxy(_method)


@bp.route('/api/service-bridges/agent-tools', methods=['GET'], name='listServiceBridgeAgentTools',
          content_types=ANY_CONTENT)
def agent_tools():
    from chalicelib.features.bridges import agent_tools as tools  # noqa: PLC0415 - lazy: cold start
    return tools.list_service_bridges(principal=caller(), project_id=query_value('projectId'),
                                      execution_id=query_value('executionId'))


@bp.route('/api/service-bridges/agent-tools/call', methods=['POST'], name='callServiceBridgeAgentTool',
          content_types=JSON_CONTENT)
def agent_tool_call():
    from chalicelib.features.bridges import agent_tools as tools  # noqa: PLC0415 - lazy: cold start
    return tools.call_tool(body(), principal=caller(), timeout=time_left())


# ----------------------------------------------------------------------------- service bridges

_PROXY_TEXT = (
    "Calls the endpoint's declared method on the bridge's baseUrl + path, whatever this request's "
    'method, with this request\'s query string and (for POST, PUT, PATCH and DELETE endpoints) its JSON '
    'body; the caller\'s headers are not forwarded, the bridge\'s and the endpoint\'s defaultHeaders '
    '(secrets interpolated) are. The upstream status and body pass through: JSON as JSON, anything '
    'else as text; X-Bridge-Upstream-Status repeats the upstream status, and a body over the cap '
    '(5 MiB) is cut, sent as text and marked X-Bridge-Truncated: true. When a field listed in the '
    "endpoint's requestSchema.required is in neither the body nor the query string, the answer is "
    '200 [] and the upstream is not contacted (an empty string, 0 or false count as present). '
    'Calling a GET endpoint needs resource:read in the organization, other methods resource:write. '
    'Every call goes through the egress fence: 400 "service bridge egress denied: <reason>" for '
    'internal targets (each redirect hop re-checked), 502 for an unreachable upstream, 504 past the '
    '30 s deadline.')
_PROXY_RESPONSES = {200: {'content': {
    'application/json': {'schema': {'description': "the upstream's JSON, or [] when required fields are missing"}},
    'text/plain': {'schema': {'type': 'string', 'description': "the upstream's text, or a cut body"}},
}}}
_PROXY_ERRORS = [400, 401, 403, 404, 413, 429, 502, 503, 504]

_PROXY_BODY = {'description': 'any JSON value, optional; passed to POST, PUT, PATCH and DELETE endpoints'}
for _method in ('GET', 'POST', 'PUT', 'PATCH', 'DELETE'):   # features/bridges/routes.py proxy_view_name
    _body = {'request': _PROXY_BODY} if _method in ('POST', 'PUT', 'PATCH') else {'request': None}
    describe(f'proxyServiceBridgeEndpoint{_method.capitalize()}', summary='Call an endpoint of a service bridge',
             tags=['service-bridges'],
             description=_PROXY_TEXT + " An unknown endpointName is 400, listing the bridge's endpoint names.",
             responses=_PROXY_RESPONSES, errors=_PROXY_ERRORS, **_body)
    describe(f'proxyServiceBridge{_method.capitalize()}',
             summary='Call the only endpoint of a single-endpoint service bridge', tags=['service-bridges'],
             description=_PROXY_TEXT + ' A bridge with other than one endpoint is 400, listing its endpoint names.',
             responses=_PROXY_RESPONSES, errors=_PROXY_ERRORS, **_body)

_TOOL_BRIDGE = schema('AgentToolBridge', {
    'type': 'object', 'required': ['id', 'endpoints'],
    'properties': {
        'id': {'type': 'string', 'format': 'uuid'}, 'name': {'type': 'string'}, 'slug': {'type': 'string'},
        'description': {'type': 'string'},
        'endpoints': {'type': 'array', 'items': {
            'type': 'object', 'required': ['name', 'method'],
            'properties': {'name': {'type': 'string'}, 'method': ref('ServiceBridgeMethod'),
                           'description': {'type': 'string'},
                           'requestSchema': ref('ServiceBridgeRequestSchema')}}},
    },
})
_TIE_TEXT = ('The call is tied to one project: an agent\'s own project, or the project of a PENDING or '
             'RUNNING execution the caller can see (executionId). A call that cannot be tied is 403; an '
             'execution or project of another organization is 404.')
describe('listServiceBridgeAgentTools', summary='list_service_bridges: the bridges an agent may call',
         tags=['service-bridges'],
         description='The agentCallable bridges of the project. ' + _TIE_TEXT + ' Listing also accepts '
                     'projectId alone (a project the caller can see).',
         parameters=[
             {'name': 'projectId', 'in': 'query', 'required': False, 'schema': {'type': 'string', 'format': 'uuid'}},
             {'name': 'executionId', 'in': 'query', 'required': False,
              'schema': {'type': 'string', 'format': 'uuid'}}],
         responses={200: schema('AgentToolBridgeList', {
             'type': 'object', 'required': ['projectId', 'bridges'],
             'properties': {'projectId': {'type': 'string', 'format': 'uuid'},
                            'executionId': {'type': 'string', 'format': 'uuid'},
                            'bridges': {'type': 'array', 'items': _TOOL_BRIDGE}}})},
         errors=[400, 401, 403, 404, 429])
describe('callServiceBridgeAgentTool', summary='call_service_bridge: call an endpoint of an agent-callable bridge',
         tags=['service-bridges'],
         description='Allowed only when the bridge is agentCallable and belongs to the tied project. '
                     + _TIE_TEXT + ' The call itself is the proxy\'s (same permission, egress, secrets); the '
                     'upstream answer comes back as {status, ok, body, truncated}.',
         request=schema('AgentToolCall', {
             'type': 'object', 'required': ['bridge', 'endpoint_name'],
             'properties': {
                 'bridge': {'type': 'string', 'minLength': 1, 'description': 'id, slug or name of the bridge'},
                 'endpoint_name': {'type': 'string', 'minLength': 1},
                 'query': {'type': 'object', 'description': 'query parameters: scalars or lists of scalars',
                           'additionalProperties': {}},
                 'body': {'description': 'JSON body for POST, PUT, PATCH and DELETE endpoints'},
                 'executionId': {'type': 'string', 'format': 'uuid',
                                 'description': 'the running execution this call is made for'},
             }}),
         responses={200: schema('AgentToolResult', {
             'type': 'object', 'required': ['status', 'ok', 'body', 'truncated'],
             'properties': {'status': {'type': 'integer', 'description': 'the upstream status'},
                            'ok': {'type': 'boolean', 'description': 'status is 2xx'},
                            'body': {'description': "the upstream's JSON, or its text, or [] when required "
                                                    'fields are missing', 'nullable': True},
                            'truncated': {'type': 'boolean'}}})},
         errors=[400, 401, 403, 404, 413, 415, 429, 502, 503, 504])
