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
