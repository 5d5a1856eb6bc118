"""The API Gateway Lambda authorizer (REQUEST type, no result caching) that supplies the usage
identifier key, so the gateway's usage plan throttles per API key (the API's key source is
AUTHORIZER; infra/usage_plan.py wires it). It does no I/O and never refuses: authentication
proper is the app's (chalicelib/front/middleware.py), which answers 401/403 in the contract's
shape. Deployed by Chalice as its own function (``gateway_authorizer``)."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.core.secrets import usage_identifier

bp = Blueprint(__name__)


@bp.lambda_function(name='gateway_authorizer')
def gateway_authorizer(event, context):
    answer = {
        'principalId': 'platform-caller',
        'policyDocument': {'Version': '2012-10-17', 'Statement': [{
            'Action': 'execute-api:Invoke', 'Effect': 'Allow', 'Resource': event.get('methodArn', '*')}]},
        'context': {},
    }
    key = usage_identifier(event.get('headers') or {})
    if key:
        answer['usageIdentifierKey'] = key
    return answer
