"""Schemathesis hooks for `make fuzz` (loaded through SCHEMATHESIS_HOOKS by tests/fuzz_api.py).

The fuzzer is a platform admin: left alone it soon revokes its own API key, deletes its own
user or membership, and every later request is a 401/403 that tests nothing. Writes (PUT,
DELETE) aimed at the fuzzer's own identity (ids in FUZZ_PROTECTED_IDS) are redirected to an
id that does not exist, so they still exercise the route (404) without locking the run out.
"""
from __future__ import annotations

import os
import uuid

import schemathesis

PROTECTED = frozenset(i for i in os.environ.get('FUZZ_PROTECTED_IDS', '').split(',') if i)


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.method.upper() not in ('PUT', 'DELETE', 'POST') or not case.path_parameters:
        return
    for name, value in list(case.path_parameters.items()):
        if isinstance(value, str) and value.lower() in PROTECTED:
            case.path_parameters[name] = str(uuid.uuid4())
