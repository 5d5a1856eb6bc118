"""moto's server for the local stack: `python -m localdev.moto_server -H HOST -p PORT`.

Two fixes over `python -m moto.server`, both about moto's TransactWriteItems, which the API
uses for every write:

* one request at a time. moto's backends are not thread-safe and its server is threaded:
  concurrent transactions fail with "dictionary changed size during iteration" (the API then
  answers 500), and a rolled-back transaction can restore a table copy that drops another
  request's writes. moto is CPU-bound under the GIL anyway, so a lock costs nothing.
* a rollback snapshot of the items the transaction touches, not of the whole table. moto
  deep-copies every table a transaction names before running it, so each write costs time in
  proportion to the table: after a few thousand items a create takes seconds and clients time
  out. Under the lock nothing else runs, so a snapshot that shares the untouched items and
  deep-copies only the targeted ones rolls back exactly as well.

Around both sits the chaos switch (localdev/chaos.py, CHAOS_* variables, ``/_chaos``): it is
outside the lock, so an injected error never waits for it and a slow answer does not hold it.
"""
from __future__ import annotations

import argparse
import copy
import os
import signal
import sys
import threading
import types
from collections import defaultdict
from typing import Any

from localdev import chaos

_state = threading.local()


def _item_keys(table, transact_items: list[dict[str, Any]]) -> set[tuple[Any, Any]]:
    """(hash, range) DynamoType keys of the items a transaction writes in ``table``."""
    from moto.dynamodb.models.dynamo_type import DynamoType
    keys = set()
    for entry in transact_items:
        _, op = next(iter(entry.items()))
        if op.get('TableName') != table.name:
            continue
        key = op.get('Key') or op.get('Item') or {}
        try:
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        except (KeyError, TypeError, IndexError):
            continue
        keys.add((hash_value, range_value))
    return keys


def snapshot(table, transact_items: list[dict[str, Any]]):
    """A copy of ``table`` good for rolling back ``transact_items``: the item index is copied,
    the items the transaction may change are deep-copied, the others are shared."""
    snap = copy.copy(table)
    if getattr(table, 'stream_shard', None) is not None:
        # stream records of a rolled-back transaction must go with it (the outbox publisher reads them)
        snap.stream_shard = copy.copy(table.stream_shard)
        snap.stream_shard.items = list(table.stream_shard.items)
    if table.range_key_attr:
        snap.items = defaultdict(dict, {h: dict(r) for h, r in table.items.items()})
    else:
        snap.items = defaultdict(dict, table.items)
    for hash_value, range_value in _item_keys(table, transact_items):
        if table.range_key_attr:
            bucket = snap.items.get(hash_value)
            if bucket is not None and range_value in bucket:
                bucket[range_value] = copy.deepcopy(bucket[range_value])
        elif hash_value in snap.items:
            snap.items[hash_value] = copy.deepcopy(snap.items[hash_value])
    return snap


def patch_moto() -> None:
    """Make moto's transaction rollback snapshot cheap (see the module docstring)."""
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    real_copy = models.copy

    def deepcopy(value, memo=None):
        items = getattr(_state, 'transact_items', None)
        if isinstance(value, Table) and items is not None:
            return snapshot(value, items)
        return real_copy.deepcopy(value, memo)

    models.copy = types.SimpleNamespace(**{**vars(real_copy), 'deepcopy': deepcopy})
    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        _state.transact_items = transact_items
        try:
            return original(self, transact_items)
        finally:
            _state.transact_items = None

    models.DynamoDBBackend.transact_write_items = transact_write_items
    idempotent_transactions()


IDEMPOTENCY_WINDOW = 600.0   # seconds, as DynamoDB's ClientRequestToken window


def idempotent_transactions() -> None:
    """TransactWriteItems honours ``ClientRequestToken`` as DynamoDB does (moto ignores it): a
    call repeating the token of one that succeeded within 10 minutes succeeds again without being
    applied twice. Without it, a transaction whose answer was lost (a chaos ``slow`` answer past
    the client's timeout) and that the SDK retried would meet its own writes, which on AWS it
    never does (issue 16)."""
    import json
    import time

    from moto.dynamodb.responses import DynamoHandler
    real = DynamoHandler.transact_write_items
    done: dict[str, tuple[float, str, Any]] = {}

    def transact_write_items(handler):
        token = handler.body.get('ClientRequestToken')
        if not token:
            return real(handler)
        now = time.monotonic()
        for old in [t for t, (at, _, _) in done.items() if now - at > IDEMPOTENCY_WINDOW]:
            del done[old]
        request = json.dumps(handler.body.get('TransactItems'), sort_keys=True)
        if token in done and done[token][1] == request:
            return done[token][2]
        result = real(handler)
        done[token] = (now, request, result)
        return result

    DynamoHandler.transact_write_items = transact_write_items


def serialized(app):
    """The WSGI app, one request at a time (the whole body is produced under the lock)."""
    lock = threading.Lock()

    def wrapped(environ, start_response):
        with lock:
            return list(app(environ, start_response))
    return wrapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('-H', '--host', default='127.0.0.1')
    parser.add_argument('-p', '--port', type=int, default=5000)
    args = parser.parse_args(argv)
    try:
        settings = chaos.settings_from_env(os.environ)
    except ValueError as err:
        parser.error(str(err))
    os.environ.setdefault('MOTO_PORT', str(args.port))

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.server import MotoRequestHandler
    from werkzeug.serving import run_simple

    patch_moto()
    app = chaos.Chaos(serialized(DomainDispatcherApplication(create_backend_app)), settings)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run_simple(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == '__main__':
    main()
