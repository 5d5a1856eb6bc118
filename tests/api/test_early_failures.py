"""A request that fails before the view's error mapping still answers in the contract's shape
({"error","message","status"} with X-Request-Id), and tracing never fails a request (issue 38:
the stages trace, and a tracer that cannot load answered every request with Chalice's bare 500)."""
from __future__ import annotations

import dataclasses
import logging

import pytest

from chalicelib.core import observability


@pytest.fixture
def tracing_on(monkeypatch):
    """TRACING_ENABLED=true as the stages set it (the test client's environment is kept)."""
    traced = dataclasses.replace(observability.get_config(), tracing_enabled=True)
    monkeypatch.setattr(observability, 'get_config', lambda: traced)
    observability._reset_tracing()
    yield
    observability._reset_tracing()


def _contract_error(reply, status: int) -> None:
    assert reply.status == status, reply
    assert reply.json['status'] == status and reply.json['error'] and reply.json['message'], reply.json
    assert reply.headers.get('x-request-id'), reply.headers


def test_a_failure_in_the_request_context_answers_in_the_contract_shape(api, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError('observability is broken')
    monkeypatch.setattr(observability, 'trace', broken)
    reply = api.get('/api/health')
    _contract_error(reply, 500)
    assert reply.headers['x-request-id'] in reply.json['message']
    assert 'broken' not in reply.json['message']


def test_a_failure_opening_the_work_context_answers_in_the_contract_shape(api, monkeypatch):
    def broken(*args, **kwargs):
        raise ImportError('no logging library')
    monkeypatch.setattr(observability, 'work', broken)
    _contract_error(api.get('/api/account/me'), 500)


def test_a_missing_xray_sdk_is_one_warning_never_a_failed_request(api, tracing_on, monkeypatch, caplog):
    """Powertools' Tracer raises this when aws_xray_sdk is not installed (what the package did)."""
    import aws_lambda_powertools

    class TracerWithoutSdk:
        def __init__(self, *args, **kwargs):
            raise ModuleNotFoundError("No module named 'aws_xray_sdk'", name='aws_xray_sdk')

    monkeypatch.setattr(aws_lambda_powertools, 'Tracer', TracerWithoutSdk)
    with caplog.at_level(logging.WARNING):
        first = api.get('/api/health')
        second = api.get('/api/account/me')
    assert first.status == 200, first
    assert second.status == 200, second
    warnings = [r for r in caplog.records if 'tracing is off' in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert 'aws_xray_sdk' in warnings[0].getMessage()


def test_a_tracer_that_raises_does_not_fail_the_request(api, tracing_on, monkeypatch):
    class Broken:
        @property
        def provider(self):
            raise RuntimeError('no segment')
    monkeypatch.setattr(observability, '_get_tracer', lambda: Broken())
    assert api.get('/api/health').status == 200


def test_a_view_error_inside_a_traced_request_is_still_the_views(api, tracing_on):
    """Tracing on (the X-Ray SDK is installed here, with no daemon: it logs and drops segments):
    errors raised by the view keep their own status through the subsegment."""
    reply = api.get('/api/organizations/00000000-0000-0000-0000-00000000dead')
    _contract_error(reply, 404)
