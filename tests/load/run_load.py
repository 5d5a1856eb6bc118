"""`make load`: locust against the local stack on loopback, bounded, then the figures.

Starts `python -m localdev.run` (its own moto server; the contract's rate limits: 100 a minute
and 20 a second per key), creates an organization, a project, three task statuses and 21 users
with their own API keys (20 members + 1 over the limit), runs locust headless
(LOAD_MINUTES=5 minutes, 21 users, spawn 5/s; tests/load/locustfile.py), samples the server's
RSS every 10 s, then prints p50/p99 per route and the RSS growth from minute 1 to the end, runs
the invariant checker, and exits 1 when a member saw any error, the over-limit user saw anything
but 2xx and 429 (or no 429 at all), the RSS grew 10 % or more, or the checker found something.
Loopback only; the server and moto are stopped at the end."""
from __future__ import annotations

import csv
import json
import os
import secrets
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

ROOT = Path(__file__).resolve().parents[2]
MINUTES = float(os.environ.get('LOAD_MINUTES', '5'))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _call(base: str, key: str, method: str, path: str, body=None):
    for _ in range(30):
        req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                     headers={'x-api-key': key, 'content-type': 'application/json'})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw = r.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as err:
            if err.code not in (429, 503):
                raise SystemExit(f'set-up {method} {path}: {err.code} {err.read()[:300]!r}') from None
            time.sleep(1.0)
    raise SystemExit(f'set-up {method} {path}: still refused')


def _rss_kb(pid: int) -> int:
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
    return 0


def main() -> int:
    port, moto_port = _free_port(), _free_port()
    base, moto = f'http://127.0.0.1:{port}', f'http://127.0.0.1:{moto_port}'
    admin = f'pk_load-{secrets.token_hex(16)}'
    work = Path(tempfile.mkdtemp(prefix='load-'))
    env = {k: v for k, v in os.environ.items() if not k.startswith(('AWS_', 'CHAOS_', 'RATE_LIMIT_'))}
    env.update(PORT=str(port), MOTO_PORT=str(moto_port), PLATFORM_ADMIN_API_KEY=admin, PYTHONPATH=str(ROOT),
               LOCAL_STATE_DIR=str(work), LOCAL_PERSIST='off', AWS_ACCESS_KEY_ID='local', AWS_SECRET_ACCESS_KEY='local',
               AWS_DEFAULT_REGION='us-east-1', TABLE_NAME='platform-load')
    log = open(work / 'server.log', 'w')
    server = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    for line in server.stdout:
        log.write(line)
        if 'platform API on' in line:
            break
    threading.Thread(target=lambda: [log.write(x) for x in server.stdout], daemon=True).start()
    try:
        return _run(base, moto, admin, work, env, server)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def _run(base, moto, admin, work, env, server) -> int:
    os.environ.update({k: env[k] for k in ('AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_DEFAULT_REGION',
                                           'TABLE_NAME')}, AWS_ENDPOINT_URL=moto)
    from chalicelib.features.identity.service import create_api_key
    org = _call(base, admin, 'POST', '/api/organizations', {'name': 'Load', 'slug': f'load-{secrets.token_hex(3)}'})
    project = _call(base, admin, 'POST', '/api/projects', {'name': 'Load', 'organizationId': org['id']})
    for i in range(3):
        _call(base, admin, 'POST', '/api/task-statuses',
              {'organizationId': org['id'], 'label': f'S{i}', 'slug': f's{i}'})
    keys = []
    for i in range(21):
        email = f'load{i}-{secrets.token_hex(3)}@example.com'
        user = _call(base, admin, 'POST', '/api/users', {'email': email})
        _call(base, admin, 'POST', '/api/memberships', {'organizationId': org['id'], 'userId': user['id'],
                                                        'role': 'MEMBER'})
        keys.append(create_api_key(user['id'], email, 'load')['key'])
    setup = work / 'setup.json'
    setup.write_text(json.dumps({'projectId': project['id'], 'memberKeys': keys[:20], 'overKey': keys[20]}))

    rss: list[tuple[float, int]] = []
    started = time.monotonic()
    stop = threading.Event()

    def sample():
        while not stop.wait(10):
            rss.append((time.monotonic() - started, _rss_kb(server.pid)))
    threading.Thread(target=sample, daemon=True).start()
    cmd = [sys.executable, '-m', 'locust', '-f', str(ROOT / 'tests/load/locustfile.py'), '--headless',
           '-u', '21', '-r', '5', '-t', f'{int(MINUTES * 60)}s', '--host', base, '--csv', str(work / 'stats'),
           '--only-summary', '--stop-timeout', '10']
    locust_env = {**os.environ, 'LOAD_SETUP': str(setup), 'LOAD_OVER_OUT': str(work / 'over.json')}
    done = subprocess.run(cmd, cwd=ROOT, env=locust_env, capture_output=True, text=True)
    stop.set()
    (work / 'locust.log').write_text(done.stdout + done.stderr)

    rows = list(csv.DictReader(open(work / 'stats_stats.csv')))
    print(f'\nlocust: {MINUTES:g} min, 20 members + 1 over the limit, loopback ({base}); files in {work}')
    print(f"{'route':<34}{'requests':>9}{'failures':>9}{'p50 ms':>8}{'p99 ms':>8}{'req/s':>7}")
    for row in rows:
        print(f"{row['Name']:<34}{row['Request Count']:>9}{row['Failure Count']:>9}{row['50%']:>8}{row['99%']:>8}"
              f"{float(row['Requests/s']):>7.2f}")
    member_failures = sum(int(r['Failure Count']) for r in rows
                          if r['Name'] != 'Aggregated' and not r['Name'].startswith('over-limit'))
    over = json.loads((work / 'over.json').read_text()) if (work / 'over.json').exists() else {}
    over_failures = over.get('other', 0) + sum(int(r['Failure Count']) for r in rows
                                               if r['Name'].startswith('over-limit'))
    over_429 = over.get('429', 0)
    first = [kb for t, kb in rss if 50 <= t <= 70] or [kb for _, kb in rss[:1]]
    last = [kb for _, kb in rss[-2:]]
    growth = (max(last) - first[0]) / first[0] * 100 if first and last else float('nan')
    print(f'server RSS: minute 1 {first[0] / 1024:.1f} MiB -> end {max(last) / 1024:.1f} MiB ({growth:+.1f} %)'
          if first and last else 'server RSS: not sampled')
    print(f"member errors: {member_failures}; over-limit user: {over.get('ok', 0)} x 2xx, {over_429} x 429 "
          f'(counted as expected), {over_failures} other errors')
    check = subprocess.run([sys.executable, '-m', 'chalicelib.ops.check_table'], cwd=ROOT,
                           env={**env, 'AWS_ENDPOINT_URL': moto}, capture_output=True, text=True, timeout=600)
    print(check.stdout.strip().splitlines()[-1] if check.stdout.strip() else check.stderr[-500:])
    ok = member_failures == 0 and over_failures == 0 and over_429 > 0 and growth < 10 and check.returncode == 0
    print('load: PASS' if ok else 'load: FAIL')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
