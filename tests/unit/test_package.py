"""`make package STAGE=prod` then cfn-lint (`make cfn-lint`), and the security properties of what
it wrote, asserted on the generated templates themselves:

* out/prod/data.json  (data stack),
* out/prod/app.json   (app stack, SAM, as deployed),
* out/prod/lint/app.expanded.json (the same expanded by aws-sam-translator: the plain
  CloudFormation that runs, event source mappings included).

The event handlers the app will grow (@app.on_sqs_message, @app.schedule,
@app.on_dynamodb_record) are packaged here already, from a throwaway Chalice app in a temporary
folder, and run through the same post-processing, so the settings they must get are tested now.

The first run builds .venv-lint and downloads the Lambda wheels (PyPI), ~30-60 s; later runs
reuse both (a few seconds).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra import app as app_stack
from infra import botocore_models, iam, ocr_function, pillow_trim, stack, usage_plan
from infra.names import Names

pytestmark = pytest.mark.slow   # minutes of CPU: `make test` runs it, the quick loop (`make check`) does not

ROOT = Path(__file__).resolve().parents[2]
STAGE = 'prod'
XRAY_ACTIONS = {'xray:PutTraceSegments', 'xray:PutTelemetryRecords'}
OUT = ROOT / 'out' / STAGE
N = Names(STAGE)

# cfn-lint warnings left on purpose (each explained in docs/operations/deploy.md).
KNOWN_WARNINGS: set[str] = set()


def _no_aws_env() -> dict[str, str]:
    """The environment of a machine without AWS credentials or configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('AWS_')}
    env.update(AWS_CONFIG_FILE='/nonexistent', AWS_SHARED_CREDENTIALS_FILE='/nonexistent',
               AWS_EC2_METADATA_DISABLED='true')
    return env


def _run(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=_no_aws_env(), capture_output=True, text=True, timeout=900)


@pytest.fixture(scope='module')
def lint_run() -> subprocess.CompletedProcess:
    """`make cfn-lint STAGE=prod`: packages the stage, then cfn-lint on every template."""
    return _run(['make', '--no-print-directory', 'cfn-lint', f'STAGE={STAGE}'])


@pytest.fixture(scope='module')
def templates(lint_run) -> dict[str, dict]:
    assert lint_run.returncode == 0, lint_run.stdout[-4000:] + lint_run.stderr[-4000:]
    return {name: json.loads((OUT / path).read_text()) for name, path in
            {'data': 'data.json', 'app': 'app.json', 'expanded': 'lint/app.expanded.json'}.items()}


# ----------------------------------------------------------------------------- template helpers

def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get('Fn::Sub'), str):
        return value['Fn::Sub']
    return None


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def policy_documents(doc: dict) -> Iterator[tuple[str, dict]]:
    """(where, policy document) for every IAM policy a template defines."""
    for lid, res in doc['Resources'].items():
        props = res.get('Properties') or {}
        if res['Type'] == 'AWS::IAM::Role':
            yield f'{lid} trust', props['AssumeRolePolicyDocument']
            for policy in props.get('Policies', []):
                yield f'{lid}/{policy["PolicyName"]}', policy['PolicyDocument']
        elif res['Type'] in ('AWS::IAM::Policy', 'AWS::IAM::ManagedPolicy', 'AWS::S3::BucketPolicy',
                             'AWS::SQS::QueuePolicy', 'AWS::SNS::TopicPolicy'):
            yield lid, props['PolicyDocument']
        elif res['Type'] == 'AWS::Serverless::Function':
            for policy in _as_list(props.get('Policies') or []):
                yield f'{lid} SAM policy', policy if isinstance(policy, dict) else {'Statement': []}


def statements(doc: dict) -> Iterator[tuple[str, dict]]:
    for where, document in policy_documents(doc):
        for statement in _as_list(document.get('Statement', [])):
            yield where, statement


def references(node: Any) -> set[str]:
    """Logical ids a piece of template refers to (Ref, Fn::GetAtt, ${X} in Fn::Sub)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == 'Ref' and isinstance(value, str):
                found.add(value.split('.')[0])
            elif key == 'Fn::GetAtt':
                found.add(value[0] if isinstance(value, list) else value.split('.')[0])
            elif key == 'Fn::Sub':
                text = value if isinstance(value, str) else value[0]
                found |= {v.split('.')[0] for v in re.findall(r'\$\{([^}!]+)\}', text)} - \
                    (set(value[1]) if isinstance(value, list) else set())
                if isinstance(value, list):
                    found |= references(value[1])
            else:
                found |= references(value)
    elif isinstance(node, list):
        for value in node:
            found |= references(value)
    return {f for f in found if not f.startswith('AWS::')}


def of_type(doc: dict, kind: str) -> dict[str, dict]:
    return {lid: r for lid, r in doc['Resources'].items() if r['Type'] == kind}


# ----------------------------------------------------------------------------- packaging and lint

def test_make_package_writes_the_templates_without_aws_credentials_and_cfn_lint_is_clean(lint_run, templates):
    report = json.loads((OUT / 'lint' / 'report.json').read_text())
    assert [m for m in report if m['level'] == 'Error'] == []
    assert {m['rule'] for m in report if m['level'] == 'Warning'} <= KNOWN_WARNINGS, report
    linted = re.search(r'cfn-lint: (\d+) templates', lint_run.stdout)
    assert linted and int(linted.group(1)) == 3, lint_run.stdout
    assert templates['app']['Transform'] == 'AWS::Serverless-2016-10-31'
    with zipfile.ZipFile(OUT / 'deployment.zip') as z:
        names = set(z.namelist())
    assert {'app.py', 'chalicelib/features/identity/authorizer.py', 'chalicelib/kernel/store/table.py'} <= names
    # the reviewer's page is package data (docs/api/review-page.md): served from the zip, no build step
    assert {f'chalicelib/features/review_ui/static/{n}' for n in ('index.html', 'app.js', 'app.css')} <= names
    assert not any(n.startswith(('tests/', 'infra/', 'localdev/', 'out/')) for n in names)
    for lid, fn in of_type(templates['app'], 'AWS::Serverless::Function').items():
        if lid == ocr_function.LOGICAL_ID:   # a container image (infra/ocr/Dockerfile), no code zip
            assert fn['Properties']['PackageType'] == 'Image' and 'CodeUri' not in fn['Properties']
            continue
        assert fn['Properties']['CodeUri'] == './deployment.zip'


def test_the_deployment_package_carries_the_bytecode_of_its_modules(templates):
    """A Lambda's code directory is read-only: without .pyc in the zip every cold start compiles
    every module it imports (infra/bytecode.py)."""
    tag = sys.implementation.cache_tag
    with zipfile.ZipFile(OUT / 'deployment.zip') as z:
        names = set(z.namelist())
        pyc = z.read(f'chalicelib/kernel/store/__pycache__/model.{tag}.pyc')
    assert {f'__pycache__/app.{tag}.pyc', f'chalice/__pycache__/app.{tag}.pyc',
            f'pynamodb/__pycache__/models.{tag}.pyc', 'chalicelib/kernel/store/dynamodb-endpoints.json'} <= names
    assert int.from_bytes(pyc[4:8], 'little') == 0b01      # unchecked hash-based (PEP 552)


def test_the_templates_fit_the_deploy_commands_of_the_readme(templates):
    """`aws cloudformation deploy` takes a template body up to 51,200 bytes; larger ones (the
    app) go through the artifacts bucket, up to 1 MB (processed SAM templates too)."""
    def size(doc):
        return len(json.dumps(doc, separators=(',', ':')))
    assert size(templates['data']) < 51_200
    assert size(templates['app']) < 800_000 and size(templates['expanded']) < 800_000


def test_the_chalice_policy_file_is_rendered_from_the_one_list_in_infra_iam():
    assert iam.policy_path(STAGE).read_text() == iam.render(STAGE), 'run `make policy STAGE=prod`'
    config = json.loads((ROOT / '.chalice' / 'config.json').read_text())['stages'][STAGE]
    assert config['autogen_policy'] is False and config['iam_policy_file'] == f'policy-{STAGE}.json'


# ----------------------------------------------------------------------------- IAM

NAMED = (f'{N.table}', f'{N.prefix}-', N.secrets_prefix, '::/apikeys', '::/usageplans/${PerKeyUsagePlan}/keys',
         'log-group:/aws/lambda/')


def _allow_statements(templates) -> Iterator[tuple[str, dict]]:
    policy_file = json.loads(iam.policy_path(STAGE).read_text())
    yield from (('policy-prod.json', s) for s in policy_file['Statement'])
    for name, doc in templates.items():
        for where, statement in statements(doc):
            if statement['Effect'] == 'Allow':
                yield f'{name}:{where}', statement


def test_no_allow_statement_has_a_wildcard_action_or_an_unnamed_resource(templates):
    seen = 0
    for where, statement in _allow_statements(templates):
        assert 'NotAction' not in statement and 'NotResource' not in statement, where
        for action in _as_list(statement['Action']):
            assert '*' not in action and re.fullmatch(r'[a-z0-9-]+:[A-Za-z]+', action), (where, action)
            seen += 1
        if 'Principal' in statement:     # a trust policy: who may assume the role
            assert statement['Principal'] == {'Service': 'lambda.amazonaws.com'}, where
            continue
        if set(_as_list(statement['Action'])) <= XRAY_ACTIONS:
            assert statement['Resource'] == '*', where   # X-Ray has no resource-level permissions
            continue
        for resource in _as_list(statement['Resource']):
            text = _text(resource)
            assert text is not None, (where, resource)
            assert text != '*' and not text.endswith(':*:*:*'), (where, text)
            if where == 'policy-prod.json' and text == 'arn:aws:apigateway:*::/usageplans/*/keys':
                continue    # the plan's id exists once deployed: the template names it, the file cannot
            assert any(name in text for name in NAMED), (where, text)
    assert seen > 20


def test_app_functions_are_traced_and_may_write_traces(templates):
    app = templates['app']
    for lid, fn in of_type(app, 'AWS::Serverless::Function').items():
        role = app['Resources'][fn['Properties']['Role']['Fn::GetAtt'][0]]
        actions = {a for p in role['Properties']['Policies'] for s in p['PolicyDocument']['Statement']
                   for a in _as_list(s['Action'])}
        if lid == 'GatewayAuthorizer':
            assert fn['Properties'].get('Tracing') != 'Active' and not actions & XRAY_ACTIONS
        else:
            assert fn['Properties']['Tracing'] == 'Active' and XRAY_ACTIONS <= actions, lid
            assert fn['Properties']['Environment']['Variables']['TRACING_ENABLED'] == 'true', lid


def test_wildcards_only_ever_widen_a_deny(templates):
    """The one `s3:*` is the bucket policy refusing every request not made over TLS."""
    for name, doc in templates.items():
        for where, statement in statements(doc):
            if any('*' in a for a in _as_list(statement.get('Action', []))):
                assert statement['Effect'] == 'Deny', (name, where)
                assert statement['Condition'] == {'Bool': {'aws:SecureTransport': 'false'}}


def _role_of(doc: dict, function: str) -> list[dict]:
    role = doc['Resources'][function]['Properties']['Role']['Fn::GetAtt'][0]
    return [s for p in doc['Resources'][role]['Properties']['Policies'] for s in p['PolicyDocument']['Statement']]


def test_each_function_writes_only_its_own_log_group_and_the_authorizer_nothing_else(templates):
    app = templates['app']
    functions = of_type(app, 'AWS::Serverless::Function')
    assert {app_stack.API_FUNCTION, app_stack.AUTHORIZER_FUNCTION} <= set(functions)
    for lid, fn in functions.items():
        name = fn['Properties']['FunctionName']
        logs = [s for s in _role_of(app, lid) if any(a.startswith('logs:') for a in s['Action'])]
        assert len(logs) == 1 and 'logs:CreateLogGroup' not in logs[0]['Action']
        assert _text(logs[0]['Resource']).endswith(f':log-group:/aws/lambda/{name}:*')
        group = app['Resources'][f'{lid}LogGroup']['Properties']
        assert group['LogGroupName'] == f'/aws/lambda/{name}' and group['RetentionInDays'] > 0
    assert [s['Sid'] for s in _role_of(app, app_stack.AUTHORIZER_FUNCTION)] == ['Logs']


def test_only_the_api_manages_gateway_keys_and_only_in_the_per_key_plan(templates):
    app = templates['app']
    for lid in of_type(app, 'AWS::Serverless::Function'):
        gateway = [s for s in _role_of(app, lid) if any(a.startswith('apigateway:') for a in s['Action'])]
        if lid != app_stack.API_FUNCTION:
            assert gateway == [], lid
            continue
        granted = {(a, _text(r)) for s in gateway for a in s['Action'] for r in _as_list(s['Resource'])}
        base = 'arn:${AWS::Partition}:apigateway:${AWS::Region}::'
        assert granted == {('apigateway:POST', f'{base}/apikeys'),
                           ('apigateway:POST', f'{base}/usageplans/${{PerKeyUsagePlan}}/keys'),
                           ('apigateway:DELETE', f'{base}/apikeys/*')}


def test_secrets_reach_only_the_organization_prefix_the_app_is_told(templates):
    app = templates['app']
    for lid, fn in of_type(app, 'AWS::Serverless::Function').items():
        env = fn['Properties']['Environment']['Variables']
        assert env['ORG_SECRETS_PREFIX'] == N.org_secrets_prefix
        for statement in _role_of(app, lid):
            if any(a.startswith('secretsmanager:') for a in statement['Action']):
                assert _text(statement['Resource']).endswith(f':secret:{env["ORG_SECRETS_PREFIX"]}*')
    # The stage's own secrets are resolved by CloudFormation from the data stack's secrets.
    created = {r['Properties']['Name'] for r in of_type(templates['data'], 'AWS::SecretsManager::Secret').values()}
    resolved = set(re.findall(r'\{\{resolve:secretsmanager:([^}:]+)\}\}', json.dumps(app)))
    assert resolved and resolved <= created
    assert all(name.startswith(N.secrets_prefix) for name in created)


# ----------------------------------------------------------------------------- data stack

def test_the_bucket_blocks_public_access_is_encrypted_versioned_and_aborts_uploads_after_a_day(templates):
    data = templates['data']
    buckets = of_type(data, 'AWS::S3::Bucket')
    assert buckets
    for lid, bucket in buckets.items():
        props = bucket['Properties']
        assert props['PublicAccessBlockConfiguration'] == {
            'BlockPublicAcls': True, 'BlockPublicPolicy': True, 'IgnorePublicAcls': True, 'RestrictPublicBuckets': True}
        sse = props['BucketEncryption']['ServerSideEncryptionConfiguration'][0]['ServerSideEncryptionByDefault']
        assert sse['SSEAlgorithm'] in ('aws:kms', 'AES256')
        assert props['VersioningConfiguration'] == {'Status': 'Enabled'}
        rules = [r for r in props['LifecycleConfiguration']['Rules'] if r['Status'] == 'Enabled']
        assert [r['AbortIncompleteMultipartUpload']['DaysAfterInitiation']
                for r in rules if 'AbortIncompleteMultipartUpload' in r] == [1]
        assert 'AccessControl' not in props and props['OwnershipControls']['Rules'] == [
            {'ObjectOwnership': 'BucketOwnerEnforced'}]
        policies = [r for r in of_type(data, 'AWS::S3::BucketPolicy').values()
                    if r['Properties']['Bucket'] == {'Ref': lid}]
        assert [s['Sid'] for p in policies for s in p['Properties']['PolicyDocument']['Statement']] == [
            'DenyInsecureTransport']


def test_the_table_has_pitr_encryption_a_stream_and_ttl(templates):
    props = templates['data']['Resources']['Table']['Properties']
    assert props['PointInTimeRecoverySpecification'] == {'PointInTimeRecoveryEnabled': True}
    assert props['SSESpecification']['SSEEnabled'] is True
    assert props['StreamSpecification'] == {'StreamViewType': 'NEW_AND_OLD_IMAGES'}
    assert props['TimeToLiveSpecification']['Enabled'] is True
    assert templates['data']['Resources']['Table']['DeletionPolicy'] == 'Retain'


def _dead_letter_queues(data: dict) -> set[str]:
    """Queues that receive what failed: redrive targets, and failure destinations the app
    stack imports (the table stream's)."""
    targets = {q['Properties']['RedrivePolicy']['deadLetterTargetArn']['Fn::GetAtt'][0]
               for q in of_type(data, 'AWS::SQS::Queue').values() if 'RedrivePolicy' in q['Properties']}
    exported = {o['Value']['Fn::GetAtt'][0] for o in data['Outputs'].values()
                if 'Export' in o and isinstance(o['Value'], dict) and 'Fn::GetAtt' in o['Value']}
    return targets | (exported & set(of_type(data, 'AWS::SQS::Queue')))


def test_every_queue_has_a_dead_letter_queue_and_every_dead_letter_queue_an_alarm(templates):
    data = templates['data']
    queues = of_type(data, 'AWS::SQS::Queue')
    dlqs = _dead_letter_queues(data)
    assert {'ActivityStartsDLQ', 'OutboxFailures'} <= dlqs
    for lid, queue in queues.items():
        props = queue['Properties']
        assert props.get('SqsManagedSseEnabled') or props.get('KmsMasterKeyId'), lid
        if lid in dlqs:
            assert 'RedrivePolicy' not in props and props['MessageRetentionPeriod'] == 14 * 24 * 3600
            continue
        redrive = props['RedrivePolicy']
        assert redrive['maxReceiveCount'] == 5 and redrive['deadLetterTargetArn']['Fn::GetAtt'][0] in dlqs, lid
    depth = {a['Properties']['Dimensions'][0]['Value']['Fn::GetAtt'][0]: a['Properties']
             for a in of_type(data, 'AWS::CloudWatch::Alarm').values()
             if a['Properties'].get('MetricName') == 'ApproximateNumberOfMessagesVisible'}
    assert set(depth) == dlqs
    for alarm in depth.values():
        assert alarm['Namespace'] == 'AWS/SQS' and alarm['Threshold'] == 0
        assert alarm['ComparisonOperator'] == 'GreaterThanThreshold'


def test_throttles_of_the_table_and_every_index_are_alarmed(templates):
    data = templates['data']
    indexes = {g['IndexName'] for g in data['Resources']['Table']['Properties']['GlobalSecondaryIndexes']}
    for kind in ('Read', 'Write'):
        watched = set()
        for alarm in of_type(data, 'AWS::CloudWatch::Alarm').values():
            for metric in alarm['Properties'].get('Metrics', []):
                stat = metric.get('MetricStat', {}).get('Metric', {})
                if stat.get('MetricName') == f'{kind}ThrottleEvents':
                    dims = {d['Name']: d['Value'] for d in stat['Dimensions']}
                    assert dims['TableName'] == {'Ref': 'Table'}
                    watched.add(dims.get('GlobalSecondaryIndexName', 'table'))
        assert watched == indexes | {'table'}, kind


# ----------------------------------------------------------------------------- app stack

def test_the_usage_plan_has_burst_20_and_100_per_minute_keyed_by_the_authorizer(templates):
    app = templates['app']
    res = app['Resources']
    throttle = res['PerKeyUsagePlan']['Properties']['Throttle']
    assert throttle == {'BurstLimit': 20, 'RateLimit': round(100 / 60, 4)}
    assert res['PerKeyUsagePlan']['Properties']['ApiStages'] == [{'ApiId': {'Ref': 'RestAPI'},
                                                                 'Stage': {'Ref': 'RestAPI.Stage'}}]
    body = res['RestAPI']['Properties']['DefinitionBody']
    assert body['x-amazon-apigateway-api-key-source'] == 'AUTHORIZER'
    authorizer = body['securityDefinitions'][usage_plan.AUTHORIZER]['x-amazon-apigateway-authorizer']
    name = res[app_stack.AUTHORIZER_FUNCTION]['Properties']['FunctionName']
    assert _text(authorizer['authorizerUri']).endswith(f':function:{name}/invocations')
    assert body['x-amazon-apigateway-gateway-responses']['THROTTLED']['statusCode'] == '429'
    assert res['AuthorizerInvokePermission']['Properties']['FunctionName'] == {'Ref': app_stack.AUTHORIZER_FUNCTION}
    key_value = res['SharedUsageKey']['Properties']['Value']
    for lid in (app_stack.API_FUNCTION, app_stack.AUTHORIZER_FUNCTION):
        env = res[lid]['Properties']['Environment']['Variables']
        assert env['USAGE_PLAN_ID'] == {'Ref': 'PerKeyUsagePlan'} and env['GATEWAY_SHARED_USAGE_KEY'] == key_value
    # expanded: the plan is attached to the stage SAM creates
    stage = res['RestAPI']['Properties']['StageName']
    stages = of_type(templates['expanded'], 'AWS::ApiGateway::Stage')
    plan = templates['expanded']['Resources']['PerKeyUsagePlan']['Properties']['ApiStages'][0]
    assert plan['Stage']['Ref'] in stages and stages[plan['Stage']['Ref']]['Properties']['StageName'] == stage


def test_the_api_names_its_functions_so_they_can_carry_the_usage_plan_id_without_a_cycle(templates):
    expanded = templates['expanded']
    functions = set(of_type(expanded, 'AWS::Lambda::Function'))
    for lid, res in expanded['Resources'].items():
        if res['Type'] in ('AWS::ApiGateway::RestApi', 'AWS::ApiGateway::Deployment', 'AWS::ApiGateway::Stage'):
            assert not references(res) & functions, lid


def test_alarms_cover_api_5xx_and_every_functions_errors(templates):
    app = templates['app']
    alarms_ = [a['Properties'] for a in of_type(app, 'AWS::CloudWatch::Alarm').values()]
    title = app['Resources']['RestAPI']['Properties']['DefinitionBody']['info']['title']
    five = [a for a in alarms_ if a.get('MetricName') == '5XXError']
    assert len(five) == 1 and five[0]['Namespace'] == 'AWS/ApiGateway' and five[0]['Statistic'] == 'Average'
    assert {d['Name']: d['Value'] for d in five[0]['Dimensions']} == {
        'ApiName': title, 'Stage': app['Resources']['RestAPI']['Properties']['StageName']}
    errors = {a['Dimensions'][0]['Value']['Ref'] for a in alarms_ if a.get('MetricName') == 'Errors'}
    assert errors == set(of_type(app, 'AWS::Serverless::Function'))
    for template in (app, templates['data']):
        for alarm in of_type(template, 'AWS::CloudWatch::Alarm').values():
            assert alarm['Properties']['AlarmActions']['Fn::If'][0] == 'HasAlarmTopic'


def test_every_import_is_exported_by_the_data_stack(templates):
    exported = {o['Export']['Name'] for o in templates['data']['Outputs'].values() if 'Export' in o}
    imports = set(re.findall(r'"Fn::ImportValue": "([^"]+)"', json.dumps(templates['app'])))
    assert imports <= exported


def test_every_sqs_event_source_of_the_packaged_app_reports_batch_item_failures(templates):
    """Vacuous while the app has no worker; the next tests package one."""
    for mapping in of_type(templates['expanded'], 'AWS::Lambda::EventSourceMapping').values():
        if ':sqs:' in json.dumps(mapping['Properties']['EventSourceArn']):
            assert mapping['Properties']['FunctionResponseTypes'] == ['ReportBatchItemFailures']


# ----------------------------------------------------------------------------- the handlers to come

PROBE_APP = textwrap.dedent('''
    from chalice import Chalice
    app = Chalice(app_name='probe')

    @app.route('/')
    def index():
        return {}

    @app.on_sqs_message(queue='%(queue)s')
    def activity_start_worker(event):
        return {'batchItemFailures': []}

    @app.schedule('rate(1 minute)')
    def scheduled_jobs(event):
        pass

    @app.on_dynamodb_record(stream_arn='arn:aws:dynamodb:us-east-1:000000000000:table/%(table)s/stream/x')
    def outbox_publisher(event):
        pass
''')
PROBE_FUNCTIONS = ('ActivityStartWorker', 'ScheduledJobs', 'OutboxPublisher')


@pytest.fixture(scope='module')
def with_handlers(templates, tmp_path_factory) -> dict:
    """The real chalice output plus the three kinds of handler as `chalice package` emits them
    (a throwaway app, same stage settings), through infra/app.py."""
    project = tmp_path_factory.mktemp('probe')
    (project / '.chalice').mkdir()
    (project / 'app.py').write_text(PROBE_APP % {'queue': N.queue, 'table': N.table})
    (project / 'requirements.txt').write_text('')
    config = json.loads((ROOT / '.chalice' / 'config.json').read_text())
    config['app_name'] = 'probe'
    (project / '.chalice' / 'config.json').write_text(json.dumps(config))
    (project / '.chalice' / f'policy-{STAGE}.json').write_text(iam.render(STAGE))
    env = {**_no_aws_env(), 'AWS_DEFAULT_REGION': 'us-east-1'}
    chalice = Path(sys.executable).with_name('chalice')
    run = subprocess.run([str(chalice), 'package', '--pkg-format', 'cloudformation', '--stage', STAGE,
                          str(project / 'out')], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    probe = json.loads((project / 'out' / 'sam.json').read_text())
    doc = json.loads((OUT / 'chalice' / 'sam.json').read_text())
    for lid in PROBE_FUNCTIONS:
        doc['Resources'][lid] = probe['Resources'][lid]
        role = probe['Resources'][lid]['Properties']['Role']['Fn::GetAtt'][0]
        doc['Resources'][role] = probe['Resources'][role]
        assert probe['Resources'][lid]['Properties']['Events']
    return {'raw': doc, 'patched': app_stack.patch(doc, STAGE)}


def _event(doc: dict, lid: str) -> dict:
    (event,) = doc['Resources'][lid]['Properties']['Events'].values()
    return event


def test_chalice_emits_sam_events_on_the_function_for_each_handler_kind(with_handlers):
    raw = with_handlers['raw']
    assert {lid: _event(raw, lid)['Type'] for lid in PROBE_FUNCTIONS} == {
        'ActivityStartWorker': 'SQS', 'ScheduledJobs': 'Schedule', 'OutboxPublisher': 'DynamoDB'}
    assert 'FunctionResponseTypes' not in _event(raw, 'ActivityStartWorker')['Properties']


def test_an_sqs_worker_reports_batch_item_failures_with_bounded_batches_and_concurrency(with_handlers):
    doc = with_handlers['patched']
    fn = doc['Resources']['ActivityStartWorker']['Properties']
    p = _event(doc, 'ActivityStartWorker')['Properties']
    assert p['FunctionResponseTypes'] == ['ReportBatchItemFailures']
    assert p['BatchSize'] == 10 and p['MaximumBatchingWindowInSeconds'] == 0
    assert p['ScalingConfig'] == {'MaximumConcurrency': app_stack.SQS_MAX_CONCURRENCY}
    assert 'ReservedConcurrentExecutions' not in fn
    queue = stack.template(STAGE)['Resources']['ActivityStarts']['Properties']
    assert _text(p['Queue']).endswith(f':{queue["QueueName"]}') and 'RedrivePolicy' in queue
    assert queue['VisibilityTimeout'] >= 6 * fn['Timeout']
    consume = [s for s in _role_of(doc, 'ActivityStartWorker') if s['Sid'] == 'QueueConsume']
    assert len(consume) == 1 and _text(consume[0]['Resource']).endswith(f':{queue["QueueName"]}')
    assert not any(a.startswith('apigateway:') for s in _role_of(doc, 'ActivityStartWorker') for a in s['Action'])


def test_the_stream_handler_reads_the_table_stream_from_the_start_and_gives_up_into_a_dlq(with_handlers):
    doc = with_handlers['patched']
    p = _event(doc, 'OutboxPublisher')['Properties']
    assert p['Stream'] == {'Fn::ImportValue': N.export('TableStreamArn')}
    assert p['StartingPosition'] == 'TRIM_HORIZON' and p['BisectBatchOnFunctionError'] is True
    assert 0 <= p['MaximumRetryAttempts'] <= 100 and 60 <= p['MaximumRecordAgeInSeconds'] <= 86400
    assert p['DestinationConfig']['OnFailure']['Destination'] == {'Fn::ImportValue': N.export('OutboxFailuresQueueArn')}
    sids = {s['Sid'] for s in _role_of(doc, 'OutboxPublisher')}
    assert {'TableStreamRead', 'OutboxFailuresSend'} <= sids and 'QueueConsume' not in sids


def test_a_scheduled_job_is_not_retried_by_lambda(with_handlers):
    doc = with_handlers['patched']
    fn = doc['Resources']['ScheduledJobs']['Properties']
    assert _event(doc, 'ScheduledJobs')['Properties']['Schedule'] == 'rate(1 minute)'
    assert fn['EventInvokeConfig']['MaximumRetryAttempts'] == 0
    assert 'ReservedConcurrentExecutions' not in fn


def test_the_app_with_every_handler_kind_still_lints_clean_and_keeps_the_properties(with_handlers, tmp_path):
    (tmp_path / 'app.json').write_text(json.dumps(with_handlers['patched']))
    run = _run([str(ROOT / '.venv-lint' / 'bin' / 'python'), str(ROOT / 'infra' / 'lint.py'), str(tmp_path)])
    assert run.returncode == 0, run.stdout + run.stderr
    expanded = json.loads((tmp_path / 'lint' / 'app.expanded.json').read_text())
    mappings = of_type(expanded, 'AWS::Lambda::EventSourceMapping')
    assert len(mappings) == 3     # the probe's queue worker and stream handler, and the OCR function's queue
    for mapping in mappings.values():
        assert mapping['Properties']['FunctionResponseTypes'] == ['ReportBatchItemFailures']
    errors = {a['Properties']['Dimensions'][0]['Value']['Ref'] for a in
              of_type(with_handlers['patched'], 'AWS::CloudWatch::Alarm').values()
              if a['Properties'].get('MetricName') == 'Errors'}
    assert set(PROBE_FUNCTIONS) <= errors
    for name, statement in statements(with_handlers['patched']):
        assert not any('*' in a for a in _as_list(statement['Action'])), name


def _with_event(with_handlers, event: dict, timeout: int = 29) -> dict:
    doc = json.loads(json.dumps(with_handlers['raw']))
    fn = doc['Resources']['ActivityStartWorker']['Properties']
    fn['Timeout'] = timeout
    fn['Events'] = {'E': event}
    return doc


@pytest.mark.parametrize('event, timeout, message', [
    ({'Type': 'SQS', 'Properties': {'Queue': 'arn:aws:sqs:us-east-1:000000000000:elsewhere', 'BatchSize': 1}},
     29, 'not a redriven queue'),
    ({'Type': 'SQS', 'Properties': {'Queue': f'arn:aws:sqs:us-east-1:000000000000:{N.queue_dlq}', 'BatchSize': 1}},
     29, 'not a redriven queue'),
    ({'Type': 'SQS', 'Properties': {'Queue': f'arn:aws:sqs:us-east-1:000000000000:{N.queue}', 'BatchSize': 1}},
     60, 'visibility timeout'),
    ({'Type': 'SQS', 'Properties': {'Queue': f'arn:aws:sqs:us-east-1:000000000000:{N.queue}', 'BatchSize': 50}},
     29, 'batching window'),
    ({'Type': 'DynamoDB', 'Properties': {'Stream': 'arn:aws:dynamodb:us-east-1:0:table/other/stream/x',
                                         'StartingPosition': 'LATEST'}}, 29, 'only stream'),
    ({'Type': 'Kinesis', 'Properties': {'Stream': 'arn:aws:kinesis:us-east-1:0:stream/x'}}, 29, 'not handled'),
])
def test_packaging_refuses_event_sources_it_cannot_make_safe(with_handlers, event, timeout, message):
    with pytest.raises(app_stack.PackagingError, match=message):
        app_stack.patch(_with_event(with_handlers, event, timeout), STAGE)


def test_the_apps_own_handlers_are_packaged_with_their_event_sources(templates):
    """The real worker, scheduler and outbox publisher of app.py (issue 12), as deployed."""
    app_doc = templates['app']['Resources']
    worker = _event(templates['app'], 'ActivityStartWorker')['Properties']
    assert worker['FunctionResponseTypes'] == ['ReportBatchItemFailures'] and worker['BatchSize'] == 10
    assert worker['Queue'] == {'Fn::Sub': f'arn:${{AWS::Partition}}:sqs:${{AWS::Region}}:${{AWS::AccountId}}:{N.queue}'}
    assert _event(templates['app'], 'ScheduledJobs')['Properties']['Schedule'] == 'rate(1 minute)'
    stream = _event(templates['app'], 'OutboxPublisher')['Properties']
    assert stream['Stream'] == {'Fn::ImportValue': N.export('TableStreamArn')}
    assert stream['StartingPosition'] == 'TRIM_HORIZON'
    assert stream['FunctionResponseTypes'] == ['ReportBatchItemFailures']
    # app.py OUTBOX_BATCH_SIZE / OUTBOX_BATCHING_WINDOW_SECONDS, as make run's poller reads them
    assert (stream['BatchSize'], stream['MaximumBatchingWindowInSeconds']) == (1000, 1)
    for lid in ('ActivityStartWorker', 'ScheduledJobs', 'OutboxPublisher'):
        env = app_doc[lid]['Properties'].get('Environment', {}).get('Variables', {})
        assert env.get('EVENT_BUS_NAME') == N.event_bus and env.get('TABLE_NAME') == N.table, lid


# ----------------------------------------------------------------------------- parsing: the OCR function

LAMBDA_UNZIPPED_LIMIT = 250 * 2 ** 20   # a zip function's code and layers, unzipped


def test_the_zip_packaged_functions_fit_lambdas_unzipped_limit_with_the_parsers(templates):
    """pypdfium2, python-docx, python-calamine and lxml ride in the zip (docs/operations/parsing.md
    "Sizes"), and Pillow, which the API draws image files' page images with (docs/operations/deploy.md
    "The package"); Tesseract, which only OCR needs, does not (the OCR image)."""
    with zipfile.ZipFile(OUT / 'deployment.zip') as z:
        infos = z.infolist()
    unzipped = sum(info.file_size for info in infos)
    assert unzipped < LAMBDA_UNZIPPED_LIMIT
    names = {info.filename.split('/')[0] for info in infos}
    assert {'pypdfium2', 'pypdfium2_raw', 'docx', 'python_calamine', 'lxml', 'PIL'} <= names
    assert 'PIL/_imaging.cpython-311-x86_64-linux-gnu.so' in {info.filename for info in infos}
    # without its AVIF codec, which nothing reads (infra/pillow_trim.py)
    assert not [i.filename for i in infos if i.filename.startswith(pillow_trim.DROPPED)]
    assert 'chalicelib/features/parsing/readers/pdf.py' in {info.filename for info in infos}


def test_the_zip_keeps_botocores_models_of_the_listed_services_only(templates):
    """infra/botocore_models.py: make package prunes botocore/data to SERVICES and botocore's own
    top-level files (docs/operations/deploy.md)."""
    with zipfile.ZipFile(OUT / 'deployment.zip') as z:
        data = [n[len('botocore/data/'):] for n in z.namelist() if n.startswith('botocore/data/')]
    assert {n.split('/', 1)[0] for n in data if '/' in n} == botocore_models.SERVICES
    assert {'endpoints.json', 'partitions.json', '_retry.json', 'sdk-default-configuration.json'} <= \
        {n for n in data if '/' not in n}
    assert 'botocore/data/dynamodb/2012-08-10/service-2.json.gz' in {f'botocore/data/{n}' for n in data}


def test_the_ocr_function_is_a_container_image_on_its_own_queue_with_a_dead_letter_queue(templates):
    app, data = templates['app'], templates['data']
    fn = app['Resources'][ocr_function.LOGICAL_ID]['Properties']
    assert fn['PackageType'] == 'Image' and fn['ImageUri'] == {'Ref': ocr_function.IMAGE_PARAMETER}
    assert fn['ImageConfig'] == {'Command': ['chalicelib.front.handlers.ocr_batch']}
    assert 'Runtime' not in fn and 'Handler' not in fn
    assert fn['FunctionName'] == N.function(ocr_function.LOGICAL_ID)
    assert fn['Environment']['Variables']['OCR_QUEUE_NAME'] == N.ocr_queue
    assert fn['Environment']['Variables']['TABLE_NAME'] == N.table
    assert app['Parameters'][ocr_function.IMAGE_PARAMETER]['Type'] == 'String'
    assert re.fullmatch(app['Parameters'][ocr_function.IMAGE_PARAMETER]['AllowedPattern'],
                        '123456789012.dkr.ecr.us-east-1.amazonaws.com/platform-ocr@sha256:' + 'a' * 64)
    event = _event(app, ocr_function.LOGICAL_ID)['Properties']
    queue_arn = f'arn:${{AWS::Partition}}:sqs:${{AWS::Region}}:${{AWS::AccountId}}:{N.ocr_queue}'
    assert event['Queue'] == {'Fn::Sub': queue_arn}
    assert event['BatchSize'] == 1 and event['FunctionResponseTypes'] == ['ReportBatchItemFailures']
    assert event['ScalingConfig'] == {'MaximumConcurrency': ocr_function.MAX_CONCURRENCY}
    queue = data['Resources']['OcrStarts']['Properties']
    assert queue['QueueName'] == N.ocr_queue
    assert queue['VisibilityTimeout'] >= 6 * fn['Timeout']
    assert queue['RedrivePolicy']['deadLetterTargetArn'] == {'Fn::GetAtt': ['OcrStartsDLQ', 'Arn']}
    assert data['Resources']['OcrStartsDLQ']['Properties']['QueueName'] == N.ocr_queue_dlq
    assert 'OcrStartsDLQDepthAlarm' in data['Resources'] and f'{ocr_function.LOGICAL_ID}ErrorsAlarm' in app['Resources']
    consume = [s for s in _role_of(app, ocr_function.LOGICAL_ID) if s['Sid'] == 'QueueConsume']
    assert len(consume) == 1 and _text(consume[0]['Resource']).endswith(f':{N.ocr_queue}')
    for lid in ('APIHandler', 'ActivityStartWorker', ocr_function.LOGICAL_ID):
        send = [s for s in _role_of(app, lid) if s['Sid'] == 'OcrStartsSend']
        assert len(send) == 1 and _text(send[0]['Resource']).endswith(f':{N.ocr_queue}'), lid
    mappings = [m['Properties'] for m in of_type(templates['expanded'], 'AWS::Lambda::EventSourceMapping').values()
                if N.ocr_queue in json.dumps(m['Properties']['EventSourceArn'])]
    assert len(mappings) == 1 and mappings[0]['BatchSize'] == 1


def test_the_ocr_image_is_debian_tesseract_and_the_runtime_api_client():
    """The image's definition (tests/integration/test_ocr_image.py builds and runs it): Debian
    bookworm, Debian's Tesseract with its English and OSD models, Python packages only from the
    pinned wheelhouse, awslambdaric as the entrypoint and the template's handler as the CMD."""
    dockerfile = (ROOT / 'infra' / 'ocr' / 'Dockerfile').read_text()
    assert re.search(r'^ARG BASE=debian:bookworm-slim$', dockerfile, re.M)
    assert re.search(r'^FROM \$\{BASE\} AS runtime$', dockerfile, re.M)
    assert 'public.ecr.aws' not in dockerfile and 'sha256sum' not in dockerfile   # no source build
    for package in ('python3', 'python3-venv', 'tesseract-ocr', 'tesseract-ocr-eng', 'tesseract-ocr-osd'):
        assert re.search(rf'\s{re.escape(package)}(\s|$)', dockerfile), package
    assert '--no-index --find-links /tmp/wheels' in dockerfile
    assert 'ENTRYPOINT ["/opt/venv/bin/python", "-m", "awslambdaric"]' in dockerfile
    assert f'CMD ["{ocr_function.HANDLER}"]' in dockerfile
    # the requirements it installs: the app's (Pillow included), OCR's own (none today), the client's
    for name in ('requirements.txt', 'infra/ocr/requirements.txt', 'infra/ocr/requirements-runtime-client.txt'):
        assert f'COPY {name} ' in dockerfile, name
        lines = [line.split('#')[0].strip() for line in (ROOT / name).read_text().splitlines()]
        assert all('==' in line for line in lines if line), (name, lines)   # pinned
    assert re.search(r'^awslambdaric==', (ROOT / 'infra/ocr/requirements-runtime-client.txt').read_text(), re.M)
    assert re.search(r'^pillow==', (ROOT / 'requirements.txt').read_text(), re.M)
    assert not re.search(r'^pillow', (ROOT / 'infra' / 'ocr' / 'requirements.txt').read_text(), re.M | re.I)
