"""Count AWS API calls made by any botocore client (pynamodb's and boto3's alike)."""
from __future__ import annotations

import collections
import contextlib

import botocore.client


@contextlib.contextmanager
def count_calls():
    """with count_calls() as calls: ...  -> calls is a Counter of operation names."""
    calls: collections.Counter = collections.Counter()
    original = botocore.client.BaseClient._make_api_call

    def counted(self, operation_name, api_params):
        calls[operation_name] += 1
        return original(self, operation_name, api_params)

    botocore.client.BaseClient._make_api_call = counted
    try:
        yield calls
    finally:
        botocore.client.BaseClient._make_api_call = original
