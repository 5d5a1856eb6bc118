"""The one Chalice patch (chalicelib/front/chalice_adapter.py) against the Chalice it relies on:
this fails when Chalice changes under it (version, the patched method's name, signature and
behaviour), and checks the patch itself on a small app."""
from __future__ import annotations

import inspect
import logging
import re
from pathlib import Path

import chalice
import pytest
from chalice import BadRequestError, Chalice, Response
from chalice.app import APIGateway, ChaliceUnhandledError, RestAPIEventHandler
from chalice.test import Client

from chalicelib.core.errors import NotFound
from chalicelib.front import chalice_adapter

ROOT = Path(__file__).resolve().parents[2]


def _chalice_method():
    method = RestAPIEventHandler._get_view_function_response
    return getattr(method, 'chalice_original', method)


def test_the_pinned_chalice_is_the_one_the_adapter_was_checked_against():
    pinned = re.search(r'^chalice==(\S+)$', (ROOT / 'requirements-dev.txt').read_text(), re.M).group(1)
    assert chalice.__version__ == pinned == chalice_adapter.CHALICE_VERSION


def test_the_patched_method_has_the_signature_we_call():
    assert list(inspect.signature(_chalice_method()).parameters) == ['self', 'view_function', 'function_args']


def _handler() -> RestAPIEventHandler:
    return RestAPIEventHandler({}, APIGateway(), logging.getLogger('test-adapter'), debug=False)


def test_chalice_lets_its_unhandled_error_through_and_answers_the_rest_itself():
    """What the adapter relies on: view_function(**function_args) is called, a
    ChaliceUnhandledError propagates, a ChaliceViewError and any other error become responses."""
    method, handler, seen = _chalice_method(), _handler(), {}

    def view(**kwargs):
        seen.update(kwargs)
        return {'ok': True}
    assert method(handler, view, {'id': '7'}).body == {'ok': True} and seen == {'id': '7'}
    with pytest.raises(ChaliceUnhandledError):
        method(handler, lambda: (_ for _ in ()).throw(ChaliceUnhandledError('x')), {})
    assert method(handler, lambda: (_ for _ in ()).throw(BadRequestError('bad')), {}).status_code == 400
    assert method(handler, lambda: (_ for _ in ()).throw(ValueError('bug')), {}).status_code == 500


def test_a_view_error_reaches_the_middleware_unwrapped():
    chalice_adapter.install()
    chalice_adapter.install()   # idempotent: wrapped once
    assert RestAPIEventHandler._get_view_function_response.chalice_original.__name__ == '_get_view_function_response'
    app = Chalice(app_name='adapter-test')
    seen: list[BaseException] = []

    @app.middleware('http')
    def catch(event, get_response):
        try:
            return get_response(event)
        except Exception as exc:  # noqa: BLE001 - what the platform middleware does
            seen.append(chalice_adapter.unwrap(exc))
            return Response(body={'caught': type(seen[-1]).__name__}, status_code=599)

    @app.route('/ours')
    def ours():
        raise NotFound('no such thing')

    @app.route('/bug')
    def bug():
        raise ValueError('a bug')

    @app.route('/chalice')
    def chalice_own():
        raise BadRequestError('bad')

    with Client(app) as client:
        assert client.http.get('/ours').json_body == {'caught': 'NotFound'}
        assert client.http.get('/bug').json_body == {'caught': 'ValueError'}
        reply = client.http.get('/chalice')   # Chalice's own 4xx keeps its path
        assert reply.status_code == 400 and reply.json_body['Code'] == 'BadRequestError'
    assert isinstance(seen[0], NotFound) and str(seen[1]) == 'a bug' and len(seen) == 2
