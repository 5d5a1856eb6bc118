"""`make run`'s pool of handler processes (localdev/work.py ``Invocations``; docs/operations/worker.md
"Under `make run`"): each invocation runs in a process other than the poller's, with the time its
invocation had left; a handler's error comes back as an error; a process that dies fails its
invocation and the next one runs in a new pool."""
from __future__ import annotations

import os
import time

import pytest

from localdev.pollers import _Context
from localdev.work import Invocations


def where(event, context):
    return {'pid': os.getpid(), 'left': context.get_remaining_time_in_millis(), 'echo': event['n']}


def fails(event, context):
    class Odd(Exception):   # a class the poller's process could not unpickle
        def __init__(self, a, b):
            super().__init__(a)
    raise Odd('the handler failed', 2)


def dies(event, context):
    os._exit(3)


@pytest.fixture(scope='module')
def pool():
    invocations = Invocations({'where': where, 'fails': fails, 'dies': dies}, 2)
    yield invocations
    invocations.stop()


def test_an_invocation_runs_in_another_process_with_its_time_left(pool):
    answer = pool.handler('where')({'n': 7}, _Context(12.0))
    assert answer['pid'] != os.getpid() and answer['echo'] == 7
    assert 10_000 < answer['left'] <= 12_000


def test_two_invocations_at_once_run_side_by_side(pool):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as threads:
        pids = {a['pid'] for a in threads.map(lambda n: pool.handler('where')({'n': n}, _Context(5.0)), range(6))}
    assert os.getpid() not in pids


def test_a_handler_error_comes_back_as_an_error(pool):
    with pytest.raises(RuntimeError, match='the handler failed'):
        pool.handler('fails')({}, _Context(5.0))
    assert pool.handler('where')({'n': 1}, _Context(5.0))['echo'] == 1


def test_a_process_that_dies_fails_its_invocation_and_a_new_pool_takes_the_next(pool):
    from concurrent.futures.process import BrokenProcessPool
    before = pool.pool
    with pytest.raises(BrokenProcessPool):
        pool.handler('dies')({}, _Context(5.0))
    assert pool.pool is not before
    started = time.monotonic()
    assert pool.handler('where')({'n': 2}, _Context(5.0))['echo'] == 2
    assert time.monotonic() - started < 10
