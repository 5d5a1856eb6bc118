"""The machine-readable contract and its human page, both public (no credential):

  GET /v3/api-docs                    the OpenAPI 3.0.3 document, generated from the route table
  GET /docs                           Swagger UI rendering it
  GET /docs/swagger-ui.css, /docs/swagger-ui-bundle.js, /docs/swagger-initializer.js
                                      Swagger UI's assets, from the swagger-ui-bundle package
                                      (served by us, never from a CDN)

The document's ``servers`` are the origin the request reached first (so Swagger UI's "Try it
out" calls this very server: on `make run` whatever its port, on a deployed stage its stage URL),
then the production URL from configuration (PUBLIC_API_URL; unset: not listed). See
docs/api/clients.md "Servers".

Cold start: the generator, the registry walk and the asset files are loaded on the first request
that needs them (and kept for the life of the process), never at import.
"""
from __future__ import annotations

import json
import re
import threading
from functools import cache

from chalice import Blueprint, Response

from chalicelib.core.config import get_config
from chalicelib.kernel.http import aliases, docmeta, policy
from chalicelib.kernel.http import routes as family_routes
from chalicelib.kernel.http.docmeta import describe
from chalicelib.kernel.http.request import ANY_CONTENT

bp = Blueprint(__name__)

_lock = threading.Lock()
_documents: dict[tuple, tuple[str, str]] = {}

TITLE = 'Document Processing Platform API'
ASSET_CACHE = 'public, max-age=86400'


# host[:port]: DNS labels (or an IPv4 address) or a bracketed IPv6 literal, an optional port.
_HOST = re.compile(r'(?:(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?'
                   r'|\[[0-9a-f:.]{2,45}\])(?::(?P<port>[0-9]{1,5}))?', re.IGNORECASE)
_STAGE = re.compile(r'[A-Za-z0-9_-]{1,128}')
DOCS_PATH = '/v3/api-docs'


def _host(value: str | None) -> str | None:
    """``value`` when it is host[:port] (at most 260 characters, a port up to 65535), else None:
    the Host header is client input, so nothing else is ever reflected into the document."""
    match = _HOST.fullmatch(value) if value and len(value) <= 260 else None
    if match is None or (match['port'] is not None and not 0 < int(match['port']) < 65536):
        return None
    return value.lower()


def request_origin(request) -> str | None:
    """The base URL ``request`` was addressed to, or None when it cannot be told safely.

    Behind API Gateway (the request context carries domainName and stage): https://{domainName}
    plus the path before /v3/api-docs as API Gateway saw it (``/{stage}`` on the execute-api
    host, the base path mapping on a custom domain). Elsewhere (`make run`, a proxy): the scheme
    of X-Forwarded-Proto (http or https; else http) and the host of X-Forwarded-Host, else Host,
    validated as host[:port]."""
    context = getattr(request, 'context', None) or {}
    headers = request.headers or {}
    domain, stage = context.get('domainName'), context.get('stage')
    if domain and stage:
        host = _host(str(domain))
        if host is None:
            return None
        seen = str(context.get('path') or '')
        prefix = seen[:-len(DOCS_PATH)].rstrip('/') if seen.endswith(DOCS_PATH) else f'/{stage}'
        if prefix and not all(_STAGE.fullmatch(part) for part in prefix.strip('/').split('/')):
            return None
        return f'https://{host}{prefix}'
    proto = (headers.get('x-forwarded-proto') or 'http').split(',')[0].strip().lower()
    if proto not in ('http', 'https'):
        proto = 'http'
    forwarded = (headers.get('x-forwarded-host') or '').split(',')[0].strip()
    host = _host(forwarded) or _host((headers.get('host') or '').strip())
    return f'{proto}://{host}' if host else None


def servers(request) -> list[dict[str, str]]:
    """The document's ``servers`` for ``request``: where it was requested from, then production."""
    out = []
    origin = request_origin(request)
    if origin:
        out.append({'url': origin, 'description': 'This server (where this document was requested from)'})
    production = get_config().public_url
    if production and production != origin:
        out.append({'url': production, 'description': 'Production'})
    return out


def document(app, request=None) -> dict:
    """The OpenAPI document of ``app`` as a dict (built on every call), its ``servers`` those of
    ``request`` (none without one)."""
    from chalicelib.kernel.http import openapi  # noqa: PLC0415 - lazy: the generator is for this route only
    routes = {path: kept for path, methods in app.routes.items()
              if (kept := {m: e for m, e in methods.items() if (path, m) not in aliases.ROUTES})}
    return openapi.build(routes, openapi.registry_index(family_routes.operation_name), policy.of,
                         docmeta.OPERATIONS, docmeta.SCHEMAS, servers(request) if request is not None else [])


def _document_parts(app) -> tuple[str, str]:
    """The document as JSON text split around its (empty) servers list, built once per process (per
    app and route count); every request splices its own servers in between."""
    key = (id(app), sum(len(m) for m in app.routes.values()))
    parts = _documents.get(key)
    if parts is None:
        with _lock:
            parts = _documents.get(key)
            if parts is None:
                text = json.dumps(document(app), separators=(',', ':'))
                head, tail = text.split('"servers":[]', 1)   # the top-level key: it precedes the paths
                parts = _documents[key] = (head + '"servers":', tail)
    return parts


def document_text(app, request=None) -> str:
    head, tail = _document_parts(app)
    listed = servers(request) if request is not None else []
    return head + json.dumps(listed, separators=(',', ':')) + tail


@bp.route(policy.public('/v3/api-docs'), methods=['GET'], name='getApiDocs', content_types=ANY_CONTENT)
def api_docs():
    # servers depend on these headers: a shared cache must not hand one origin's document to another
    return Response(body=document_text(bp.current_app, bp.current_request), status_code=200,
                    headers={'Content-Type': 'application/json',
                             'Vary': 'Host, X-Forwarded-Host, X-Forwarded-Proto'})


describe('getApiDocs', summary='The OpenAPI document of this API (this document)', tags=['docs'],
         responses={200: {'type': 'object', 'additionalProperties': True}}, errors=[429])


# ----------------------------------------------------------------------------- Swagger UI

PAGE = f"""<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>{TITLE}</title>
  <link rel="stylesheet" href="docs/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="docs/swagger-ui-bundle.js"></script>
  <script src="docs/swagger-initializer.js"></script>
</body>
</html>
"""

# Relative URLs: the page works under any base path (an API Gateway stage prefix too).
INITIALIZER = """window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: 'v3/api-docs',
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout'
  });
});
"""


@cache
def _asset(name: str) -> str:
    from swagger_ui_bundle import swagger_ui_path  # noqa: PLC0415 - lazy: assets for the docs page only
    text = (swagger_ui_path / name).read_text(encoding='utf-8')
    # The source maps are not served: drop the reference so browsers do not ask for them.
    lines = text.rstrip('\n').split('\n')
    if lines and lines[-1].startswith(('//# sourceMappingURL=', '/*# sourceMappingURL=')):
        lines.pop()
    return '\n'.join(lines) + '\n'


def _text(body: str, content_type: str, cache: str = 'no-cache') -> Response:
    return Response(body=body, status_code=200,
                    headers={'Content-Type': f'{content_type}; charset=utf-8', 'Cache-Control': cache})


@bp.route(policy.public('/docs'), methods=['GET'], name='getApiDocsPage', content_types=ANY_CONTENT)
def docs_page():
    return _text(PAGE, 'text/html')


@bp.route(policy.public('/docs/swagger-ui.css'), methods=['GET'], name='getSwaggerUiCss',
          content_types=ANY_CONTENT)
def swagger_css():
    return _text(_asset('swagger-ui.css'), 'text/css', ASSET_CACHE)


@bp.route(policy.public('/docs/swagger-ui-bundle.js'), methods=['GET'], name='getSwaggerUiBundle',
          content_types=ANY_CONTENT)
def swagger_js():
    return _text(_asset('swagger-ui-bundle.js'), 'text/javascript', ASSET_CACHE)


@bp.route(policy.public('/docs/swagger-initializer.js'), methods=['GET'], name='getSwaggerUiInitializer',
          content_types=ANY_CONTENT)
def swagger_initializer():
    return _text(INITIALIZER, 'text/javascript')


def _content(media_type: str) -> dict:
    return {'content': {media_type: {'schema': {'type': 'string'}}}}


describe('getApiDocsPage', summary='The API documentation page (Swagger UI)', tags=['docs'],
         responses={200: _content('text/html')}, errors=[429])
describe('getSwaggerUiCss', summary='Swagger UI style sheet', tags=['docs'],
         responses={200: _content('text/css')}, errors=[429])
describe('getSwaggerUiBundle', summary='Swagger UI script', tags=['docs'],
         responses={200: _content('text/javascript')}, errors=[429])
describe('getSwaggerUiInitializer', summary='Swagger UI start-up script', tags=['docs'],
         responses={200: _content('text/javascript')}, errors=[429])
