"""Schemathesis hooks for `make fuzz` (loaded through SCHEMATHESIS_HOOKS by tests/fuzz_api.py).

The fuzzer is a platform admin: left alone it soon revokes its own API key, deletes its own
user or membership, and every later request is a 401/403 that tests nothing. Writes (PUT,
DELETE) aimed at the fuzzer's own identity (ids in FUZZ_PROTECTED_IDS) are redirected to an
id that does not exist, so they still exercise the route (404) without locking the run out.

With FUZZ_KEYS (comma-separated API keys of the fuzzer's user, tests/fuzz_api.py), each call
carries the next key in turn; FUZZ_KEY_LOG names a file where the calls and keys used are
written at exit (the run checks them).
"""
from __future__ import annotations

import atexit
import itertools
import json
import os
import threading
import uuid

import schemathesis

PROTECTED = frozenset(i for i in os.environ.get('FUZZ_PROTECTED_IDS', '').split(',') if i)
KEYS = [k for k in os.environ.get('FUZZ_KEYS', '').split(',') if k]
_turn = itertools.count()
_used: dict[int, int] = {}   # key's position in KEYS -> calls
_lock = threading.Lock()


def _write_log() -> None:
    path = os.environ.get('FUZZ_KEY_LOG')
    if path and KEYS:
        with open(path, 'w') as out:
            json.dump({'calls': sum(_used.values()), 'keys': sorted(_used)}, out)


atexit.register(_write_log)


def _rotate(case) -> None:
    with _lock:
        turn = next(_turn) % len(KEYS)
        _used[turn] = _used.get(turn, 0) + 1
    key = KEYS[turn]
    case.headers = {**(case.headers or {}), 'x-api-key': key}


@schemathesis.hook
def before_call(context, case, kwargs):
    if KEYS:
        _rotate(case)
    if case.method.upper() not in ('PUT', 'DELETE', 'POST') or not case.path_parameters:
        return
    for name, value in list(case.path_parameters.items()):
        if isinstance(value, str) and value.lower() in PROTECTED:
            case.path_parameters[name] = str(uuid.uuid4())


@schemathesis.check
def no_500(ctx, response, case):
    """Under chaos (`make fuzz-chaos`): a fault is answered 503 with Retry-After and the error
    body; any other 5xx is a finding (used instead of ``not_a_server_error``)."""
    if response.status_code < 500:
        return None
    if response.status_code != 503:
        raise AssertionError(f'{response.status_code} is not the answer to a fault (503 with Retry-After)')
    if not response.headers.get('Retry-After') and not response.headers.get('retry-after'):
        raise AssertionError('503 without Retry-After')
    body = response.json()
    if not isinstance(body, dict) or not {'error', 'message', 'status'} <= set(body):
        raise AssertionError('503 without the error body')
    return None
