"""The edge layer of rate limiting (infra/usage_plan.py): the usage plan carries the app's
figures, the API definition takes its usage key from the Lambda authorizer, the authorizer
names the right key, and platform keys get (and lose) their gateway twins."""
from __future__ import annotations

import base64
import json

import pytest

from infra import usage_plan
from tests.conftest import ADMIN_KEY


def test_the_usage_plan_carries_the_apps_rate_and_burst():
    config = json.loads((usage_plan.ROOT / '.chalice' / 'config.json').read_text())
    env = config['environment_variables']
    per_minute, burst = int(env['RATE_LIMIT_PER_MINUTE']), int(env['RATE_LIMIT_BURST_PER_SECOND'])
    assert (per_minute, burst) == (100, 20) == usage_plan.limits('prod')
    res = usage_plan.template('prod')['Resources']
    assert res['PerKeyUsagePlan']['Properties']['Throttle'] == {'BurstLimit': 20, 'RateLimit': round(100 / 60, 4)}
    shared = res['SharedUsagePlan']['Properties']['Throttle']
    assert shared['BurstLimit'] == 20 * usage_plan.SHARED_FACTOR
    assert res['SharedUsagePlanKey']['Properties']['UsagePlanId'] == {'Ref': 'SharedUsagePlan'}
    throttled = res['ThrottledResponse']['Properties']
    assert throttled['StatusCode'] == '429'
    assert json.loads(throttled['ResponseTemplates']['application/json']) == {
        'error': 'Too Many Requests', 'message': 'Rate limit exceeded', 'status': 429}
    invalid = res['InvalidKeyResponse']['Properties']
    assert invalid['ResponseType'] == 'INVALID_API_KEY' and invalid['StatusCode'] == '401'
    assert 'gatewayresponse.header.WWW-Authenticate' in invalid['ResponseParameters']
    # the gateway's own answers in the error shape, each with its request id and the limit (issue 41)
    missing = res['MissingRouteResponse']['Properties']
    assert (missing['ResponseType'], missing['StatusCode']) == ('MISSING_AUTHENTICATION_TOKEN', '404')
    assert json.loads(missing['ResponseTemplates']['application/json'])['status'] == 404
    assert res['TooLargeResponse']['Properties']['StatusCode'] == '413'
    for name in ('ThrottledResponse', 'InvalidKeyResponse', 'MissingRouteResponse', 'TooLargeResponse'):
        headers = res[name]['Properties']['ResponseParameters']
        assert headers['gatewayresponse.header.X-Request-Id'] == 'context.requestId', name
        assert headers['gatewayresponse.header.X-RateLimit-Limit'] == "'100'", name


def test_every_route_but_the_service_ones_needs_the_authorizer_supplied_key():
    from chalice.deploy.swagger import CFNSwaggerGenerator

    from app import app
    from chalicelib.kernel.http import policy
    swagger = usage_plan.patch_swagger(CFNSwaggerGenerator().generate_swagger(app))
    assert swagger['x-amazon-apigateway-api-key-source'] == 'AUTHORIZER'
    authorizer = swagger['securityDefinitions'][usage_plan.AUTHORIZER]['x-amazon-apigateway-authorizer']
    assert authorizer['type'] == 'request' and authorizer['authorizerResultTtlInSeconds'] == 0
    assert 'GatewayAuthorizer.Arn' in authorizer['authorizerUri']['Fn::Sub']
    seen = 0
    for path, methods in app.routes.items():
        for method in methods:
            operation = swagger['paths'][path][method.lower()]
            if policy.of(path) == 'service':
                assert 'security' not in operation, path
            else:
                assert operation['security'] == [{usage_plan.AUTHORIZER: [], 'api_key': []}], path
                seen += 1
    assert seen > 200


@pytest.fixture
def gateway(monkeypatch, aws):
    """A usage plan in (moto's) API Gateway, and the app configured to use it."""
    import boto3

    from chalicelib.core.config import get_config, reset_config
    client = boto3.client('apigateway', region_name='us-east-1')
    plan = client.create_usage_plan(name='per-key', throttle={'burstLimit': 20, 'rateLimit': 1.6667})
    monkeypatch.setenv('USAGE_PLAN_ID', plan['id'])
    monkeypatch.setenv('GATEWAY_SHARED_USAGE_KEY', 'shared-usage-key-0123456789')
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests
    yield client, plan['id']
    monkeypatch.undo()
    reset_config()


def _authorize(client, headers):
    r = client.lambda_.invoke('gateway_authorizer', {'type': 'REQUEST', 'headers': headers,
                                                    'methodArn': 'arn:aws:execute-api:us-east-1:1:a/api/GET/x'})
    return r.payload


def test_platform_keys_get_gateway_twins_and_the_authorizer_names_them(gateway, client, api):
    from chalicelib.core.secrets import hash_key
    apigw, plan_id = gateway
    made = api.post('/api/account/me/api-keys', {'name': 'twinned'})
    assert made.status == 201
    raw = made.json['key']
    twins = [k for k in apigw.get_api_keys(includeValues=True)['items'] if k['value'] == hash_key(raw)]
    assert len(twins) == 1 and twins[0]['enabled']
    assert twins[0]['id'] in {k['id'] for k in apigw.get_usage_plan_keys(usagePlanId=plan_id)['items']}
    assert raw not in json.dumps(apigw.get_api_keys(includeValues=True)['items'], default=str)
    email = api.get('/api/account/me').json['email']
    for headers in ({'x-api-key': raw}, {'X-Access-Token': raw}, {'Authorization': f'Bearer {raw}'},
                    {'authorization': 'Basic ' + base64.b64encode(f'{email}:{raw}'.encode()).decode()}):
        answer = _authorize(client, headers)
        assert answer['usageIdentifierKey'] == hash_key(raw), headers
        assert answer['policyDocument']['Statement'][0]['Effect'] == 'Allow'
    for headers in ({}, {'authorization': 'Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig'}):
        assert _authorize(client, headers)['usageIdentifierKey'] == 'shared-usage-key-0123456789'
    assert api.delete(f"/api/account/me/api-keys/{made.json['id']}").status == 204
    assert twins[0]['id'] not in {k['id'] for k in apigw.get_api_keys()['items']}


def test_without_a_usage_plan_no_twins_are_made(api, aws):
    import boto3
    assert api.post('/api/account/me/api-keys', {'name': 'plain'}).status == 201
    assert boto3.client('apigateway', region_name='us-east-1').get_api_keys()['items'] == []
    assert api.get('/api/account/me', key=ADMIN_KEY).status == 200
