"""Request rate limits: RATE_LIMIT_PER_MINUTE per subject (default 100) and a burst of
RATE_LIMIT_BURST_PER_SECOND (default 20) per second.

Subjects: ``key:{keyId}`` for API-key and Basic callers, ``user:{userId}`` for bearer-token
callers. Requests without a valid credential, public routes and the internal service caller are
not counted (their responses still carry the headers, stating the limit): counting them would
make every garbage request a DynamoDB write; the gateway's throttling absorbs floods.

Windows are fixed: the minute window is the UTC minute, the burst window the second. One
conditional UpdateItem per request (store/ratelimit.py).

Response headers (every response, errors included):
  X-RateLimit-Limit      the per-minute limit
  X-RateLimit-Remaining  requests left in the current minute (0 on a 429)
  X-RateLimit-Reset      epoch seconds when the window that refused (or the minute) reopens
and on a 429 ``Retry-After`` (seconds).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from chalicelib.core.config import get_config
from chalicelib.core.errors import TooManyRequests
from chalicelib.core.observability import get_logger
from chalicelib.store import ratelimit as store

log = get_logger('ratelimit')

clock: Callable[[], float] = time.time   # tests patch this to control the windows
TTL_GRACE_SECONDS = 120


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


def check(subject: str) -> Decision:
    """Count one request of ``subject`` and decide; fails open if the table cannot answer."""
    cfg = get_config()
    per_minute, burst = cfg.rate_limit_per_minute, cfg.rate_limit_burst_per_second
    now = clock()
    minute = int(now // 60)
    second = int(now) % 60
    minute_end = (minute + 1) * 60
    try:
        counts = store.hit(subject, minute=minute, second=second, minute_limit=per_minute, second_limit=burst,
                           expires_at=minute_end + TTL_GRACE_SECONDS)
    except Exception:  # noqa: BLE001 - an outage of the limiter must not become an outage of the API
        log.exception('rate limiter unavailable; request admitted')
        return untracked()
    if counts.admitted:
        return Decision(True, per_minute, max(0, per_minute - counts.minute), minute_end)
    if counts.minute >= per_minute:
        reset = minute_end
    else:  # the burst window refused: it reopens with the next second
        reset = int(now) + 1
    return Decision(False, per_minute, 0, reset, max(1, math.ceil(reset - now)))


def untracked() -> Decision:
    """Headers for a request that is not counted: the limit, nothing used."""
    cfg = get_config()
    now = clock()
    return Decision(True, cfg.rate_limit_per_minute, cfg.rate_limit_per_minute, (int(now // 60) + 1) * 60)

