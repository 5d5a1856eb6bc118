"""Count AWS API calls made by any botocore client (pynamodb's and boto3's alike)."""
from __future__ import annotations

import collections
import contextlib
import threading

import botocore.client


class Calls(collections.Counter):
    """Operation name -> calls; ``max_in_flight``: the most calls that were in flight at once."""
    max_in_flight = 0


@contextlib.contextmanager
def count_calls():
    """with count_calls() as calls: ...  -> calls is a Counter of operation names."""
    calls = Calls()
    lock = threading.Lock()
    state = {'now': 0}
    original = botocore.client.BaseClient._make_api_call

    def counted(self, operation_name, api_params):
        with lock:
            calls[operation_name] += 1
            state['now'] += 1
            calls.max_in_flight = max(calls.max_in_flight, state['now'])
        try:
            return original(self, operation_name, api_params)
        finally:
            with lock:
                state['now'] -= 1

    botocore.client.BaseClient._make_api_call = counted
    try:
        yield calls
    finally:
        botocore.client.BaseClient._make_api_call = original
