"""`make fuzz`: schemathesis against the local server, driven by the served /v3/api-docs.

Starts the API the way `make run` does (localdev/run.py: its own moto server, bootstrap admin)
on a free loopback port with a known admin key and the rate limits raised out of the way, runs
schemathesis over every operation of the document with the checks the contract cares about,
and stops the server it started. Exit status: schemathesis's (0 = no finding), 1 when the
run overran its budget.

Bounded by case counts, not by time: the coverage phase (every documented boundary and
violation once), FUZZ_MAX_EXAMPLES random cases per operation (default 15), FUZZ_STATEFUL_EXAMPLES
stateful runs (default 80) along the document's links (create -> get/update/delete); the seed is fixed (FUZZ_SEED) so a
CI failure reproduces. FUZZ_TIMEOUT (default 600 s) stops a run that overruns. Loopback only.
Operations that call out (the service bridge proxy and agent tool call) are excluded: generated
bridges would name hosts beyond this machine. Extra arguments go to `schemathesis run`, e.g.
--include-path-regex '^/api/projects'.
Reports (JUnit) and the server log stay in the printed directory when the run fails.

The fuzzer rotates FUZZ_ROTATE_KEYS (default 40) API keys of its one user, a key per call
(tests/fuzz_hooks.py), as a client with many keys would: every minute of the run counts dozens of
credentials of one user (issue 27: the old rate counters on the user's ACL item failed their
minute's cleanup that way, 503 for every request). The run fails when fewer keys were used or
when it did not cross a minute boundary.

Under chaos (`make fuzz-chaos`: CHAOS_RATE, default 0.1 there, of the DynamoDB/S3/SQS calls of
the server's own moto fail or stall, docs/operations/chaos-runs.md), schemathesis's
``not_a_server_error`` gives way to ``no_500`` (tests/fuzz_hooks.py): a 503 with Retry-After
and the error body is the documented answer to a fault, anything else 5xx is a finding. After
the run, chaos is switched off and the invariant checker (`chalicelib.ops.check_table`) must
find nothing; the chaos counters and the checker's report are printed.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINE = 2000
CHECKS = ('not_a_server_error,response_schema_conformance,status_code_conformance,'
          'content_type_conformance,response_headers_conformance')
# Operations that call a URL a client chose (service bridges): with generated bridges they would
# look up and connect to hosts beyond this machine. tests/api/test_bridges_*.py cover them under a
# network guard instead.
OUTBOUND = r'/proxy(/|$)|/agent-tools/call$'

# The coverage phase sends each documented boundary and violation once; its "unexpected
# methods" (TRACE, PATCH, ... on every path) are left out: the server's 405 for a method a
# path does not have is not part of the document.
CONFIG = """
[phases.coverage]
unexpected-methods = []

[phases.stateful]
max-steps = 12

[phases.stateful.generation]
max-examples = {stateful_examples}
"""
# the stateful phase's scenarios (``FUZZ_STATEFUL_EXAMPLES``): 80 in `make fuzz`; the run inside
# `make test` takes fewer (tests/integration/test_fuzz_run.py)
STATEFUL_EXAMPLES = 80


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _get(url: str, key: str | None = None, timeout: float = 5):
    request = urllib.request.Request(url, headers={'x-api-key': key} if key else {})
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return json.loads(r.read())


def _wait_for(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f'the local server exited with {proc.returncode} before answering')
        try:
            _get(url, timeout=2)
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            time.sleep(0.2)
    raise SystemExit(f'the local server did not answer {url} within {timeout:.0f} s')


def _protected_ids(base: str, key: str) -> list[str]:
    """The fuzzer's own identity: its user, memberships, API keys and home organization."""
    me = _get(f'{base}/api/account/me', key)
    ids = {me['id'], *(m['organizationId'] for m in me.get('memberships', []))}
    ids.update(k['id'] for k in _get(f'{base}/api/account/me/api-keys', key))
    page = _get(f'{base}/api/memberships?pageSize=100', key)
    ids.update(m['id'] for m in page['content'] if m.get('userId') == me['id'])
    return sorted(i.lower() for i in ids)


def _make_keys(base: str, key: str, n: int) -> list[str]:
    """``n`` more API keys of the fuzzer's user (the bootstrap admin)."""
    keys = []
    for i in range(n):
        request = urllib.request.Request(f'{base}/api/account/me/api-keys', method='POST',
                                         data=json.dumps({'name': f'fuzz-rotation-{i}'}).encode(),
                                         headers={'x-api-key': key, 'content-type': 'application/json'})
        with urllib.request.urlopen(request, timeout=10) as r:
            keys.append(json.loads(r.read())['key'])
    return keys


def _rotation_problem(log: Path, wanted: int, started: float, ended: float) -> str | None:
    """Why the key rotation did not happen as the run promises (None: it did)."""
    try:
        used = json.loads(log.read_text())
    except (OSError, ValueError):
        return f'no record of the keys the fuzzer used ({log})'
    print(f"key rotation: {used['calls']} calls over {len(used['keys'])} keys, "
          f'{int(started // 60)}..{int(ended // 60)} (epoch minutes)', flush=True)
    if len(used['keys']) < wanted:
        return f"only {len(used['keys'])} of {wanted} keys were used"
    if int(started // 60) == int(ended // 60):
        return 'the run did not cross a minute boundary'
    return None


def _overrun(proc: subprocess.Popen, budget: float) -> None:
    print(f'fuzz run overran its {budget:.0f} s budget (FUZZ_TIMEOUT): stopping it', flush=True)
    proc.overran = True
    _stop(proc, signal.SIGINT)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(sig)  # localdev.run stops its moto server on SIGTERM
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def _chaos_rate() -> float:
    try:
        return float(os.environ.get('CHAOS_RATE') or 0)
    except ValueError:
        return 0.0


def _retrying(call, attempts: int = 20):
    """A set-up read under chaos may meet a 503: try again (bounded)."""
    for attempt in range(attempts):
        try:
            return call()
        except urllib.error.HTTPError as err:
            if err.code != 503 or attempt == attempts - 1:
                raise
        except (TimeoutError, urllib.error.URLError):   # a slow fault outlasted the read timeout
            if attempt == attempts - 1:
                raise
        time.sleep(0.5)


def _after_chaos(moto_url: str, env: dict[str, str]) -> int:
    """Chaos off, its counters printed, then the invariant checker: its exit status."""
    from localdev import chaos
    state = chaos.remote_state(moto_url)
    chaos.remote_configure(moto_url, rate=0)
    per_service = ', '.join(f"{svc} {c['injected']}/{c['calls']} {c.get('kinds', {})}"
                            for svc, c in state['byService'].items())
    print(f"chaos: {state['calls']} AWS calls, {state['injected']} faults injected: {per_service}", flush=True)
    check_env = {**env, 'AWS_ENDPOINT_URL': moto_url}
    # LOCAL_WORKERS=off: nothing publishes the outbox or starts an activity, so those two checks
    # would only measure how long the run took
    done = subprocess.run([sys.executable, '-m', 'chalicelib.ops.check_table',
                           '--skip', 'outbox-published,activities-stuck'], cwd=ROOT, env=check_env,
                          capture_output=True, text=True, timeout=600)
    print(done.stdout + done.stderr, flush=True)
    return done.returncode


def main(argv: list[str]) -> int:
    port = _free_port()
    chaos_rate = _chaos_rate()
    moto_port = _free_port()
    key = f'pk_fuzz-{secrets.token_hex(16)}'
    base = f'http://127.0.0.1:{port}'
    work = Path(tempfile.mkdtemp(prefix='fuzz-'))
    budget = float(os.environ.get('FUZZ_TIMEOUT', '600'))
    env = {**os.environ, 'PORT': str(port), 'PLATFORM_ADMIN_API_KEY': key,
           'RATE_LIMIT_PER_MINUTE': '100000000', 'RATE_LIMIT_BURST_PER_SECOND': '100000000',
           'PYTHONPATH': str(ROOT), 'LOCAL_STATE_DIR': str(work), 'LOCAL_PERSIST': 'off',   # never .local/'s data
           # no worker or scheduler: a generated plan's BRIDGE_CALL step would call out (docs/api/work.md)
           'LOCAL_WORKERS': 'off'}
    for name in ('AWS_ENDPOINT_URL', 'MOTO_PORT'):  # our own moto, never a shared endpoint
        env.pop(name, None)
    env['MOTO_PORT'] = str(moto_port)   # a fresh port of our own: the chaos switch and the checker reach it
    env.setdefault('AWS_ACCESS_KEY_ID', 'local')
    env.setdefault('AWS_SECRET_ACCESS_KEY', 'local')
    server_log = open(work / 'server.log', 'wb')
    server = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=env,
                              stdout=server_log, stderr=subprocess.STDOUT)
    started = time.time()
    status = 1
    try:
        _wait_for(f'{base}/v3/api-docs', server, timeout=120 if chaos_rate else 60)
        config = work / 'schemathesis.toml'
        config.write_text(CONFIG.format(stateful_examples=int(os.environ.get('FUZZ_STATEFUL_EXAMPLES',
                                                                         STATEFUL_EXAMPLES))))
        rotate = int(os.environ.get('FUZZ_ROTATE_KEYS', '40'))
        keys = _retrying(lambda: _make_keys(base, key, rotate)) if rotate else []
        auth = [] if keys else ['-H', f'x-api-key: {key}']   # rotated by the hooks otherwise
        cmd = [
            sys.executable, '-m', 'schemathesis.cli', '--config-file', str(config), 'run',
            f'{base}/v3/api-docs', '--url', base, *auth,
            '--checks', CHECKS.replace('not_a_server_error', 'no_500') if chaos_rate else CHECKS,
            '--max-examples', os.environ.get('FUZZ_MAX_EXAMPLES', '15'),
            '--seed', os.environ.get('FUZZ_SEED', '20261'),
            '--workers', os.environ.get('FUZZ_WORKERS', '2'),
            '--phases', os.environ.get('FUZZ_PHASES', 'fuzzing,stateful'),
            '--generation-database', 'none', '--request-timeout', '30',
            '--suppress-health-check', 'too_slow,filter_too_much,data_too_large',
            '--exclude-path-regex', OUTBOUND,
            '--report', 'junit', '--report-dir', str(work), '--output-truncate', 'true',
            '--no-color', *argv,
        ]
        fuzz_env = {k: v for k, v in env.items() if k != 'PORT'}
        fuzz_env.update(SCHEMATHESIS_HOOKS='tests.fuzz_hooks',
                        FUZZ_PROTECTED_IDS=','.join(_retrying(lambda: _protected_ids(base, key))),
                        FUZZ_KEYS=','.join(keys), FUZZ_KEY_LOG=str(work / 'keys-used.json'))
        fuzz_started = time.time()
        print(f'fuzzing {base} (server log and report in {work})', flush=True)
        fuzzer = subprocess.Popen(cmd, cwd=work, env=fuzz_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        timer = threading.Timer(max(1.0, budget - (time.time() - started)), _overrun, (fuzzer, budget))
        timer.start()
        try:
            for raw in fuzzer.stdout:  # generated bodies can be megabytes: keep the log readable
                line = raw.decode('utf-8', 'replace').rstrip('\n')
                print(line if len(line) <= MAX_LINE else f'{line[:MAX_LINE]} ... [{len(line)} chars]', flush=True)
            status = fuzzer.wait()
        finally:
            timer.cancel()
        if getattr(fuzzer, 'overran', False):
            status = 1
        problem = _rotation_problem(work / 'keys-used.json', rotate, fuzz_started, time.time()) if keys else None
        if problem:
            print(f'key rotation: {problem}', flush=True)
            status = status or 1
        if chaos_rate and server.poll() is None:
            checked = _after_chaos(f'http://127.0.0.1:{moto_port}', env)
            status = status or checked
    finally:
        _stop(server)
        server_log.close()
    print(f'fuzz finished in {time.time() - started:.0f} s with status {status}', flush=True)
    if status == 0 and not os.environ.get('FUZZ_KEEP'):
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
