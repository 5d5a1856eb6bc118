"""The OCR image run as Lambda runs it, on this machine (issue 47; docs/operations/parsing.md
"The OCR image"). tests/integration/test_ocr_image.py drives it; its figures are in bench/README.md "The OCR image".

* ``RuntimeApi``: a stand-in of the Lambda Runtime API on loopback, the four calls AWS documents
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
  Network: ``--network host``, so the container reaches the stand-in and the moto server, both
  bound on 127.0.0.1. Host networking does not stop a process from dialling out; what keeps every
  packet on this machine is that every address the image is given is a loopback one (the
  endpoint of every AWS client, the Runtime API, the X-Ray daemon) and that nothing in the image
  looks a host name up (``test_ocr_image.py`` checks the environment it passes holds no other
  address). Docker's ``--internal`` bridge networks were the alternative: the stand-ins would then
  bind on the bridge's gateway address instead of loopback.
"""
from __future__ import annotations

import json
import queue
import secrets
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
    """The Runtime API on ``127.0.0.1:<port>`` (``address`` is what AWS_LAMBDA_RUNTIME_API takes)."""

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
                       endpoint_url: str, xray_port: int) -> dict[str, str]:
    """What Lambda itself sets in an image function's environment (beside the template's), with
    the local stand-ins' loopback addresses."""
    return {
        'AWS_LAMBDA_RUNTIME_API': runtime_api, '_HANDLER': handler, 'LAMBDA_TASK_ROOT': '/var/task',
        'AWS_LAMBDA_FUNCTION_NAME': function_name, 'AWS_LAMBDA_FUNCTION_MEMORY_SIZE': str(memory_mb),
        'AWS_LAMBDA_FUNCTION_VERSION': '$LATEST', 'AWS_LAMBDA_INITIALIZATION_TYPE': 'on-demand',
        'AWS_LAMBDA_LOG_GROUP_NAME': f'/aws/lambda/{function_name}', 'AWS_LAMBDA_LOG_STREAM_NAME': 'rehearsal',
        'AWS_REGION': region, 'AWS_DEFAULT_REGION': region, 'TZ': ':UTC',
        'AWS_ACCESS_KEY_ID': 'rehearsal', 'AWS_SECRET_ACCESS_KEY': 'rehearsal', 'AWS_SESSION_TOKEN': 'rehearsal',
        'AWS_XRAY_CONTEXT_MISSING': 'LOG_ERROR', 'AWS_XRAY_DAEMON_ADDRESS': f'127.0.0.1:{xray_port}',
        '_AWS_XRAY_DAEMON_ADDRESS': '127.0.0.1', '_AWS_XRAY_DAEMON_PORT': str(xray_port),
        'AWS_ENDPOINT_URL': endpoint_url,
    }


def docker_run(image: str, name: str, environment: dict[str, str], memory_mb: int,
               command: list[str] | None = None) -> list[str]:
    """The ``docker run`` line of the function (see the module's docstring); ``command`` replaces
    the image's CMD (the handler), as the template's ImageConfig.Command does."""
    line = ['docker', 'run', '--rm', '--name', name, '--read-only',
            '--tmpfs', f'/tmp:rw,nosuid,nodev,size={EPHEMERAL_MB}m',
            f'--memory={memory_mb}m', f'--memory-swap={memory_mb}m', '--user', NOBODY,
            '--network', 'host', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges']
    for key, value in sorted(environment.items()):
        line += ['--env', f'{key}={value}']
    return line + [image] + list(command or [])


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
