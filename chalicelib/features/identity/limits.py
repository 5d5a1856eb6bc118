"""Rate-limit shapes: the four counts of one request and the four limits.

The counters themselves live in one small item per user and minute, counted by the request's
one UpdateItem (features/identity/gate.py): per user ``u``, per second ``uNN``, per credential
``c{cred}`` and ``c{cred}NN``. Because they live in the table, they hold across Lambda
instances.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WindowCounts:
    admitted: bool
    user_minute: int    # the user's requests in the minute (including this one when admitted)
    user_second: int
    key_minute: int     # the credential's requests in the minute
    key_second: int


@dataclass(frozen=True)
class Limits:
    key_minute: int
    key_second: int
    user_minute: int
    user_second: int
