"""The MCP Streamable HTTP endpoint as a stateless JSON-RPC layer: one POST in, one JSON answer
out, no session, no SSE. It fits a Lambda request/response cycle, where the SDK's server side
(an ASGI app with a task group per session) does not; the wire shapes are the SDK's own pydantic
models (``mcp_types``, the SDK's type package: pydantic only, ~0.25 s to import, loaded on the
first /mcp call, never at REST cold start).

Protocol versions (``SUPPORTED``): 2026-07-28 (the per-request ``_meta`` envelope with
``server/discover``, no handshake) and the handshake versions 2025-11-25, 2025-06-18 and
2025-03-26 (``initialize``: the client's version when it is one of them, else 2025-11-25).

- ``MCP-Protocol-Version`` not one of those: 400 with JSON-RPC error -32022 naming them. Absent:
  2025-03-26, as the transport specification says, unless the body carries the 2026 envelope.
- 2026-07-28: every request's ``params._meta`` carries the protocol version and client
  capabilities, equal to the ``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name`` headers
  (-32602 / -32020 otherwise); ``initialize`` is -32022.
- A notification or a client response: 202, no body (``notifications/initialized`` included).
- A 2025-03-26 batch: every request in it counts against the rate limit (``_batch``); those past
  the limit are not run and each gets JSON-RPC error -32029 naming it (docs/api/limits.md).
- A tool failure (a service error: 400, 403, 404, 409 with the current ``changeSequence``, 503)
  is a result with ``isError: true``; a protocol problem (parse error, unknown method or tool,
  bad params) is a JSON-RPC error, with the HTTP status of the SDK's own table (400, 404).
  Nothing answers 500: an unexpected failure inside a tool is a tool error naming the request id.
"""
from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import mcp_types as types
from mcp_types import jsonrpc as rpc

from chalicelib.core import jsonbody, last_resort, observability
from chalicelib.core.config import get_config
from chalicelib.core.errors import ApiError, reason
from chalicelib.core.principal import Principal
from chalicelib.features.identity import ratelimit
from chalicelib.features.mcp import auth, tools

MODERN = ('2026-07-28',)
HANDSHAKE = ('2025-11-25', '2025-06-18', '2025-03-26')
SUPPORTED = (*MODERN, *HANDSHAKE)
LATEST_HANDSHAKE = HANDSHAKE[0]
DEFAULT_VERSION = '2025-03-26'   # no MCP-Protocol-Version header (transport spec)
SERVER_NAME = 'platform-api'
INSTRUCTIONS = ('Tools over the platform\'s work queue: organizations, projects, teams, activities, tasks and '
                'task groups. Reads are list_* / get_*; writes accept changeSequence (optimistic locking). '
                "A grouped task's assignee is set through its group (assign_task_group).")
HTTP_STATUS = {rpc.PARSE_ERROR: 400, rpc.INVALID_REQUEST: 400, rpc.INVALID_PARAMS: 400,
               rpc.HEADER_MISMATCH: 400, rpc.UNSUPPORTED_PROTOCOL_VERSION: 400, rpc.METHOD_NOT_FOUND: 404}
LEGACY_ONLY_FIELDS = ('resultType', 'ttlMs', 'cacheScope')
RATE_LIMITED = -32029   # a JSON-RPC server error (the -32000..-32099 range): this call was not run


@dataclass
class Reply:
    status: int
    body: Any = None                  # a JSON value, or None for no body
    headers: dict[str, str] = field(default_factory=dict)


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def _error(id_: Any, exc: RpcError) -> dict[str, Any]:
    error: dict[str, Any] = {'code': exc.code, 'message': exc.message}
    if exc.data is not None:
        error['data'] = exc.data
    return {'jsonrpc': '2.0', 'id': id_, 'error': error}


def _unsupported(requested: Any) -> RpcError:
    return RpcError(rpc.UNSUPPORTED_PROTOCOL_VERSION, 'Unsupported protocol version',
                    {'supported': list(SUPPORTED), 'requested': str(requested)[:64]})


def _dump(model: Any, version: str) -> dict[str, Any]:
    out = model.model_dump(by_alias=True, mode='json', exclude_none=True)
    if version not in MODERN:   # 2026 fields older clients were never told about
        for name in LEGACY_ONLY_FIELDS:
            out.pop(name, None)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(type(value).__name__)


# ----------------------------------------------------------------------------- HTTP

def handle_post(headers: Mapping[str, str], raw: bytes | str | None, principal: Principal) -> Reply:
    header_version = headers.get('mcp-protocol-version')
    if header_version is not None:
        header_version = header_version.strip()
        if header_version not in SUPPORTED:
            return Reply(400, _error(None, _unsupported(header_version)))
    try:
        message = jsonbody.loads(raw)
    except ApiError as exc:
        return Reply(400, _error(None, RpcError(rpc.PARSE_ERROR, f'Parse error: {exc.message}')))
    if isinstance(message, list):
        if header_version in MODERN or not message:
            return Reply(400, _error(None, RpcError(rpc.INVALID_REQUEST, 'A batch is not accepted here')))
        return _batch(message, headers, header_version, principal)
    answer = _one(message, headers, header_version, principal)
    if answer is None:
        return Reply(202)
    status, body = answer
    return Reply(status, body)


def _batch(messages: list[Any], headers: Mapping[str, str], header_version: str | None,
           principal: Principal) -> Reply:
    """A 2025-03-26 JSON-RPC batch: every request in it is a request against the rate limit (the
    HTTP request counted the first; the others are counted here, at once, before any runs:
    features/identity/ratelimit.py ``count_more``). The calls past the limit are not run: each
    is answered with its own JSON-RPC error naming the limit (docs/api/limits.md)."""
    requests = [i for i, m in enumerate(messages) if isinstance(m, dict) and 'id' in m and 'method' in m]
    admitted = 1 + ratelimit.count_more(principal, len(requests) - 1) if requests else 0
    refused = set(requests[admitted:])
    answers = []
    for i, message in enumerate(messages):
        if i in refused:
            answers.append(_rate_limited(message, requests.index(i) + 1, len(requests)))
            continue
        answer = _one(message, headers, header_version, principal)
        if answer is not None:
            answers.append(answer[1])
    return Reply(200, answers) if answers else Reply(202)


def _rate_limited(message: dict[str, Any], position: int, total: int) -> dict[str, Any]:
    cfg = get_config()
    wait = ratelimit.retry_after()
    return _error(message['id'] if isinstance(message['id'], (str, int)) else None, RpcError(
        RATE_LIMITED, f'Rate limit exceeded: request {position} of {total} in this batch was not run '
                      f'({cfg.rate_limit_per_minute} requests a minute per credential, every call of a batch '
                      f'counted); retry in {wait} s',
        {'status': 429, 'retryAfter': wait, 'limit': cfg.rate_limit_per_minute}))


def _one(message: Any, headers: Mapping[str, str], header_version: str | None,
         principal: Principal) -> tuple[int, dict[str, Any]] | None:
    """(HTTP status, JSON-RPC answer) of one message, or None for a notification/response."""
    if not isinstance(message, dict) or message.get('jsonrpc') != '2.0':
        return 400, _error(None, RpcError(rpc.INVALID_REQUEST, 'Not a JSON-RPC 2.0 message'))
    if 'id' not in message:
        if isinstance(message.get('method'), str):
            return None   # a notification (notifications/initialized, cancelled, ...): accepted
        return 400, _error(None, RpcError(rpc.INVALID_REQUEST, 'A notification needs a method'))
    id_ = message['id']
    if 'method' not in message and ('result' in message or 'error' in message):
        return None       # a response to a request we never send: accepted and dropped
    if isinstance(id_, bool) or not isinstance(id_, (str, int)):
        return 400, _error(None, RpcError(rpc.INVALID_REQUEST, 'The id must be a string or an integer'))
    method, params = message.get('method'), message.get('params')
    try:
        if not isinstance(method, str):
            raise RpcError(rpc.INVALID_REQUEST, 'The method must be a string')
        if params is not None and not isinstance(params, dict):
            raise RpcError(rpc.INVALID_PARAMS, 'params must be an object')
        result = _request(method, params or {}, headers, header_version, principal)
    except RpcError as exc:
        return HTTP_STATUS.get(exc.code, 200), _error(id_, exc)
    return 200, {'jsonrpc': '2.0', 'id': id_, 'result': result}


def _modern_envelope(method: str, params: dict[str, Any]) -> bool:
    meta = params.get('_meta')
    return method != 'initialize' and isinstance(meta, dict) and types.PROTOCOL_VERSION_META_KEY in meta


def _request(method: str, params: dict[str, Any], headers: Mapping[str, str], header_version: str | None,
             principal: Principal) -> dict[str, Any]:
    if header_version in MODERN or (header_version is None and _modern_envelope(method, params)):
        version = _check_envelope(method, params, headers, header_version)
    else:
        version = header_version or DEFAULT_VERSION
    if method == 'initialize':
        if version in MODERN:
            raise _unsupported(version)
        return _initialize(params)
    if method == 'server/discover':
        if version not in MODERN:
            raise RpcError(rpc.METHOD_NOT_FOUND, 'server/discover is a 2026-07-28 method; use initialize')
        return _dump(types.DiscoverResult(supported_versions=list(SUPPORTED), capabilities=_capabilities(),
                                          instructions=INSTRUCTIONS,
                                          _meta={types.SERVER_INFO_META_KEY: _server_info()}), version)
    if method == 'ping':
        return {'resultType': 'complete'} if version in MODERN else {}
    if method == 'tools/list':
        listed = types.ListToolsResult(tools=[types.Tool.model_validate(t.listing()) for t in tools.TOOLS])
        return _dump(listed, version)
    if method == 'tools/call':
        return _dump(_call(params, principal), version)
    raise RpcError(rpc.METHOD_NOT_FOUND, f'Method not found: {method[:100]}')


def _check_envelope(method: str, params: dict[str, Any], headers: Mapping[str, str],
                    header_version: str | None) -> str:
    """The 2026-07-28 per-request checks (the SDK's own ladder, in its order)."""
    if method == 'initialize':
        raise _unsupported(header_version)
    meta = params.get('_meta')
    if not isinstance(meta, dict):
        raise RpcError(rpc.INVALID_PARAMS, f'params._meta must be an object carrying '
                                           f'{types.PROTOCOL_VERSION_META_KEY!r} and '
                                           f'{types.CLIENT_CAPABILITIES_META_KEY!r}')
    missing = [k for k in (types.PROTOCOL_VERSION_META_KEY, types.CLIENT_CAPABILITIES_META_KEY) if k not in meta]
    if missing:
        raise RpcError(rpc.INVALID_PARAMS, f"params._meta is missing {', '.join(missing)}")
    version = meta[types.PROTOCOL_VERSION_META_KEY]
    if header_version is None or header_version != version:
        raise RpcError(rpc.HEADER_MISMATCH, "MCP-Protocol-Version header does not match the request's protocol version")
    if headers.get('mcp-method') != method:
        raise RpcError(rpc.HEADER_MISMATCH, 'Mcp-Method header does not match the method')
    if method == 'tools/call' and isinstance(params.get('name'), str) and \
            _decoded(headers.get('mcp-name')) != params['name']:
        raise RpcError(rpc.HEADER_MISMATCH, 'Mcp-Name header does not match the tool name')
    if not isinstance(version, str):
        raise RpcError(rpc.INVALID_PARAMS, 'the protocol version must be a string')
    if version not in MODERN:
        raise _unsupported(version)
    return version


def _decoded(value: str | None) -> str | None:
    """Header values outside printable ASCII come as ``=?base64?...?=`` (the SDK's encoding)."""
    if value is None or not (value.startswith('=?base64?') and value.endswith('?=')):
        return value
    try:
        return base64.b64decode(value[9:-2], validate=True).decode('utf-8')
    except (ValueError, UnicodeDecodeError):
        return None


def _server_info() -> dict[str, Any]:
    return {'name': SERVER_NAME, 'title': 'Document-processing platform', 'version': get_config().app_version}


def _capabilities() -> types.ServerCapabilities:
    return types.ServerCapabilities(tools=types.ToolsCapability(list_changed=False))


def _initialize(params: dict[str, Any]) -> dict[str, Any]:
    requested = params.get('protocolVersion')
    version = requested if requested in HANDSHAKE else LATEST_HANDSHAKE
    result = types.InitializeResult(protocol_version=version, capabilities=_capabilities(),
                                    server_info=types.Implementation.model_validate(_server_info()),
                                    instructions=INSTRUCTIONS)
    return _dump(result, version)


# ----------------------------------------------------------------------------- tools/call

def _call(params: dict[str, Any], principal: Principal) -> types.CallToolResult:
    name = params.get('name')
    if not isinstance(name, str):
        raise RpcError(rpc.INVALID_PARAMS, "tools/call needs the tool's name")
    tool = tools.BY_NAME.get(name)
    if tool is None:
        raise RpcError(rpc.INVALID_PARAMS, f'Unknown tool: {name[:100]}')
    arguments = params.get('arguments')
    observability.annotate(tool=name)
    try:
        result = tool.run(tools.validate(tool.input_schema, arguments), principal)
        structured = json.loads(json.dumps(_omit_none(result), default=_plain))
    except Exception as exc:  # noqa: BLE001 - a tool's failure is a tool error: the REST API's last resort
        error = last_resort.answer(exc, where=f'tool {name}')
        return _tool_error(error.status, error.message, **error.extra)
    return types.CallToolResult(content=[types.TextContent(type='text', text=json.dumps(structured))],
                                structured_content=structured, is_error=False)


def _omit_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _omit_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_omit_none(v) for v in value]
    return value


def _tool_error(status: int, message: str, **extra: Any) -> types.CallToolResult:
    error = {'status': status, 'error': reason(status), 'message': message, **extra}
    error = json.loads(json.dumps(error, default=_plain))
    text = message + (f" (current changeSequence: {extra['changeSequence']})" if 'changeSequence' in extra else '')
    return types.CallToolResult(content=[types.TextContent(type='text', text=text)],
                                structured_content={'error': error}, is_error=True)


# ----------------------------------------------------------------------------- well-known

def protected_resource_metadata() -> dict[str, Any]:
    return auth.metadata(auth.enabled())
