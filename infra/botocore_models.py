"""botocore's service models in the deployment package: only the services the functions call.

botocore ships the model of every AWS service (~440 folders under ``botocore/data``: 14.9 MiB of
the zip, 18.3 MiB unzipped, the largest thing in it); the functions create clients for a handful.
``prune_zip`` rewrites deployment.zip (after ``chalice package`` built it, before
infra/bytecode.py compiles it) keeping, under ``botocore/data/``, only

- the folders of ``SERVICES`` (each whole: its API model, endpoint rule set, paginators,
  waiters), and
- botocore's own top-level files (``endpoints.json``, ``partitions.json``, ``_retry.json``,
  ``sdk-default-configuration.json``: every file directly in ``botocore/data``, whatever a later
  botocore adds there).

``SERVICES`` is the one list (docs/operations/deploy.md "Package size"). A client created for a
service not in it fails with ``UnknownServiceError`` on Lambda: tests/unit/test_botocore_models.py
finds every client the code (and the libraries that create their own) makes and fails when one is
missing here, and the deploy rehearsal (tests/integration/test_deploy_rehearsal.py) runs every
function on the pruned package. Everything else in the zip (boto3's resource models included) is
left as it is.
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

DATA = 'botocore/data/'

SERVICES = frozenset({
    'dynamodb',         # pynamodb (the table), boto3.resource('dynamodb') (kernel/store/model.py)
    's3',               # documents and blobs (features/documents/blobs.py)
    'sqs',              # the activity and OCR queues (features/work/store.py)
    'events',           # EventBridge PutEvents (features/work/store.py)
    'secretsmanager',   # organizations' bridge secrets (features/bridges/secrets.py)
    'apigateway',       # API keys' usage-plan twins (features/identity/credentials.py)
    'xray',             # the X-Ray SDK's sampling-rules client (aws_xray_sdk/core/sampling/connector.py)
    'sts',              # botocore's credential chain, should a role be assumed (AssumeRole providers)
})


def kept(name: str, services: frozenset[str] = SERVICES) -> bool:
    """Whether the zip entry ``name`` stays: everything outside botocore/data, its top-level
    files, and the folders of ``services``."""
    if not name.startswith(DATA):
        return True
    rest = name[len(DATA):]
    if '/' not in rest:
        return True
    return rest.split('/', 1)[0] in services


def prune_zip(zip_path: Path, services: frozenset[str] = SERVICES) -> tuple[int, int]:
    """Rewrite ``zip_path`` without the models of other services; returns (entries dropped,
    unzipped bytes dropped). Fails if a service of ``services`` has no model in the zip (a typo,
    or a botocore that renamed it)."""
    rewritten = zip_path.with_suffix('.pruning')
    dropped = dropped_bytes = 0
    present: set[str] = set()
    with zipfile.ZipFile(zip_path) as src, \
            zipfile.ZipFile(rewritten, 'w', compression=zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if info.filename.startswith(DATA) and info.filename.count('/') > 2:
                present.add(info.filename[len(DATA):].split('/', 1)[0])
            if kept(info.filename, services):
                out.writestr(info, src.read(info.filename))   # names, modes, dates unchanged
            else:
                dropped += 1
                dropped_bytes += info.file_size
    missing = services - present
    if missing:
        rewritten.unlink()
        raise ValueError(f'no botocore model in the package for {sorted(missing)} (infra/botocore_models.py)')
    os.replace(rewritten, zip_path)
    return dropped, dropped_bytes
