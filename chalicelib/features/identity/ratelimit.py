"""Request rate limits.

Per credential (the contract's headline figure): RATE_LIMIT_PER_MINUTE (default 100) and a burst
of RATE_LIMIT_BURST_PER_SECOND (default 20) per API key; a user's bearer tokens count together
as one credential. Per user, over all their keys and tokens: RATE_LIMIT_USER_PER_MINUTE and
RATE_LIMIT_USER_BURST_PER_SECOND (default three times the per-key figures: 300 and 60), so
holding 50 keys does not give 50 quotas. Requests without a valid credential, public routes and
the internal service caller are not counted (their responses still carry the headers, stating
the limit): counting them would make every garbage request a DynamoDB write; the gateway's
throttling absorbs floods.

Windows are fixed: the minute window is the UTC minute, the burst window the second. The
request's one gate UpdateItem (features/identity/gate.py, features/identity/admission.py) counts all
four windows on the user's item for that minute (a small item that expires; docs/scale.md "Rate
gate"), while the authenticating read runs beside it; a refused request writes nothing (not
counted). ``count(principal, n)`` counts n more requests of a caller already admitted (an MCP
batch: every call counts).

When the counters cannot be read or written (the table throttles or fails), the limiter fails
closed for writes: any method but GET, HEAD and OPTIONS gets 503 with ``Retry-After`` and
changes nothing. Reads are admitted, counted against the same figures in a small in-process
window (per Lambda instance, ``_fallback``) so one instance never serves a caller more than the
limits while the table is away; its 429s carry the same headers. A flood that throttles the
table therefore cannot switch limiting off, and a throttled limiter does not turn a read
outage of the limiter into an outage of every read.

Response headers (every response, errors included):
  X-RateLimit-Limit      the per-minute limit of a credential
  X-RateLimit-Remaining  requests left in the current minute: the smaller of what is left to the
                         credential and to the user (0 on a 429)
  X-RateLimit-Reset      epoch seconds when the window that refused (or the minute) reopens
and on a 429 ``Retry-After`` (seconds).
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from chalicelib.core.config import get_config
from chalicelib.core.errors import ServiceUnavailable, TooManyRequests
from chalicelib.core.observability import get_logger
from chalicelib.features.identity import limits as windows

log = get_logger('ratelimit')

clock: Callable[[], float] = time.time   # tests patch this to control the windows
TTL_GRACE_SECONDS = 120
READ_METHODS = frozenset({'GET', 'HEAD', 'OPTIONS'})
UNAVAILABLE_RETRY_AFTER = 2


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset: int
    retry_after: int = 0

    def headers(self) -> dict[str, str]:
        out = {'X-RateLimit-Limit': str(self.limit), 'X-RateLimit-Remaining': str(self.remaining),
               'X-RateLimit-Reset': str(self.reset)}
        if not self.allowed:
            out['Retry-After'] = str(self.retry_after)
        return out

    def error(self) -> TooManyRequests:
        return TooManyRequests(f'Rate limit exceeded: retry in {self.retry_after} s',
                               headers=self.headers())


class LimiterUnavailable(ServiceUnavailable):
    """The counters cannot be reached and the request is a write: refused, nothing done."""

    def __init__(self, decision: Decision) -> None:
        super().__init__('The rate limiter is unavailable; nothing was changed, retry shortly',
                         headers={**decision.headers(), 'Retry-After': str(UNAVAILABLE_RETRY_AFTER)})
        self.decision = decision


def limits() -> windows.Limits:
    cfg = get_config()
    return windows.Limits(key_minute=cfg.rate_limit_per_minute, key_second=cfg.rate_limit_burst_per_second,
                        user_minute=cfg.rate_limit_user_per_minute, user_second=cfg.rate_limit_user_burst_per_second)


class Refused(TooManyRequests):
    """Over a limit: 429 with the headers of ``decision``."""

    def __init__(self, decision: Decision) -> None:
        error = decision.error()
        super().__init__(error.message, headers=error.headers)
        self.decision = decision


def decide(counts, limits_: windows.Limits, now: float) -> Decision:
    """The decision for the counts the gate returned (features/identity/gate.py ``GateAnswer``)."""
    return _decide(counts, limits_, now)


def count(principal, n: int = 1, method: str = 'POST') -> Decision:
    """Count ``n`` more requests of an authenticated caller through its credential (an MCP batch
    counts every call; the request itself was counted by its admission): one UpdateItem.
    Over a limit: ``Refused`` and nothing counted. An uncounted caller (no ``rate_key``: the
    service, an agent) is not counted. The gate unavailable: as ``without_table``."""
    if n <= 0 or not principal.rate_key:
        return untracked()
    from chalicelib.features.identity import gate  # noqa: PLC0415 - lazy: cold start (pynamodb)
    limits_ = limits()
    now = clock()
    try:
        counts = gate.count(principal.user_id, rate_key=principal.rate_key, minute=int(now // 60),
                            second=int(now) % 60, limits=limits_, weight=n)
    except Exception as exc:  # noqa: BLE001 - the gate cannot count: fail closed for writes
        log.warning('request gate unavailable (%s)', type(exc).__name__)
        return without_table(principal.user_id, principal.rate_key, method, n)
    decision = _decide(counts, limits_, now)
    if not decision.allowed:
        raise Refused(decision)
    return decision


def without_table(user_id: str, credential: str, method: str = 'GET', n: int = 1) -> Decision:
    """The gate could not count (module docstring): a write is refused with
    ``LimiterUnavailable``; a read is counted in this process's windows (``Refused`` when over)."""
    if method.upper() not in READ_METHODS:
        raise LimiterUnavailable(untracked())
    limits_ = limits()
    now = clock()
    minute = int(now // 60)
    counts = _fallback.hit(user_id, credential, minute=minute, second=int(now) % 60, limits=limits_, n=n)
    decision = _decide(counts, limits_, now)
    if not decision.allowed:
        raise Refused(decision)
    return decision


def _decide(counts: windows.WindowCounts, limits: windows.Limits, now: float) -> Decision:
    minute_end = (int(now // 60) + 1) * 60
    if counts.admitted:
        remaining = min(limits.key_minute - counts.key_minute, limits.user_minute - counts.user_minute)
        return Decision(True, limits.key_minute, max(0, remaining), minute_end)
    if counts.key_minute >= limits.key_minute or counts.user_minute >= limits.user_minute:
        reset = minute_end
    else:  # a burst window refused: it reopens with the next second
        reset = int(now) + 1
    return Decision(False, limits.key_minute, 0, reset, max(1, math.ceil(reset - now)))


def count_more(principal, n: int) -> int:
    """Count ``n`` more requests of the caller of the current, admitted request (the calls of an
    MCP JSON-RPC batch past its first: each is a request) -> how many were counted, the first
    ones; the rest are over a limit, or the counters cannot be reached (fail closed), and must
    not run. Only counted callers have a ``rate_key``."""
    if n <= 0:
        return 0
    if principal is None or not getattr(principal, 'rate_key', None):
        return n
    from chalicelib.features.identity import gate  # noqa: PLC0415 - lazy: the store loads boto3 (cold start)
    limits_ = limits()
    now = clock()
    minute, second = int(now // 60), int(now) % 60
    want = n
    try:
        for _ in range(4):   # the gate counts all of ``want`` or none: on a refusal, ask for what is left
            if want <= 0:
                return 0
            counts = gate.count(principal.user_id, rate_key=principal.rate_key, minute=minute, second=second,
                                limits=limits_, weight=want)
            if counts.admitted:
                return want
            want = min(want, limits_.user_minute - counts.user_minute, limits_.user_second - counts.user_second,
                       limits_.key_minute - counts.key_minute, limits_.key_second - counts.key_second)
        return 0
    except Exception:  # noqa: BLE001 - the counters cannot be reached: nothing more runs (fail closed)
        log.warning('could not count %s more requests of a batch', n, exc_info=True)
        return 0


def retry_after() -> int:
    """Seconds until the minute window reopens (what a refused batch call is told)."""
    now = clock()
    return max(1, math.ceil((int(now // 60) + 1) * 60 - now))


def untracked() -> Decision:
    """Headers for a request that is not counted: the limit, nothing used."""
    cfg = get_config()
    now = clock()
    return Decision(True, cfg.rate_limit_per_minute, cfg.rate_limit_per_minute, (int(now // 60) + 1) * 60)


class _Fallback:
    """The same four windows, in memory, for reads while the table cannot count (per process;
    only the current minute is kept)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._minute = -1
        self._counts: dict[str, int] = {}

    def hit(self, user_id: str, credential: str, *, minute: int, second: int,
            limits: windows.Limits, n: int = 1) -> windows.WindowCounts:
        keys = (f'{user_id}', f'{user_id}#{second}', f'{user_id}|{credential}', f'{user_id}|{credential}#{second}')
        caps = (limits.user_minute, limits.user_second, limits.key_minute, limits.key_second)
        with self._lock:
            if minute != self._minute:
                self._minute, self._counts = minute, {}
            now = [self._counts.get(k, 0) for k in keys]
            admitted = all(c + n <= cap for c, cap in zip(now, caps, strict=True))
            if admitted:
                for k in keys:
                    self._counts[k] = self._counts.get(k, 0) + n
                now = [c + n for c in now]
        return windows.WindowCounts(admitted, now[0], now[1], now[2], now[3])


_fallback = _Fallback()
