"""Small helpers shared by the blueprints: the current request's parts and typical responses."""
from __future__ import annotations

from typing import Any

from chalice import Response

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


def created(body: Any) -> Response:
    return Response(body=body, status_code=201)


def no_content() -> Response:
    return Response(body='', status_code=204, headers={'Content-Type': 'application/json'})
