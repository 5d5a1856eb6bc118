"""The MCP tool connector's HTTP door: ``<basePath>/mcp`` (Streamable HTTP, JSON answers, no
SSE, no session) and its RFC 9728 protected resource metadata. The middleware authenticates
``/mcp`` with the connector's own rules (policy ``mcp``: features/mcp/auth.py); this view
hands the request to the JSON-RPC layer (features/mcp/protocol.py), loaded on first use: the
MCP types never load at REST cold start."""
from __future__ import annotations

import json

from chalice import Blueprint, Response

from chalicelib.kernel.http import policy
from chalicelib.kernel.http.docmeta import describe, ref, schema
from chalicelib.kernel.http.request import ANY_CONTENT, JSON_CONTENT, caller, raw_body, request

bp = Blueprint(__name__)

MCP_PATH = policy.mcp('/mcp')
METADATA = policy.public('/.well-known/oauth-protected-resource')
METADATA_MCP = policy.public('/.well-known/oauth-protected-resource/mcp')
ALLOW = {'Allow': 'POST'}


@bp.route(MCP_PATH, methods=['POST'], name='mcpPost', content_types=JSON_CONTENT)
def mcp_post():
    from chalicelib.features.mcp import protocol  # noqa: PLC0415 - lazy: cold start (mcp_types ~0.25 s)
    reply = protocol.handle_post(request().headers, raw_body(), caller())
    body = '' if reply.body is None else json.dumps(reply.body, separators=(',', ':'))
    return Response(body=body, status_code=reply.status, headers={'Content-Type': 'application/json', **reply.headers})


def _method_not_allowed(method: str) -> Response:
    from chalicelib.core.errors import error_body  # noqa: PLC0415 - small, only here
    message = (f'{method} is not served: this MCP endpoint answers every POST with JSON and keeps no '
               'session or server-sent event stream')
    return Response(body=error_body(405, message), status_code=405,
                    headers={'Content-Type': 'application/json', **ALLOW})


@bp.route(MCP_PATH, methods=['GET'], name='mcpGet', content_types=ANY_CONTENT)
def mcp_get():
    return _method_not_allowed('GET')


@bp.route(MCP_PATH, methods=['DELETE'], name='mcpDelete', content_types=ANY_CONTENT)
def mcp_delete():
    return _method_not_allowed('DELETE')


def _metadata():
    from chalicelib.features.mcp import auth  # noqa: PLC0415 - lazy: cold start
    return Response(body=auth.metadata(auth.enabled()), status_code=200,
                    headers={'Content-Type': 'application/json', 'Cache-Control': 'max-age=3600'})


@bp.route(METADATA, methods=['GET'], name='getProtectedResourceMetadata', content_types=ANY_CONTENT)
def protected_resource_metadata():
    return _metadata()


@bp.route(METADATA_MCP, methods=['GET'], name='getMcpProtectedResourceMetadata', content_types=ANY_CONTENT)
def mcp_protected_resource_metadata():
    return _metadata()


_JSONRPC = schema('JsonRpcMessage', {
    'type': 'object', 'description': 'a JSON-RPC 2.0 request, notification or response (MCP)',
    'required': ['jsonrpc'], 'additionalProperties': True,
    'properties': {'jsonrpc': {'type': 'string', 'enum': ['2.0']}, 'id': {}, 'method': {'type': 'string'},
                   'params': {'type': 'object'}, 'result': {}, 'error': {'type': 'object'}}})
_METADATA = schema('ProtectedResourceMetadata', {
    'type': 'object', 'required': ['resource', 'authorization_servers'],
    'properties': {'resource': {'type': 'string'},
                   'authorization_servers': {'type': 'array', 'items': {'type': 'string'}},
                   'bearer_methods_supported': {'type': 'array', 'items': {'type': 'string'}},
                   'scopes_supported': {'type': 'array', 'items': {'type': 'string'}},
                   'resource_name': {'type': 'string'}}})
_MCP_TEXT = ('The MCP tool connector (Streamable HTTP, protocol 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26): '
             'JSON-RPC in, JSON out, 202 for notifications. 404 when disabled (MCP_ENABLED). '
             'docs/api/mcp.md.')
# 400 and 404 carry a JSON-RPC error for a protocol problem (parse error, unsupported version,
# unknown method), the usual error body otherwise (connector disabled, bad Origin, credentials)
_RPC_OR_ERROR = {'anyOf': [_JSONRPC, ref('Error')]}
describe('mcpPost', summary='MCP: send a JSON-RPC message', tags=['mcp'], description=_MCP_TEXT,
         request={'anyOf': [_JSONRPC, {'type': 'array', 'items': _JSONRPC}]},
         responses={200: {'anyOf': [_JSONRPC, {'type': 'array', 'items': _JSONRPC}]}, 202: None,
                    400: _RPC_OR_ERROR, 404: _RPC_OR_ERROR},
         errors=[401, 403, 429, 503])
describe('mcpGet', summary='MCP: no server-sent event stream (405)', tags=['mcp'], request=None,
         responses={405: ref('Error')}, errors=[401, 403, 404])
describe('mcpDelete', summary='MCP: no session to end (405)', tags=['mcp'], request=None,
         responses={405: ref('Error')}, errors=[401, 403, 404])
describe('getProtectedResourceMetadata', summary='OAuth protected resource metadata of /mcp (RFC 9728)',
         tags=['mcp'], request=None, responses={200: _METADATA}, errors=[404])
describe('getMcpProtectedResourceMetadata', summary='OAuth protected resource metadata of /mcp (RFC 9728)',
         tags=['mcp'], request=None, responses={200: _METADATA}, errors=[404])
