"""Small helpers shared by the blueprints: the current request's parts, parsed (the strict
JSON rules of core/jsonbody.py, the caller set by the middleware), and typical responses."""
from __future__ import annotations

import ipaddress
from collections.abc import Collection, Iterable
from typing import Any

from chalice import Response

from chalicelib.core import jsonbody
from chalicelib.core.errors import BadRequest, UnsupportedMediaType
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


# What a 415 tells the client to send (Chalice's own 415, for a body of another type, gets it
# too: front/middleware.py)
SEND_JSON = "send the body as JSON with the header Content-Type: application/json (curl: -H 'content-type: " \
            "application/json' -d '{...}')"


def _json_declared(raw: bytes | str | None) -> bytes | str | None:
    """``raw`` when the request says it is JSON; a body without a Content-Type is a 415 (Chalice
    would take it for JSON: docs/api/conventions.md "Bodies")."""
    if raw not in (None, b'', '') and not (request().headers or {}).get('content-type'):
        raise UnsupportedMediaType(f'The request has a body but no Content-Type header: {SEND_JSON}')
    return raw


def body() -> dict[str, Any]:
    """The request body as a JSON object (strict parsing: 400 for anything else)."""
    return jsonbody.loads_object(_json_declared(raw_body()))


def optional_body() -> Any:
    """The request body as any JSON value (strict parsing), or None when there is none."""
    raw = _json_declared(raw_body())
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


# ----------------------------------------------------------------------------- unknown names
# One rule for body fields and query parameters (docs/api/conventions.md "Unknown fields and
# parameters"): a name the endpoint does not know is a 400 naming it and the closest known name,
# so a typo is never silently dropped. The allowance: a request authenticated with the legacy
# ``x-access-token`` header (the platform's SDK and CLI, whose models send every field they
# define, some of which this API does not keep) has them ignored, and the answer lists them in
# ``X-Ignored-Fields`` / ``X-Ignored-Parameters``.
IGNORED_HEADERS = {'field': 'X-Ignored-Fields', 'parameter': 'X-Ignored-Parameters'}


def sdk_client() -> bool:
    """Whether this request came from the platform's SDK or CLI (the legacy x-access-token header)."""
    return one_based_pages()


def _closest(name: str, known: Iterable[str]) -> str | None:
    import difflib  # noqa: PLC0415 - lazy: only a refused name needs it
    by_fold = {k.lower(): k for k in known}
    if name.lower() in by_fold:
        return by_fold[name.lower()]
    found = difflib.get_close_matches(name.lower(), list(by_fold), n=1, cutoff=0.6)
    return by_fold[found[0]] if found else None


def unknown_names(kind: str, names: Iterable[str], known: Collection[str], where: str,
                  listed: Collection[str] | None = None) -> dict[str, str]:
    """400 for the first ``names`` not in ``known`` (``kind`` 'field' or 'parameter', ``where``
    ends the message: 'in a Project body'); for the SDK, the header listing them instead ({} when
    every name is known). ``listed`` (default ``known``) is what the message offers, hints
    included: a body accepts the server fields a GET answered, but only what a client may write
    is worth suggesting (docs/api/conventions.md "Unknown fields and parameters")."""
    unknown = sorted({n for n in names if n not in known})
    if not unknown:
        return {}
    if sdk_client():
        return {IGNORED_HEADERS[kind]: ', '.join(unknown)[:1000]}
    offered = known if listed is None else listed
    parts = []
    for name in unknown[:5]:
        hint = _closest(name, offered)
        parts.append(f"'{name[:64]}'" + (f" (did you mean '{hint}'?)" if hint else ''))
    plural = 's' if len(unknown) > 1 else ''
    label = 'known' if listed is None else 'a client may send'
    raise BadRequest(f'Unknown {kind}{plural} {", ".join(parts)} {where}; {label}: {", ".join(sorted(offered))}'[:2000],
                     unknown=unknown[:20])


def check_params(known: Collection[str], where: str) -> dict[str, str]:
    """The query parameters of this request against ``known`` (``unknown_names``)."""
    return unknown_names('parameter', params(), known, where)


# ----------------------------------------------------------------------------- pages

def page_links(page: dict[str, Any]) -> dict[str, str]:
    """RFC 8288 ``Link`` header of a list answer: first, prev, next, last, each this request's
    URL with only ``page`` changed (numbered as this caller numbers pages: from 1 for the SDK)."""
    from urllib.parse import urlencode  # noqa: PLC0415 - lazy: only list answers need it

    req = request()
    path = (req.context or {}).get('path') or req.path
    total = max(int(page.get('totalPages') or 0), 1)
    one = 1 if one_based_pages() else 0
    current = int(page.get('number') or 0) - one
    query = [(k, v) for k, vs in params().items() if k != 'page' for v in vs]

    def url(number: int) -> str:
        return f'<{path}?{urlencode([*query, ("page", number + one)])}>'
    links = [f'{url(0)}; rel="first"']
    if current > 0:
        links.append(f'{url(min(current, total) - 1)}; rel="prev"')
    if current + 1 < total:
        links.append(f'{url(current + 1)}; rel="next"')
    links.append(f'{url(total - 1)}; rel="last"')
    return {'Link': ', '.join(links)}


def page_response(page: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    """A list answer: the page envelope, its ``Link`` header beside it."""
    return Response(body=page, status_code=200, headers={**page_links(page), **(headers or {})})


def caller() -> Principal:
    """The authenticated principal of this request (401 when there is none)."""
    return current()


def created(body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(body=body, status_code=201, headers=headers or {})


def no_content() -> Response:
    return Response(body='', status_code=204, headers={'Content-Type': 'application/json'})
