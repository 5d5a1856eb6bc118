"""The deploy rehearsal's reading of a template (infra/rehearsal.py): every function found with
its kind, a function of a new kind or an unresolvable variable loud, sizes per package."""
from __future__ import annotations

import os
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
        OnS3={'Type': 'AWS::Serverless::Function', 'Properties': {
            'Runtime': 'python3.11', 'Handler': 'app.s3', 'Events': {'B': {'Type': 'S3'}}}},
        NoHandler={'Type': 'AWS::Serverless::Function', 'Properties': {'Runtime': 'python3.11'}}))}
    assert kinds['OnS3'] == 'unknown' and kinds['NoHandler'] == 'unknown'
    assert 'unknown' not in rehearsal.KINDS


def test_an_image_function_is_found_with_its_images_command_as_handler():
    (ocr,) = [f for f in rehearsal.functions(_template(Ocr={'Type': 'AWS::Serverless::Function', 'Properties': {
        'PackageType': 'Image', 'ImageUri': {'Ref': 'Img'}, 'ImageConfig': {'Command': ['m.ocr_batch']},
        'Timeout': 300, 'Events': {'Q': {'Type': 'SQS'}}}})) if f.logical_id == 'Ocr']
    assert (ocr.kind, ocr.handler, ocr.timeout) == ('image', 'm.ocr_batch', 300)
    assert 'image' in rehearsal.KINDS
    with pytest.raises(rehearsal.RehearsalError, match='ImageConfig.Command'):
        rehearsal.functions(_template(Ocr={'Type': 'AWS::Serverless::Function', 'Properties': {
            'PackageType': 'Image', 'ImageUri': 'x'}}))


def test_the_image_layout_is_the_package_plus_its_pinned_requirements_read_only(tmp_path):
    task = tmp_path / 'task'
    (task / 'chalicelib').mkdir(parents=True)
    (task / 'chalicelib' / 'a.py').write_text('A = 1\n')
    (task / 'chalicelib').chmod(0o555)
    task.chmod(0o555)
    pins = tmp_path / 'requirements-ocr.txt'
    pins.write_text('# OCR only\npillow==12.0.0\n')
    image = rehearsal.image_task(task, tmp_path, pins)
    try:
        assert (image / 'chalicelib' / 'a.py').read_text() == 'A = 1\n'
        assert (image / 'PIL' / 'Image.py').is_file() and (image / 'pillow-12.0.0.dist-info').is_dir()
        assert (image / 'requirements.txt').is_file()
        assert (image / 'requirements-ocr.txt').read_text() == pins.read_text()
        assert all(not p.stat().st_mode & 0o222 for p in [image, *image.rglob('*')])
        pins.write_text('pillow==1.0\n')
        with pytest.raises(rehearsal.RehearsalError, match='pins 1.0'):
            rehearsal.image_task(task, tmp_path / 'again', pins)
        pins.write_text('pillow>=12\n')
        with pytest.raises(rehearsal.RehearsalError, match='not pinned'):
            rehearsal.image_task(task, tmp_path / 'third', pins)
    finally:
        for root in (tmp_path / 'image-task', tmp_path / 'again', tmp_path / 'third', task):
            for folder, _, _ in os.walk(root):
                os.chmod(folder, 0o755)


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
