"""One `make run` per folder (issue 46 item 9; docs/operations/local-state.md "One server per
folder"): a second `python -m localdev.run` (what `make run` runs, with its environment) on the
folder of a running one is refused with a clear message before it reads, deletes or writes
anything, and what the first acknowledged survives its stop and a restart. The lock dies with
its holders: after a kill -9 the next start waits for the dying run's last save, then serves it.

Real processes on loopback ports; every wait is bounded."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 180
REFUSE_SECONDS = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _env(folder: Path, **extra: str) -> dict[str, str]:
    """`make run`'s environment (Makefile: PYTHONPATH=. FRESH=... python -m localdev.run), its
    files in ``folder``, state kept (the default), on free loopback ports."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('AWS_', 'CHAOS_')) and k not in (
               'PLATFORM_ADMIN_API_KEY', 'LOCAL_PERSIST', 'LOCAL_ADMIN_KEY_FILE', 'FRESH')}
    env.update(PYTHONPATH='.', LOCAL_STATE_DIR=str(folder), PORT=str(_free_port()),
               MOTO_PORT=str(_free_port()), FRESH='')
    env.update(extra)
    return env


class Run:
    def __init__(self, folder: Path, **extra: str) -> None:
        self.env = _env(folder, **extra)
        self.base = f'http://127.0.0.1:{self.env["PORT"]}'
        self.proc = subprocess.Popen([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output: list[str] = []
        timer = threading.Timer(START_SECONDS, self.proc.kill)   # bounded: a hung start is killed
        timer.start()
        try:
            for line in self.proc.stdout:
                self.output.append(line)
                if 'platform API on' in line:
                    break
        finally:
            timer.cancel()
        assert self.proc.poll() is None, 'did not start:\n' + ''.join(self.output)
        threading.Thread(target=lambda: self.output.extend(self.proc.stdout), daemon=True).start()

    def call(self, method: str, path: str, key: str, body: dict | None = None) -> tuple[int, dict | None]:
        req = urllib.request.Request(self.base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={'content-type': 'application/json', 'x-api-key': key})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                payload = resp.read()
                return resp.status, json.loads(payload) if payload else None
        except urllib.error.HTTPError as err:
            payload = err.read()
            return err.code, json.loads(payload) if payload else None

    def stop(self) -> None:
        """Ctrl-C, as a user stops it (the last save included)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            assert self.proc.wait(timeout=90) == 0, ''.join(self.output[-20:])
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=30)


def _refused(folder: Path, **extra: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, '-m', 'localdev.run'], cwd=ROOT, env=_env(folder, **extra),
                              capture_output=True, text=True, timeout=REFUSE_SECONDS)
    except subprocess.TimeoutExpired as exc:   # run() killed it
        raise AssertionError(f'a second server on {folder} was not refused within {REFUSE_SECONDS} s: '
                             f'{(exc.stdout or b"").decode(errors="replace")[-500:]}') from None


def test_a_second_server_on_a_running_ones_folder_is_refused_and_nothing_is_lost(tmp_path):
    folder = tmp_path / 'local'
    first = Run(folder)
    try:
        key = (folder / 'admin-api-key').read_text().strip()
        status, org = first.call('POST', '/api/organizations', key, {'name': 'Acknowledged', 'slug': 'acked'})
        assert status == 201, org

        for extra in ({}, {'FRESH': '1'}):   # FRESH=1 would delete the running server's state
            began = time.monotonic()
            second = _refused(folder, **extra)
            assert second.returncode != 0, second.stdout + second.stderr
            said = second.stdout + second.stderr
            assert 'another `make run`' in said and str(folder) in said, said
            assert f'pid {first.proc.pid}' in said and f'port {first.env["PORT"]}' in said, said
            assert 'LOCAL_STATE_DIR=' in said, said
            assert 'platform API on' not in said and 'FRESH:' not in said, said
            assert time.monotonic() - began < REFUSE_SECONDS
        # the refused runs touched nothing: the first's key and data stand, it still serves
        assert (folder / 'admin-api-key').read_text().strip() == key
        assert first.proc.poll() is None
        status, read = first.call('GET', f'/api/organizations/{org["id"]}', key)
        assert status == 200 and read['slug'] == 'acked', read
    finally:
        first.stop()

    again = Run(folder)
    try:
        assert any('loaded from' in line for line in again.output), ''.join(again.output)
        status, read = again.call('GET', f'/api/organizations/{org["id"]}', key)
        assert status == 200 and read['slug'] == 'acked', read
        status, later = again.call('POST', '/api/organizations', key, {'name': 'Later', 'slug': 'later'})
        assert status == 201, later
    finally:
        # killed, not stopped: its lock goes with it (no stale lock), its moto server saves last
        again.proc.kill()
        again.proc.wait(timeout=30)

    after_kill = Run(folder)
    try:
        for org_id in (org['id'], later['id']):
            status, read = after_kill.call('GET', f'/api/organizations/{org_id}', key)
            assert status == 200, read
    finally:
        after_kill.stop()
