"""The deploy rehearsal (issue 38; infra/rehearsal.py): what `make package STAGE=prod` builds,
unpacked read-only and run the way Lambda runs it, every function the packaged template declares
in its own isolated `python3.11 -I -S` interpreter as an unprivileged user, with the template's
environment and tracing on, against a local moto server on loopback.

The package is built once for this module (~15 s with the wheel cache warm; the first build of a
machine downloads the Lambda wheels from PyPI); bench/README.md "The Lambda package" has the
times. The first admin and key are made by the operator's command (infra/bootstrap_admin.py), as
on a deployed stage."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from infra import rehearsal
from infra.package import stage_environment
from localdev.pollers import QueuePoller, StreamReader, scheduled_event
from tests.live import free_port

ROOT = Path(__file__).resolve().parents[2]
STAGE = 'prod'
REGION = 'us-east-1'
KINDS_REQUIRED = {'authorizer', 'api', 'queue', 'stream', 'schedule', 'image'}
SCAN = ROOT / 'tests' / 'fixtures' / 'documents' / 'scanned-page.png'   # a page of lppl.pdf, scanned
SCAN_WORDS = {'Preamble', 'verbatim', 'distribute'}   # tests/fixtures/documents/manifest.json


def _moto(port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('AWS_', 'CHAOS_'))}
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.moto_server', '-H', '127.0.0.1', '-p', str(port)],
                            cwd=ROOT, env={**env, 'PYTHONPATH': str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import urllib.request
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f'http://127.0.0.1:{port}/moto-api/', timeout=1)
            return proc
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError('moto server did not start') from None
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError('moto server did not start within 60 s')


def _operator_env(endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('AWS_', 'CHAOS_'))}
    return {**env, 'PYTHONPATH': str(ROOT), 'AWS_ENDPOINT_URL': endpoint, 'AWS_DEFAULT_REGION': REGION,
            'AWS_ACCESS_KEY_ID': 'operator', 'AWS_SECRET_ACCESS_KEY': 'operator'}


class Stage:
    """A stage rehearsed: the package, the emulator with the data stack's resources, a process
    per function (started on first use, kept warm)."""

    def __init__(self, root: Path, out: Path, endpoint: str, xray: rehearsal.XRayDaemon) -> None:
        self.root, self.endpoint, self.xray = root, endpoint, xray
        self.template = json.loads((out / 'app.json').read_text())
        self.sizes = rehearsal.sizes(out / 'deployment.zip')
        self.task = rehearsal.unpack(out / 'deployment.zip', root)
        self.runtime = rehearsal.runtime_folder(root)
        self.functions = {f.logical_id: f for f in rehearsal.functions(self.template)}
        self.routes = rehearsal.api_routes(self.template)
        self.processes: dict[str, rehearsal.Process] = {}
        self._image_task: Path | None = None
        self.aws = {name: boto3.client(name, region_name=REGION, endpoint_url=endpoint,
                                       aws_access_key_id='test', aws_secret_access_key='test')
                    for name in ('apigateway', 'secretsmanager', 'sqs', 'dynamodb')}
        self._create_resources()

    def _create_resources(self) -> None:
        env = {**_operator_env(self.endpoint), **stage_environment(STAGE)}
        subprocess.run([sys.executable, '-c', 'from localdev.run import create_resources; create_resources()'],
                       cwd=ROOT, env=env, check=True, timeout=120)
        # the app stack's usage plan, and the secrets the data stack generates
        plan = self.aws['apigateway'].create_usage_plan(name=f'platform-{STAGE}-per-key')
        self.resources = {'PerKeyUsagePlan': plan['id']}
        names = set()
        for function in self.functions.values():
            names |= set(rehearsal._DYNAMIC.findall(json.dumps(function.variables)))
        self.secret_values = {}
        for name in sorted(names):
            value = hashlib.sha256(f'rehearsal-{name}'.encode()).hexdigest()
            self.aws['secretsmanager'].create_secret(Name=name, SecretString=value)
            self.secret_values[name] = value
        answer = subprocess.run([sys.executable, '-m', 'infra.bootstrap_admin', STAGE], cwd=ROOT,
                                env=_operator_env(self.endpoint), capture_output=True, text=True, timeout=120)
        assert answer.returncode == 0, answer.stdout + answer.stderr
        self.operator_output = answer.stdout
        self.key = next(line.rsplit(' ', 1)[-1] for line in answer.stdout.splitlines() if 'admin API key' in line)

    def image_task(self) -> Path:
        """The OCR image's /var/task (infra/ocr/Dockerfile), laid out on first use."""
        if self._image_task is None:
            started = time.perf_counter()
            self._image_task = rehearsal.image_task(self.task, self.root)
            print(f'\nrehearsal: the OCR image\'s /var/task laid out in {time.perf_counter() - started:.1f} s')
        return self._image_task

    def process(self, logical_id: str) -> rehearsal.Process:
        if logical_id not in self.processes:
            function = self.functions[logical_id]
            env = rehearsal.resolve(function, self.template, resources=self.resources,
                                    secret_values=self.secret_values)
            task = self.image_task() if function.kind == 'image' else self.task
            self.processes[logical_id] = rehearsal.Process(
                function, task, env, runtime_dir=self.runtime, log_path=self.root / f'{logical_id}.log',
                region=REGION, endpoint_url=self.endpoint, xray_port=self.xray.port)
        return self.processes[logical_id]

    def of_kind(self, kind: str) -> list[rehearsal.Function]:
        return [f for f in self.functions.values() if f.kind == kind]

    def only(self, kind: str) -> rehearsal.Function:
        """The one function of a kind; a second one (a function added later) needs its own step here."""
        found = self.of_kind(kind)
        assert len(found) == 1, (f'{len(found)} functions of kind {kind!r} ({[f.logical_id for f in found]}): '
                                 'the rehearsal drives one; give the new one its own step in this file')
        return found[0]

    def request(self, method: str, path: str, body: Any = None, key: str | None = '__admin__', *,
                raw: bytes | None = None, content_type: str = 'application/json') -> dict[str, Any]:
        """Through the gateway: the authorizer first (its answer in the request's context), then the API.
        ``raw``: a binary body (sent base64-encoded, as API Gateway sends a binary media type's)."""
        headers = {'content-type': content_type, 'user-agent': 'rehearsal'}
        if key:
            headers['x-api-key'] = self.key if key == '__admin__' else key
        authorizer = self.only('authorizer')
        answer = self.process(authorizer.logical_id).call(rehearsal.authorizer_event(method, path, headers))
        assert answer['policyDocument']['Statement'][0]['Effect'] == 'Allow', answer
        api = self.only('api')
        event = rehearsal.api_event(self.routes, method, path, headers=headers,
                                    body=raw if raw is not None else None if body is None else json.dumps(body),
                                    authorizer=answer)
        response = self.process(api.logical_id).call(event)
        response['usageIdentifierKey'] = answer.get('usageIdentifierKey')
        if response.get('statusCode', 500) >= 500:   # the function's log says why, in the assertion's message
            response['log'] = self.process(api.logical_id).log_tail(3000)
        content_type = {k.lower(): v for k, v in (response.get('headers') or {}).items()}.get('content-type', '')
        # Chalice sets no Content-Type on a dict body (API Gateway answers it as application/json)
        if ('json' in content_type or not content_type) and str(response.get('body') or '')[:1] in ('{', '['):
            response['json'] = json.loads(response['body'])
        return response

    def close(self) -> None:
        for process in self.processes.values():   # all at once: each exits on the end of its input
            process.proc.stdin.close()
        for process in self.processes.values():
            process.close()


def explain(response: dict[str, Any]) -> str:
    log = str(response.get('log', '')).replace('\\n', '\n')   # JSON log lines: tracebacks escaped
    return f"{response.get('statusCode')} {str(response.get('body'))[:500]}\n{log}"


@pytest.fixture(scope='module')
def package_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp('package')
    started = time.perf_counter()
    rehearsal.build(STAGE, out)
    print(f'\nrehearsal: make package STAGE={STAGE} took {time.perf_counter() - started:.1f} s')
    return out


@pytest.fixture(scope='module')
def stage(package_dir):
    port = free_port()
    moto = _moto(port)
    root = rehearsal.workspace()
    xray = rehearsal.XRayDaemon()
    built = None
    try:
        built = Stage(root, package_dir, f'http://127.0.0.1:{port}', xray)
        yield built
    finally:
        if built is not None:
            built.close()
        xray.close()
        moto.terminate()
        moto.wait(timeout=10)
        rehearsal.remove(root)


def test_package_sizes_within_80_percent_of_lambdas_limits(package_dir):
    sizes = rehearsal.sizes(package_dir / 'deployment.zip')
    print('\n' + sizes.report())
    assert sizes.zipped <= rehearsal.ALARM_SHARE * rehearsal.ZIPPED_LIMIT, sizes.report()
    assert sizes.unzipped <= rehearsal.ALARM_SHARE * rehearsal.UNZIPPED_LIMIT, sizes.report()
    # CloudFormation reads a template of at most 1 MB from S3 (docs/operations/deploy.md)
    template = (package_dir / 'app.json').stat().st_size
    print(f'app.json: {template:,} bytes ({template / rehearsal.TEMPLATE_LIMIT:.0%} of 1 MB)')
    assert template <= rehearsal.ALARM_SHARE * rehearsal.TEMPLATE_LIMIT


def test_package_carries_no_build_tools(package_dir):
    """Chalice's command line and the packaging tools never reach the function (issue 38)."""
    packages = {name for name, _ in rehearsal.sizes(package_dir / 'deployment.zip').top}
    assert not packages & {'pip', 'setuptools', 'wheel', 'click', 'yaml', 'inquirer', 'blessed', 'wcwidth'}
    assert {'aws_xray_sdk', 'chalice', 'app', 'chalicelib'} <= packages


def test_every_function_of_the_template_has_a_rehearsal(stage):
    kinds = {f.logical_id: f.kind for f in stage.functions.values()}
    unknown = {name: kind for name, kind in kinds.items() if kind not in rehearsal.KINDS}
    assert not unknown, f'functions the rehearsal cannot run: {unknown} (add them to infra/rehearsal.py)'
    assert set(kinds.values()) >= KINDS_REQUIRED, kinds
    # every variable of every function resolves (a variable Lambda would not get fails here)
    for function in stage.functions.values():
        env = rehearsal.resolve(function, stage.template, resources=stage.resources,
                                secret_values=stage.secret_values)
        assert env['TRACING_ENABLED'] == 'true'


def test_api_answers_through_the_authorizer_with_tracing_on(stage):
    health = stage.request('GET', '/api/health', key=None)
    assert health['statusCode'] == 200, explain(health)
    assert health['usageIdentifierKey'] == stage.secret_values[f'platform/{STAGE}/gateway-shared-usage-key']

    me = stage.request('GET', '/api/account/me')
    assert me['statusCode'] == 200, explain(me)
    assert me['json']['email'] == 'admin@example.com'
    # the key's usage identifier is the value of its twin in the per-key usage plan (else API Gateway: 401)
    twins = stage.aws['apigateway'].get_usage_plan_keys(usagePlanId=stage.resources['PerKeyUsagePlan'])['items']
    values = {stage.aws['apigateway'].get_api_key(apiKey=t['id'], includeValue=True)['value'] for t in twins}
    assert me['usageIdentifierKey'] == hashlib.sha256(stage.key.encode()).hexdigest()
    assert me['usageIdentifierKey'] in values

    created = stage.request('POST', '/api/organizations', {'name': 'Rehearsal', 'slug': 'rehearsal'})
    assert created['statusCode'] == 201, explain(created)
    read = stage.request('GET', f"/api/organizations/{created['json']['id']}")
    assert read['statusCode'] == 200, explain(read)
    assert read['json']['slug'] == 'rehearsal'

    missing = stage.request('GET', '/api/organizations/00000000-0000-0000-0000-00000000dead')
    assert missing['statusCode'] == 404, explain(missing)
    assert set(missing['json']) >= {'error', 'message', 'status'}
    assert missing['headers']['X-Request-Id']

    docs = stage.request('GET', '/v3/api-docs', key=None)
    assert docs['statusCode'] == 200, explain(docs)
    assert docs['json']['openapi'].startswith('3.')
    page = stage.request('GET', '/docs', key=None)
    assert page['statusCode'] == 200 and '<html' in page['body'].lower(), page
    bundle = stage.request('GET', '/docs/swagger-ui-bundle.js', key=None)
    assert bundle['statusCode'] == 200 and len(bundle['body']) > 100_000

    # tracing worked: the request's subsegment reached the (stand-in) X-Ray daemon
    deadline = time.time() + 5
    while time.time() < deadline and not any('GET /api/health' in n for n in stage.xray.names()):
        time.sleep(0.1)
    assert any('GET /api/health' in n for n in stage.xray.names()), stage.xray.names()[:20]


def test_worker_reports_batch_item_failures(stage):
    worker = stage.only('queue')
    process = stage.process(worker.logical_id)
    queue = stage_environment(STAGE)['ACTIVITY_QUEUE_NAME']
    url = stage.aws['sqs'].get_queue_url(QueueName=queue)['QueueUrl']
    bad = stage.aws['sqs'].send_message(QueueUrl=url, MessageBody='{"not": "an activity start"}')['MessageId']
    results = []

    def handler(event, _context):
        results.append(process.call(event))
        return results[-1]

    poller = QueuePoller(handler, queue, region=REGION, endpoint_url=stage.endpoint)
    stats = poller.poll_once()
    assert stats == {'received': 1, 'failed': 1}, (stats, results, process.log_tail())
    assert results[0]['batchItemFailures'] == [{'itemIdentifier': bad}]


def test_stream_handler_records_the_events(stage):
    """The organization created above wrote an outbox event: the stream handler publishes and
    records it (the record shows in the API's events list)."""
    publisher = stage.only('stream')
    process = stage.process(publisher.logical_id)
    stage.request('POST', '/api/organizations', {'name': 'Streamed', 'slug': 'streamed'})
    results = []

    def handler(event, _context):
        results.append(process.call(event))
        return results[-1]

    reader = StreamReader(handler, stage_environment(STAGE)['TABLE_NAME'], region=REGION,
                          endpoint_url=stage.endpoint, batch_size=1000)
    stats = reader.poll_once()
    assert stats['records'] > 0 and stats['failed'] == 0, (stats, results, process.log_tail())
    assert all(r == {'batchItemFailures': []} for r in results), results
    events = stage.request('GET', '/api/events?pageSize=100')
    assert events['statusCode'] == 200, explain(events)
    assert events['json']['content'], events


def test_schedule_runs(stage):
    scheduled = stage.only('schedule')
    stats = stage.process(scheduled.logical_id).call(scheduled_event(REGION))
    assert isinstance(stats, dict) and 'due' in stats, stats


def test_functions_cannot_write_outside_tmp(stage):
    """The package folder (and the OCR image's /var/task) is read-only and the functions run
    unprivileged: a write there fails here as it does on Lambda (the rehearsal would catch a module
    that writes beside itself)."""
    api = stage.only('api')
    stage.process(api.logical_id)   # started
    for folder in (stage.task, stage.image_task(), stage.image_task() / 'PIL'):
        code = f'open({str(folder / "probe")!r}, "w")'
        probe = subprocess.run(
            ['setpriv', f'--reuid={rehearsal.NOBODY}', f'--regid={rehearsal.NOBODY}', '--clear-groups', '--',
             rehearsal.interpreter(), '-I', '-S', '-c', code] if os.geteuid() == 0 else
            [rehearsal.interpreter(), '-I', '-S', '-c', code],
            capture_output=True, text=True)
        assert probe.returncode != 0 and 'PermissionError' in probe.stderr, (folder, probe)


def test_ocr_function_reads_a_scan_the_worker_hands_over(stage):
    """The OCR function (PackageType Image, infra/ocr/Dockerfile) in its image's Python layout:
    a scanned page uploaded and reprocessed through the API, the zip-packaged worker hands the page
    over on the OCR queue (with OCR_QUEUE_NAME set it reads no scan), the OCR
    function reads it with Tesseract, and the family's document holds the words with confidences.
    A message it cannot read comes back as a batch item failure. (Runs last: the stream and
    worker steps above expect their queues to themselves.)"""
    ocr = stage.only('image')
    assert ocr.handler == 'chalicelib.front.handlers.ocr_batch', ocr.handler
    # the image's layout is the package's (Pillow included: the API draws image pages with it) plus
    # OCR's own requirements (none today)
    assert (stage.image_task() / 'PIL').is_dir() and (stage.task / 'PIL').is_dir()
    process = stage.process(ocr.logical_id)
    assert stage.processes[ocr.logical_id].environment['OCR_QUEUE_NAME'] == stage_environment(STAGE)['OCR_QUEUE_NAME']
    sqs = stage.aws['sqs']
    ocr_queue = stage_environment(STAGE)['OCR_QUEUE_NAME']
    ocr_url = sqs.get_queue_url(QueueName=ocr_queue)['QueueUrl']
    results: list[dict[str, Any]] = []

    def ocr_handler(event, _context):
        results.append(process.call(event))
        return results[-1]

    ocr_poller = QueuePoller(ocr_handler, ocr_queue, region=REGION, endpoint_url=stage.endpoint)
    bad = sqs.send_message(QueueUrl=ocr_url, MessageBody='{"not": "a parse step"}')['MessageId']
    assert ocr_poller.poll_once() == {'received': 1, 'failed': 1}, (results, process.log_tail())
    assert results[-1]['batchItemFailures'] == [{'itemIdentifier': bad}]

    org = stage.request('POST', '/api/organizations', {'name': 'Scans', 'slug': 'scans'})
    assert org['statusCode'] == 201, explain(org)
    project = stage.request('POST', '/api/projects', {'name': 'scans', 'organizationId': org['json']['id']})
    assert project['statusCode'] == 201, explain(project)
    store = stage.request('POST', '/api/document-stores', {'projectId': project['json']['id'], 'name': 'scans',
                                                           'slug': 'scans'})
    assert store['statusCode'] == 201, explain(store)
    family = stage.request('POST', f"/api/document-stores/{store['json']['id']}/upload?path=scans/page.png",
                           raw=SCAN.read_bytes(), content_type='image/png')
    assert family['statusCode'] == 201, explain(family)
    family_id = family['json']['id']
    # the packaged API draws the scan's page (Pillow is in the zip: docs/api/documents.md "Page images
    # and words"), before any parse; 140 dpi asked is drawn at the 150 step
    image = stage.request('GET', f'/api/document-families/{family_id}/pages/1/image?dpi=140')
    assert image['statusCode'] == 200, explain(image)
    assert {k: image['json'][k] for k in ('dpi', 'width', 'height', 'pageCount')} == \
        {'dpi': 150, 'width': 1241, 'height': 1755, 'pageCount': 1}, image['json']
    assert image['json']['url'].startswith(stage.endpoint + '/'), image['json']['url']   # the local emulator
    import urllib.request
    with urllib.request.urlopen(image['json']['url'], timeout=10) as got:
        assert got.read(8) == b'\x89PNG\r\n\x1a\n'
    run = stage.request('POST', f'/api/document-families/{family_id}/reprocess')
    assert run['statusCode'] == 202, explain(run)

    worker = stage.process(stage.only('queue').logical_id)
    worker_poller = QueuePoller(lambda event, _context: worker.call(event),
                                stage_environment(STAGE)['ACTIVITY_QUEUE_NAME'], region=REGION,
                                endpoint_url=stage.endpoint)
    deadline = time.time() + 180
    status = None
    while time.time() < deadline:
        worker_poller.poll_once()
        ocr_poller.poll_once()
        status = stage.request('GET', f"/api/executions/{run['json']['id']}")
        if status['json']['status'] not in ('PENDING', 'RUNNING'):
            break
    assert status['json']['status'] == 'SUCCEEDED', (status['json'], process.log_tail(), worker.log_tail())
    messages = [m['message'] for m in status['json']['statusMessages']]
    assert any('needs OCR' in m for m in messages), messages   # the zip worker handed it over
    assert len(results) >= 2 and all(r == {'batchItemFailures': []} for r in results[1:]), results

    document = stage.request('GET', f'/api/document-families/{family_id}/document')
    assert document['statusCode'] == 200, explain(document)
    nodes = document['json']['nodes']
    root = next(n for n in nodes if n['nodeType'] == 'document')
    assert root['features']['parser'] == 'image-ocr', root
    words = [n for n in nodes if n['nodeType'] == 'word']
    assert SCAN_WORDS <= {w['content'] for w in words}, sorted(w['content'] for w in words)[:50]
    assert all(0 <= w['features']['confidence'] <= 1 for w in words)
    assert sum(w['features']['confidence'] for w in words) / len(words) > 0.5
