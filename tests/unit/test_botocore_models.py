"""The deployment package keeps botocore's models only for infra/botocore_models.py SERVICES: every
client the functions create must have its model there, or it fails on Lambda with
``UnknownServiceError``. This test finds them all, so a new client without its model fails here,
not in a deploy:

- the app's code (app.py, chalicelib/): every ``client(...)``, ``resource(...)``,
  ``create_client(...)`` or ``*_client(...)`` call with a service name as a string; a call to boto3
  or botocore whose service is not a string must sit in a function named ``*_client`` (whose own
  callers name the service, and are read in turn), else the test cannot tell and fails;
- the libraries that create clients of their own, in the modules the app loads from them:
  pynamodb (the table), the X-Ray SDK (Powertools' Tracer: sampling rules) and every
  Powertools module the app's imports load.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from infra import botocore_models

ROOT = Path(__file__).resolve().parents[2]
CLIENT_CALLS = {'client', 'resource', 'create_client'}
# libraries that create clients themselves, read whole (the X-Ray SDK is loaded lazily by the Tracer)
LIBRARIES = ('pynamodb', 'aws_xray_sdk')


def _is_client_call(func: ast.expr) -> bool:
    """``<anything>.client(...)`` / ``.resource(...)`` / ``.create_client(...)`` (boto3's, a session's),
    or a call of a function named ``*_client`` (the app's wrappers)."""
    if isinstance(func, ast.Attribute):
        return func.attr in CLIENT_CALLS or func.attr.endswith('_client')
    return isinstance(func, ast.Name) and func.id.endswith('_client')


def _service_arg(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == 'service_name':
            return keyword.value
    return call.args[0] if call.args else None


def _constants(trees: list[ast.Module]) -> dict[str, str]:
    """Module-level ``NAME = 'text'`` of the files read (a library's SERVICE_NAME)."""
    found = {}
    for tree in trees:
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) \
                    and isinstance(stmt.value.value, str):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = stmt.value.value
    return found


def services_in(files: list[Path], *, strict: bool) -> tuple[set[str], list[str]]:
    """The services named by client calls in ``files``, and (``strict``) the calls it cannot read."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in files}
    constants = _constants(list(trees.values()))
    services, unreadable = set(), []
    for path, tree in trees.items():
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call) or not _is_client_call(call.func):
                continue
            arg = _service_arg(call)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                services.add(arg.value)
            elif isinstance(arg, ast.Name) and arg.id in constants:
                services.add(constants[arg.id])
            elif strict and arg is not None and isinstance(call.func, ast.Attribute) \
                    and call.func.attr in CLIENT_CALLS:
                scope = parents.get(call)
                while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    scope = parents.get(scope)
                if scope is None or not scope.name.endswith('_client'):
                    unreadable.append(f'{path}:{call.lineno}')
    return services, unreadable


def _app_files() -> list[Path]:
    return [ROOT / 'app.py', *sorted((ROOT / 'chalicelib').rglob('*.py'))]


def _powertools_files() -> list[Path]:
    """The Powertools modules the app's own imports of it load (a new utility is read with them)."""
    imports = set()
    for path in _app_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('aws_lambda_powertools'):
                imports |= {(node.module, alias.name) for alias in node.names}
    assert imports, 'the app imports Powertools (its Logger, Tracer, metrics, batch)'
    script = ('import importlib, json, sys\n'
              f'for module, name in {sorted(imports)!r}:\n'
              '    getattr(importlib.import_module(module), name)\n'
              'print(json.dumps(sorted({m.__file__ for n, m in list(sys.modules.items())\n'
              '    if n.startswith("aws_lambda_powertools") and getattr(m, "__file__", None)})))\n')
    answer = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert answer.returncode == 0, answer.stderr
    return [Path(f) for f in json.loads(answer.stdout)]


def _library_services() -> set[str]:
    """Each library read on its own (its constants are its own: pynamodb's SERVICE_NAME)."""
    services = set()
    for library in LIBRARIES:
        module = __import__(library)
        services |= services_in(sorted(Path(module.__file__).parent.rglob('*.py')), strict=False)[0]
    return services | services_in(_powertools_files(), strict=False)[0]


def test_every_service_the_app_creates_a_client_for_keeps_its_model():
    services, unreadable = services_in(_app_files(), strict=True)
    assert not unreadable, (f'clients whose service cannot be read: {unreadable}: name the service as a '
                            'string, or make the client in a function named *_client called with it')
    assert {'dynamodb', 's3', 'sqs', 'events', 'secretsmanager', 'apigateway'} <= services   # the scan sees them
    assert services <= botocore_models.SERVICES, \
        f'add {sorted(services - botocore_models.SERVICES)} to SERVICES in infra/botocore_models.py'


def test_every_service_the_libraries_create_a_client_for_keeps_its_model():
    services = _library_services()
    assert {'dynamodb', 'xray'} <= services   # pynamodb's table client, the X-Ray SDK's sampling client
    assert services <= botocore_models.SERVICES, \
        f'add {sorted(services - botocore_models.SERVICES)} to SERVICES in infra/botocore_models.py'


def test_a_client_of_an_unknown_service_or_a_service_hidden_in_a_variable_is_found(tmp_path):
    probe = tmp_path / 'probe.py'
    probe.write_text('import boto3\n'
                     'def make(name):\n    return boto3.client(name)\n'
                     'def kinesis_client():\n    return boto3.client(SERVICE)\n'
                     'x = kinesis_client\nboto3.resource("sns")\n')
    services, unreadable = services_in([probe], strict=True)
    assert services == {'sns'} and unreadable == [f'{probe}:3']


def _zip(path: Path, names: list[str]) -> Path:
    with zipfile.ZipFile(path, 'w') as archive:
        for name in names:
            archive.writestr(name, name)
    return path


def test_pruning_keeps_the_services_botocores_own_files_and_everything_else(tmp_path):
    names = ['app.py', 'botocore/__init__.py', 'botocore/data/endpoints.json', 'botocore/data/_retry.json',
             'botocore/data/partitions.json', 'botocore/data/sdk-default-configuration.json',
             'botocore/data/s3/2006-03-01/service-2.json.gz', 'botocore/data/s3/2006-03-01/paginators-1.json',
             'botocore/data/ec2/2016-11-15/service-2.json.gz', 'botocore/data/iot/2015-05-28/waiters-2.json',
             'boto3/data/ec2/2016-11-15/resources-1.json']
    path = _zip(tmp_path / 'deployment.zip', names)
    dropped, _ = botocore_models.prune_zip(path, frozenset({'s3'}))
    with zipfile.ZipFile(path) as archive:
        left = sorted(archive.namelist())
        assert archive.read('botocore/data/s3/2006-03-01/paginators-1.json') == \
            b'botocore/data/s3/2006-03-01/paginators-1.json'
    gone = {'botocore/data/ec2/2016-11-15/service-2.json.gz', 'botocore/data/iot/2015-05-28/waiters-2.json'}
    assert dropped == 2 and left == sorted(set(names) - gone)


def test_pruning_refuses_a_service_the_package_has_no_model_for(tmp_path):
    path = _zip(tmp_path / 'deployment.zip', ['botocore/data/s3/2006-03-01/service-2.json.gz'])
    with pytest.raises(ValueError, match='sqs'):
        botocore_models.prune_zip(path, frozenset({'s3', 'sqs'}))
    with zipfile.ZipFile(path) as archive:
        assert archive.namelist() == ['botocore/data/s3/2006-03-01/service-2.json.gz']   # left untouched
