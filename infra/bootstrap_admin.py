"""The first platform admin and API key of a deployed stage (docs/operations/deploy.md "The first
admin"):

    PYTHONPATH=. .venv/bin/python -m infra.bootstrap_admin prod [--email admin@example.com] [--org default]

With the operator's AWS credentials for the stage's account and region, after both stacks are
deployed. It runs the same bootstrap as ``make run`` (chalicelib/features/identity/bootstrap.py:
the ``default`` organization, the admin user, a PLATFORM_ADMIN membership, an API key) against
the stage's table, with the stage's settings from .chalice/config.json, and with the stage's
per-key usage plan (``platform-<stage>-per-key``, infra/usage_plan.py) found in API Gateway: the
key gets its API Gateway twin in that plan (chalicelib/features/identity/credentials.py), without
which API Gateway answers 401 to it. The key is printed once; run again, it keeps the existing
admin and key and prints none. Refuses to run when the table or the usage plan is missing (the
stacks are not deployed, or not in this region).
"""
from __future__ import annotations

import argparse
import os
import sys

from infra.package import stage_environment


def usage_plan_id(gateway, stage: str) -> str:
    name = f'platform-{stage}-per-key'
    for page in gateway.get_paginator('get_usage_plans').paginate():
        for plan in page.get('items') or []:
            if plan.get('name') == name:
                return plan['id']
    raise SystemExit(f'no API Gateway usage plan {name!r} in this account and region: deploy the app stack first')


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog='python -m infra.bootstrap_admin', description=__doc__.split('\n\n')[0])
    parser.add_argument('stage')
    parser.add_argument('--email', default='admin@example.com', help="the admin's e-mail (default admin@example.com)")
    parser.add_argument('--org', default='default', help="the first organization's slug (default 'default')")
    args = parser.parse_args(argv)
    os.environ.update(stage_environment(args.stage))   # TABLE_NAME, ... as the functions get them
    import boto3  # noqa: PLC0415 - after the stage's settings are in the environment

    region = os.environ.get('AWS_REGION') or os.environ.get('AWS_DEFAULT_REGION') or 'us-east-1'
    endpoint = os.environ.get('AWS_ENDPOINT_URL') or None
    dynamodb = boto3.client('dynamodb', region_name=region, endpoint_url=endpoint)
    table = os.environ['TABLE_NAME']
    try:
        dynamodb.describe_table(TableName=table)
    except dynamodb.exceptions.ResourceNotFoundException:
        raise SystemExit(f'no table {table!r} in this account and region: deploy the data stack first') from None
    os.environ['USAGE_PLAN_ID'] = usage_plan_id(boto3.client('apigateway', region_name=region, endpoint_url=endpoint),
                                                args.stage)
    from chalicelib.core.config import get_config  # noqa: PLC0415 - reads the environment set above
    get_config.cache_clear()
    from chalicelib.features.identity.bootstrap import bootstrap  # noqa: PLC0415 - same reason

    result = bootstrap(admin_email=args.email, org_slug=args.org)
    print(f"stage {args.stage}: organization {result['organizationId']}, admin {args.email} ({result['userId']}), "
          f"usage plan {os.environ['USAGE_PLAN_ID']}")
    if result['apiKey']:
        print(f"admin API key (shown once, store it now): {result['apiKey']}")
    else:
        print('the admin already has an API key: none created (revoke and create keys through the API)')
    return result


if __name__ == '__main__':
    main(sys.argv[1:])
