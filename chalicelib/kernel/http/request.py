"""Small helpers shared by the blueprints: the current request's parts, parsed (the strict
JSON rules of core/jsonbody.py, the caller set by the middleware), and typical responses."""
from __future__ import annotations

import ipaddress
from typing import Any

from chalice import Response

from chalicelib.core import jsonbody
from chalicelib.core.principal import Principal, current

ANY_CONTENT = ['*/*']
JSON_CONTENT = ['application/json']

_app = None


def bind(app) -> None:
    global _app
    _app = app


def request():
    return _app.current_request


def params() -> dict[str, list[str]]:
    qp = request().query_params
    if not qp:
        return {}
    return {k: qp.getlist(k) for k in qp.keys()}


def raw_body() -> bytes | None:
    return request().raw_body


def body() -> dict[str, Any]:
    """The request body as a JSON object (strict parsing: 400 for anything else)."""
    return jsonbody.loads_object(raw_body())


def optional_body() -> Any:
    """The request body as any JSON value (strict parsing), or None when there is none."""
    raw = raw_body()
    return None if raw in (None, b'', '') else jsonbody.loads(raw)


def query_value(name: str) -> str | None:
    """The last value of a query parameter, or None when it is absent or empty."""
    values = params().get(name) or []
    return values[-1] if values and values[-1] != '' else None


def client_address() -> str | None:
    """The client's address: API Gateway's ``requestContext.identity.sourceIp``; when that is a
    loopback address (a local front door: ``make run``, chalice local), the first
    ``X-Forwarded-For`` hop if there is one. Behind API Gateway the source is never loopback,
    so a client cannot choose its address with that header."""
    req = request()
    source = ((req.context or {}).get('identity') or {}).get('sourceIp') or None
    try:
        local = source is None or ipaddress.ip_address(source).is_loopback
    except ValueError:
        local = False
    if local:
        forwarded = (req.headers or {}).get('x-forwarded-for') or ''
        first = forwarded.split(',', 1)[0].strip()
        if first:
            return first
    return source


def time_left(margin: float = 1.0) -> float | None:
    """Seconds this invocation may still run, less ``margin`` (None when unknown): an outbound
    call that would outlive the function is cut first, so the client gets our error body."""
    context = getattr(_app, 'lambda_context', None)
    remaining = getattr(context, 'get_remaining_time_in_millis', None)
    if remaining is None:
        return None
    return max(0.001, remaining() / 1000 - margin)


def one_based_pages() -> bool:
    """Whether this request pages from 1: it authenticated with the legacy ``x-access-token``
    header (the platform's SDK and CLI), which identity.authenticate reads when ``x-api-key`` is
    absent. Every other credential pages from 0, as the contract says (docs/api/sdk-compatibility.md)."""
    headers = request().headers or {}
    return not headers.get('x-api-key') and bool(headers.get('x-access-token'))


def caller() -> Principal:
    """The authenticated principal of this request (401 when there is none)."""
    return current()


def created(body: Any) -> Response:
    return Response(body=body, status_code=201)


def no_content() -> Response:
    return Response(body='', status_code=204, headers={'Content-Type': 'application/json'})
