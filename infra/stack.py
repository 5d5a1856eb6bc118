"""CloudFormation for the stateful resources the Chalice app uses, generated from the code so
the two cannot drift: the table (keys, GSIs and projections read from the pynamodb model),
the document bucket, the activity-start queue with its dead-letter queue, the event bus.

    PYTHONPATH=. python -m infra.stack prod > infra/out/prod.json
    aws cloudformation deploy --stack-name platform-prod-data --template-file infra/out/prod.json
    chalice deploy --stage prod

The API itself (API Gateway + Lambda) is deployed by ``chalice deploy --stage prod`` with the
names in .chalice/config.json; infra/usage_plan.py (if present) adds the usage plan.
"""
from __future__ import annotations

import json
import sys
from typing import Any

from chalicelib.store.model import Item


def _table(name: str) -> dict[str, Any]:
    schema = Item._get_schema()
    order = {'HASH': 0, 'RANGE': 1}
    gsis = [{
        'IndexName': g['index_name'],
        'KeySchema': sorted(g['key_schema'], key=lambda k: order[k['KeyType']]),
        'Projection': g['projection'],
    } for g in schema['global_secondary_indexes']]
    return {
        'Type': 'AWS::DynamoDB::Table',
        'DeletionPolicy': 'Retain',
        'UpdateReplacePolicy': 'Retain',
        'Properties': {
            'TableName': name,
            'BillingMode': 'PAY_PER_REQUEST',
            'AttributeDefinitions': schema['attribute_definitions'],
            'KeySchema': sorted(schema['key_schema'], key=lambda k: order[k['KeyType']]),
            'GlobalSecondaryIndexes': gsis,
            'TimeToLiveSpecification': {'AttributeName': 'ttl', 'Enabled': True},
            'PointInTimeRecoverySpecification': {'PointInTimeRecoveryEnabled': True},
            'SSESpecification': {'SSEEnabled': True},
            'StreamSpecification': {'StreamViewType': 'NEW_AND_OLD_IMAGES'},
        },
    }


def template(stage: str = 'prod') -> dict[str, Any]:
    prefix = f'platform-{stage}'
    return {
        'AWSTemplateFormatVersion': '2010-09-09',
        'Description': f'Platform API data resources ({stage})',
        'Resources': {
            'Table': _table(prefix),
            'Documents': {
                'Type': 'AWS::S3::Bucket',
                'DeletionPolicy': 'Retain',
                'Properties': {
                    'BucketName': f'{prefix}-documents',
                    'BucketEncryption': {'ServerSideEncryptionConfiguration': [
                        {'ServerSideEncryptionByDefault': {'SSEAlgorithm': 'aws:kms'}}]},
                    'PublicAccessBlockConfiguration': {
                        'BlockPublicAcls': True, 'BlockPublicPolicy': True,
                        'IgnorePublicAcls': True, 'RestrictPublicBuckets': True},
                    'LifecycleConfiguration': {'Rules': [{
                        'Id': 'abort-stale-multipart', 'Status': 'Enabled',
                        'AbortIncompleteMultipartUpload': {'DaysAfterInitiation': 7}}]},
                },
            },
            'ActivityStartsDLQ': {
                'Type': 'AWS::SQS::Queue',
                'Properties': {'QueueName': f'{prefix}-activity-starts-dlq', 'MessageRetentionPeriod': 1209600,
                               'SqsManagedSseEnabled': True},
            },
            'ActivityStarts': {
                'Type': 'AWS::SQS::Queue',
                'Properties': {
                    'QueueName': f'{prefix}-activity-starts', 'VisibilityTimeout': 180,
                    'SqsManagedSseEnabled': True,
                    'RedrivePolicy': {'deadLetterTargetArn': {'Fn::GetAtt': ['ActivityStartsDLQ', 'Arn']},
                                      'maxReceiveCount': 5},
                },
            },
            'EventBus': {'Type': 'AWS::Events::EventBus', 'Properties': {'Name': prefix}},
        },
        'Outputs': {
            'TableName': {'Value': {'Ref': 'Table'}},
            'TableStreamArn': {'Value': {'Fn::GetAtt': ['Table', 'StreamArn']}},
            'BucketName': {'Value': {'Ref': 'Documents'}},
            'QueueUrl': {'Value': {'Ref': 'ActivityStarts'}},
            'EventBusName': {'Value': {'Ref': 'EventBus'}},
        },
    }


if __name__ == '__main__':
    print(json.dumps(template(sys.argv[1] if len(sys.argv) > 1 else 'prod'), indent=2))
