"""The platform SDK's other paths (chalicelib/kernel/http/aliases.py), one test per alias, each
through the real SDK (``kodexa`` in .venv-sdk, unmodified) against the real local server: the
session tests/integration/sdk_aliases_session.py runs once and reports every alias on its own line.
Left-out SDK paths and why: docs/api/clients.md."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.test_local_run import server  # noqa: F401 - the fixture
from tests.integration.test_sdk_client import SDK_VENV, _env, _untripped

ALIASES = ('extensionPacks-organization-list', 'extensionPacks-by-slug-and-version', 'extensionPacks-by-ref',
           'documentFamilies-get', 'documentFamilies-list', 'documentFamilies-delete',
           'project-assistants-create', 'project-assistants-list', 'project-assistant-update',
           'project-assistant-delete', 'project-documentStores-list', 'project-dataStores-list',
           'project-dataForms-list', 'execution-cancel-put', 'user-memberships')


@pytest.fixture(scope='module')
def sdk_bin() -> Path:
    """The SDK's virtualenv: `make test` builds it first (`make sdk` alone)."""
    python = SDK_VENV / 'bin' / 'python'
    assert python.exists(), f'{python} is missing: build the SDK virtualenv with `make sdk`'
    return SDK_VENV / 'bin'


@pytest.fixture(scope='module')
def session(server, sdk_bin, tmp_path_factory):  # noqa: F811 - the fixture
    home = tmp_path_factory.mktemp('sdk-home')
    run = subprocess.run([str(sdk_bin / 'python'), str(Path(__file__).with_name('sdk_aliases_session.py')),
                          server['base'], server['key']], capture_output=True, text=True, timeout=300,
                         env=_env(home), cwd=home)
    _untripped(run)
    lines = {}
    for line in run.stdout.splitlines():
        verdict, _, rest = line.partition(' ')
        name, _, detail = rest.partition(' ')
        lines[name] = (verdict, detail)
    return run, lines


@pytest.mark.parametrize('alias', ALIASES)
def test_sdk_alias(session, alias):
    run, lines = session
    assert alias in lines, run.stdout + run.stderr[-3000:]
    verdict, detail = lines[alias]
    assert verdict == 'ok', f'{alias}: {detail}\n{run.stderr[-3000:]}'


def test_the_session_tried_every_alias_and_nothing_else(session):
    run, lines = session
    assert set(lines) == set(ALIASES), run.stdout
    assert run.returncode == (0 if all(v == 'ok' for v, _ in lines.values()) else 1)
