"""The app stack: what ``chalice package --pkg-format cloudformation`` emits, made deployable.

Chalice 1.34 emits a SAM template (``Transform: AWS::Serverless-2016-10-31``): one
``AWS::Serverless::Function`` per Lambda (the API's ``APIHandler``, every
``@app.lambda_function`` such as ``GatewayAuthorizer``, every event handler), each with its own
``AWS::IAM::Role`` (the stage sets ``iam_policy_file``), the event handlers' sources as SAM
``Events`` on the function (``SQS``, ``Schedule``, ``DynamoDB``, ``SNS``, ``CloudWatchEvent``),
and an ``AWS::Serverless::Api`` whose DefinitionBody is the Swagger of the routes.

:func:`patch` works on whatever functions and events are there (it is not told which exist):

* every SQS event source reports batch item failures (``FunctionResponseTypes:
  [ReportBatchItemFailures]``: the handler returns ``{"batchItemFailures": [...]}``), takes
  batches of 10 unless the code chose a size, is capped by ``ScalingConfig.MaximumConcurrency``,
  and must consume one of the data stack's redriven queues whose visibility timeout is at
  least 6x the function's timeout (packaging fails otherwise);
* every DynamoDB stream source reads the data stack's table stream (imported; the ARN written
  in the code is a placeholder), from TRIM_HORIZON (an outbox event is never skipped), bisects a
  failing batch, gives up on a record after MaximumRetryAttempts / MaximumRecordAgeInSeconds and
  sends it to the outbox failure queue (alarmed), and may report batch item failures;
* a scheduled function is not retried by Lambda (its next tick is the retry);
* every function gets a fixed name, its own log group (30 days) and a role from infra/iam.py
  (the authorizer: its log group only); event handlers lose the stage's reserved concurrency
  (SQS concurrency is capped by the event source instead) so that the account keeps its
  unreserved pool;
* the API definition gets the authorizer, the AUTHORIZER key source and the gateway responses
  (infra/usage_plan.py), and refers to the functions by name, so that the functions can carry
  the usage plan's id (USAGE_PLAN_ID) without a dependency cycle;
* the usage plans, the shared usage key and the alarms (5xx rate of the API, errors of every
  function) are added; secrets come from the data stack by dynamic reference;
* the OCR function (infra/ocr_function.py: a container image on the OCR queue, which Chalice
  cannot package) is added first, then treated as every other event handler.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from infra import alarms, iam, ocr_function, stack, usage_plan
from infra.names import APP_NAME, Names

API_FUNCTION = 'APIHandler'
AUTHORIZER_FUNCTION = usage_plan.AUTHORIZER_FUNCTION
LOG_RETENTION_DAYS = 30

CHALICE_SQS_BATCH_SIZE = 1          # on_sqs_message's default: "the code did not choose"
SQS_BATCH_SIZE = 10
SQS_MAX_CONCURRENCY = 20            # pollers scale to 1,250 otherwise, starving the API
VISIBILITY_FACTOR = 6               # AWS: queue visibility timeout >= 6 x function timeout

STREAM_SETTINGS = {
    'StartingPosition': 'TRIM_HORIZON',
    'BisectBatchOnFunctionError': True,
    'MaximumRetryAttempts': 10,
    'MaximumRecordAgeInSeconds': 6 * 3600,
    'FunctionResponseTypes': ['ReportBatchItemFailures'],
}
SCHEDULE_INVOKE_CONFIG = {'MaximumRetryAttempts': 0, 'MaximumEventAgeInSeconds': 60}
SCHEDULE_RETRY_POLICY = {'MaximumRetryAttempts': 3, 'MaximumEventAgeInSeconds': 60}
UNPATCHED_EVENTS = {'SNS', 'CloudWatchEvent'}   # nothing to tune; their IAM is the sender's
# functions whose SQS batch size infra chose (not Chalice's default of 1, which means "unchosen")
CHOSEN_BATCH_SIZES = {ocr_function.LOGICAL_ID: ocr_function.BATCH_SIZE}

PARAMETERS = {
    'JwtIssuer': {'Type': 'String', 'Default': '', 'Description': 'AUTH_JWT_ISSUER (empty: no bearer JWTs)'},
    'JwtAudience': {'Type': 'String', 'Default': '', 'Description': 'AUTH_JWT_AUDIENCE'},
    'JwtJwksUrl': {'Type': 'String', 'Default': '', 'Description': 'AUTH_JWT_JWKS_URL'},
}


class PackagingError(Exception):
    """The packaged app asks for something this stack cannot deploy safely."""


def _sub(value: str) -> dict[str, str]:
    return {'Fn::Sub': value}


def function_arn(name: str) -> dict[str, str]:
    return _sub(f'arn:${{AWS::Partition}}:lambda:${{AWS::Region}}:${{AWS::AccountId}}:function:{name}')


def _resolve(secret_name: str) -> str:
    return '{{resolve:secretsmanager:' + secret_name + '}}'


def _walk(node: Any, fn: Callable[[Any], Any]) -> Any:
    node = fn(node)
    if isinstance(node, dict):
        return {k: _walk(v, fn) for k, v in node.items()}
    if isinstance(node, list):
        return [_walk(v, fn) for v in node]
    return node


def _by_name(functions: dict[str, str]) -> Callable[[Any], Any]:
    """Rewrite references to a function's ARN into its ARN built from its (fixed) name."""
    def rewrite(node: Any) -> Any:
        if not isinstance(node, dict) or len(node) != 1:
            return node
        if 'Fn::GetAtt' in node:
            target = node['Fn::GetAtt']
            if isinstance(target, list) and len(target) == 2 and target[1] == 'Arn' and target[0] in functions:
                return function_arn(functions[target[0]])
        if 'Fn::Sub' in node and isinstance(node['Fn::Sub'], str):
            text = node['Fn::Sub']
            for logical_id, name in functions.items():
                text = text.replace(f'${{{logical_id}.Arn}}',
                                    f'arn:${{AWS::Partition}}:lambda:${{AWS::Region}}:${{AWS::AccountId}}:function:{name}')
            return {'Fn::Sub': text}
        return node
    return rewrite


# ----------------------------------------------------------------------------- event sources

def _data_queues(stage: str) -> dict[str, dict[str, Any]]:
    """Queue name -> properties, for the data stack's queues that a worker may consume."""
    resources = stack.template(stage)['Resources']
    return {r['Properties']['QueueName']: r['Properties'] for r in resources.values()
            if r['Type'] == 'AWS::SQS::Queue' and 'RedrivePolicy' in r['Properties']}


def _queue_name(queue: Any) -> str:
    text = queue.get('Fn::Sub') if isinstance(queue, dict) else queue
    if not isinstance(text, str) or not text.startswith('arn:'):
        raise PackagingError(f'cannot tell which queue {queue!r} is')
    return text.rsplit(':', 1)[1]


def _patch_sqs(stage: str, function: str, props: dict[str, Any], event: dict[str, Any]) -> str:
    queues = _data_queues(stage)
    p = event['Properties']
    name = _queue_name(p['Queue'])
    if name not in queues:
        raise PackagingError(f'{function} consumes {name}, which is not a redriven queue of the data stack '
                             f'({", ".join(sorted(queues))}): add it to infra/stack.py')
    if function in CHOSEN_BATCH_SIZES:
        p['BatchSize'] = CHOSEN_BATCH_SIZES[function]
    elif p.get('BatchSize', CHALICE_SQS_BATCH_SIZE) == CHALICE_SQS_BATCH_SIZE:
        p['BatchSize'] = SQS_BATCH_SIZE
    window = p.setdefault('MaximumBatchingWindowInSeconds', 0)
    if p['BatchSize'] > 10 and window < 1:
        raise PackagingError(f'{function}: a batch size over 10 needs a batching window of at least 1 s')
    needed = VISIBILITY_FACTOR * int(props.get('Timeout', 3)) + window
    visibility = int(queues[name].get('VisibilityTimeout', 30))
    if visibility < needed:
        raise PackagingError(f'{name}: visibility timeout {visibility}s < {VISIBILITY_FACTOR} x {function} '
                             f'timeout + batching window ({needed}s): raise it in infra/stack.py')
    p['Queue'] = _sub(f'arn:${{AWS::Partition}}:sqs:${{AWS::Region}}:${{AWS::AccountId}}:{name}')
    p['FunctionResponseTypes'] = ['ReportBatchItemFailures']
    p.setdefault('ScalingConfig', {'MaximumConcurrency': SQS_MAX_CONCURRENCY})
    return name


def _patch_stream(stage: str, function: str, event: dict[str, Any]) -> None:
    n = Names(stage)
    p = event['Properties']
    stream = p.get('Stream')
    match = re.search(r':table/([^/]+)/stream/', stream) if isinstance(stream, str) else None
    if not match or not match.group(1).startswith('platform-'):
        raise PackagingError(f'{function}: the only stream is the platform table\'s (got {stream!r})')
    p['Stream'] = {'Fn::ImportValue': n.export('TableStreamArn')}
    p.update(copy.deepcopy(STREAM_SETTINGS))
    p['DestinationConfig'] = {'OnFailure': {'Type': 'SQS', 'Destination': {
        'Fn::ImportValue': n.export('OutboxFailuresQueueArn')}}}


def patch_events(stage: str, function: str, props: dict[str, Any]) -> tuple[set[str], list[str]]:
    """Tune the SAM ``Events`` of one function in place; returns (IAM source kinds, queues)."""
    kinds: set[str] = set()
    queues: list[str] = []
    for event in (props.get('Events') or {}).values():
        kind = event.get('Type')
        if kind == 'SQS':
            queues.append(_patch_sqs(stage, function, props, event))
            kinds.add(iam.SQS_SOURCE)
        elif kind == 'DynamoDB':
            _patch_stream(stage, function, event)
            kinds.add(iam.STREAM_SOURCE)
        elif kind == 'Schedule':
            event['Properties'].setdefault('RetryPolicy', dict(SCHEDULE_RETRY_POLICY))
            props.setdefault('EventInvokeConfig', dict(SCHEDULE_INVOKE_CONFIG))
        elif kind not in UNPATCHED_EVENTS:
            raise PackagingError(f'{function}: event source {kind} is not handled by infra/app.py')
    return kinds, queues


# ----------------------------------------------------------------------------- the whole template

def _kind(logical_id: str) -> str:
    return {API_FUNCTION: iam.API, AUTHORIZER_FUNCTION: iam.AUTHORIZER}.get(logical_id, iam.HANDLER)


def _default_is_service_route() -> Callable[[str], bool]:
    import app  # noqa: F401, PLC0415 - lazy: only packaging needs the routes (registering blueprints)
    from chalicelib.kernel.http import policy  # noqa: PLC0415 - lazy: filled in by the import above
    return lambda path: policy.of(path) == 'service'


def patch(doc: dict[str, Any], stage: str, is_service_route: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """The deployable app template from ``chalice package`` output (a new dict)."""
    n = Names(stage)
    out = copy.deepcopy(doc)
    resources: dict[str, Any] = out['Resources']
    for required in (API_FUNCTION, AUTHORIZER_FUNCTION):
        if resources.get(required, {}).get('Type') != 'AWS::Serverless::Function':
            raise PackagingError(f'chalice package emitted no {required}')
    # the OCR function (a container image Chalice cannot package), with the stage's environment
    stage_env = resources[API_FUNCTION]['Properties'].get('Environment', {}).get('Variables', {})
    resources[ocr_function.LOGICAL_ID] = ocr_function.function(stage, stage_env)
    functions = {lid: r for lid, r in resources.items() if r['Type'] == 'AWS::Serverless::Function'}
    names = {lid: n.function(lid) for lid in functions}

    shared_key = _resolve(n.shared_usage_key_secret)
    added: dict[str, Any] = {}
    for lid, fn in functions.items():
        props = fn['Properties']
        kind = _kind(lid)
        props['FunctionName'] = names[lid]
        sources, queues = patch_events(stage, lid, props)
        if props.get('Events'):
            props.pop('ReservedConcurrentExecutions', None)

        env = props.setdefault('Environment', {}).setdefault('Variables', {})
        if kind != iam.AUTHORIZER:   # X-Ray active tracing (core/observability.py); the authorizer does no I/O
            props['Tracing'] = 'Active'
        if kind in (iam.API, iam.AUTHORIZER):
            env['USAGE_PLAN_ID'] = {'Ref': 'PerKeyUsagePlan'}
            env['GATEWAY_SHARED_USAGE_KEY'] = shared_key
        if kind == iam.API:
            env['INTERNAL_SERVICE_TOKEN'] = _resolve(n.internal_token_secret)
            env['CLIENT_IP_HASH_KEY'] = _resolve(n.client_ip_hash_key_secret)
            env.update({'AUTH_JWT_ISSUER': {'Ref': 'JwtIssuer'}, 'AUTH_JWT_AUDIENCE': {'Ref': 'JwtAudience'},
                        'AUTH_JWT_JWKS_URL': {'Ref': 'JwtJwksUrl'}})

        log_group = f'{lid}LogGroup'
        added[log_group] = {'Type': 'AWS::Logs::LogGroup', 'Properties': {
            'LogGroupName': f'/aws/lambda/{names[lid]}', 'RetentionInDays': LOG_RETENTION_DAYS}}
        fn['DependsOn'] = sorted({*([fn['DependsOn']] if isinstance(fn.get('DependsOn'), str)
                                    else fn.get('DependsOn', [])), log_group})

        role = f'{lid}Role'   # one role per function, whatever Chalice shared
        added[role] = {'Type': 'AWS::IAM::Role', 'Properties': {
            'AssumeRolePolicyDocument': {'Version': '2012-10-17', 'Statement': [{
                'Effect': 'Allow', 'Principal': {'Service': 'lambda.amazonaws.com'}, 'Action': 'sts:AssumeRole'}]},
            'Policies': [{'PolicyName': f'{lid}Policy',
                          'PolicyDocument': iam.function_policy(stage, kind, names[lid], sources, queues)}]}}
        props['Role'] = {'Fn::GetAtt': [role, 'Arn']}

        added[f'{lid}ErrorsAlarm'] = alarms.alarm(
            f'{names[lid]}-errors', f'{names[lid]} failed (unhandled errors, timeouts) in the last 5 minutes.',
            namespace='AWS/Lambda', metric='Errors', dimensions={'FunctionName': {'Ref': lid}})

    # Chalice's roles that no function uses any more.
    for lid in [lid for lid, r in resources.items() if r['Type'] == 'AWS::IAM::Role' and lid not in added]:
        del resources[lid]
    resources.update(added)

    # The API definition: authorizer, key source, gateway responses, functions by name.
    api = resources['RestAPI']['Properties']
    body = usage_plan.patch_swagger(api['DefinitionBody'], is_service_route or _default_is_service_route(),
                                    uri=_sub('arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/'
                                             '2015-03-31/functions/arn:${AWS::Partition}:lambda:${AWS::Region}:'
                                             f'${{AWS::AccountId}}:function:{names[AUTHORIZER_FUNCTION]}/invocations'))
    body = _walk(body, _by_name(names))
    api_name = f'{APP_NAME}-{stage}'
    body.setdefault('info', {})['title'] = api_name
    body['x-amazon-apigateway-gateway-responses'] = usage_plan.gateway_responses(stage)
    api['DefinitionBody'] = body

    resources.update(usage_plan.plan_resources(
        stage, api={'Ref': 'RestAPI'}, api_stage={'Ref': 'RestAPI.Stage'}, key_value=shared_key,
        authorizer={'Ref': AUTHORIZER_FUNCTION}))
    resources['Api5xxAlarm'] = alarms.alarm(
        f'{api_name}-5xx-rate', 'More than 5% of API requests answered 5xx over 5 minutes.',
        namespace='AWS/ApiGateway', metric='5XXError', statistic='Average', threshold=0.05,
        dimensions={'ApiName': api_name, 'Stage': usage_plan.api_stage_name(stage)})

    out['Description'] = f'Platform API application ({stage}): API Gateway, Lambda functions, usage plans, alarms'
    out['Parameters'] = {**PARAMETERS, ocr_function.IMAGE_PARAMETER: dict(ocr_function.PARAMETER),
                         **alarms.parameters(), **out.get('Parameters', {})}
    out['Conditions'] = {**alarms.conditions(), **out.get('Conditions', {})}
    out.setdefault('Outputs', {}).update({
        'PerKeyUsagePlanId': {'Value': {'Ref': 'PerKeyUsagePlan'}, 'Description': 'USAGE_PLAN_ID'},
        'SharedUsagePlanId': {'Value': {'Ref': 'SharedUsagePlan'}},
    })
    return out
