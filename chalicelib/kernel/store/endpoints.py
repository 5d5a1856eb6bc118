"""The DynamoDB client's botocore session, without botocore's 1.2 MB endpoint table.

Creating any botocore client decodes ``botocore/data/endpoints.json`` (every partition's every
service: 1.25 MB of JSON, ~40-60 ms of CPU, the largest single cost of a cold start's first
request, bench/bench_request_path.py). The table's client needs one service of it. Its session
gets a loader that answers ``endpoints`` with ``dynamodb-endpoints.json`` beside this module:
the same document with every partition's metadata and only the ``dynamodb`` service (10 KB),
declared built-in so that botocore resolves endpoints exactly as with its own file (the endpoint
rule set decides; the legacy table is not fed to it as a custom endpoint).

The file is derived from the installed botocore: ``python -m chalicelib.kernel.store.endpoints``
rewrites it, and tests/unit/test_endpoints_slim.py fails when it differs (a botocore upgrade).
Everything else (the S3, Secrets Manager, API Gateway clients, boto3's resource API) uses
botocore's own data.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SLIM = Path(__file__).with_name('dynamodb-endpoints.json')
SERVICES = ('dynamodb',)


def derive(endpoints: dict[str, Any]) -> dict[str, Any]:
    """``endpoints`` (botocore's document) with only SERVICES under each partition."""
    return {**endpoints, 'partitions': [
        {**p, 'services': {name: s for name, s in p['services'].items() if name in SERVICES}}
        for p in endpoints['partitions']]}


def session():
    """A botocore session whose loader answers ``endpoints`` from the slim file."""
    import botocore.loaders  # noqa: PLC0415 - lazy: with the model
    import botocore.session  # noqa: PLC0415 - lazy: with the model

    class Loader(botocore.loaders.Loader):
        @botocore.loaders.instance_cache
        def load_data_with_path(self, name):
            if name == 'endpoints':
                return json.loads(SLIM.read_text()), str(SLIM)
            return super().load_data_with_path(name)

        def is_builtin_path(self, path):
            return path == str(SLIM) or super().is_builtin_path(path)

    result = botocore.session.get_session()
    result.register('needs-retry.dynamodb', note_trouble)   # every handler runs; ours decides nothing
    data_path = result.get_config_variable('data_path')
    result.register_component('data_loader', Loader(
        extra_search_paths=data_path.split(os.pathsep) if data_path else None))
    return result


def note_trouble(response=None, caught_exception=None, **_) -> None:
    """botocore's retry decision hook (never decides: returns None): a call that timed out, lost
    its connection, was throttled or failed is noted on the unit of work's budget, so a budget
    it then runs out of answers 503, the platform's cause, not 422 (core/budget.py)."""
    from chalicelib.core import budget  # noqa: PLC0415 - loaded by then; kept off import
    from chalicelib.core.errors import AWS_UNAVAILABLE_CODES  # noqa: PLC0415
    if caught_exception is not None:
        budget.note_dependency_trouble()
        return None
    if response is not None:
        http, parsed = response
        code = (parsed or {}).get('Error', {}).get('Code')
        if getattr(http, 'status_code', 200) >= 500 or code in AWS_UNAVAILABLE_CODES:
            budget.note_dependency_trouble()
    return None


def watched(client):
    """``client`` (any AWS service's) with its slow or failing calls noted on the unit of work's
    budget (``note_trouble``): S3, SQS, EventBridge, Secrets Manager and API Gateway as DynamoDB."""
    client.meta.events.register('needs-retry', note_trouble)
    return client


def write() -> None:
    """Rewrite the slim file from the installed botocore."""
    import botocore.loaders  # noqa: PLC0415 - a developer command
    full = botocore.loaders.Loader().load_data('endpoints')
    SLIM.write_text(json.dumps(derive(full), indent=1, sort_keys=True) + '\n')


if __name__ == '__main__':
    write()
    print(f'wrote {SLIM}')
