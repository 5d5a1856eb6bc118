"""The deploy rehearsal: run what ``make package`` builds the way Lambda runs it, on this machine.

``tests/integration/test_deploy_rehearsal.py`` drives it (so ``make test`` rehearses every
deploy) and ``bench/bench_lambda_package.py`` times it. The steps:

1. **Build** with make package's code path (``infra.package.main``) into a folder of its own.
2. **Unpack** deployment.zip into a read-only folder (directories 0555, files 0444 or 0555), the
   stand-in for Lambda's read-only ``/var/task``.
3. **Read the functions from the packaged template** (``app.json``): every
   ``AWS::Serverless::Function``, its handler, the environment the template gives it (CloudFormation
   references resolved: parameters to their defaults, a resource ``Ref`` to the local stand-in the
   caller names, ``{{resolve:secretsmanager:...}}`` to a secret the caller created), and its kind:
   ``authorizer`` and ``api`` (named by the REST API's definition), ``queue`` / ``stream`` /
   ``schedule`` (by its event source), ``image`` (``PackageType: Image``: the OCR function, its
   handler the image's ``ImageConfig.Command``). A function of any other kind, or one whose environment
   holds a reference the rehearsal cannot resolve, is an error: a function added later is
   rehearsed or fails loudly, never skipped.
4. **Start** each in a fresh ``python3.11 -I -S`` interpreter (no site-packages, no
   PYTHONPATH: the standard library and the package folder only), as ``nobody`` when run as
   root (``setpriv``), with that environment plus what Lambda itself sets (``AWS_REGION``,
   ``LAMBDA_TASK_ROOT``, ``_HANDLER``, the X-Ray daemon's address, ...) and the endpoint of the
   local moto server; ``infra/lambda_bootstrap.py`` is its runtime loop. An import the package
   cannot satisfy, a file it does not carry, a variable the template does not set, or a write
   outside ``/tmp`` fails there as it would on Lambda.
5. **The container-image function** (the OCR function, infra/ocr/Dockerfile) runs as far as its
   image's Python layout allows (``image_task``): a read-only folder laid out as the Dockerfile
   lays out the image's ``/var/task`` (the package's code and runtime libraries, plus the pinned
   distributions of infra/ocr/requirements.txt, copied from the test virtualenv, which must hold
   the pinned versions: nothing is downloaded), started like the others. The system's Tesseract
   stands in for the image's (the same Debian package). The image itself, built and run under
   docker as Lambda runs it, is rehearsed by tests/integration/test_ocr_image.py
   (infra/image_rehearsal.py; docs/operations/parsing.md "The OCR image").

Sizes are measured against Lambda's limits (``sizes``; docs/operations/deploy.md "Package size").
"""
from __future__ import annotations

import base64
import json
import os
import re
import secrets
import select
import shutil
import socket
import stat
import subprocess
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024
ZIPPED_LIMIT = 50 * MB       # a zip uploaded directly (Lambda quotas)
UNZIPPED_LIMIT = 250 * MB    # the function's code and layers, unzipped
TEMPLATE_LIMIT = 1024 * 1024   # CloudFormation: a template read from S3, 1 MB (51,200 bytes inline)
ALARM_SHARE = 0.8            # the size test fails past 80 % of either limit
NOBODY = 65534
BOOTSTRAP = Path(__file__).with_name('lambda_bootstrap.py')
IMAGE_REQUIREMENTS = ROOT / 'infra' / 'ocr' / 'requirements.txt'   # the OCR image's own (its Dockerfile)
KINDS = ('authorizer', 'api', 'queue', 'stream', 'schedule', 'image')


class RehearsalError(Exception):
    """The package cannot be rehearsed as it stands: a function, a reference or a step it does not know."""


# ----------------------------------------------------------------------------- build and sizes

def build(stage: str, out: Path) -> Path:
    """``make package STAGE=<stage>`` into ``out`` (its code path, not a copy of it)."""
    from infra import package  # noqa: PLC0415 - imports chalice's packaging only when building
    package.main(stage, str(out))
    return out


@dataclass
class Sizes:
    zipped: int
    unzipped: int
    top: list[tuple[str, int]]   # (top-level package, unzipped bytes), largest first

    def report(self, count: int = 12) -> str:
        zipped, unzipped = self.zipped / ZIPPED_LIMIT, self.unzipped / UNZIPPED_LIMIT
        lines = [f'deployment.zip: {self.zipped / MB:.1f} MiB zipped ({zipped:.0%} of {ZIPPED_LIMIT // MB} MiB), '
                 f'{self.unzipped / MB:.1f} MiB unzipped ({unzipped:.0%} of {UNZIPPED_LIMIT // MB} MiB); '
                 'largest packages, unzipped:']
        lines += [f'  {size / MB:7.2f} MiB  {name}' for name, size in self.top[:count]]
        return '\n'.join(lines)


def _package_of(name: str) -> str:
    top = name.split('/', 1)[0]
    if top.endswith(('.dist-info', '.data')):
        top = re.sub(r'-[^-]+\.(dist-info|data)$', '', top)
    return top.removesuffix('.py').split('.cpython-')[0]


def sizes(zip_path: Path) -> Sizes:
    with zipfile.ZipFile(zip_path) as archive:
        per: dict[str, int] = {}
        for info in archive.infolist():
            per[_package_of(info.filename)] = per.get(_package_of(info.filename), 0) + info.file_size
    return Sizes(zipped=zip_path.stat().st_size, unzipped=sum(per.values()),
                 top=sorted(per.items(), key=lambda kv: -kv[1]))


def unpack(zip_path: Path, root: Path) -> Path:
    """deployment.zip into ``root/task``, read-only for everyone (as Lambda's /var/task)."""
    task = root / 'task'
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(task)
        executable = {info.filename.rstrip('/') for info in archive.infolist()
                      if (info.external_attr >> 16) & stat.S_IXUSR}
    _read_only(task, executable)
    return task


def _read_only(task: Path, executable: set[str]) -> None:
    for folder, dirs, files in os.walk(task, topdown=False):   # files first, then their folder
        base = Path(folder)
        for name in files:
            relative = (base / name).relative_to(task).as_posix()
            os.chmod(base / name, 0o555 if relative in executable else 0o444)
        for name in dirs:
            os.chmod(base / name, 0o555)
    task.chmod(0o555)


def pinned(requirements: Path) -> list[tuple[str, str]]:
    """``name==version`` lines of a requirements file (an image's are pinned, as the team's are)."""
    found = []
    for line in requirements.read_text().splitlines():
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        name, equals, version = line.partition('==')
        if not equals:
            raise RehearsalError(f'{requirements}: {line!r} is not pinned (name==version)')
        found.append((name.strip(), version.strip()))
    return found


def image_task(task: Path, root: Path, requirements: Path = IMAGE_REQUIREMENTS) -> Path:
    """The OCR image's ``/var/task`` as infra/ocr/Dockerfile lays it out, in ``root/image-task``,
    read-only: the app and its runtime libraries (the unpacked package's files, hard-linked: the
    Dockerfile pip-installs the same requirements.txt) plus each pinned distribution of
    ``requirements`` (Pillow), copied from this interpreter's site-packages (the test virtualenv,
    which requirements-dev.txt gives the same pins). A distribution missing here, at another
    version, or needing one the layout lacks, is an error: the rehearsal downloads nothing."""
    image = root / 'image-task'

    def link(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:   # another file system
            shutil.copy2(source, target)

    shutil.copytree(task, image, copy_function=link)
    for folder, _dirs, _ in os.walk(image):   # writable while it is laid out (copytree kept the 0555s)
        os.chmod(folder, 0o755)
    executable = {p.relative_to(image).as_posix() for p in image.rglob('*')
                  if p.is_file() and p.stat().st_mode & stat.S_IXUSR}
    have = {_package_of(p.name).lower().replace('-', '_') for p in image.iterdir()}
    for name, version in pinned(requirements):
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise RehearsalError(f'{name}=={version} ({requirements.name}) is not installed in the test '
                                 'virtualenv: the image rehearsal copies it from there') from None
        if distribution.version != version:
            raise RehearsalError(f'{name}: the test virtualenv has {distribution.version}, the image pins '
                                 f'{version} ({requirements})')
        needs = [r for r in distribution.requires or [] if 'extra ==' not in r]
        missing = [r for r in needs if re.split(r'[ ;<>=!~\[(]', r, maxsplit=1)[0].lower().replace('-', '_')
                   not in have]
        if missing:
            raise RehearsalError(f'{name} needs {missing}, which the image layout would lack (infra/rehearsal.py)')
        for file in distribution.files or []:
            if '..' in file.parts:   # scripts and data outside site-packages: not in /var/task
                continue
            source, target = Path(distribution.locate_file(file)), image / Path(*file.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            if source.stat().st_mode & stat.S_IXUSR:
                executable.add(target.relative_to(image).as_posix())
    shutil.copy(ROOT / 'requirements.txt', image / 'requirements.txt')   # as the Dockerfile COPYs them
    shutil.copy(requirements, image / 'requirements-ocr.txt')
    _read_only(image, executable)
    return image


def interpreter() -> str:
    """A python3.11 an unprivileged user can run (the system's first: a root-only pyenv is not)."""
    for candidate in ('/usr/bin/python3.11', '/usr/local/bin/python3.11', shutil.which('python3.11')):
        if candidate and os.access(candidate, os.X_OK):
            if os.geteuid() != 0 or _world_reachable(Path(candidate)):
                return candidate
    raise RehearsalError('no python3.11 that the unprivileged user can run (Lambda runs python3.11)')


def _world_reachable(path: Path) -> bool:
    real = path.resolve()
    parents = [p for p in real.parents]
    return bool(real.stat().st_mode & stat.S_IXOTH) and all(p.stat().st_mode & stat.S_IXOTH for p in parents)


# ----------------------------------------------------------------------------- the template

@dataclass
class Function:
    logical_id: str
    name: str
    kind: str
    handler: str
    variables: dict[str, Any]        # as the template gives them (references unresolved)
    timeout: int
    memory: int
    tracing: str
    events: dict[str, Any] = field(default_factory=dict)


def functions(template: dict[str, Any]) -> list[Function]:
    """Every function of the packaged app template, with its kind; an unknown kind raises."""
    resources = template.get('Resources') or {}
    apis = [r for r in resources.values() if r.get('Type') in ('AWS::Serverless::Api', 'AWS::ApiGateway::RestApi')]
    authorizer_uris = json.dumps([(r['Properties'].get('DefinitionBody') or {}).get('securityDefinitions')
                                  for r in apis])
    integration_uris = json.dumps([(r['Properties'].get('DefinitionBody') or {}).get('paths') for r in apis])
    found = []
    for logical_id, resource in resources.items():
        if resource.get('Type') not in ('AWS::Serverless::Function', 'AWS::Lambda::Function'):
            continue
        props = resource.get('Properties') or {}
        name = props.get('FunctionName') or logical_id
        handler = props.get('Handler') or ''
        events = props.get('Events') or {}
        types = {e.get('Type') for e in events.values()}
        if props.get('PackageType') == 'Image':
            kind = 'image'
            handler = ((props.get('ImageConfig') or {}).get('Command') or [''])[0]   # the image's CMD otherwise
            if not handler:
                raise RehearsalError(f'{logical_id}: an image function without ImageConfig.Command; the '
                                     'rehearsal reads the handler from the template')
        elif not handler:
            kind = 'unknown'
        elif f'function:{name}/' in authorizer_uris:
            kind = 'authorizer'
        elif f'function:{name}/' in integration_uris or f'{logical_id}.Arn' in integration_uris:
            kind = 'api'
        elif types == {'SQS'}:
            kind = 'queue'
        elif types == {'DynamoDB'}:
            kind = 'stream'
        elif types == {'Schedule'}:
            kind = 'schedule'
        else:
            kind = 'unknown'
        if props.get('Runtime', 'python3.11') != 'python3.11' and kind != 'image':
            raise RehearsalError(f'{logical_id}: runtime {props.get("Runtime")}, the rehearsal runs python3.11')
        found.append(Function(logical_id=logical_id, name=name, kind=kind, handler=handler,
                              variables=dict((props.get('Environment') or {}).get('Variables') or {}),
                              timeout=int(props.get('Timeout') or 3), memory=int(props.get('MemorySize') or 128),
                              tracing=str(props.get('Tracing') or 'PassThrough'), events=events))
    return found


_DYNAMIC = re.compile(r'\{\{resolve:secretsmanager:([^:}]+)[^}]*\}\}')


def resolve(function: Function, template: dict[str, Any], *, resources: dict[str, str],
            secret_values: dict[str, str]) -> dict[str, str]:
    """The function's environment as CloudFormation would set it, with local stand-ins:
    ``resources`` maps a logical id to the value its ``Ref`` gives, ``secret_values`` a secret's
    name to its value. Anything else unresolvable raises (a variable Lambda would not get)."""
    parameters = template.get('Parameters') or {}

    def value(name: str, raw: Any) -> str:
        if isinstance(raw, str):
            def secret(match: re.Match) -> str:
                if match.group(1) not in secret_values:
                    raise RehearsalError(f'{function.logical_id}: {name} reads secret {match.group(1)!r}, '
                                         'which the rehearsal did not create')
                return secret_values[match.group(1)]
            return _DYNAMIC.sub(secret, raw)
        if isinstance(raw, (int, float, bool)):
            return str(raw).lower() if isinstance(raw, bool) else str(raw)
        if isinstance(raw, dict) and set(raw) == {'Ref'}:
            ref = raw['Ref']
            if ref in parameters:
                return str(parameters[ref].get('Default', ''))
            if ref in resources:
                return resources[ref]
        raise RehearsalError(f'{function.logical_id}: {name} = {json.dumps(raw)} has no local stand-in in the '
                             'rehearsal (infra/rehearsal.py resolve)')

    return {name: value(name, raw) for name, raw in function.variables.items()}


def api_routes(template: dict[str, Any]) -> list[str]:
    for resource in (template.get('Resources') or {}).values():
        body = (resource.get('Properties') or {}).get('DefinitionBody') or {}
        if resource.get('Type') in ('AWS::Serverless::Api', 'AWS::ApiGateway::RestApi') and body.get('paths'):
            return list(body['paths'])
    raise RehearsalError('the template declares no REST API with paths')


# ----------------------------------------------------------------------------- running a function

def trace_id() -> str:
    return f'Root=1-{int(time.time()):08x}-{secrets.token_hex(12)};Parent={secrets.token_hex(8)};Sampled=1'


class XRayDaemon:
    """A UDP listener on loopback (or ``host``, another address of this machine: the OCR image's
    rehearsal binds it on its network's gateway) standing in for the X-Ray daemon: records what the
    functions' X-Ray SDK emits (segment documents), so the rehearsal sees tracing work."""

    def __init__(self, host: str = '127.0.0.1') -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.documents: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except OSError:
                continue
            _, _, body = data.partition(b'\n')   # '{"format": "json", "version": 1}\n{segment}'
            try:
                self.documents.append(json.loads(body))
            except ValueError:
                continue

    def names(self) -> list[str]:
        return [str(d.get('name')) for d in self.documents]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class Process:
    """One function's execution environment: a fresh isolated interpreter, initialised once
    (its cold start), then invoked as often as the caller wants (warm)."""

    def __init__(self, function: Function, task: Path, environment: dict[str, str], *, runtime_dir: Path,
                 log_path: Path, region: str, endpoint_url: str, xray_port: int) -> None:
        self.function = function
        env = dict(environment)
        env.update({
            'PATH': '/usr/local/bin:/usr/bin/:/bin', 'LANG': 'en_US.UTF-8', 'TZ': ':UTC',
            'LAMBDA_TASK_ROOT': str(task), 'LAMBDA_RUNTIME_DIR': str(runtime_dir), '_HANDLER': function.handler,
            'AWS_EXECUTION_ENV': 'AWS_Lambda_python3.11', 'AWS_LAMBDA_FUNCTION_NAME': function.name,
            'AWS_LAMBDA_FUNCTION_MEMORY_SIZE': str(function.memory), 'AWS_LAMBDA_FUNCTION_VERSION': '$LATEST',
            'AWS_LAMBDA_LOG_GROUP_NAME': f'/aws/lambda/{function.name}', 'AWS_LAMBDA_LOG_STREAM_NAME': 'rehearsal',
            'AWS_REGION': region, 'AWS_DEFAULT_REGION': region,
            'AWS_ACCESS_KEY_ID': 'rehearsal', 'AWS_SECRET_ACCESS_KEY': 'rehearsal', 'AWS_SESSION_TOKEN': 'rehearsal',
            'AWS_XRAY_CONTEXT_MISSING': 'LOG_ERROR', 'AWS_XRAY_DAEMON_ADDRESS': f'127.0.0.1:{xray_port}',
            '_AWS_XRAY_DAEMON_ADDRESS': '127.0.0.1', '_AWS_XRAY_DAEMON_PORT': str(xray_port),
            # the local emulator in place of AWS's endpoints (loopback only)
            'AWS_ENDPOINT_URL': endpoint_url,
        })
        self.environment = env
        command = [interpreter(), '-I', '-S', str(runtime_dir / BOOTSTRAP.name)]
        if os.geteuid() == 0:   # CI runs as root: the function runs as nobody, as Lambda's sbx_user does
            command = ['setpriv', f'--reuid={NOBODY}', f'--regid={NOBODY}', '--clear-groups', '--'] + command
        read_fd, write_fd = os.pipe()
        self.log_path = log_path
        self._log = log_path.open('ab')
        started = time.perf_counter()
        self.proc = subprocess.Popen(command + [str(write_fd)], stdin=subprocess.PIPE, stdout=self._log,
                                     stderr=subprocess.STDOUT, env=env, cwd=task, pass_fds=(write_fd,))
        os.close(write_fd)
        self._answers = os.fdopen(read_fd, 'r')
        ready = self._read(timeout=60)
        self.init_ms = ready.get('init_ms')
        self.start_ms = (time.perf_counter() - started) * 1000   # process start + interpreter + init
        if 'init_error' in ready:
            self.close()
            error = ready['init_error']
            raise RehearsalError(f'{function.logical_id} ({function.handler}) failed to initialise: '
                                 f'{error["error"]}: {error["message"]}\n{error["trace"]}\n{self.log_tail()}')

    def _read(self, timeout: float) -> dict[str, Any]:
        ready, _, _ = select.select([self._answers], [], [], timeout)
        line = self._answers.readline() if ready else ''
        if not line:
            self.close()
            raise RehearsalError(f'{self.function.logical_id}: no answer within {timeout:g} s '
                                 f'(exit {self.proc.poll()})\n{self.log_tail()}')
        return json.loads(line)

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        """One invocation: {'result': ..., 'ms': ...} or {'error', 'message', 'trace', 'ms'}."""
        request = {'event': event, 'trace_id': trace_id(), 'timeout_ms': self.function.timeout * 1000}
        self.proc.stdin.write((json.dumps(request) + '\n').encode())
        self.proc.stdin.flush()
        return self._read(timeout=self.function.timeout + 5)

    def call(self, event: dict[str, Any]) -> Any:
        """invoke, raising on an invocation error (what Lambda would report as a function error)."""
        answer = self.invoke(event)
        if 'error' in answer:
            raise RehearsalError(f'{self.function.logical_id} raised {answer["error"]}: {answer["message"]}\n'
                                 f'{answer["trace"]}\n{self.log_tail()}')
        return answer['result']

    def log_tail(self, chars: int = 4000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors='replace')[-chars:]

    def close(self) -> None:
        """End of input: the runtime loop returns and the interpreter exits (killed after 5 s)."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._answers.close()
        self._log.close()


def runtime_folder(root: Path) -> Path:
    """The runtime loop, read-only, outside the package (as Lambda's /var/runtime)."""
    runtime = root / 'runtime'
    runtime.mkdir(exist_ok=True)
    shutil.copy(BOOTSTRAP, runtime / BOOTSTRAP.name)
    (runtime / BOOTSTRAP.name).chmod(0o444)
    runtime.chmod(0o555)
    return runtime


def workspace() -> Path:
    """A folder the unprivileged user can traverse (pytest's tmp folders are root's, mode 0700)."""
    root = Path(f'/tmp/rehearsal-{uuid.uuid4().hex[:12]}')
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    return root


def remove(root: Path) -> None:
    """The workspace, read-only folders included (root needs no write bit to delete)."""
    if os.geteuid() != 0:
        for folder, _, _ in os.walk(root):
            os.chmod(folder, 0o755)
    shutil.rmtree(root, ignore_errors=True)


# ----------------------------------------------------------------------------- API Gateway's side

def api_event(routes: list[str], method: str, path: str, *, headers: dict[str, str] | None = None,
              body: str | bytes | None = None, authorizer: dict[str, Any] | None = None,
              stage: str = 'api') -> dict[str, Any]:
    """API Gateway's proxy event for a request (REST API, Lambda proxy integration), with the
    authorizer's answer in ``requestContext.authorizer`` as the gateway passes it. A ``bytes``
    body goes base64-encoded (``isBase64Encoded``), as the gateway sends a binary media type's."""
    from chalice.local import RouteMatcher  # noqa: PLC0415 - the test process's chalice: same matching rules

    match = RouteMatcher(routes).match_route(path)
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    request_id = str(uuid.uuid4())
    context: dict[str, Any] = {
        'resourcePath': match.route, 'httpMethod': method, 'path': f'/{stage}{path.split("?")[0]}', 'stage': stage,
        'requestId': request_id, 'extendedRequestId': request_id, 'requestTimeEpoch': int(time.time() * 1000),
        'identity': {'sourceIp': '127.0.0.1', 'userAgent': headers.get('user-agent', 'rehearsal')},
        'accountId': '000000000000', 'apiId': 'rehearsal', 'protocol': 'HTTP/1.1', 'domainName': 'rehearsal.local',
    }
    if authorizer is not None:
        context['authorizer'] = {**(authorizer.get('context') or {}), 'principalId': authorizer.get('principalId')}
    return {
        'resource': match.route, 'path': path.split('?')[0], 'httpMethod': method, 'headers': headers,
        'multiValueHeaders': {k: [v] for k, v in headers.items()},
        'queryStringParameters': {k: v[-1] for k, v in match.query_params.items()} or None,
        'multiValueQueryStringParameters': match.query_params or None,
        'pathParameters': match.captured or None, 'stageVariables': None, 'requestContext': context,
        'body': base64.b64encode(body).decode() if isinstance(body, bytes) else body,
        'isBase64Encoded': isinstance(body, bytes),
    }


def authorizer_event(method: str, path: str, headers: dict[str, str], stage: str = 'api') -> dict[str, Any]:
    """A REQUEST authorizer's event."""
    arn = f'arn:aws:execute-api:us-east-1:000000000000:rehearsal/{stage}/{method}{path}'
    return {'type': 'REQUEST', 'methodArn': arn,
            'resource': path, 'path': path, 'httpMethod': method, 'headers': dict(headers),
            'queryStringParameters': {}, 'pathParameters': {}, 'stageVariables': {},
            'requestContext': {'stage': stage, 'httpMethod': method, 'path': f'/{stage}{path}'}}
