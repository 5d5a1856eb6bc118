"""The real local stack for reliability tests: `python -m localdev.run` (its own moto server,
bootstrap admin, the threaded HTTP server) in a child process on loopback, driven by many
threads at once, with the chaos switch of its moto server and the table's invariant checker.

``LiveStack.check()`` runs ``python -m chalicelib.ops.check_table`` against the stack's moto
server in a child process (the operator's command, as `make check-data` runs it) and returns
(exit code, report)."""
from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any

    def __repr__(self) -> str:
        return f'Answer({self.status}, {str(self.body)[:300]})'


class LiveStack:
    def __init__(self, state_dir: Path, **env: str) -> None:
        self.port, self.moto_port = free_port(), free_port()
        self.moto_url = f'http://127.0.0.1:{self.moto_port}'
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(('AWS_', 'CHAOS_'))}
        # no saved state unless asked (LOCAL_PERSIST='on'): a save holds the moto server's
        # request lock, which would skew what these runs measure (docs/operations/local-state.md)
        base_env.update(PORT=str(self.port), MOTO_PORT=str(self.moto_port), PYTHONPATH=str(ROOT),
                        LOCAL_STATE_DIR=str(state_dir),
                        RATE_LIMIT_PER_MINUTE='1000000', RATE_LIMIT_BURST_PER_SECOND='1000000',
                        **{'LOCAL_PERSIST': 'off', 'TABLE_NAME': 'platform-live', **env})
        self.env = base_env
        self.output: list[str] = []
        self.proc = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=base_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.key = None
        for line in self.proc.stdout:
            self.output.append(line)
            if 'admin API key' in line:
                self.key = line.rsplit(' ', 1)[-1].strip()
            if 'platform API on' in line:
                break
        if self.proc.poll() is not None:
            raise RuntimeError('local stack did not start:\n' + ''.join(self.output[-30:]))
        threading.Thread(target=lambda: self.output.extend(self.proc.stdout), daemon=True).start()
        self._local = threading.local()

    # ------------------------------------------------------------------ HTTP
    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, 'conn', None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=120)
        return conn

    def call(self, method: str, path: str, body: Any = None, key: str | None = '__admin__',
             raw: bytes | None = None, content_type: str = 'application/json') -> Answer:
        headers = {'content-type': content_type}
        key = self.key if key == '__admin__' else key
        if key:
            headers['x-api-key'] = key
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        for attempt in range(2):   # a keep-alive connection the server closed: reconnect once
            conn = self._conn()
            try:
                conn.request(method, path, body=payload, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        text = raw.decode() if raw else ''
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, parsed)

    def get(self, path: str, **kw: Any) -> Answer:
        return self.call('GET', path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Answer:
        return self.call('POST', path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> Answer:
        return self.call('PUT', path, body, **kw)

    def delete(self, path: str, **kw: Any) -> Answer:
        return self.call('DELETE', path, **kw)

    def created(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.post(path, body)
        assert answer.status == 201, answer
        return answer.body

    # ------------------------------------------------------------------ concurrency
    def burst(self, calls: list[Callable[[], Answer]], threads: int | None = None) -> list[Answer]:
        """Run ``calls`` at once: each on its own thread, released together by a barrier."""
        n = threads or len(calls)
        barrier = threading.Barrier(min(n, len(calls)))

        def run(call: Callable[[], Answer]) -> Answer:
            try:
                barrier.wait(timeout=30)
            except threading.BrokenBarrierError:
                pass
            return call()
        with ThreadPoolExecutor(max_workers=n) as pool:
            return list(pool.map(run, calls))

    # ------------------------------------------------------------------ chaos and invariants
    def chaos(self, **settings: Any) -> dict[str, Any]:
        from localdev import chaos
        chaos.remote_configure(self.moto_url, **settings)
        return chaos.remote_reset(self.moto_url)

    def chaos_state(self) -> dict[str, Any]:
        from localdev import chaos
        return chaos.remote_state(self.moto_url)

    def check(self, *args: str) -> tuple[int, str]:
        env = {**self.env, 'AWS_ENDPOINT_URL': self.moto_url, 'AWS_ACCESS_KEY_ID': 'local',
               'AWS_SECRET_ACCESS_KEY': 'local', 'AWS_DEFAULT_REGION': 'us-east-1'}
        done = subprocess.run([sys.executable, '-m', 'chalicelib.ops.check_table', *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        return done.returncode, done.stdout + done.stderr

    def published(self, timeout: float = 300) -> float:
        """Wait until the outbox poller has published (and recorded) every event written so far,
        as the checker's ``outbox-published`` with no grace period sees it: the seconds it took.
        Under chaos the one poller falls behind (each of its writes meets the faults too), and a
        checker reading while it catches up sees records without their counter moves."""
        began = time.monotonic()
        while True:
            code, report = self.check('--only', 'outbox-published', '--outbox-minutes', '0', '--settle-seconds', '0')
            if code == 0:
                return time.monotonic() - began
            assert time.monotonic() - began < timeout, report[-2000:]
            time.sleep(2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.keep_log()

    def keep_log(self) -> Path:
        """The server's whole output kept as a test artifact (``.local/artifacts/live/<state dir
        name>.log``): what a failed run on CI leaves to read (its API key lines left out)."""
        folder = ROOT / '.local' / 'artifacts' / 'live'
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f'{Path(self.env["LOCAL_STATE_DIR"]).name}.log'
        path.write_text(''.join(line for line in list(self.output) if 'API key' not in line))
        return path
