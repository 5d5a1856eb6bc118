"""cfn-lint on every template ``make package`` wrote, run with the lint virtualenv's Python
(.venv-lint, requirements-lint.txt): ``make cfn-lint STAGE=prod``.

Templates with the SAM transform are linted twice: as written (cfn-lint validates SAM resources
against their schema) and expanded by aws-sam-translator (the plain CloudFormation that
CloudFormation itself would run: event source mappings, the API's deployment and stage,
permissions), so dependency cycles and properties of the generated resources are checked too.
The expanded copies go to ``<out>/lint/`` (never deploy those: deploy ``app.json``).

Writes ``<out>/lint/report.json`` (every match: rule, level, file, message) and exits 1 when
any match is an error. Stand-alone: imports nothing from the project.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SAM = 'AWS::Serverless-2016-10-31'


class _NoManagedPolicies:
    """The translator asks for managed policy ARNs only for policies named in SAM ``Policies``;
    every function here has an explicit role, so there is nothing to look up (no AWS call)."""

    def load(self) -> dict:
        return {}


def expand(template: dict) -> dict:
    os.environ.setdefault('AWS_DEFAULT_REGION', 'us-east-1')
    from samtranslator.translator.transform import transform  # noqa: PLC0415 - lazy: after the region is set

    doc = json.loads(json.dumps(template))
    for resource in doc.get('Resources', {}).values():
        props = resource.get('Properties') or {}
        if resource.get('Type') == 'AWS::Serverless::Function' and isinstance(props.get('CodeUri'), str) \
                and not props['CodeUri'].startswith('s3://'):
            # what `aws cloudformation package` does: the local artefact becomes an S3 object
            props['CodeUri'] = 's3://artifacts/' + props['CodeUri'].lstrip('./')
    return transform(doc, {}, _NoManagedPolicies())


def main(out_dir: str) -> int:
    out = Path(out_dir)
    templates = sorted(p for p in out.glob('*.json'))
    if not templates:
        print(f'lint: no templates in {out} (run make package first)', file=sys.stderr)
        return 1
    lint_dir = out / 'lint'
    lint_dir.mkdir(exist_ok=True)
    targets = list(templates)
    for path in templates:
        doc = json.loads(path.read_text())
        transforms = doc.get('Transform', [])
        if SAM in (transforms if isinstance(transforms, list) else [transforms]):
            expanded = lint_dir / f'{path.stem}.expanded.json'
            expanded.write_text(json.dumps(expand(doc), indent=1))
            targets.append(expanded)
    cfn_lint = Path(sys.executable).with_name('cfn-lint')
    run = subprocess.run([str(cfn_lint), '--format', 'json', *map(str, targets)], capture_output=True, text=True)
    try:
        matches = json.loads(run.stdout or '[]')
    except json.JSONDecodeError:
        print(run.stdout, run.stderr, sep='\n', file=sys.stderr)
        return 1
    report = [{'rule': m['Rule']['Id'], 'level': m['Level'], 'file': m['Filename'],
               'line': m['Location']['Start']['LineNumber'], 'message': m['Message']} for m in matches]
    (lint_dir / 'report.json').write_text(json.dumps(report, indent=2) + '\n')
    for m in report:
        print(f"{m['level']:<13} {m['rule']} {m['file']}:{m['line']} {m['message']}")
    errors = [m for m in report if m['level'] == 'Error']
    print(f'cfn-lint: {len(targets)} templates, {len(errors)} errors, '
          f'{sum(m["level"] == "Warning" for m in report)} warnings '
          f'({", ".join(str(t) for t in targets)})')
    if run.returncode & 1 or (run.returncode and not report):   # cfn-lint itself failed
        print(run.stderr, file=sys.stderr)
        return 1
    return 1 if errors else 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        raise SystemExit('usage: .venv-lint/bin/python infra/lint.py <out dir>')
    sys.exit(main(sys.argv[1]))
