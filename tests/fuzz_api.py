"""`make fuzz`: schemathesis against the local server, driven by the served /v3/api-docs.

Starts the API the way `make run` does (localdev/run.py: its own moto server, bootstrap admin)
on a free loopback port with a known admin key and the rate limits raised out of the way,
then runs schemathesis over every operation of the document with the checks the contract
cares about, and stops the server it started. Exit status: schemathesis's (0 = no finding).

Bounded: FUZZ_MAX_EXAMPLES cases per operation and phase (default 12) and FUZZ_MAX_TIME seconds
in all (default 480); the seed is fixed (FUZZ_SEED) so a CI failure reproduces. Only loopback
traffic. Extra arguments go to `schemathesis run` (e.g. --include-path-regex '^/api/projects').
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ('not_a_server_error,response_schema_conformance,status_code_conformance,'
          'content_type_conformance,response_headers_conformance')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _wait_for(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f'the local server exited with {proc.returncode} before answering')
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    raise SystemExit(f'the local server did not answer {url} within {timeout:.0f} s')


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)  # localdev.run stops its moto server on SIGTERM
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def main(argv: list[str]) -> int:
    port = _free_port()
    key = f'pk_fuzz-{secrets.token_hex(16)}'
    base = f'http://127.0.0.1:{port}'
    work = Path(tempfile.mkdtemp(prefix='fuzz-'))
    env = {**os.environ, 'PORT': str(port), 'PLATFORM_ADMIN_API_KEY': key,
           'RATE_LIMIT_PER_MINUTE': '100000000', 'RATE_LIMIT_BURST_PER_SECOND': '100000000',
           'PYTHONPATH': str(ROOT)}
    for name in ('AWS_ENDPOINT_URL', 'MOTO_PORT'):  # our own moto, never a shared endpoint
        env.pop(name, None)
    server_log = open(work / 'server.log', 'wb')
    server = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=env,
                              stdout=server_log, stderr=subprocess.STDOUT)
    started = time.time()
    try:
        _wait_for(f'{base}/v3/api-docs', server)
        cmd = [
            sys.executable, '-m', 'schemathesis.cli', 'run', f'{base}/v3/api-docs', '--url', base,
            '-H', f'x-api-key: {key}', '--checks', CHECKS,
            '--max-examples', os.environ.get('FUZZ_MAX_EXAMPLES', '12'),
            '--max-time', os.environ.get('FUZZ_MAX_TIME', '480'),
            '--seed', os.environ.get('FUZZ_SEED', '20261'),
            '--workers', os.environ.get('FUZZ_WORKERS', '2'),
            '--phases', os.environ.get('FUZZ_PHASES', 'examples,coverage,fuzzing'),
            '--generation-database', 'none', '--request-timeout', '30',
            '--suppress-health-check', 'too_slow,filter_too_much,data_too_large',
            '--report', 'junit', '--report-dir', str(work),
            '--no-color', *argv,
        ]
        print(f'fuzzing {base} (server log and report in {work})', flush=True)
        status = subprocess.call(cmd, cwd=work, env={k: v for k, v in env.items() if k != 'PORT'})
    finally:
        _stop(server)
        server_log.close()
    print(f'fuzz finished in {time.time() - started:.0f} s with status {status}', flush=True)
    if status == 0 and not os.environ.get('FUZZ_KEEP'):
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
