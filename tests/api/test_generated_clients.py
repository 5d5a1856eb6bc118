"""Clients people generate from GET /v3/api-docs work without an edit (docs/api/clients.md).

* Python: openapi-python-client (pinned in requirements-dev.txt) generates a client from the
  served document with no warning; a flow runs through its typed functions only, against the
  in-process app (chalice's test client behind an httpx transport): list with a filter, create,
  get, update with changeSequence, a stale update's 409 parsed as ConflictError, setTaskStatus,
  a view=summary page, delete.
* TypeScript: openapi-typescript (tests/clients/ts/package.json, package-lock.json; `npm ci`
  when node_modules is missing) generates types from the same document and `tsc --noEmit`
  compiles tests/clients/ts/usage.ts, which lists, creates and updates through openapi-fetch's
  typed calls; a file that misuses a page's items must not compile.
"""
from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_KEY

pytestmark = pytest.mark.slow   # minutes of CPU: `make test` runs it, the quick loop (`make check`) does not

ROOT = Path(__file__).resolve().parents[2]
TS = ROOT / 'tests' / 'clients' / 'ts'
PACKAGE = 'platform_api_client'


def _served_document(api, path: Path) -> Path:
    r = api.get('/v3/api-docs', key=None, headers={'Host': 'platform.test'})
    assert r.status == 200
    path.write_bytes(r.body)
    return path


class _ChaliceTransport(httpx.BaseTransport):
    """An httpx transport that hands each request to chalice's in-process test client."""

    def __init__(self, client) -> None:
        self.client = client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode('ascii')
        headers = {k.decode('latin-1'): v.decode('latin-1') for k, v in request.headers.raw}
        resp = self.client.http.request(request.method, path, headers=headers, body=request.read() or None)
        return httpx.Response(resp.status_code, headers=resp.headers, content=resp.body)


@pytest.fixture
def generated(api, tmp_path):
    """The Python client generated from the served document, imported as ``platform_api_client``."""
    doc = _served_document(api, tmp_path / 'api-docs.json')
    config = tmp_path / 'generator.yaml'
    config.write_text('post_hooks: []\n')   # no formatter run: the generated code is used, not read
    generator = Path(sys.executable).parent / 'openapi-python-client'
    run = subprocess.run([str(generator), 'generate', '--path', str(doc), '--output-path',
                          str(tmp_path / PACKAGE), '--meta', 'none', '--config', str(config)],
                         capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert 'warning' not in output.lower(), output     # every operation and schema generated
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + '.')]:
            del sys.modules[name]


def test_python_client_generated_from_the_document_drives_a_flow_through_typed_calls(generated, client):
    c = generated
    api_mod = f'{PACKAGE}.api'
    projects = {n: importlib.import_module(f'{api_mod}.projects.{n}') for n in
                ('list_projects', 'create_project', 'get_project', 'update_project', 'delete_project')}
    tasks = {n: importlib.import_module(f'{api_mod}.tasks.{n}') for n in
             ('create_task', 'set_task_status', 'list_tasks', 'delete_task')}
    create_status = importlib.import_module(f'{api_mod}.task_statuses.create_task_status')
    models = importlib.import_module(f'{PACKAGE}.models')
    unset = importlib.import_module(f'{PACKAGE}.types').UNSET
    http = c.Client(base_url='http://platform.test', headers={'x-api-key': ADMIN_KEY},
                    httpx_args={'transport': _ChaliceTransport(client)}, raise_on_unexpected_status=True)

    # list with a filter: a ProjectPage whose content is typed Project (was: every list typed Activity)
    name_filter = ["name == 'typed-client'"]
    empty = projects['list_projects'].sync_detailed(client=http, filter_=name_filter)
    assert empty.status_code == 200 and isinstance(empty.parsed, models.ProjectPage)
    assert empty.parsed.content == [] and empty.parsed.total_elements == 0

    made = projects['create_project'].sync_detailed(
        client=http, body=models.ProjectCreateRequest(name='typed-client', description='from a generated client'))
    assert made.status_code == 201 and isinstance(made.parsed, models.Project), made.content
    project = made.parsed
    projects['create_project'].sync(client=http, body=models.ProjectCreateRequest(name='someone-else'))

    page = projects['list_projects'].sync(client=http, filter_=name_filter, page_size=5)
    assert isinstance(page, models.ProjectPage)
    assert [type(p) for p in page.content] == [models.Project]
    assert page.content[0].id == project.id and page.content[0].name == 'typed-client'
    assert (page.total_elements, page.number_of_elements, page.first, page.last) == (1, 1, True, True)

    got = projects['get_project'].sync(project.id, client=http)
    assert isinstance(got, models.Project) and got.description == 'from a generated client'

    updated = projects['update_project'].sync(project.id, client=http, body=models.ProjectUpdateRequest(
        description='updated', change_sequence=got.change_sequence))
    assert isinstance(updated, models.Project)
    assert updated.description == 'updated' and updated.change_sequence == got.change_sequence + 1

    stale = projects['update_project'].sync_detailed(project.id, client=http, body=models.ProjectUpdateRequest(
        description='lost update', change_sequence=got.change_sequence))
    assert stale.status_code == 409
    assert isinstance(stale.parsed, models.ConflictError)     # the declared error model, parsed
    assert stale.parsed.status == 409 and stale.parsed.change_sequence == updated.change_sequence
    assert stale.parsed.error and stale.parsed.message

    # setTaskStatus on a task of the project, and a view=summary page typed as TaskPage
    status = create_status.sync(client=http, body=models.TaskStatusCreateRequest(
        slug='review', label='Review', status_type=models.TaskStatusType.IN_PROGRESS))
    assert isinstance(status, models.TaskStatus)
    task = tasks['create_task'].sync(client=http, body=models.TaskCreateRequest(
        project_id=project.id, title='check it', plan=models.TaskCreateRequestPlanType0.from_dict({'steps': 3})))
    assert isinstance(task, models.Task)
    moved = tasks['set_task_status'].sync(task.id, client=http, body=models.TaskStatusChange(
        status_slug='review', change_sequence=task.change_sequence))
    assert isinstance(moved, models.Task) and moved.status_slug == 'review'
    full = tasks['list_tasks'].sync(client=http, filter_=[f"projectId == '{project.id}'"])
    summary = tasks['list_tasks'].sync(client=http, filter_=[f"projectId == '{project.id}'"],
                                       view=models.ListTasksView.SUMMARY)
    assert isinstance(full, models.TaskPage) and isinstance(summary, models.TaskPage)
    assert full.content[0].plan.to_dict() == {'steps': 3}
    assert summary.content[0].id == task.id and summary.content[0].plan is unset

    assert tasks['delete_task'].sync_detailed(task.id, client=http).status_code == 204
    assert projects['delete_project'].sync_detailed(project.id, client=http).status_code == 204
    gone = projects['get_project'].sync_detailed(project.id, client=http)
    assert gone.status_code == 404 and isinstance(gone.parsed, models.Error) and gone.parsed.status == 404


# ----------------------------------------------------------------------------- TypeScript

def _npm_ready() -> Path:
    """tests/clients/ts/node_modules, installed from the lock file (`npm ci`) when missing."""
    modules = TS / 'node_modules'
    if not (modules / '.bin' / 'tsc').exists():
        npm = shutil.which('npm')
        assert npm, 'npm is not on PATH: Node 20 and npm are needed for the TypeScript client check'
        run = subprocess.run([npm, 'ci', '--no-audit', '--no-fund'], cwd=TS, capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
    return modules


def _tsc(workdir: Path, *files: str) -> subprocess.CompletedProcess:
    config = {'compilerOptions': {'strict': True, 'noEmit': True, 'target': 'ES2022', 'module': 'ESNext',
                                  'moduleResolution': 'Bundler', 'lib': ['ES2022', 'DOM'],
                                  'skipLibCheck': True}, 'files': list(files)}
    (workdir / 'tsconfig.json').write_text(json.dumps(config))
    return subprocess.run([str(workdir / 'node_modules' / '.bin' / 'tsc'), '-p', 'tsconfig.json'],
                          cwd=workdir, capture_output=True, text=True, timeout=300)


def test_typescript_types_from_the_document_compile_a_typed_usage_file(api, tmp_path):
    modules = _npm_ready()
    doc = _served_document(api, tmp_path / 'api-docs.json')
    (tmp_path / 'node_modules').symlink_to(modules)
    # --default-non-nullable false: a request field with a default stays optional (the response
    # schemas' `required` already says what is always present); docs/api/clients.md
    gen = subprocess.run([str(modules / '.bin' / 'openapi-typescript'), str(doc), '-o', 'api.d.ts',
                          '--default-non-nullable', 'false'],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, 'NO_COLOR': '1'})
    assert gen.returncode == 0, gen.stdout + gen.stderr
    assert 'warn' not in (gen.stdout + gen.stderr).lower(), gen.stdout + gen.stderr
    shutil.copy(TS / 'usage.ts', tmp_path / 'usage.ts')
    ok = _tsc(tmp_path, 'usage.ts')
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # the check can fail: a page's items are typed (a Project has no `title`), so misuse is refused
    shutil.copy(TS / 'misuse.ts', tmp_path / 'misuse.ts')
    bad = _tsc(tmp_path, 'misuse.ts')
    assert bad.returncode != 0
    assert "Property 'title' does not exist" in bad.stdout, bad.stdout
