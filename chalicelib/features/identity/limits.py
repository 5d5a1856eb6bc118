"""Rate-limit shapes: the four counts of one request and the four limits.

The counters themselves live on the user's gate item and are counted by the request's one
UpdateItem (kernel/store/gate.py): per user and minute ``ru``, per second ``rsNN``, per credential
``rk_{cred}`` and ``rk_{cred}_NN``. Because they live in the table, they hold across Lambda
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
