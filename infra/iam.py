"""What each Lambda function may do: ONE list of grants, rendered twice.

* into each function's role in the packaged app template (infra/app.py), with the partition,
  region, account and usage plan of the deployment, per function: the API gets the API's
  grants, the gateway authorizer (no I/O) only its log group, each event handler the app's
  grants plus what its own event sources need (the queue it consumes, the table stream and the
  outbox failure queue);
* into ``.chalice/policy-<stage>.json`` (what ``chalice package``/``chalice deploy`` read, the
  union of the app's grants, region and account left open); ``make policy`` writes it, and
  tests/unit/test_package.py fails when it differs from this list.

No grant names a wildcard action or a service-wide ``service:*``; every resource is named (the
table and its indexes, the bucket's objects, the queues, the bus, the organization secret
prefix, the gateway's API keys and the per-key usage plan's keys, the function's own log group).

    PYTHONPATH=. python -m infra.iam write prod    # rewrite .chalice/policy-prod.json
    PYTHONPATH=. python -m infra.iam check prod    # exit 1 when it is stale
"""
from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.names import APP_NAME, Names

ROOT = Path(__file__).resolve().parents[1]

# Who gets a grant: the kind of function, plus one kind per event source it has.
API, AUTHORIZER, HANDLER = 'api', 'authorizer', 'handler'
SQS_SOURCE, STREAM_SOURCE = 'sqs-source', 'stream-source'
APP = frozenset({API, HANDLER})

ARN = 'arn:{partition}:{service}:{region}:{account}:{resource}'


@dataclass(frozen=True)
class Grant:
    sid: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]   # str.format templates: partition, region, account, usage_plan, function, queue
    who: frozenset[str]


def _arn(service: str, resource: str, *, regional: bool = True, account: bool = True) -> str:
    return ARN.format(partition='{partition}', service=service, region='{region}' if regional else '',
                      account='{account}' if account else '', resource=resource)


def grants(stage: str) -> list[Grant]:
    n = Names(stage)
    table = _arn('dynamodb', f'table/{n.table}')
    return [
        # TransactWriteItems needs no action of its own: it is checked per item operation.
        Grant('Table', ('dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', 'dynamodb:PutItem',
                        'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:ConditionCheckItem',
                        'dynamodb:DescribeTable'),
              (table, f'{table}/index/*'), APP),
        # Object-level only (multipart: create/upload part/complete are PutObject).
        Grant('Documents', ('s3:GetObject', 's3:PutObject', 's3:DeleteObject', 's3:AbortMultipartUpload',
                            's3:ListMultipartUploadParts'),
              (_arn('s3', f'{n.bucket}/*', regional=False, account=False),), APP),
        # a deleted family's document versions are found by prefix (features/documents/service.py)
        Grant('DocumentsList', ('s3:ListBucket',), (_arn('s3', n.bucket, regional=False, account=False),), APP),
        Grant('ActivityStartsSend', ('sqs:SendMessage', 'sqs:GetQueueUrl', 'sqs:GetQueueAttributes'),
              (_arn('sqs', n.queue),), APP),
        # pages without a text layer go to the OCR function's queue (infra/ocr_function.py)
        Grant('OcrStartsSend', ('sqs:SendMessage', 'sqs:GetQueueUrl', 'sqs:GetQueueAttributes'),
              (_arn('sqs', n.ocr_queue),), APP),
        Grant('Events', ('events:PutEvents',), (_arn('events', f'event-bus/{n.event_bus}'),), APP),
        Grant('OrgSecretsRead', ('secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret'),
              (_arn('secretsmanager', f'secret:{n.org_secrets_prefix}*'),), APP),
        Grant('OrgSecretsWrite', ('secretsmanager:CreateSecret', 'secretsmanager:PutSecretValue',
                                  'secretsmanager:DeleteSecret'),
              (_arn('secretsmanager', f'secret:{n.org_secrets_prefix}*'),), frozenset({API})),
        # features/identity/credentials.py: create_api_key (POST /apikeys), create_usage_plan_key (POST
        # /usageplans/{id}/keys, the per-key plan only), delete_api_key (DELETE /apikeys/{id}).
        Grant('GatewayKeysCreate', ('apigateway:POST',),
              (_arn('apigateway', '/apikeys', account=False),
               _arn('apigateway', '/usageplans/{usage_plan}/keys', account=False)), frozenset({API})),
        Grant('GatewayKeysDelete', ('apigateway:DELETE',),
              (_arn('apigateway', '/apikeys/*', account=False),), frozenset({API})),
        # Event sources: Lambda polls with the function's role.
        Grant('QueueConsume', ('sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'),
              (_arn('sqs', '{queue}'),), frozenset({SQS_SOURCE})),
        Grant('TableStreamRead', ('dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator',
                                  'dynamodb:ListStreams'),
              (f'{table}/stream/*',), frozenset({STREAM_SOURCE})),
        Grant('OutboxFailuresSend', ('sqs:SendMessage',), (_arn('sqs', n.outbox_failures),),
              frozenset({STREAM_SOURCE})),
        # X-Ray (TRACING_ENABLED; core/observability.py): these two actions have no resource-level
        # permissions, so the resource is necessarily '*'.
        Grant('Tracing', ('xray:PutTraceSegments', 'xray:PutTelemetryRecords'), ('*',), APP),
        # Its own log group only (created by the template, so no logs:CreateLogGroup).
        Grant('Logs', ('logs:CreateLogStream', 'logs:PutLogEvents'),
              (_arn('logs', 'log-group:/aws/lambda/{function}:*'),), APP | {AUTHORIZER}),
    ]


def _statements(stage: str, kinds: set[str], values: dict[str, Any], queues: Iterable[str]) -> list[dict[str, Any]]:
    out = []
    for grant in grants(stage):
        if not grant.who & kinds:
            continue
        resources: list[str] = []
        for template in grant.resources:
            for queue in (queues if '{queue}' in template else [None]):
                resources.append(template.format(**values, queue=queue))
        out.append({'Sid': grant.sid, 'Effect': 'Allow', 'Action': list(grant.actions),
                    'Resource': resources[0] if len(resources) == 1 else resources})
    return out


CFN_VALUES = {'partition': '${AWS::Partition}', 'region': '${AWS::Region}', 'account': '${AWS::AccountId}',
              'usage_plan': '${PerKeyUsagePlan}'}


def function_policy(stage: str, kind: str, function_name: str, sources: set[str] = frozenset(),
                    queues: Iterable[str] = ()) -> dict[str, Any]:
    """The policy document of one function's role in the packaged template (CloudFormation
    intrinsics for partition, region, account and the usage plan id)."""
    statements = _statements(stage, {kind, *sources}, {**CFN_VALUES, 'function': function_name}, list(queues))
    for statement in statements:
        resources = statement['Resource'] if isinstance(statement['Resource'], list) else [statement['Resource']]
        subbed = [{'Fn::Sub': r} if '${' in r else r for r in resources]
        statement['Resource'] = subbed[0] if len(subbed) == 1 else subbed
    return {'Version': '2012-10-17', 'Statement': statements}


def chalice_policy(stage: str) -> dict[str, Any]:
    """``.chalice/policy-<stage>.json``: what any function of the app may need (region,
    account and usage plan open; log groups of the stage's functions)."""
    values = {'partition': 'aws', 'region': '*', 'account': '*', 'usage_plan': '*',
              'function': f'{APP_NAME}-{stage}-*'}
    kinds = {API, HANDLER, SQS_SOURCE, STREAM_SOURCE}
    return {'Version': '2012-10-17', 'Statement': _statements(stage, kinds, values, [Names(stage).queue])}


def policy_path(stage: str) -> Path:
    return ROOT / '.chalice' / f'policy-{stage}.json'


def render(stage: str) -> str:
    return json.dumps(chalice_policy(stage), indent=2) + '\n'


if __name__ == '__main__':
    if len(sys.argv) != 3 or sys.argv[1] not in ('write', 'check'):
        raise SystemExit('usage: python -m infra.iam write|check <stage>')
    command, stage = sys.argv[1:]
    path = policy_path(stage)
    if command == 'write':
        path.write_text(render(stage))
    elif not path.exists() or path.read_text() != render(stage):
        raise SystemExit(f'{path.relative_to(ROOT)} differs from infra/iam.py: run `make policy STAGE={stage}`')
