"""The OCR image run as Lambda runs it, on this machine (issue 47; docs/operations/parsing.md
"The OCR image"). tests/integration/test_ocr_image.py drives it (and prints the figures of bench/README.md).

* ``RuntimeApi``: a stand-in of the Lambda Runtime API (on loopback, or the rehearsal network's
  gateway), the four calls AWS documents
  (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html): ``GET
  /2018-06-01/runtime/invocation/next`` (long poll; the event, with ``Lambda-Runtime-Aws-Request-Id``,
  ``-Deadline-Ms``, ``-Invoked-Function-Arn``, ``-Trace-Id``), ``POST .../invocation/{id}/response``,
  ``POST .../invocation/{id}/error`` and ``POST .../runtime/init/error``. It records what the
  image answers; ``wait`` says how an invocation ended (a response, an error, an init error, the
  container gone, or no answer in time).
* ``docker_run``: the ``docker run`` line of a function: the root filesystem read-only, ``/tmp``
  the only writable place (a tmpfs of Lambda's default 512 MB ephemeral storage), the template's
  MemorySize as the memory limit (no swap), an unprivileged user (Lambda runs images as one), the
  image's entrypoint unchanged, the template's environment plus what Lambda sets itself
  (``AWS_LAMBDA_RUNTIME_API`` among them) and the local emulator's endpoint.
* ``Network``: the guard that keeps every packet on this machine, whatever the image does
  (docs/operations/parsing.md "The OCR image"; the developers' guide: no test sends a packet
  beyond this machine, even when the code under test is broken). The container runs on a
  user-defined bridge network created ``--internal`` for the run (a unique name, removed at the
  end). Docker 20.10 still gives its containers a default route via the bridge's gateway (this
  host), but for an internal network it adds a rule to the host's FORWARD chain
  (DOCKER-ISOLATION-STAGE-1) dropping whatever comes in from the bridge for another subnet: a
  packet for any address but the host's stops here (``Network.isolation_drops`` counts them; a
  network without that rule is refused). Names: Docker's embedded DNS (127.0.0.11 in the
  container) answers the network's own names and forwards every other lookup to the servers of
  ``--dns``, dialled from inside the container's network namespace (only the host's own loopback
  resolvers, taken from its resolv.conf when no ``--dns`` is given, are dialled from the host);
  the run gives ``--dns 127.0.0.1``, the container's own loopback, where nothing answers: the
  host's resolvers are never asked. What the image dials is bound on the gateway address: the
  Runtime API and X-Ray stand-ins directly, the moto server (on loopback) through ``Forwarder``, a
  bounded TCP relay from the gateway address to one loopback port.
  tests/integration/test_ocr_image.py proves the guard on the same image and settings (a connect
  to a documentation address is dropped on this host, a lookup of a public name is heard only on
  the container's loopback).
"""
from __future__ import annotations

import ipaddress
import json
import queue
import secrets
import select
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PREFIX = '/2018-06-01/runtime'
EPHEMERAL_MB = 512          # Lambda's default /tmp
NOBODY = '65534:65534'


@dataclass
class Outcome:
    kind: str                # 'response' | 'error' | 'init-error' | 'exited' | 'timeout'
    body: Any = None
    error_type: str | None = None
    at: float = 0.0          # time.monotonic() when it was posted


class RuntimeApi:
    """The Runtime API on ``<host>:<port>`` (``address`` is what AWS_LAMBDA_RUNTIME_API takes): the
    rehearsal binds it on its ``Network``'s gateway."""

    def __init__(self, function_name: str, region: str = 'us-east-1', host: str = '127.0.0.1') -> None:
        self.function_arn = f'arn:aws:lambda:{region}:000000000000:function:{function_name}'
        self._events: queue.Queue[tuple[str, Any, int]] = queue.Queue()
        self._done = threading.Condition()
        self.outcomes: dict[str, Outcome] = {}
        self.init_errors: list[Outcome] = []
        self.first_poll_at: float | None = None    # the runtime's init is over: it asks for work
        self._stop = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def log_message(self, *_args: Any) -> None:
                return

            def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                if api._stop.is_set() and status == 503:
                    self.close_connection = True
                    return
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:   # the container went away mid-poll (docker stop)
                    self.close_connection = True

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path != f'{PREFIX}/invocation/next':
                    self._answer(404, {'errorType': 'NotFound', 'errorMessage': self.path})
                    return
                if api.first_poll_at is None:
                    api.first_poll_at = time.monotonic()
                while not api._stop.is_set():   # a long poll, as Lambda's (until there is an event)
                    try:
                        request_id, event, deadline_ms = api._events.get(timeout=0.2)
                    except queue.Empty:
                        continue
                    self._answer(200, event, {
                        'Lambda-Runtime-Aws-Request-Id': request_id,
                        'Lambda-Runtime-Deadline-Ms': str(deadline_ms),
                        'Lambda-Runtime-Invoked-Function-Arn': api.function_arn,
                        'Lambda-Runtime-Trace-Id': (f'Root=1-{int(time.time()):08x}-{secrets.token_hex(12)};'
                                                    f'Parent={secrets.token_hex(8)};Sampled=1')})
                    return
                self._answer(503, {'errorType': 'ShuttingDown', 'errorMessage': 'the stand-in stopped'})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get('Content-Length') or 0)
                raw = self.rfile.read(length) if length else b''
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors='replace')
                error_type = self.headers.get('Lambda-Runtime-Function-Error-Type')
                parts = self.path[len(PREFIX):].strip('/').split('/') if self.path.startswith(PREFIX) else []
                if parts == ['init', 'error']:
                    outcome = Outcome('init-error', body, error_type, time.monotonic())
                    with api._done:
                        api.init_errors.append(outcome)
                        api._done.notify_all()
                elif len(parts) == 3 and parts[0] == 'invocation' and parts[2] in ('response', 'error'):
                    kind = 'response' if parts[2] == 'response' else 'error'
                    with api._done:
                        api.outcomes[parts[1]] = Outcome(kind, body, error_type, time.monotonic())
                        api._done.notify_all()
                else:
                    self._answer(404, {'errorType': 'NotFound', 'errorMessage': self.path})
                    return
                self._answer(202, {'status': 'OK'})

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.address = f'{host}:{self.server.server_address[1]}'
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={'poll_interval': 0.2}, daemon=True)
        self._thread.start()

    def invoke(self, event: Any, timeout_seconds: float) -> str:
        """Queue an invocation (the next GET .../next takes it): its request id."""
        request_id = str(uuid.uuid4())
        self._events.put((request_id, event, int((time.time() + timeout_seconds) * 1000)))
        return request_id

    def wait(self, request_id: str, timeout: float, alive: Any = lambda: True) -> Outcome:
        """How the invocation ended: its response or error, an init error, the container gone
        (``alive()`` false), or nothing within ``timeout`` seconds."""
        ends = time.monotonic() + timeout
        with self._done:
            while True:
                if request_id in self.outcomes:
                    return self.outcomes[request_id]
                if self.init_errors:
                    return self.init_errors[-1]
                if not alive():
                    return Outcome('exited', at=time.monotonic())
                left = ends - time.monotonic()
                if left <= 0:
                    return Outcome('timeout', at=time.monotonic())
                self._done.wait(min(left, 0.5))

    def close(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()


def lambda_environment(function_name: str, handler: str, memory_mb: int, *, region: str, runtime_api: str,
                       endpoint_url: str, xray_port: int, xray_host: str = '127.0.0.1') -> dict[str, str]:
    """What Lambda itself sets in an image function's environment (beside the template's), with
    the local stand-ins' addresses (``runtime_api``, ``endpoint_url``) and the X-Ray daemon's
    port on ``xray_host`` (the rehearsal's network gateway)."""
    return {
        'AWS_LAMBDA_RUNTIME_API': runtime_api, '_HANDLER': handler, 'LAMBDA_TASK_ROOT': '/var/task',
        'AWS_LAMBDA_FUNCTION_NAME': function_name, 'AWS_LAMBDA_FUNCTION_MEMORY_SIZE': str(memory_mb),
        'AWS_LAMBDA_FUNCTION_VERSION': '$LATEST', 'AWS_LAMBDA_INITIALIZATION_TYPE': 'on-demand',
        'AWS_LAMBDA_LOG_GROUP_NAME': f'/aws/lambda/{function_name}', 'AWS_LAMBDA_LOG_STREAM_NAME': 'rehearsal',
        'AWS_REGION': region, 'AWS_DEFAULT_REGION': region, 'TZ': ':UTC',
        'AWS_ACCESS_KEY_ID': 'rehearsal', 'AWS_SECRET_ACCESS_KEY': 'rehearsal', 'AWS_SESSION_TOKEN': 'rehearsal',
        'AWS_XRAY_CONTEXT_MISSING': 'LOG_ERROR', 'AWS_XRAY_DAEMON_ADDRESS': f'{xray_host}:{xray_port}',
        '_AWS_XRAY_DAEMON_ADDRESS': xray_host, '_AWS_XRAY_DAEMON_PORT': str(xray_port),
        'AWS_ENDPOINT_URL': endpoint_url,
    }


def docker_run(image: str, name: str, environment: dict[str, str], memory_mb: int, network: str,
               command: list[str] | None = None, extra: list[str] | None = None) -> list[str]:
    """The ``docker run`` line of the function (see the module's docstring) on ``network`` (a
    ``Network``'s name), its embedded DNS forwarding to the container's own loopback only;
    ``command`` replaces the image's CMD (the handler), as the template's ImageConfig.Command does;
    ``extra`` options go before the image (the guard's test overrides the entrypoint there, never
    the rehearsal)."""
    line = ['docker', 'run', '--rm', '--name', name, '--read-only',
            '--tmpfs', f'/tmp:rw,nosuid,nodev,size={EPHEMERAL_MB}m',
            f'--memory={memory_mb}m', f'--memory-swap={memory_mb}m', '--user', NOBODY,
            '--network', network, '--dns', GUARD_DNS,
            '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges']
    for key, value in sorted(environment.items()):
        line += ['--env', f'{key}={value}']
    return line + list(extra or []) + [image] + list(command or [])


GUARD_DNS = '127.0.0.1'   # the container's own loopback: the embedded DNS forwards nowhere else


class Network:
    """A Docker bridge network created ``--internal`` for one run, under a unique name, removed by
    ``close`` (see the module's docstring). ``gateway`` is this host's address on it: what the
    container may reach, and all it may reach."""

    def __init__(self, prefix: str = 'ocr-rehearsal') -> None:
        self.name = f'{prefix}-{uuid.uuid4().hex[:10]}'
        created = subprocess.run(['docker', 'network', 'create', '--internal', '--driver', 'bridge',
                                  '--label', 'platform.rehearsal=1', self.name],
                                 capture_output=True, text=True, timeout=60)
        if created.returncode != 0:
            raise RuntimeError(f'docker network create {self.name}: {created.stderr.strip()}')
        try:
            found = subprocess.run(['docker', 'network', 'inspect', self.name], capture_output=True, text=True,
                                   timeout=60, check=True)
            info = json.loads(found.stdout)[0]
            config = info['IPAM']['Config'][0]
            self.internal = bool(info['Internal'])
            self.subnet = ipaddress.ip_network(config['Subnet'])
            self.gateway = config['Gateway']
            self.bridge = (info.get('Options') or {}).get('com.docker.network.bridge.name') or f"br-{info['Id'][:12]}"
            if not self.internal or ipaddress.ip_address(self.gateway) not in self.subnet:
                raise RuntimeError(f'{self.name} is not an internal network with a gateway: {info}')
            self.isolation_drops()   # the host's rule that drops what leaves the bridge is in place
        except BaseException:
            self.close()
            raise

    def isolation_drops(self) -> int:
        """Packets the host has dropped so far that came in from the bridge for another subnet
        (the DROP rule Docker adds to the FORWARD chain, DOCKER-ISOLATION-STAGE-1, for an internal
        network; Docker 20.10 still gives its containers a default route via the gateway, so a
        packet for any other address reaches this host and stops there). Raises when the rule is
        missing (a daemon run with ``--iptables=false``, or iptables unreadable): no rehearsal
        runs on a network whose guard cannot be seen."""
        listed = subprocess.run(['iptables', '-w', '-S', 'DOCKER-ISOLATION-STAGE-1', '-v'], capture_output=True,
                                text=True, timeout=30)
        for rule in listed.stdout.splitlines():
            words = rule.split()
            if (f'! -d {self.subnet}' in rule and f'-i {self.bridge}' in rule and rule.endswith('-j DROP')
                    and '-c' in words):
                return int(words[words.index('-c') + 1])
        raise RuntimeError(f'no rule drops what leaves {self.bridge} ({self.name}) for another subnet '
                           f'(iptables -S DOCKER-ISOLATION-STAGE-1: {listed.stdout.strip() or listed.stderr.strip()})')

    def close(self) -> None:
        subprocess.run(['docker', 'network', 'rm', self.name], capture_output=True, timeout=60)

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class Forwarder:
    """A TCP relay from ``<host>:<port>`` (``address``) to ``127.0.0.1:<target_port>``: how a
    container on a ``Network`` reaches a loopback service (the moto server). Bounded: at most
    ``max_connections`` at once (more are closed at accept), each closed after ``idle_seconds``
    without traffic; ``close`` stops the listener and every relay and joins their threads."""

    def __init__(self, host: str, target_port: int, *, max_connections: int = 32, idle_seconds: float = 120) -> None:
        self.target = ('127.0.0.1', target_port)
        self.max_connections = max_connections
        self.idle_seconds = idle_seconds
        self.refused = 0
        self._listener = socket.create_server((host, 0))
        self._listener.settimeout(0.2)
        self.address = f'{host}:{self._listener.getsockname()[1]}'
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._relays: set[threading.Thread] = set()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            with self._lock:
                if len(self._relays) >= self.max_connections:
                    self.refused += 1
                    client.close()
                    continue
                relay = threading.Thread(target=self._relay, args=(client,), daemon=True)
                self._relays.add(relay)
            relay.start()

    def _relay(self, client: socket.socket) -> None:
        try:
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                return
            with upstream:
                ends = time.monotonic() + self.idle_seconds
                pair = {client: upstream, upstream: client}
                while not self._stop.is_set() and time.monotonic() < ends:
                    ready, _, _ = select.select(list(pair), [], [], 0.2)
                    for sock in ready:
                        try:
                            data = sock.recv(65536)
                            if data:
                                pair[sock].sendall(data)
                        except OSError:
                            data = b''
                        if not data:
                            return
                        ends = time.monotonic() + self.idle_seconds
        finally:
            client.close()
            with self._lock:
                self._relays.discard(threading.current_thread())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            relays = list(self._relays)
        for relay in relays:
            relay.join(timeout=5)


def peak_memory_bytes(container: str) -> int | None:
    """The container's peak memory so far (cgroup v1 ``memory.max_usage_in_bytes``, v2
    ``memory.peak``), read from the host while it runs; None when neither is found."""
    import subprocess  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415
    found = subprocess.run(['docker', 'inspect', '--format', '{{.Id}}', container], capture_output=True, text=True)
    cid = found.stdout.strip()
    if not cid:
        return None
    for path in (f'/sys/fs/cgroup/memory/docker/{cid}/memory.max_usage_in_bytes',
                 f'/sys/fs/cgroup/system.slice/docker-{cid}.scope/memory.peak',
                 f'/sys/fs/cgroup/docker/{cid}/memory.peak'):
        if Path(path).exists():
            return int(Path(path).read_text().split()[0])
    return None
