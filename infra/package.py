"""``make package STAGE=<stage>``: the deployable templates of a stage, without AWS credentials.

    PYTHONPATH=. python -m infra.package prod out/prod

writes
    out/prod/data.json        the data stack (infra/stack.py)
    out/prod/app.json         the app stack (SAM): chalice package output patched by infra/app.py
    out/prod/deployment.zip   the functions' code, referenced by app.json (CodeUri), botocore's
                              models pruned to the services the app calls
                              (infra/botocore_models.py), Pillow without its AVIF codec
                              (infra/pillow_trim.py), with its bytecode (infra/bytecode.py)
    out/prod/chalice/sam.json what chalice package emitted, untouched (for review and tests)

``chalice package`` imports app.py; it runs with the stage's environment variables from
.chalice/config.json, so decorators that read them at import time (a queue name) see the
stage's values. The first run downloads the Lambda wheels from PyPI into .chalice/deployments
(git-ignored); later runs reuse them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from infra import app as app_stack
from infra import botocore_models, bytecode, iam, pillow_trim, stack

ROOT = Path(__file__).resolve().parents[1]


def stage_environment(stage: str) -> dict[str, str]:
    config = json.loads((ROOT / '.chalice' / 'config.json').read_text())
    if stage not in config.get('stages', {}):
        raise SystemExit(f'no stage {stage!r} in .chalice/config.json')
    env = dict(config.get('environment_variables') or {})
    env.update(config['stages'][stage].get('environment_variables') or {})
    return env


def chalice_package(stage: str, out: Path) -> Path:
    raw = out / 'chalice'
    if raw.exists():
        shutil.rmtree(raw)
    env = {**os.environ, **stage_environment(stage)}
    env.setdefault('AWS_DEFAULT_REGION', 'us-east-1')   # chalice wants one; nothing regional is emitted
    env['PYTHONPATH'] = os.pathsep.join(filter(None, [str(ROOT), env.get('PYTHONPATH')]))
    chalice = Path(sys.executable).with_name('chalice')
    subprocess.run([str(chalice), '--project-dir', str(ROOT), 'package', '--pkg-format', 'cloudformation',
                    '--stage', stage, str(raw)], check=True, env=env, cwd=ROOT)
    return raw


def write(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(doc, indent=2) + '\n')


def main(stage: str, out_dir: str) -> None:
    policy = iam.policy_path(stage)
    if policy.exists() and policy.read_text() != iam.render(stage):
        raise SystemExit(f'{policy.relative_to(ROOT)} differs from infra/iam.py: run `make policy STAGE={stage}`')
    out = Path(out_dir)
    if not out.is_absolute():
        out = ROOT / out
    out.mkdir(parents=True, exist_ok=True)
    raw = chalice_package(stage, out)
    sam = json.loads((raw / 'sam.json').read_text())
    try:
        patched = app_stack.patch(sam, stage)
    except app_stack.PackagingError as exc:
        raise SystemExit(f'package: {exc}') from exc
    shutil.move(str(raw / 'deployment.zip'), out / 'deployment.zip')
    # only the services the functions call keep their botocore model (infra/botocore_models.py);
    # pruned before compiling, so the bytecode step has less to unpack
    botocore_models.prune_zip(out / 'deployment.zip')
    pillow_trim.trim_zip(out / 'deployment.zip')   # Pillow without its AVIF codec (infra/pillow_trim.py)
    bytecode.add_to_zip(out / 'deployment.zip')   # no compiling on a cold start (infra/bytecode.py)
    write(out / 'app.json', patched)
    write(out / 'data.json', stack.template(stage))
    print(f'wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}/: data.json app.json deployment.zip')


if __name__ == '__main__':
    if len(sys.argv) != 3:
        raise SystemExit('usage: python -m infra.package <stage> <out dir>')
    main(*sys.argv[1:])
