"""The one retry rule for writes that lost to another writer (issues 23 and 24).

A write that the table could not take now (another transaction held one of its items:
``TransactionConflict``) or that lost a read-modify-write race (the record changed between its
read and its conditional write) wrote nothing, and may simply be tried again:

    def attempt():
        stored = read()
        try:
            commit(ops_for(stored))
        except WriteConflict as exc:
            if lost(exc):
                raise writes.Again() from None
            raise
    return writes.retry_write(attempt)

``retry_write`` re-runs ``attempt`` after a jittered, exponentially growing wait ("full
jitter": uniform in [0, min(cap, base * 2**n)], so concurrent losers spread out instead of
colliding again), for as long as the unit of work's hard ceiling (core/budget.py: waiting on
other writers is not work the request asked for, so it is not held to the 8 s work budget,
only to API Gateway's and the Lambda's time) leaves room, and at most ``tries`` times.
Then it answers 503 with Retry-After, and nothing was written: the
cause is the platform's (contention), not the request's. Every module that retries a write
(kernel/crud.py, features/documents/deltas.py, features/documents/batch.py, ...) uses this.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from chalicelib.core import budget
from chalicelib.core.errors import ServiceUnavailable

T = TypeVar('T')

BACKOFF_BASE = 0.02      # seconds; try n waits up to BACKOFF_BASE * 2**n ...
BACKOFF_MAX = 0.25       # ... and never more than this
RESERVE_SECONDS = 0.5    # budget kept to answer: no new try starts with less left
DEFAULT_TRIES = 16       # a transaction meeting a busy item (a counter shard, a parent)
UNBOUNDED_TRIES = 1_000  # a re-apply over concurrent writers: the budget is the real bound
RACE_MAX_WAIT = 2.0      # seconds: with 50 writers of one record, losers spread over two seconds


class Again(Exception):
    """Raised by an attempt that wrote nothing and may be tried again."""


def busy() -> ServiceUnavailable:
    return ServiceUnavailable('The resource is busy with other writes; nothing was changed, retry shortly',
                              retry_after=1)


def backoff(attempt: int, max_wait: float = BACKOFF_MAX) -> None:
    """Wait before try ``attempt + 1`` (full jitter, capped; never past the budget's reserve)."""
    wait = random.uniform(0, min(BACKOFF_BASE * 2 ** min(attempt, 16), max_wait))
    time.sleep(max(0.0, min(wait, budget.remaining(ceiling=True) - RESERVE_SECONDS)))


def retry_write(attempt: Callable[[], T], *, tries: int = DEFAULT_TRIES, max_wait: float = BACKOFF_MAX) -> T:
    """``attempt()``'s answer, re-running it while it raises ``Again`` (module docstring);
    503 (``busy``) when the tries or the budget run out. ``max_wait``: the longest single wait
    (many writers of one record spread over a longer window: ``RACE_MAX_WAIT``)."""
    for n in range(tries):
        try:
            return attempt()
        except Again:
            if n + 1 >= tries or budget.remaining(ceiling=True) < RESERVE_SECONDS:
                break
            backoff(n, max_wait)
    raise busy()
