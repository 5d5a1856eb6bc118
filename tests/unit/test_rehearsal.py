"""The deploy rehearsal's reading of a template (infra/rehearsal.py): every function found with
its kind, a function of a new kind or an unresolvable variable loud, sizes per package."""
from __future__ import annotations

import zipfile

import pytest

from infra import rehearsal


def _template(**extra_functions) -> dict:
    fn = {'Type': 'AWS::Serverless::Function',
          'Properties': {'Runtime': 'python3.11', 'Handler': 'app.app', 'FunctionName': 'p-APIHandler',
                         'Environment': {'Variables': {'A': '1'}}}}
    resources = {
        'RestAPI': {'Type': 'AWS::Serverless::Api', 'Properties': {'DefinitionBody': {
            'paths': {'/x': {'get': {'x-amazon-apigateway-integration': {'uri': {
                'Fn::Sub': 'arn:...:function:p-APIHandler/invocations'}}}}},
            'securityDefinitions': {'auth': {'x-amazon-apigateway-authorizer': {'authorizerUri': {
                'Fn::Sub': 'arn:...:function:p-Auth/invocations'}}}}}}},
        'APIHandler': fn,
        'Auth': {'Type': 'AWS::Serverless::Function', 'Properties': {
            'Runtime': 'python3.11', 'Handler': 'm.auth', 'FunctionName': 'p-Auth'}},
        'Worker': {'Type': 'AWS::Serverless::Function', 'Properties': {
            'Runtime': 'python3.11', 'Handler': 'app.worker', 'Events': {'Q': {'Type': 'SQS'}}}},
        'Tick': {'Type': 'AWS::Serverless::Function', 'Properties': {
            'Runtime': 'python3.11', 'Handler': 'app.tick', 'Events': {'S': {'Type': 'Schedule'}}}},
        'Outbox': {'Type': 'AWS::Serverless::Function', 'Properties': {
            'Runtime': 'python3.11', 'Handler': 'app.outbox', 'Events': {'D': {'Type': 'DynamoDB'}}}},
        **extra_functions,
    }
    return {'Parameters': {'Iss': {'Type': 'String', 'Default': ''}}, 'Resources': resources}


def test_every_function_is_found_with_its_kind():
    kinds = {f.logical_id: f.kind for f in rehearsal.functions(_template())}
    assert kinds == {'APIHandler': 'api', 'Auth': 'authorizer', 'Worker': 'queue', 'Tick': 'schedule',
                     'Outbox': 'stream'}


def test_a_function_of_a_new_kind_is_not_skipped():
    kinds = {f.logical_id: f.kind for f in rehearsal.functions(_template(
        Ocr={'Type': 'AWS::Serverless::Function', 'Properties': {'PackageType': 'Image', 'ImageUri': 'x'}},
        OnS3={'Type': 'AWS::Serverless::Function', 'Properties': {
            'Runtime': 'python3.11', 'Handler': 'app.s3', 'Events': {'B': {'Type': 'S3'}}}}))}
    assert kinds['Ocr'] == 'image' and kinds['OnS3'] == 'unknown'
    assert not {'image', 'unknown'} & set(rehearsal.KINDS)


def test_another_runtime_is_refused():
    with pytest.raises(rehearsal.RehearsalError, match='python3.12'):
        rehearsal.functions(_template(New={'Type': 'AWS::Serverless::Function', 'Properties': {
            'Runtime': 'python3.12', 'Handler': 'a.b'}}))


def test_variables_resolve_to_local_stand_ins_or_fail_loudly():
    template = _template()
    (api,) = [f for f in rehearsal.functions(template) if f.kind == 'api']
    api.variables = {'PLAN': {'Ref': 'Plan'}, 'ISS': {'Ref': 'Iss'}, 'KEY': '{{resolve:secretsmanager:s/k}}',
                     'N': 3, 'ON': True}
    env = rehearsal.resolve(api, template, resources={'Plan': 'plan-1'}, secret_values={'s/k': 'v'})
    assert env == {'PLAN': 'plan-1', 'ISS': '', 'KEY': 'v', 'N': '3', 'ON': 'true'}
    for raw, stand_ins in [({'Ref': 'Unknown'}, {}), ('{{resolve:secretsmanager:other}}', {}),
                           ({'Fn::ImportValue': 'x'}, {})]:
        api.variables = {'X': raw}
        with pytest.raises(rehearsal.RehearsalError, match='X'):
            rehearsal.resolve(api, template, resources=stand_ins, secret_values={'s/k': 'v'})


def test_sizes_per_top_level_package(tmp_path):
    path = tmp_path / 'deployment.zip'
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('botocore/a.py', 'x' * 3000)
        archive.writestr('botocore-1.0.dist-info/RECORD', 'x' * 10)
        archive.writestr('typing_extensions.py', 'x' * 100)
        archive.writestr('_cffi_backend.cpython-311-x86_64-linux-gnu.so', 'x' * 50)
    sizes = rehearsal.sizes(path)
    assert sizes.top == [('botocore', 3010), ('typing_extensions', 100), ('_cffi_backend', 50)]
    assert sizes.unzipped == 3160 and sizes.zipped == path.stat().st_size
    assert 'botocore' in sizes.report()
