"""The Lambda package under the deploy rehearsal (infra/rehearsal.py): sizes, and the API
function's cold and warm times with tracing on, as deployed (bench/README.md "The Lambda package").

    PYTHONPATH=. .venv/bin/python bench/bench_lambda_package.py      # ~3 min; BENCH_COLD=9 fresh processes each

Builds the prod package (make package's code path), runs a local moto server with the stage's
resources and the first admin (the operator command), then alternates fresh API processes
(`python3.11 -I -S` on the read-only package, as nobody, the template's environment):

  bare      a bare Chalice app from the same package folder (chalice/app.py and the same
            libraries), one route doing one DynamoDB get_item inside a Powertools Tracer
            subsegment created on first use: the floor "with the same tracing"
  ours      the package's API function, the same request path (authorizer context included)
  bare-off / ours-off   the same two with TRACING_ENABLED=false (what relying on Lambda's
            active tracing alone, no SDK in the function, would cost)

Cold = process start to the first answer (interpreter, imports, the first request); warm = the
median of the next BENCH_WARM requests of the same process. Requests: GET /api/health (one
get_item of the table) and an authenticated GET /api/organizations/{id} (ours only).
"""
from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra import rehearsal  # noqa: E402
from tests.integration.test_deploy_rehearsal import REGION, Stage, _moto  # noqa: E402
from tests.live import free_port  # noqa: E402

COLD = int(os.environ.get('BENCH_COLD') or 9)
WARM = int(os.environ.get('BENCH_WARM') or 30)

BARE_APP = '''
import os

import boto3
from chalice import Chalice

app = Chalice(app_name='bare')
_tracer = None


def _trace(name):
    global _tracer
    if os.environ.get('TRACING_ENABLED') != 'true':
        import contextlib
        return contextlib.nullcontext()
    if _tracer is None:
        from aws_lambda_powertools import Tracer
        _tracer = Tracer(service='bare')
    return _tracer.provider.in_subsegment(name)


_client = None


@app.route('/api/health')
def health():
    global _client
    with _trace('## GET /api/health'):
        if _client is None:
            _client = boto3.client('dynamodb')
        _client.get_item(TableName=os.environ['TABLE_NAME'], Key={'pk': {'S': 'HEALTH#'}, 'sk': {'S': 'A'}})
    return {'status': 'UP'}
'''


def bare_task(task: Path, root: Path) -> Path:
    """The package folder with app.py replaced by the bare app (hard links: same files, same bytecode)."""
    bare = root / 'bare-task'
    shutil.copytree(task, bare, copy_function=os.link)
    (bare / 'app.py').unlink()
    for cached in (bare / '__pycache__').glob('app.*'):
        cached.unlink()
    (bare / 'app.py').write_text(BARE_APP)
    for path in [bare, *bare.rglob('*')]:
        if path.is_dir():
            path.chmod(0o555)
    (bare / 'app.py').chmod(0o444)
    return bare


def main() -> None:
    out = Path(tempfile.mkdtemp(prefix='bench-package-'))
    started = time.perf_counter()
    rehearsal.build('prod', out)
    build_s = time.perf_counter() - started
    port = free_port()
    moto = _moto(port)
    root = rehearsal.workspace()
    xray = rehearsal.XRayDaemon()
    stage = None
    try:
        stage = Stage(root, out, f'http://127.0.0.1:{port}', xray)
        print(f'package built in {build_s:.1f} s')
        print(stage.sizes.report())
        created = stage.request('POST', '/api/organizations', {'name': 'Bench', 'slug': 'bench'})
        org_path = f"/api/organizations/{created['json']['id']}"
        headers = {'content-type': 'application/json', 'x-api-key': stage.key}
        authorizer = stage.only('authorizer')
        auth = stage.process(authorizer.logical_id).call(rehearsal.authorizer_event('GET', org_path, headers))
        api = stage.only('api')
        env = rehearsal.resolve(api, stage.template, resources=stage.resources, secret_values=stage.secret_values)
        bare = bare_task(stage.task, root)

        def event(path, key=True):
            return rehearsal.api_event(stage.routes, 'GET', path, headers=headers if key else {}, authorizer=auth)

        variants = {
            'bare': (bare, 'true', '/api/health'), 'ours': (stage.task, 'true', '/api/health'),
            'ours GET by id': (stage.task, 'true', org_path),
            'bare-off': (bare, 'false', '/api/health'), 'ours-off': (stage.task, 'false', '/api/health'),
        }
        cold: dict[str, list[float]] = {k: [] for k in variants}
        init: dict[str, list[float]] = {k: [] for k in variants}
        first_ms: dict[str, list[float]] = {k: [] for k in variants}
        warm: dict[str, list[float]] = {k: [] for k in variants}
        for n in range(COLD):
            for name, (task, tracing, path) in variants.items():
                process = rehearsal.Process(api, task, {**env, 'TRACING_ENABLED': tracing}, runtime_dir=stage.runtime,
                                            log_path=root / f'bench-{n}.log', region=REGION,
                                            endpoint_url=stage.endpoint, xray_port=xray.port)
                try:
                    first = process.invoke(event(path, key='GET by id' in name))
                    assert first.get('result', {}).get('statusCode') == 200, (name, first, process.log_tail())
                    cold[name].append(process.start_ms + first['ms'])
                    init[name].append(process.init_ms)
                    first_ms[name].append(first['ms'])
                    if n == 0:
                        for _ in range(WARM):
                            warm[name].append(process.invoke(event(path, key='GET by id' in name))['ms'])
                finally:
                    process.close()
        print(f'\nAPI function, fresh processes (medians of {COLD}; warm: median of {WARM} requests of one process)')
        print(f'{"variant":<16} {"cold ms":>9} {"init ms":>9} {"1st req ms":>10} {"warm ms":>9}')
        for name in variants:
            print(f'{name:<16} {statistics.median(cold[name]):9.0f} {statistics.median(init[name]):9.0f} '
                  f'{statistics.median(first_ms[name]):10.0f} {statistics.median(warm[name]):9.1f}')
        med = {k: statistics.median(v) for k, v in cold.items()}
        print(f"\ncold, tracing on:  ours / bare = {med['ours'] / med['bare']:.2f}x (target <= 1.15)")
        print(f"cold, tracing on, GET by id: ours / bare = {med['ours GET by id'] / med['bare']:.2f}x")
        print(f"cold, tracing off: ours / bare = {med['ours-off'] / med['bare-off']:.2f}x")
        print(f"what tracing adds to a cold start: ours {med['ours'] - med['ours-off']:.0f} ms, "
              f"bare {med['bare'] - med['bare-off']:.0f} ms")
        print(f'X-Ray documents received by the stand-in daemon: {len(xray.documents)}')
    finally:
        if stage is not None:
            stage.close()
        xray.close()
        moto.terminate()
        moto.wait(timeout=10)
        rehearsal.remove(root)
        shutil.rmtree(out, ignore_errors=True)


if __name__ == '__main__':
    main()
