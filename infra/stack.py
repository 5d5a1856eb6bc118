"""CloudFormation for the stateful resources of a stage (the *data stack*), generated from the
code so the two cannot drift: the table (keys, GSIs and projections read from the pynamodb
model), the document bucket, the activity-start queue and its dead-letter queue, the OCR
function's queue and its dead-letter queue, the outbox
publisher's failure queue, the event bus, the stage's generated secrets, and the alarms on all
of them. Names come from infra/names.py; the app stack (infra/app.py) imports the exports.

    make package STAGE=prod      # writes out/prod/data.json (and the app template)
    aws cloudformation deploy --stack-name platform-prod-data --template-file out/prod/data.json

(or ``PYTHONPATH=. python -m infra.stack prod`` for this template alone.)
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

from chalicelib.kernel.store.model import Item
from infra import alarms, ocr_function
from infra.names import Names

TTL_ATTRIBUTE = 'ttl'
MULTIPART_ABORT_DAYS = 1          # incomplete multipart uploads are aborted (and their parts freed)
NONCURRENT_VERSION_DAYS = 30      # overwritten/deleted document versions are kept this long
QUEUE_VISIBILITY_TIMEOUT = 180    # >= 6 x the worker's timeout (checked when packaging the app)
MAX_RECEIVE_COUNT = 5
DLQ_RETENTION = 14 * 24 * 3600    # the longest SQS keeps a message


def _key_schema(keys: list[dict[str, str]]) -> list[dict[str, str]]:
    order = {'HASH': 0, 'RANGE': 1}
    return sorted(keys, key=lambda k: order[k['KeyType']])


# Indexes the code no longer reads, kept in the template only while a stage moves off them
# (``KEEP_RETIRED_INDEXES=x2_updated,x3_updated make package``): CloudFormation creates or deletes
# one GSI per stack update, so a stage deploys the app that no longer reads them with all of them
# kept, then drops one retired index per update (docs/operations/deploy.md "Index changes").
RETIRED_INDEXES: dict[str, tuple[str, str, str]] = {
    'tenant_all': ('tpk', 'csk', 'ALL'),    # ALL projection of by_created's keys (docs/scale.md "Projections")
    'by_parent': ('ppk', 'csk', 'ALL'),     # ALL projection of parent_keys' keys
    # value indexes in updatedOn order (docs/scale.md "Value indexes by createdOn only")
    **{f'x{n}_updated': (f'x{n}', 'usk', 'KEYS_ONLY') for n in range(1, 6)},
}


def _retired(names: tuple[str, ...]) -> list[dict[str, Any]]:
    unknown = [n for n in names if n not in RETIRED_INDEXES]
    if unknown:
        raise ValueError(f'not a retired index: {", ".join(unknown)} (known: {", ".join(RETIRED_INDEXES)})')
    return [{'IndexName': n, 'KeySchema': [{'AttributeName': h, 'KeyType': 'HASH'},
                                           {'AttributeName': r, 'KeyType': 'RANGE'}],
             'Projection': {'ProjectionType': projection}}
            for n, (h, r, projection) in RETIRED_INDEXES.items() if n in names]


def _table(name: str, keep_retired: tuple[str, ...] = ()) -> dict[str, Any]:
    schema = Item._get_schema()
    if TTL_ATTRIBUTE not in Item.get_attributes():
        raise ValueError(f'the model has no {TTL_ATTRIBUTE!r} attribute for the table TTL')
    gsis = [{
        'IndexName': g['index_name'],
        'KeySchema': _key_schema(g['key_schema']),
        'Projection': g['projection'],
    } for g in schema['global_secondary_indexes']] + _retired(keep_retired)
    return {
        'Type': 'AWS::DynamoDB::Table',
        'DeletionPolicy': 'Retain',
        'UpdateReplacePolicy': 'Retain',
        'Properties': {
            'TableName': name,
            'BillingMode': 'PAY_PER_REQUEST',
            'AttributeDefinitions': schema['attribute_definitions'],
            'KeySchema': _key_schema(schema['key_schema']),
            'GlobalSecondaryIndexes': gsis,
            'TimeToLiveSpecification': {'AttributeName': TTL_ATTRIBUTE, 'Enabled': True},
            'PointInTimeRecoverySpecification': {'PointInTimeRecoveryEnabled': True},
            'SSESpecification': {'SSEEnabled': True},
            'StreamSpecification': {'StreamViewType': 'NEW_AND_OLD_IMAGES'},
            'DeletionProtectionEnabled': True,
        },
    }


def _bucket(name: str) -> dict[str, Any]:
    return {
        'Type': 'AWS::S3::Bucket',
        'DeletionPolicy': 'Retain',
        'UpdateReplacePolicy': 'Retain',
        'Properties': {
            'BucketName': name,
            'BucketEncryption': {'ServerSideEncryptionConfiguration': [{
                'ServerSideEncryptionByDefault': {'SSEAlgorithm': 'aws:kms'}, 'BucketKeyEnabled': True}]},
            'PublicAccessBlockConfiguration': {
                'BlockPublicAcls': True, 'BlockPublicPolicy': True,
                'IgnorePublicAcls': True, 'RestrictPublicBuckets': True},
            'OwnershipControls': {'Rules': [{'ObjectOwnership': 'BucketOwnerEnforced'}]},
            'VersioningConfiguration': {'Status': 'Enabled'},
            'LifecycleConfiguration': {'Rules': [
                {'Id': 'abort-incomplete-multipart', 'Status': 'Enabled',
                 'AbortIncompleteMultipartUpload': {'DaysAfterInitiation': MULTIPART_ABORT_DAYS}},
                {'Id': 'expire-noncurrent-versions', 'Status': 'Enabled',
                 'NoncurrentVersionExpiration': {'NoncurrentDays': NONCURRENT_VERSION_DAYS},
                 'ExpiredObjectDeleteMarker': True},
            ]},
        },
    }


def _tls_only(bucket: str) -> dict[str, Any]:
    arn = {'Fn::GetAtt': [bucket, 'Arn']}
    return {
        'Type': 'AWS::S3::BucketPolicy',
        'Properties': {'Bucket': {'Ref': bucket}, 'PolicyDocument': {'Version': '2012-10-17', 'Statement': [{
            'Sid': 'DenyInsecureTransport', 'Effect': 'Deny', 'Principal': {'AWS': '*'}, 'Action': 's3:*',
            'Resource': [arn, {'Fn::Join': ['', [arn, '/*']]}],
            'Condition': {'Bool': {'aws:SecureTransport': 'false'}}}]}},
    }


def _queue(name: str, *, dlq: str | None = None, visibility: int | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {'QueueName': name, 'SqsManagedSseEnabled': True}
    if dlq is None:
        props['MessageRetentionPeriod'] = DLQ_RETENTION
    else:
        props['RedrivePolicy'] = {'deadLetterTargetArn': {'Fn::GetAtt': [dlq, 'Arn']},
                                  'maxReceiveCount': MAX_RECEIVE_COUNT}
    if visibility is not None:
        props['VisibilityTimeout'] = visibility
    return {'Type': 'AWS::SQS::Queue', 'Properties': props}


def _secret(name: str, description: str) -> dict[str, Any]:
    return {
        'Type': 'AWS::SecretsManager::Secret',
        'DeletionPolicy': 'Retain',
        'UpdateReplacePolicy': 'Retain',
        'Properties': {'Name': name, 'Description': description,
                       'GenerateSecretString': {'PasswordLength': 48, 'ExcludePunctuation': True}},
    }


# Queues that hold what failed elsewhere: alarmed on depth, and not themselves redriven.
DEAD_LETTER_QUEUES = ('ActivityStartsDLQ', 'OcrStartsDLQ', 'OutboxFailures')


def _alarms(n: Names, resources: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for queue in DEAD_LETTER_QUEUES:
        name = resources[queue]['Properties']['QueueName']
        out[f'{queue}DepthAlarm'] = alarms.alarm(
            f'{name}-depth', f'Messages are waiting in {name}: something failed {MAX_RECEIVE_COUNT} times '
                             'or was given up on; inspect and redrive.',
            namespace='AWS/SQS', metric='ApproximateNumberOfMessagesVisible',
            dimensions={'QueueName': {'Fn::GetAtt': [queue, 'QueueName']}}, statistic='Maximum', period=60)
    indexes = [g['IndexName'] for g in resources['Table']['Properties']['GlobalSecondaryIndexes']]
    for kind in ('Read', 'Write'):
        table = {'TableName': {'Ref': 'Table'}}
        metrics = [(f'{kind}ThrottleEvents', table)]
        metrics += [(f'{kind}ThrottleEvents', {**table, 'GlobalSecondaryIndexName': i}) for i in indexes]
        for part, start in enumerate(range(0, len(metrics), alarms.MAX_MATH_METRICS)):  # CloudWatch: 10 per alarm
            suffix = '' if part == 0 else str(part + 1)
            out[f'Table{kind}Throttles{suffix}Alarm'] = alarms.sum_alarm(
                f'{n.table}-{kind.lower()}-throttles{"-" + suffix if suffix else ""}',
                f'DynamoDB throttled {kind.lower()}s on {n.table} or its indexes (on-demand capacity limits, '
                'hot partitions).', namespace='AWS/DynamoDB',
                metric_dimensions=metrics[start:start + alarms.MAX_MATH_METRICS])
    return out


def template(stage: str = 'prod', keep_retired: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The data stack of ``stage``; ``keep_retired`` (default: ``KEEP_RETIRED_INDEXES``, comma
    separated) names retired indexes still to be kept (``RETIRED_INDEXES``)."""
    if keep_retired is None:
        keep_retired = tuple(n for n in os.environ.get('KEEP_RETIRED_INDEXES', '').split(',') if n.strip())
    n = Names(stage)
    resources: dict[str, Any] = {
        'Table': _table(n.table, tuple(k.strip() for k in keep_retired)),
        'Documents': _bucket(n.bucket),
        'DocumentsPolicy': _tls_only('Documents'),
        'ActivityStartsDLQ': _queue(n.queue_dlq),
        'ActivityStarts': _queue(n.queue, dlq='ActivityStartsDLQ', visibility=QUEUE_VISIBILITY_TIMEOUT),
        # pages without a text layer, for the OCR function (infra/ocr_function.py)
        'OcrStartsDLQ': _queue(n.ocr_queue_dlq),
        'OcrStarts': _queue(n.ocr_queue, dlq='OcrStartsDLQ', visibility=ocr_function.QUEUE_VISIBILITY_TIMEOUT),
        'OutboxFailures': _queue(n.outbox_failures),
        'EventBus': {'Type': 'AWS::Events::EventBus', 'Properties': {'Name': n.event_bus}},
        'InternalServiceToken': _secret(n.internal_token_secret,
                                        'INTERNAL_SERVICE_TOKEN: the token of the internal (service) routes'),
        'GatewaySharedUsageKey': _secret(n.shared_usage_key_secret,
                                         'GATEWAY_SHARED_USAGE_KEY: the shared usage plan key value'),
        'ClientIpHashKey': _secret(n.client_ip_hash_key_secret,
                                   'CLIENT_IP_HASH_KEY: HMAC key of clientIpHash on UI events'),
    }
    resources.update(_alarms(n, resources))

    def export(what: str, value: Any) -> dict[str, Any]:
        return {'Value': value, 'Export': {'Name': n.export(what)}}

    return {
        'AWSTemplateFormatVersion': '2010-09-09',
        'Description': f'Platform API data resources ({stage})',
        'Parameters': alarms.parameters(),
        'Conditions': alarms.conditions(),
        'Resources': resources,
        'Outputs': {
            'TableName': {'Value': {'Ref': 'Table'}},
            'TableStreamArn': export('TableStreamArn', {'Fn::GetAtt': ['Table', 'StreamArn']}),
            'BucketName': {'Value': {'Ref': 'Documents'}},
            'QueueUrl': {'Value': {'Ref': 'ActivityStarts'}},
            'OcrQueueUrl': {'Value': {'Ref': 'OcrStarts'}},
            'OutboxFailuresQueueArn': export('OutboxFailuresQueueArn', {'Fn::GetAtt': ['OutboxFailures', 'Arn']}),
            'EventBusName': {'Value': {'Ref': 'EventBus'}},
        },
    }


if __name__ == '__main__':
    print(json.dumps(template(sys.argv[1] if len(sys.argv) > 1 else 'prod'), indent=2))
