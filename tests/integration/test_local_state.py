"""`make run` keeps its data across a restart, as a new user meets it: the repository cloned into a
temporary folder, `make run` there, records created, Ctrl-C, `make run` again, the records read
back with the same admin key; `make run FRESH=1` then starts empty, and the old key's 401 says
where the local key is (docs/operations/local-state.md).

The clone reuses this checkout's virtualenv: `.venv` is a symlink to it, and the clone's
requirements files are dated before its `.installed` stamp, so make sees an installed venv and
no pip runs (the stamp itself is not touched)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _call(base: str, method: str, path: str, key: str, body: dict | None = None) -> tuple[int, dict | None]:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body is not None else None,
                                 method=method, headers={'content-type': 'application/json', 'x-api-key': key})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            payload = resp.read()
            return resp.status, json.loads(payload) if payload else None
    except urllib.error.HTTPError as err:
        payload = err.read()
        return err.code, json.loads(payload) if payload else None


@pytest.fixture(scope='module')
def clone(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp('clone') / 'platform'
    subprocess.run(['git', 'clone', '--quiet', str(ROOT), str(where)], check=True, timeout=60)
    venv = (ROOT / '.venv').resolve()
    (where / '.venv').symlink_to(venv)
    stamp = (venv / '.installed').stat().st_mtime
    # every prerequisite of the venv stamp (the Makefile's $(STAMP) rule)
    for name in ('requirements.txt', 'requirements-dev.txt', 'infra/ocr/requirements.txt'):
        os.utime(where / name, (stamp - 60, stamp - 60))
    return where


class MakeRun:
    """`make run` in the clone, in its own process group (Ctrl-C goes to make and the server)."""

    def __init__(self, clone: Path, **env: str) -> None:
        self.port = _free_port()
        self.base = f'http://127.0.0.1:{self.port}'
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(('AWS_', 'CHAOS_')) and k not in (
                     'LOCAL_STATE_DIR', 'PLATFORM_ADMIN_API_KEY', 'MOTO_PORT', 'FRESH', 'LOCAL_PERSIST',
                     'PYTHONPATH', 'LOCAL_ADMIN_KEY_FILE', 'MAKEFLAGS', 'MFLAGS')}
        clean.update(PORT=str(self.port), **env)
        self.started = time.monotonic()
        self.proc = subprocess.Popen(['make', '--no-print-directory', 'run'], cwd=clone, env=clean,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.output: list[str] = []
        for line in self.proc.stdout:
            self.output.append(line)
            if 'platform API on' in line:
                break
        assert self.proc.poll() is None, 'make run exited during start-up:\n' + ''.join(self.output)
        self.ready = time.monotonic() - self.started
        threading.Thread(target=lambda: self.output.extend(self.proc.stdout), daemon=True).start()

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            assert self.proc.wait(timeout=90) is not None
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)


def test_make_run_from_a_clone_keeps_records_and_key_across_a_restart(clone):
    first = MakeRun(clone)
    try:
        key_file = clone / '.local' / 'admin-api-key'
        key = key_file.read_text().strip()
        status, org = _call(first.base, 'POST', '/api/organizations', key, {'name': 'Kept', 'slug': 'kept'})
        assert status == 201, org
        status, project = _call(first.base, 'POST', '/api/projects', key,
                                {'name': 'Survives', 'organizationId': org['id']})
        assert status == 201, project
        status, changed = _call(first.base, 'PUT', f'/api/projects/{project["id"]}', key,
                                {'description': 'changed before the stop', 'changeSequence': 1})
        assert status == 200, changed
    finally:
        first.stop()
    # make echoes its recipes: no venv built, no pip run (the clone took the installed one)
    assert not any('pip' in line or '-m venv' in line for line in first.output), ''.join(first.output)
    assert (clone / '.local' / 'moto-state.pickle').exists()

    second = MakeRun(clone)
    try:
        assert key_file.read_text().strip() == key, 'the admin key changed across the restart'
        assert any('loaded from' in line for line in second.output), ''.join(second.output)
        saved = clone / '.local' / 'moto-state.pickle'
        before = saved.stat().st_mtime_ns
        time.sleep(2.5)   # past the saver's period: the start changed nothing, so nothing was saved
        assert saved.stat().st_mtime_ns == before, 'the start rewrote the saved state'
        status, read = _call(second.base, 'GET', f'/api/projects/{project["id"]}', key)
        assert status == 200, read
        assert (read['name'], read['description'], read['changeSequence']) == (
            'Survives', 'changed before the stop', 2)
        status, page = _call(second.base, 'GET', "/api/organizations?filter=slug=='kept'", key)
        assert status == 200 and [o['id'] for o in page['content']] == [org['id']]
        # the restarted store takes writes too: its unique keys and counters came back whole
        status, again = _call(second.base, 'POST', '/api/organizations', key, {'name': 'Dup', 'slug': 'kept'})
        assert status == 409, again
        status, more = _call(second.base, 'POST', '/api/projects', key, {'name': 'After', 'organizationId': org['id']})
        assert status == 201, more
        deadline = time.monotonic() + 30
        while saved.stat().st_mtime_ns == before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert saved.stat().st_mtime_ns != before, 'a write was not saved while serving'
    finally:
        second.stop()

    fresh = MakeRun(clone, FRESH='1')
    try:
        new_key = key_file.read_text().strip()
        assert new_key != key
        status, refused = _call(fresh.base, 'GET', f'/api/projects/{project["id"]}', key)
        assert status == 401, refused
        assert str(key_file) in refused['message'] and 'FRESH=1' in refused['message']
        assert 'POST /api/account/me/api-keys' in refused['message']
        status, page = _call(fresh.base, 'GET', "/api/organizations?filter=slug=='kept'", new_key)
        assert status == 200 and page['content'] == []
    finally:
        fresh.stop()
