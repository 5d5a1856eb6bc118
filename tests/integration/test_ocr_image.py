"""The OCR function's container image, built and run as Lambda runs it (issue 47;
docs/operations/parsing.md "The OCR image"; infra/image_rehearsal.py).

The image (infra/ocr/Dockerfile, tagged by the hash of its inputs: infra/ocr/image.sh) is built
once per machine: `make test` builds it in the background while the other tests run
(OCR_IMAGE_BUILD_EXIT names the file its exit status lands in; this module waits for it); run on
its own, this module builds it. The Docker daemon is started when none answers (as root) and
stopped at the end if this module started it.

The rehearsal: a scanned page of the corpus is uploaded to a live local server whose own OCR
worker is off (LOCAL_OCR_WORKER=off), the zip worker of that server hands the page over on the OCR
queue, the message is taken from the moto server as Lambda's event source mapping would, wrapped
as Lambda's SQS event and handed to the image through a stand-in of the Runtime API.
The container: `docker run --read-only --tmpfs /tmp`, the template's environment and MemorySize
(infra/ocr_function.py, as infra/app.py puts it in the template), an unprivileged user, the
entrypoint unchanged. The image must answer a response with no batch item failure, and the
family's /document and /text must then hold the scan's words. A broken image (Tesseract's English
model removed; a handler name that does not import) must fail the same rehearsal.

The network is the guard (infra/image_rehearsal.py ``Network``; the developers' guide: no test
sends a packet beyond this machine, even when the code under test is broken): the container runs
on a Docker bridge network created `--internal` for this module (a unique name, removed at the
end) with `--dns 127.0.0.1`; the Runtime API and X-Ray stand-ins are bound on the network's
gateway (an address of this host), the moto server is reached through a bounded TCP relay on the
gateway (``Forwarder``), and every address the container is given is the gateway's. The last test
proves the guard on the same image and settings: a connect to a documentation address stops at
this host's FORWARD chain, and a lookup of a public name reaches only the container's own
loopback (the host's resolvers are never asked)."""
from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import boto3
import pytest

from infra import image_rehearsal, ocr_function, rehearsal
from infra.package import stage_environment
from localdev.pollers import sqs_event
from tests.live import LiveStack

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / 'infra' / 'ocr' / 'image.sh'
STAGE = 'prod'
REGION = 'us-east-1'
SCAN = ROOT / 'tests' / 'fixtures' / 'documents' / 'scanned-page.pdf'   # a page of lppl.pdf, scanned at 300 dpi
MANIFEST = json.loads((SCAN.parent / 'manifest.json').read_text())
SCAN_WORDS = set(MANIFEST['real'][SCAN.name]['words'])
BUILD_WAIT_SECONDS = 25 * 60
RESOURCE_NAMES = ('TABLE_NAME', 'BUCKET_NAME', 'ACTIVITY_QUEUE_NAME', 'OCR_QUEUE_NAME', 'EVENT_BUS_NAME',
                  'ORG_SECRETS_PREFIX')
TEMPLATE = ocr_function.function(STAGE, stage_environment(STAGE))['Properties']


def _script(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, 'PY': str(ROOT / '.venv' / 'bin' / 'python')}
    done = subprocess.run([str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
    return done


def _docker_answers() -> bool:
    return subprocess.run(['docker', 'info'], capture_output=True).returncode == 0


@pytest.fixture(scope='module')
def image():
    """The image's tag, built (or waited for); the daemon started for this module if none answered."""
    started_here = not _docker_answers()
    if started_here:
        _script('daemon-start', timeout=120)
    try:
        tag = _script('tag').stdout.strip()
        exit_file = os.environ.get('OCR_IMAGE_BUILD_EXIT')
        if exit_file:   # make test's background build: wait for its exit status
            ends = time.monotonic() + BUILD_WAIT_SECONDS
            while not Path(exit_file).exists():
                assert time.monotonic() < ends, f'the OCR image build did not end within {BUILD_WAIT_SECONDS} s'
                time.sleep(2)
            log = Path(exit_file).with_suffix('.log')
            status = Path(exit_file).read_text().strip()
            assert status == '0', f'the OCR image build failed (exit {status}):\n' + (
                log.read_text(errors='replace')[-4000:] if log.exists() else '')
        else:
            _script('build', timeout=BUILD_WAIT_SECONDS)
        assert subprocess.run(['docker', 'image', 'inspect', tag], capture_output=True).returncode == 0, tag
        yield tag
    finally:
        if started_here:
            _script('daemon-stop', check=False, timeout=120)


@pytest.fixture(scope='module')
def live(tmp_path_factory):
    """The local server on the stage's resource names (the template's environment names them), its
    own OCR worker off: the OCR queue's messages wait for the image."""
    names = {k: stage_environment(STAGE)[k] for k in RESOURCE_NAMES}
    stack = LiveStack(tmp_path_factory.mktemp('ocr-image'), LOCAL_OCR_WORKER='off', **names)
    yield stack
    stack.stop()


@pytest.fixture(scope='module')
def store(live):
    org = next(o for o in live.get('/api/organizations').body['content'] if o.get('slug') == 'default')
    project = live.created('/api/projects', {'name': f'ocr-image-{uuid.uuid4().hex[:6]}', 'organizationId': org['id']})
    return live.created('/api/document-stores', {'projectId': project['id'], 'name': 'scans',
                                                 'slug': f'scans-{uuid.uuid4().hex[:8]}'})


@dataclass
class Guard:
    network: image_rehearsal.Network
    moto: image_rehearsal.Forwarder      # the live server's moto server, relayed from the gateway


@pytest.fixture(scope='module')
def guard(image, live):
    """The run's internal network and the relay to the moto server on its gateway; both gone at
    the end (the network removed, the relay's threads joined)."""
    network = image_rehearsal.Network()
    try:
        moto = image_rehearsal.Forwarder(network.gateway, live.moto_port)
        try:
            yield Guard(network, moto)
        finally:
            moto.close()
    finally:
        network.close()
    gone = subprocess.run(['docker', 'network', 'inspect', network.name], capture_output=True)
    assert gone.returncode != 0, f'{network.name} left behind'


@pytest.fixture(scope='module')
def xray(guard):
    daemon = rehearsal.XRayDaemon(host=guard.network.gateway)
    yield daemon
    daemon.close()


@dataclass
class Rehearsal:
    outcome: image_rehearsal.Outcome
    family_id: str
    words: set[str] = field(default_factory=set)
    text: str = ''
    execution: dict[str, Any] | None = None
    log: str = ''
    cold_start_s: float = 0.0
    init_s: float | None = None
    peak_memory: int | None = None

    @property
    def read_the_scan(self) -> bool:
        return (self.outcome.kind == 'response' and self.outcome.body == {'batchItemFailures': []}
                and SCAN_WORDS <= self.words and all(w in self.text for w in SCAN_WORDS))

    def explain(self) -> str:
        return (f'outcome {self.outcome.kind} {self.outcome.error_type}: {json.dumps(self.outcome.body)[:2000]}\n'
                f'execution: {json.dumps(self.execution)[:2000]}\nwords: {sorted(self.words)[:40]}\n'
                f'container log:\n{self.log[-4000:]}')


def _parse_execution(live, family_id: str) -> dict | None:
    page = live.get('/api/executions?pageSize=50&filter=' + quote(f"documentFamilyId == '{family_id}'")).body
    parses = [e for e in page['content'] if (e.get('metadata') or {}).get('stage') == 'parse']
    return parses[0] if parses else None


def _handed_over(live, family_id: str) -> dict[str, Any]:
    """The OCR queue's message for the family, taken from the moto server as Lambda's event source
    mapping takes it (ReceiveMessage, every attribute), wrapped as Lambda's SQS event."""
    sqs = boto3.client('sqs', region_name=REGION, endpoint_url=live.moto_url,
                       aws_access_key_id='local', aws_secret_access_key='local')
    url = sqs.get_queue_url(QueueName=stage_environment(STAGE)['OCR_QUEUE_NAME'])['QueueUrl']
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=['QueueArn'])['Attributes']['QueueArn']
    ends = time.monotonic() + 90
    execution = None
    while time.monotonic() < ends:
        execution = execution or _parse_execution(live, family_id)
        if execution is None:
            time.sleep(0.5)
            continue
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=1, VisibilityTimeout=600,
                                       AttributeNames=['All'], MessageAttributeNames=['All']).get('Messages') or []
        for message in messages:
            if execution['id'] in message['Body']:   # the parse execution's message (its activityId)
                return {'event': sqs_event(messages, arn, REGION), 'sqs': sqs, 'url': url}
            # another family's page (an earlier rehearsal's retry): back to the queue
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message['ReceiptHandle'], VisibilityTimeout=0)
    execution = _parse_execution(live, family_id)
    raise AssertionError(f'no OCR queue message for family {family_id} within 90 s: '
                         f'{execution and execution["statusMessages"]}')


def _environment(guard: Guard, api: image_rehearsal.RuntimeApi, xray_port: int, handler: str) -> dict[str, str]:
    name = f'platform-api-{STAGE}-{ocr_function.LOGICAL_ID}'
    gateway = guard.network.gateway
    env = {**TEMPLATE['Environment']['Variables'],
           **image_rehearsal.lambda_environment(name, handler, TEMPLATE['MemorySize'], region=REGION,
                                                runtime_api=api.address, endpoint_url=f'http://{guard.moto.address}',
                                                xray_port=xray_port, xray_host=gateway)}
    # every address the function dials is the gateway's (PUBLIC_API_URL is a name it writes, never dials)
    dialled = [env['AWS_ENDPOINT_URL'], f"http://{env['AWS_LAMBDA_RUNTIME_API']}",
               f"udp://{env['AWS_XRAY_DAEMON_ADDRESS']}"]
    assert all(urlparse(url).hostname == gateway for url in dialled), dialled
    return env


def rehearse(live, store, xray, guard: Guard, image: str, command: list[str] | None = None,
             source: Path = SCAN) -> Rehearsal:
    """Upload ``source``, hand its OCR message to ``image`` through the Runtime API stand-in, and
    read the family back."""
    upload = live.call('POST', f"/api/document-stores/{store['id']}/upload?path=scans/{uuid.uuid4().hex[:8]}.pdf",
                       raw=source.read_bytes(), content_type='application/pdf')
    assert upload.status == 201, upload
    family_id = upload.body['id']
    handed = _handed_over(live, family_id)
    handler = (command or TEMPLATE['ImageConfig']['Command'])[0]
    api = image_rehearsal.RuntimeApi(f'platform-api-{STAGE}-{ocr_function.LOGICAL_ID}', REGION,
                                     host=guard.network.gateway)
    container = f'ocr-rehearsal-{uuid.uuid4().hex[:10]}'
    line = image_rehearsal.docker_run(image, container, _environment(guard, api, xray.port, handler),
                                      TEMPLATE['MemorySize'], guard.network.name, command)
    log_path = Path(f'/tmp/{container}.log')
    peak = None
    with log_path.open('wb') as log:
        started = time.monotonic()
        proc = subprocess.Popen(line, stdout=log, stderr=subprocess.STDOUT)
        try:
            request_id = api.invoke(handed['event'], TEMPLATE['Timeout'])
            outcome = api.wait(request_id, TEMPLATE['Timeout'] + 30, alive=lambda: proc.poll() is None)
            peak = image_rehearsal.peak_memory_bytes(container)
        finally:
            subprocess.run(['docker', 'stop', '-t', '2', container], capture_output=True, timeout=60)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            api.close()
    result = Rehearsal(outcome=outcome, family_id=family_id, log=log_path.read_text(errors='replace'),
                       cold_start_s=outcome.at - started,
                       init_s=api.first_poll_at - started if api.first_poll_at else None, peak_memory=peak)
    log_path.unlink(missing_ok=True)
    failed = {f['itemIdentifier'] for f in (outcome.body or {}).get('batchItemFailures', [])} \
        if outcome.kind == 'response' and isinstance(outcome.body, dict) else None
    if failed == set():   # as the event source mapping does on success: the message is deleted
        record = handed['event']['Records'][0]
        handed['sqs'].delete_message(QueueUrl=handed['url'], ReceiptHandle=record['receiptHandle'])
        ends = time.monotonic() + 60   # the zip worker of the local server finishes the stage
        while time.monotonic() < ends:
            result.execution = _parse_execution(live, family_id)
            if result.execution and result.execution['status'] not in ('PENDING', 'RUNNING'):
                break
            time.sleep(0.5)
    else:
        result.execution = _parse_execution(live, family_id)
    document = live.get(f'/api/document-families/{family_id}/document')
    if document.status == 200:
        result.words = {n['content'] for n in document.body['nodes'] if n['nodeType'] == 'word'}
    text = live.get(f'/api/document-families/{family_id}/text')
    if text.status == 200:
        result.text = text.body['text'] if isinstance(text.body, dict) else str(text.body)
    return result


def test_the_image_reads_a_scan_the_zip_worker_hands_over(live, store, xray, guard, image):
    """The image answers the OCR queue's event through the Runtime API with no batch item
    failure, and the family's /document and /text hold the scan's words."""
    done = rehearse(live, store, xray, guard, image)
    assert done.read_the_scan, done.explain()
    assert done.execution['status'] == 'SUCCEEDED', done.explain()
    assert any('needs OCR' in m['message'] for m in done.execution['statusMessages']), done.execution
    print(f'\nOCR image {image}: cold start (docker run to the first response) {done.cold_start_s:.1f} s, '
          f'runtime initialised after {done.init_s or 0:.1f} s, peak memory '
          f'{(done.peak_memory or 0) / 2**20:.0f} MiB of {TEMPLATE["MemorySize"]} MB')


def test_an_image_without_the_english_model_fails_the_rehearsal(live, store, xray, guard, image):
    """The image with Tesseract's English model removed (a derived image, FROM the good one)."""
    broken = f'{image.split(":")[0]}-broken:no-eng-{uuid.uuid4().hex[:6]}'
    build = subprocess.run(['docker', 'build', '-q', '-t', broken, '-'], capture_output=True, text=True, timeout=300,
                           input=f'FROM {image}\nUSER root\n'
                                 'RUN rm /usr/share/tesseract-ocr/5/tessdata/eng.traineddata\n')
    assert build.returncode == 0, build.stderr
    try:
        done = rehearse(live, store, xray, guard, broken)
    finally:
        subprocess.run(['docker', 'rmi', '-f', broken], capture_output=True, timeout=120)
    assert not done.read_the_scan, done.explain()
    assert not SCAN_WORDS & done.words, done.explain()
    # the function answered, and the stage failed naming Tesseract (the page is not silently empty)
    assert done.execution['status'] == 'FAILED', done.explain()
    assert any('ocr-failed' in m['message'] for m in done.execution['statusMessages']), done.explain()


def test_a_bad_handler_name_fails_the_rehearsal(live, store, xray, guard, image):
    """The good image with a handler that does not exist (the template's ImageConfig.Command
    overrides the CMD the same way): the runtime reports it (init error) and nothing is read."""
    done = rehearse(live, store, xray, guard, image, command=['chalicelib.front.handlers.no_such_handler'])
    assert done.outcome.kind in ('init-error', 'error'), done.explain()
    assert 'no_such_handler' in json.dumps(done.outcome.body), done.explain()
    assert not done.read_the_scan, done.explain()


# Run inside the container by the guard's test (the image's Python, the entrypoint overridden):
# it dials out only once it has seen that its routes are the guard's (the network's subnet and a
# default route via its gateway, nothing else), so a broken guard fails the test without a packet
# sent. A UDP listener on the container's loopback port 53 answers REFUSED to every query and
# records it: where the embedded DNS (127.0.0.11) forwards a lookup to with --dns 127.0.0.1.
GUARD_PROBE = r'''
import json, os, socket, struct, threading, time
gateway, subnet, public = os.environ['GUARD_GATEWAY'], os.environ['GUARD_SUBNET'], os.environ['GUARD_NAME']
out = {'routes': [], 'interfaces': []}
for row in open('/proc/net/route').read().splitlines()[1:]:
    iface, dest, via, _, _, _, _, mask = row.split()[:8]
    ip = lambda h: socket.inet_ntoa(struct.pack('<I', int(h, 16)))
    out['routes'].append([iface, f'{ip(dest)}/{bin(int(mask, 16)).count("1")}', ip(via)])
out['interfaces'] = sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').read().splitlines()[2:])
expected = sorted([['eth0', '0.0.0.0/0', gateway], ['eth0', subnet, '0.0.0.0']])
out['guarded'] = sorted(out['routes']) == expected and out['interfaces'] == ['eth0', 'lo']
if out['guarded']:
    asked = out['asked'] = []
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.bind(('127.0.0.1', 53))
    dns.settimeout(0.1)
    stop = threading.Event()
    def serve():
        while not stop.is_set():
            try:
                query, peer = dns.recvfrom(4096)
            except OSError:
                continue
            labels, at = [], 12
            while query[at]:
                labels.append(query[at + 1:at + 1 + query[at]].decode()); at += 1 + query[at]
            asked.append('.'.join(labels))
            flags = 0x8000 | (int.from_bytes(query[2:4], 'big') & 0x0100) | 0x0080 | 5   # REFUSED
            dns.sendto(query[:2] + flags.to_bytes(2, 'big') + bytes([0, 1, 0, 0, 0, 0, 0, 0]) + query[12:at + 5], peer)
    threading.Thread(target=serve, daemon=True).start()
    started = time.monotonic()
    try:
        socket.create_connection(('198.51.100.1', 443), timeout=2).close()
        out['outside'] = 'connected'
    except OSError as e:
        out['outside'] = f'{type(e).__name__}: {e}'
    out['outside_s'] = round(time.monotonic() - started, 3)
    started = time.monotonic()
    try:
        out['lookup'] = repr(socket.getaddrinfo(public, 443))
    except OSError as e:
        out['lookup'] = f'{type(e).__name__}: {e}'
    out['lookup_s'] = round(time.monotonic() - started, 3)
    host, port = os.environ['GUARD_RELAY'].split(':')
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        out['gateway'] = 'connected'
    except OSError as e:
        out['gateway'] = f'{type(e).__name__}: {e}'
    stop.set()
print(json.dumps(out))
'''


def test_the_network_keeps_every_packet_on_this_machine(live, guard, image):
    """The guard holds for a broken image: the same image, network and docker run settings as the
    rehearsal, with its entrypoint replaced by a probe (this test only) that dials 198.51.100.1:443
    (TEST-NET-2, a documentation address; this machine's own eth0 sits in TEST-NET-1) with a 2 s
    timeout and looks up a public AWS name. The connect stops at this host: it fails within its
    timeout and the host's rule dropping what leaves the bridge for another subnet counts it. The
    lookup fails at once, asked only of the container's own loopback (the probe's listener
    there hears it): the host's resolvers are never asked. The gateway (the relay to moto) answers."""
    network = guard.network
    public = f'lambda.{REGION}.amazonaws.com'
    env = {'GUARD_GATEWAY': network.gateway, 'GUARD_SUBNET': str(network.subnet), 'GUARD_NAME': public,
           'GUARD_RELAY': guard.moto.address}
    # the unprivileged user binds port 53 in the container's own network namespace only (a
    # namespaced sysctl), for the probe's listener
    extra = ['--entrypoint', '/opt/venv/bin/python', '--sysctl', 'net.ipv4.ip_unprivileged_port_start=0']
    line = image_rehearsal.docker_run(image, f'ocr-guard-{uuid.uuid4().hex[:10]}', env, TEMPLATE['MemorySize'],
                                      network.name, command=['-c', GUARD_PROBE], extra=extra)
    assert ['--dns', image_rehearsal.GUARD_DNS] == line[line.index('--dns'):line.index('--dns') + 2]
    drops = network.isolation_drops()
    started = time.monotonic()
    probe = subprocess.run(line, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    assert probe.returncode == 0, probe.stderr[-3000:]
    out = json.loads(probe.stdout.strip().splitlines()[-1])
    assert out['guarded'], out   # else it dialled nothing: the container is not on the guard's network
    assert out['outside'].startswith(('TimeoutError', 'OSError')) and out['outside_s'] <= 2.5, out
    assert network.isolation_drops() > drops, out   # the SYN stopped in this host's FORWARD chain
    assert out['lookup'].startswith('gaierror') and out['lookup_s'] < 1, out
    assert out['asked'] and set(out['asked']) == {public}, out   # forwarded to the container's loopback only
    assert out['gateway'] == 'connected', out
    assert elapsed < 30, elapsed
    print(f"\nguard on {network.name} ({network.subnet}, gateway {network.gateway}): 198.51.100.1:443 "
          f"{out['outside']} after {out['outside_s']} s (host drops +{network.isolation_drops() - drops}); "
          f"{public}: {out['lookup']} after {out['lookup_s']} s, asked of the container's loopback "
          f"{len(out['asked'])} times; probe container {elapsed:.1f} s")
