"""Rate limiting at the edge: the API Gateway usage plan, with the Lambda authorizer supplying
the usage identifier key (API key source AUTHORIZER).

Two layers, one set of figures (RATE_LIMIT_PER_MINUTE, RATE_LIMIT_BURST_PER_SECOND, read here
from .chalice/config.json, the same values the app reads at run time):

* the app (chalicelib/features/identity/ratelimit.py) enforces the contract exactly: 100 requests per
  fixed minute per key, 20 per second, counted in DynamoDB across Lambda instances, with the
  X-RateLimit-* headers on every response;
* the gateway usage plan carries the same burst and rate (token bucket: BurstLimit = burst,
  RateLimit = per_minute / 60 requests per second) and stops floods before they cost a Lambda
  invocation. A token bucket refilling at 100/60 per second is not the same shape as "100 per
  minute" (a client that spends 100 requests in ten seconds is throttled by the gateway after
  roughly 20 + 17); it is the closest a usage plan can express, so the app's fixed windows are
  what the contract promises and the gateway is the coarse outer guard.

How a request finds its usage plan key: the REQUEST authorizer ``gateway_authorizer``
(chalicelib/features/identity/authorizer.py, no result caching, no I/O) returns ``usageIdentifierKey``:
* for an API key (x-api-key, x-access-token, Bearer pk_..., Basic email:key): the key's
  SHA-256, which is the value of the key's *twin* API Gateway key, created in the per-key plan
  when the platform key is created and deleted when it is revoked (features/identity/credentials.py; the
  app does this when USAGE_PLAN_ID is set);
* for everyone else (bearer JWTs, no credential, public routes): the shared key of the shared
  plan (GATEWAY_SHARED_USAGE_KEY), whose throttle is SHARED_FACTOR times larger; per-user
  limits of JWT callers are the app's.
An unknown or revoked key has no twin, so the gateway answers INVALID_API_KEY: mapped below to
the contract's 401. The gateway's own 429 (THROTTLED) carries the contract's error body and
Retry-After, but not X-RateLimit-Remaining/Reset (the gateway does not expose them).

Deploying: ``make package STAGE=prod`` puts all of this into the app template (infra/app.py):
the patched API definition (key source, authorizer, gateway responses), the usage plans, the
shared key (its value generated in Secrets Manager by the data stack) and USAGE_PLAN_ID /
GATEWAY_SHARED_USAGE_KEY in the functions' environment; see docs/operations/deploy.md.
``python -m infra.usage_plan template prod`` is the same as a stand-alone stack, for an API
deployed some other way. Keys created before USAGE_PLAN_ID was set have no twin: re-create them
(their hashes are known, so a one-off job can also create the twins).
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED_FACTOR = 20            # the shared plan serves every JWT and anonymous caller together
AUTHORIZER = 'gatewayAuthorizer'
AUTHORIZER_FUNCTION = 'GatewayAuthorizer'   # Chalice's CloudFormation name for gateway_authorizer
ERROR_TEMPLATE = '{"error":"%s","message":"%s","status":%d}'
REQUEST_ID = 'context.requestId'


def _chalice_config() -> dict[str, Any]:
    return json.loads((ROOT / '.chalice' / 'config.json').read_text())


def limits(stage: str = 'prod') -> tuple[int, int]:
    """(per minute, burst per second) of a stage, from the app's own configuration."""
    config = _chalice_config()
    env = dict(config.get('environment_variables') or {})
    env.update((config.get('stages', {}).get(stage, {}) or {}).get('environment_variables') or {})
    return int(env.get('RATE_LIMIT_PER_MINUTE', 100)), int(env.get('RATE_LIMIT_BURST_PER_SECOND', 20))


def api_stage_name(stage: str = 'prod') -> str:
    return (_chalice_config().get('stages', {}).get(stage, {}) or {}).get('api_gateway_stage', stage)


def _responses(stage: str) -> dict[str, tuple[str, int, str, str, dict[str, str]]]:
    """The gateway's own answers, in the contract's error shape: name -> (type, status, error,
    message, headers)."""
    per_minute, _ = limits(stage)
    # every answer carries a request id (the gateway's own, as the app's answers do) and the limit
    common = {'X-Request-Id': REQUEST_ID, 'X-RateLimit-Limit': str(per_minute)}
    return {
        'ThrottledResponse': ('THROTTLED', 429, 'Too Many Requests', 'Rate limit exceeded',
                              {'Retry-After': '1', **common}),
        'InvalidKeyResponse': ('INVALID_API_KEY', 401, 'Unauthorized', 'Invalid API key',
                               {'WWW-Authenticate': 'Bearer, ApiKey header="x-api-key", Basic realm="platform"',
                                **common}),
        # API Gateway answers a method and path no route has as a 403 "Missing Authentication
        # Token" in its own shape: a 404 in ours, as the local front door answers (localdev/server.py)
        'MissingRouteResponse': ('MISSING_AUTHENTICATION_TOKEN', 404, 'Not Found', 'No route for this method and path',
                                 common),
        'TooLargeResponse': ('REQUEST_TOO_LARGE', 413, 'Payload Too Large', 'Request body larger than 10 MB', common),
    }


def _header_value(value: str) -> str:
    """A gateway response header's mapping: a request-context value as is, a fixed text quoted."""
    return value if value.startswith('context.') else f"'{value}'"


def _gateway_response(kind: str, status: int, error: str, message: str, headers: dict[str, str]) -> dict:
    return {
        'Type': 'AWS::ApiGateway::GatewayResponse',
        'Properties': {
            'RestApiId': {'Ref': 'RestApiId'},
            'ResponseType': kind,
            'StatusCode': str(status),
            'ResponseParameters': {f'gatewayresponse.header.{k}': _header_value(v) for k, v in headers.items()},
            'ResponseTemplates': {'application/json': ERROR_TEMPLATE % (error, message, status)},
        },
    }


def gateway_responses(stage: str = 'prod') -> dict[str, Any]:
    """The same answers as the ``x-amazon-apigateway-gateway-responses`` extension of an API
    definition: deployed with the API itself (a GatewayResponse resource only takes effect at
    the API's next deployment)."""
    return {kind: {'statusCode': str(status),
                   'responseParameters': {f'gatewayresponse.header.{k}': _header_value(v) for k, v in headers.items()},
                   'responseTemplates': {'application/json': ERROR_TEMPLATE % (error, message, status)}}
            for kind, status, error, message, headers in _responses(stage).values()}


def plan_resources(stage: str, *, api: Any, api_stage: Any, key_value: Any, authorizer: Any) -> dict[str, Any]:
    """The usage plans, the shared key and the authorizer's invoke permission, for an API
    ``api`` (a RestApi id), its stage ``api_stage``, the shared key's value ``key_value`` and
    the authorizer function ``authorizer`` (name or ARN)."""
    per_minute, burst = limits(stage)
    rate = round(per_minute / 60, 4)
    stages = [{'ApiId': api, 'Stage': api_stage}]
    return {
        'PerKeyUsagePlan': {
            'Type': 'AWS::ApiGateway::UsagePlan',
            'Properties': {'UsagePlanName': f'platform-{stage}-per-key', 'ApiStages': stages,
                           'Description': f'{per_minute}/min, burst {burst}/s per API key (twins)',
                           'Throttle': {'BurstLimit': burst, 'RateLimit': rate}},
        },
        'SharedUsagePlan': {
            'Type': 'AWS::ApiGateway::UsagePlan',
            'Properties': {'UsagePlanName': f'platform-{stage}-shared', 'ApiStages': stages,
                           'Description': 'bearer-token and anonymous callers together',
                           'Throttle': {'BurstLimit': burst * SHARED_FACTOR,
                                        'RateLimit': round(rate * SHARED_FACTOR, 4)}},
        },
        'SharedUsageKey': {
            'Type': 'AWS::ApiGateway::ApiKey',
            'Properties': {'Name': f'platform-{stage}-shared', 'Enabled': True, 'Value': key_value},
        },
        'SharedUsagePlanKey': {
            'Type': 'AWS::ApiGateway::UsagePlanKey',
            'Properties': {'KeyId': {'Ref': 'SharedUsageKey'}, 'KeyType': 'API_KEY',
                           'UsagePlanId': {'Ref': 'SharedUsagePlan'}},
        },
        'AuthorizerInvokePermission': {
            'Type': 'AWS::Lambda::Permission',
            'Properties': {'Action': 'lambda:InvokeFunction', 'Principal': 'apigateway.amazonaws.com',
                           'FunctionName': authorizer,
                           'SourceArn': {'Fn::Sub': ['arn:${AWS::Partition}:execute-api:${AWS::Region}:'
                                                     '${AWS::AccountId}:${Api}/authorizers/*', {'Api': api}]}},
        },
    }


def template(stage: str = 'prod') -> dict[str, Any]:
    """A stand-alone stack for an API deployed some other way (``make package`` embeds the same
    plans in the app template instead: infra/app.py)."""
    resources = plan_resources(stage, api={'Ref': 'RestApiId'}, api_stage={'Ref': 'StageName'},
                               key_value={'Ref': 'SharedUsageKeyValue'},
                               authorizer={'Ref': 'AuthorizerFunctionArn'})
    resources.update({name: _gateway_response(*spec) for name, spec in _responses(stage).items()})
    return {
        'AWSTemplateFormatVersion': '2010-09-09',
        'Description': f'Platform API usage plans and gateway responses ({stage})',
        'Parameters': {
            'RestApiId': {'Type': 'String', 'Description': 'the API deployed by Chalice'},
            'StageName': {'Type': 'String', 'Default': api_stage_name(stage)},
            'SharedUsageKeyValue': {'Type': 'String', 'NoEcho': True, 'MinLength': 20,
                                    'Description': 'GATEWAY_SHARED_USAGE_KEY of the stage'},
            'AuthorizerFunctionArn': {'Type': 'String', 'Description': 'the gateway_authorizer function'},
        },
        'Resources': resources,
        'Outputs': {
            'PerKeyUsagePlanId': {'Value': {'Ref': 'PerKeyUsagePlan'}, 'Description': 'USAGE_PLAN_ID'},
            'SharedUsagePlanId': {'Value': {'Ref': 'SharedUsagePlan'}},
        },
    }


def authorizer_uri() -> dict[str, Any]:
    return {'Fn::Sub': 'arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2015-03-31'
                       f'/functions/${{{AUTHORIZER_FUNCTION}.Arn}}/invocations'}


def patch_swagger(swagger: dict[str, Any], is_service_route=None, uri: Any = None) -> dict[str, Any]:
    """The API definition Chalice generates, with the key source AUTHORIZER, the REQUEST
    authorizer, and every operation requiring the (authorizer-supplied) usage key. Routes the
    app authenticates with the internal service token stay outside the usage plans."""
    if is_service_route is None:
        from chalicelib.kernel.http import policy  # noqa: PLC0415 - lazy: infra scripts run without the app
        is_service_route = lambda path: policy.of(path) == 'service'  # noqa: E731
    out = copy.deepcopy(swagger)
    out['x-amazon-apigateway-api-key-source'] = 'AUTHORIZER'
    definitions = out.setdefault('securityDefinitions', {})
    definitions['api_key'] = {'type': 'apiKey', 'name': 'x-api-key', 'in': 'header'}
    definitions[AUTHORIZER] = {
        'type': 'apiKey', 'name': 'Authorization', 'in': 'header',
        'x-amazon-apigateway-authtype': 'custom',
        'x-amazon-apigateway-authorizer': {'type': 'request', 'authorizerResultTtlInSeconds': 0,
                                           'authorizerUri': uri if uri is not None else authorizer_uri()},
    }
    for path, operations in out.get('paths', {}).items():
        if is_service_route(path):
            continue
        for method, operation in operations.items():
            if method in ('get', 'put', 'post', 'delete', 'patch', 'head') and isinstance(operation, dict):
                operation['security'] = [{AUTHORIZER: [], 'api_key': []}]
    return out


if __name__ == '__main__':
    command = sys.argv[1] if len(sys.argv) > 1 else 'template'
    if command == 'template':
        print(json.dumps(template(sys.argv[2] if len(sys.argv) > 2 else 'prod'), indent=2))
    else:
        raise SystemExit('usage: python -m infra.usage_plan template [stage]')
