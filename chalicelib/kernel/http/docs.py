"""The machine-readable contract and its human page, both public (no credential):

  GET /v3/api-docs                    the OpenAPI 3.0.3 document, generated from the route table
  GET /docs                           Swagger UI rendering it
  GET /docs/swagger-ui.css, /docs/swagger-ui-bundle.js, /docs/swagger-initializer.js
                                      Swagger UI's assets, from the swagger-ui-bundle package
                                      (served by us, never from a CDN)

Cold start: the generator, the registry walk and the asset files are loaded on the first request
that needs them (and kept for the life of the process), never at import.
"""
from __future__ import annotations

import json
import threading
from functools import cache

from chalice import Blueprint, Response

from chalicelib.core.config import get_config
from chalicelib.kernel.http import docmeta, policy
from chalicelib.kernel.http import routes as resources
from chalicelib.kernel.http.docmeta import describe
from chalicelib.kernel.http.request import ANY_CONTENT

bp = Blueprint(__name__)

_lock = threading.Lock()
_documents: dict[tuple, str] = {}

TITLE = 'Document Processing Platform API'
ASSET_CACHE = 'public, max-age=86400'


def document(app) -> dict:
    """The OpenAPI document of ``app`` as a dict (built on every call)."""
    from chalicelib.kernel.http import openapi  # noqa: PLC0415 - lazy: the generator is for this route only
    return openapi.build(app.routes, openapi.registry_index(resources.operation_name), policy.of,
                         docmeta.OPERATIONS, docmeta.SCHEMAS, get_config().public_url)


def document_text(app) -> str:
    """The document as JSON text, built once per process (per app, route count and public URL)."""
    key = (id(app), sum(len(m) for m in app.routes.values()), get_config().public_url)
    text = _documents.get(key)
    if text is None:
        with _lock:
            text = _documents.get(key)
            if text is None:
                text = json.dumps(document(app), separators=(',', ':'))
                _documents[key] = text
    return text


@bp.route(policy.public('/v3/api-docs'), methods=['GET'], name='getApiDocs', content_types=ANY_CONTENT)
def api_docs():
    return Response(body=document_text(bp.current_app), status_code=200,
                    headers={'Content-Type': 'application/json'})


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
