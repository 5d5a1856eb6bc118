"""The request id of an unexpected failure is API Gateway's (``requestContext.requestId``) when
the event carries one, so a client's report and the gateway's access log name the same request."""
from __future__ import annotations

import json
import logging
import uuid

from tests.conftest import ADMIN_KEY


def _event(path: str, request_id: str | None) -> dict:
    context = {'resourcePath': '/api/projects/{id}', 'httpMethod': 'GET', 'path': path,
               'stage': 'api', 'identity': {'sourceIp': '203.0.113.9'}}
    if request_id is not None:
        context['requestId'] = request_id
    return {'resource': '/api/projects/{id}', 'path': path, 'httpMethod': 'GET',
            'headers': {'x-api-key': ADMIN_KEY}, 'multiValueHeaders': {'x-api-key': [ADMIN_KEY]},
            'queryStringParameters': None, 'multiValueQueryStringParameters': None,
            'pathParameters': {'id': path.rsplit('/', 1)[1]}, 'stageVariables': None,
            'requestContext': context, 'body': None, 'isBase64Encoded': False}


def _fail(monkeypatch):
    from chalicelib.kernel import crud

    def broken(*args, **kwargs):
        raise RuntimeError('boom')
    monkeypatch.setattr(crud, 'get', broken)


def test_an_unexpected_error_names_the_gateway_request_id(platform, monkeypatch, caplog):
    from app import app
    _fail(monkeypatch)
    gateway_id = f'gw-{uuid.uuid4()}'
    with caplog.at_level(logging.ERROR, logger='platform'):
        answer = app(_event(f'/api/projects/{uuid.uuid4()}', gateway_id), None)
    body = json.loads(answer['body'])
    assert answer['statusCode'] == 500 and body['status'] == 500
    assert gateway_id in body['message'] and 'boom' not in body['message']
    assert any(gateway_id in record.getMessage() for record in caplog.records)


def test_without_a_gateway_id_one_is_generated(platform, monkeypatch):
    from app import app
    _fail(monkeypatch)
    body = json.loads(app(_event(f'/api/projects/{uuid.uuid4()}', None), None)['body'])
    generated = body['message'].rsplit('request ', 1)[1].rstrip(')')
    assert uuid.UUID(generated)
