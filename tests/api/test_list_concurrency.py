"""Concurrent creates in one tenant: the sharded counter stays exact and no write conflict
reaches a caller.

Creates run on several threads at once, each calling the create service directly under its
own principal (chalice's test client is not thread-safe). moto's in-process DynamoDB is not
thread-safe either (a transaction deep-copies the table while another thread writes it:
"dictionary changed size during iteration"), so every DynamoDB request is applied under one
lock: our code runs concurrently, the database applies one request at a time, as DynamoDB
does per item.

moto never reports TransactionConflict. DynamoDB cancels a transaction with that reason when
one of its items is part of another transaction in progress (the hot counter item of every
create in a tenant, hence the shards). ``ConflictingDynamo`` models it: a transaction keeps
its items busy for ``hold`` seconds after it is applied; a transaction touching a busy item
is cancelled with TransactionConflict for that item and changes nothing. Creates no longer
share an item (issue 27: guard and counter shards), so overlaps are rare and random; ``every``
also cancels the first attempt of every n-th transaction (by its ClientRequestToken, the same on
its retries) as if an overlapping one held an item, so every run has conflicts to retry.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.invariants import table_invariants  # noqa: F401 - the checker after every test (issue 16)

pytestmark = pytest.mark.usefixtures('table_invariants')

N = 40
THREADS = 8


class SerialDynamo:
    """Apply moto DynamoDB requests one at a time; optionally simulate TransactionConflict."""

    def __init__(self, hold: float | None = None, every: int | None = None) -> None:
        self.lock = threading.RLock()
        self.hold = hold
        self.every = every
        self.tokens: set[str] = set()
        self.busy: dict[tuple[str, str], float] = {}
        self.conflicts = 0
        self.transactions = 0

    def install(self, monkeypatch) -> None:
        from moto.dynamodb.exceptions import TransactionCanceledException
        from moto.dynamodb.responses import DynamoHandler
        call_action, transact = DynamoHandler.call_action, DynamoHandler.transact_write_items
        sim = self

        def locked_call_action(handler):
            with sim.lock:
                return call_action(handler)

        def transact_write_items(handler):
            self.transactions += 1
            keys = []
            for entry in handler.body['TransactItems']:
                (kind, spec), = entry.items()
                key = spec['Item'] if kind == 'Put' else spec['Key']
                keys.append((key['pk']['S'], key['sk']['S']))
            now = time.monotonic()
            token = handler.body.get('ClientRequestToken')
            first = token not in sim.tokens
            sim.tokens.add(token)
            if sim.every and first and len(sim.tokens) % sim.every == 0:
                sim.conflicts += 1
                raise TransactionCanceledException([
                    ('TransactionConflict', 'Transaction is ongoing for the item', None) if i == 0
                    else (None, None, None) for i in range(len(keys))])
            if sim.hold is not None and any(sim.busy.get(k, 0) > now for k in keys):
                sim.conflicts += 1
                raise TransactionCanceledException([
                    ('TransactionConflict', 'Transaction is ongoing for the item', None)
                    if sim.busy.get(k, 0) > now else (None, None, None) for k in keys])
            result = transact(handler)
            if sim.hold is not None:
                for k in keys:
                    sim.busy[k] = now + sim.hold
            return result

        monkeypatch.setattr(DynamoHandler, 'call_action', locked_call_action)
        monkeypatch.setattr(DynamoHandler, 'transact_write_items', transact_write_items)


def _create_concurrently(platform, org_id, n=N, threads=THREADS) -> list[BaseException]:
    from chalicelib.core.principal import Principal
    from chalicelib.kernel import crud
    admin = Principal(user_id=platform['userId'], email='admin@example.com',
                      memberships={org_id: 'PLATFORM_ADMIN'}, platform_admin=True)
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        start.wait()
        for i in range(index, n, threads):
            try:
                crud.create('labels', {'organizationId': org_id, 'name': f'label {i}'}, admin)
            except BaseException as exc:  # noqa: BLE001 - every failure counts
                errors.append(exc)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return errors


def _counts(api, org_id) -> tuple[int, int, int]:
    """(totalElements of the unfiltered list (the counter), of a filtered list (the index),
    the counter shards in use)."""
    from chalicelib.kernel.store import table
    from chalicelib.kernel.store.model import configure
    counter = api.get('/api/labels?pageSize=1').json['totalElements']
    indexed = api.get("/api/labels?pageSize=1&filter=name=like='label *'").json['totalElements']
    shards = [s for p in range(table.COUNTER_PARTITIONS)
              for s in configure().query(table.counter_partition_pk(f'CNT#labels#{org_id}', p))]
    return counter, indexed, len([s for s in shards if s.cnt])


def test_concurrent_creates_all_succeed_and_the_counter_is_exact(api, org_id, platform, monkeypatch):
    SerialDynamo().install(monkeypatch)
    errors = _create_concurrently(platform, org_id)
    assert errors == []
    counter, indexed, shards = _counts(api, org_id)
    assert counter == indexed == N
    assert shards > 1  # creates spread over several counter items


def test_a_conflicting_transaction_leaves_nothing_behind(api, org_id, platform, monkeypatch):
    """Whatever happens to the callers, the counter always equals what was written."""
    sim = SerialDynamo(hold=0.02, every=4)
    sim.install(monkeypatch)
    errors = _create_concurrently(platform, org_id)
    assert sim.conflicts > 0, 'the simulation produced no conflict: nothing was tested'
    counter, indexed, _ = _counts(api, org_id)
    assert counter == indexed == N - len(errors)


def test_transaction_conflicts_are_retried_and_never_reach_the_caller(api, org_id, platform, monkeypatch):
    sim = SerialDynamo(hold=0.02, every=4)
    sim.install(monkeypatch)
    errors = _create_concurrently(platform, org_id)
    assert sim.conflicts > 0, 'the simulation produced no conflict: nothing was tested'
    assert [repr(e) for e in errors] == []
    counter, indexed, _ = _counts(api, org_id)
    assert counter == indexed == N
