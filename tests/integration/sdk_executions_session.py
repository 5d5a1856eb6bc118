"""The unmodified SDK (``kodexa``) lists and reads the executions of every kind (issue 46 item 2):
the parse stage's run, an assistant's pipeline (BRIDGE_CALL, SCRIPT, EXTRACT steps) and an
activity plan's execution.

Run by tests/integration/test_sdk_executions.py with the SDK's own virtualenv (.venv-sdk), never
imported by the app's tests: ``python sdk_executions_session.py <base url> <api key> <project id>
<json {kind: execution id}>``. Each step prints ``ok <step> <detail>``; the first failure prints
its traceback and exits 1.
"""
from __future__ import annotations

import json
import sys
import traceback

from kodexa.platform.client import KodexaClient


def ok(step: str, detail: object = '') -> None:
    print(f'ok {step} {detail}', flush=True)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def main(base: str, key: str, project_id: str, kinds: dict[str, str]) -> None:
    client = KodexaClient(url=base, access_token=key)
    listed = client.executions.list(page_size=100, filters=[f"projectId: '{project_id}'"])
    ids = {e.id for e in listed.content}
    check(set(kinds.values()) <= ids, f'listed {sorted(ids)}, wanted {kinds}')
    ok('list', f'{listed.total_elements} executions of the project')
    everything = client.executions.list(page_size=100)
    check(set(kinds.values()) <= {e.id for e in everything.content}, 'the unfiltered list')
    ok('list all', everything.total_elements)
    for kind, execution_id in kinds.items():
        got = client.executions.get(execution_id)
        check(got.id == execution_id, f'{kind}: {got.id}')
        steps = got.pipeline.steps if got.pipeline is not None else []
        ok('get', f'{kind} {got.status} {[(s.name, s.step_type) for s in steps or []]}')
    print(json.dumps({'done': True}), flush=True)


if __name__ == '__main__':
    try:
        main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
    except Exception:  # noqa: BLE001 - the test reads the traceback
        traceback.print_exc()
        sys.exit(1)
