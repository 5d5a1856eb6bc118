"""The platform's public Python SDK (``kodexa``) and CLI (``kodexa-cli``), unmodified, against the
real local server (`make run`'s: moto server, bootstrap, HTTP on loopback).

They live in their own virtualenv, ``.venv-sdk``, built by ``make`` from the pinned
requirements-sdk.txt (`make test` builds it first; running this file alone builds it through the
same make target). The SDK session is tests/integration/sdk_session.py, run by that
virtualenv's interpreter; the CLI is that virtualenv's ``kodexa`` with HOME in a temporary
directory (where it keeps its profile). Nothing here sends a packet beyond loopback: the SDK and
CLI are only given the local server's URL, and both run with tests/integration/sdk_guard on their
path, whose sitecustomize lets their sockets reach loopback only (a trip fails the test).
"""
from __future__ import annotations

import os
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.integration.test_local_run import ROOT, _call, server  # noqa: F401 - the fixture

SDK_VENV = ROOT / '.venv-sdk'
STEPS = ('organizations', 'projects', 'project lists', 'products', 'assistants', 'tasks', 'executions',
         'knowledge sets', 'document store', 'project delete')


@pytest.fixture(scope='module')
def sdk_bin() -> Path:
    """The SDK's virtualenv, built (or found up to date) by the Makefile."""
    made = subprocess.run(['make', '--no-print-directory', '.venv-sdk/.installed'], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stdout + made.stderr
    return SDK_VENV / 'bin'


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('AWS_', 'KODEXA', 'PYTHON'))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / '.config'), COLUMNS='200', NO_COLOR='1',
               PYTHONPATH=str(Path(__file__).with_name('sdk_guard')))
    return env


def _untripped(run: subprocess.CompletedProcess) -> None:
    assert 'NETGUARD TRIPPED' not in run.stderr + run.stdout, run.stderr


def test_the_sdk_session(server, sdk_bin, tmp_path):  # noqa: F811 - the fixture
    run = subprocess.run([str(sdk_bin / 'python'), str(Path(__file__).with_name('sdk_session.py')),
                          server['base'], server['key']], capture_output=True, text=True, timeout=300,
                         env=_env(tmp_path), cwd=tmp_path)
    done = [line.split(' ', 2)[1] if line.startswith('ok ') else line for line in run.stdout.splitlines()]
    _untripped(run)
    assert run.returncode == 0, run.stdout + run.stderr
    for step in STEPS:
        assert any(line.startswith(f'ok {step} ') for line in run.stdout.splitlines()), (step, done)
    assert run.stdout.rstrip().endswith('{"done": true}')


def test_the_sdk_reads_writes_and_reprocesses_a_parsed_document(server, sdk_bin, tmp_path):  # noqa: F811
    corpus = ROOT / 'tests' / 'fixtures' / 'documents'
    run = subprocess.run([str(sdk_bin / 'python'), str(Path(__file__).with_name('sdk_documents_session.py')),
                          server['base'], server['key'], str(corpus)], capture_output=True, text=True, timeout=300,
                         env=_env(tmp_path), cwd=tmp_path)
    _untripped(run)
    assert run.returncode == 0, run.stdout + run.stderr
    for step in ('get_document', 'put_document', 'reprocess'):
        assert any(line.startswith(f'ok {step} ') for line in run.stdout.splitlines()), (step, run.stdout)
    assert run.stdout.rstrip().endswith('{"done": true}')


def test_the_guard_of_the_sdk_processes_trips_beyond_loopback(sdk_bin, tmp_path):
    code = ("import socket\n"
            "for attempt in (lambda: socket.create_connection(('example.com', 80), timeout=1),\n"
            "                lambda: socket.socket().connect(('192.0.2.1', 80))):\n"
            "    try:\n        attempt()\n    except OSError as e:\n        print('refused', e)\n")
    run = subprocess.run([str(sdk_bin / 'python'), '-c', code], capture_output=True, text=True, timeout=60,
                         env=_env(tmp_path), cwd=tmp_path)
    assert 'NETGUARD TRIPPED lookup example.com' in run.stderr, run.stderr
    assert 'NETGUARD TRIPPED connect 192.0.2.1:80' in run.stderr, run.stderr
    assert run.stdout.count('refused') == 2


def test_the_cli_logs_in_and_lists(server, sdk_bin, tmp_path):  # noqa: F811 - the fixture
    base, key = server['base'], server['key']
    name = f'cli-project-{uuid.uuid4().hex[:6]}'
    status, _, _ = _call(base, 'POST', '/api/projects', {'name': name}, key)
    assert status == 201

    def kodexa(*args: str) -> str:
        run = subprocess.run([str(sdk_bin / 'kodexa'), *args], capture_output=True, text=True, timeout=120,
                             env=_env(tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL)
        _untripped(run)
        assert run.returncode == 0, run.stdout + run.stderr
        return run.stdout
    assert 'Logged in' in kodexa('login', '--url', base, '--token', key)
    assert list(tmp_path.rglob('.kodexa.json')), 'the CLI kept no profile under HOME'
    orgs = kodexa('get', 'organizations')
    assert 'Listing organizations' in orgs and 'default' in orgs and 'Default' in orgs, orgs
    projects = kodexa('get', 'projects')
    assert 'Listing projects' in projects and name in projects, projects
    # the table shows the embedded organization's name (its organization.name column)
    row = next(line for line in projects.splitlines() if name in line)
    assert 'Default' in row, projects


def test_the_cli_uploads_a_file_into_a_store(server, sdk_bin, tmp_path):  # noqa: F811 - the fixture
    """`kodexa upload <org>/<store> <file>`, then the file read back byte for byte (GET .../fs: a 307
    to the bytes, which urllib follows like the SDK's requests session)."""
    base, key = server['base'], server['key']
    slug = f'cli-files-{uuid.uuid4().hex[:6]}'
    status, _, project = _call(base, 'POST', '/api/projects', {'name': slug}, key)
    assert status == 201
    status, _, store = _call(base, 'POST', '/api/document-stores',
                             {'projectId': project['id'], 'name': 'CLI files', 'slug': slug}, key)
    assert status == 201
    payload = os.urandom(70_000) + b'\x00\r\n\xff end'
    (tmp_path / 'scan-1.pdf').write_bytes(payload)
    home = tmp_path / 'home'
    home.mkdir()
    run = subprocess.run([str(sdk_bin / 'kodexa'), 'upload', f'default/{slug}', 'scan-1.pdf',
                          '--url', base, '--token', key], capture_output=True, text=True, timeout=120,
                         env=_env(home), cwd=tmp_path, stdin=subprocess.DEVNULL)
    _untripped(run)
    assert run.returncode == 0 and 'Successfully uploaded scan-1.pdf' in run.stdout, run.stdout + run.stderr
    request = urllib.request.Request(f'{base}/api/stores/default/{slug}/fs?path=scan-1.pdf',
                                     headers={'x-api-key': key})
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200 and resp.read() == payload
    status, _, page = _call(base, 'GET', f"/api/document-families?filter=documentStoreId=='{store['id']}'",
                            key=key)
    assert status == 200 and [f['path'] for f in page['content']] == ['scan-1.pdf']
