"""One time budget per unit of work: an HTTP request, a queue message, a scheduled tick.

    budget.start(seconds)        # the middleware per request, the worker per message
    budget.check('validation of 170,000 instances x 3 rules')   # inside loops that grow with input
    budget.remaining()           # seconds left (inf outside a unit of work)

``check`` raises ``BudgetExceeded``: a 422 whose message names the work that ran out of time
("The request exceeds its work budget of 8 s: ..."), the input is the cause. Waiting on us (a
write retried because other writers hold the record) is not work the request asked for: it is
bounded by the unit's hard ceiling instead (``remaining(ceiling=True)``: API Gateway's 29 s, the
Lambda's remaining time) and answers 503 with Retry-After when that runs out (kernel/writes.py).
Every check happens before a write, never between the parts of one, so a request that runs
out has written nothing (docs/api/limits.md).

The deadline lives in a ``contextvars.ContextVar``: each request, and each thread it starts with
``contextvars.copy_context``, sees its own. A Lambda's remaining time caps it (``for_request``):
a request never outlives API Gateway's 29 s, nor its invocation.

Written here rather than taken from a library: what is needed is a monotonic deadline in a
context variable and one exception mapped to the API's error shape; no maintained package
offers that without bringing its own async or signal-based cancellation (which a Lambda's
single thread of Python code cannot use safely).
"""
from __future__ import annotations

import math
import time
from contextvars import ContextVar, Token
from dataclasses import dataclass, field

from chalicelib.core.errors import ApiError, ServiceUnavailable

GATEWAY_SECONDS = 29.0        # API Gateway's integration timeout
SAFETY_SECONDS = 1.0          # left to answer (serialise, log) once the budget is spent
DEFAULT_REQUEST_SECONDS = 8.0


@dataclass(frozen=True)
class Deadline:
    seconds: float       # the whole budget, as started
    ends: float          # time.monotonic() when it is spent
    ceiling_ends: float  # time.monotonic() past which nothing may run at all (>= ends)
    # set when an AWS dependency was slow or failing during the unit (``note_dependency_trouble``):
    # shared by every context copied from the unit's (threads it starts), as the object is
    trouble: dict = field(default_factory=dict)

    def remaining(self, ceiling: bool = False) -> float:
        return (self.ceiling_ends if ceiling else self.ends) - time.monotonic()


_current: ContextVar[Deadline | None] = ContextVar('work_budget', default=None)


class BudgetSpentWaiting(ServiceUnavailable):
    """The unit of work ran out of time while AWS was slow or failing; nothing was written."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f'The request ran out of its {_figure(seconds)} s budget while the platform\'s storage '
                         f'was slow or failing: {what}; nothing more was changed, retry shortly', retry_after=2)


class BudgetExceeded(ApiError):
    """The unit of work ran out of its time budget; nothing was written."""
    status = 422

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f'The request exceeds its work budget of {_figure(seconds)} s: {what}',
                         limit='workBudget', budgetSeconds=round(seconds, 3))
        self.what = what


def _figure(seconds: float) -> str:
    return f'{seconds:g}' if seconds >= 1 else f'{seconds:.2f}'


def start(seconds: float, *, ceiling: float | None = None) -> Token:
    """Start a budget of ``seconds`` for the current unit of work -> a token for ``end``.
    ``ceiling``: seconds the unit may last at all, waiting included (default: ``seconds``)."""
    seconds = max(0.0, float(seconds))
    now = time.monotonic()
    ceiling = seconds if ceiling is None else max(seconds, float(ceiling))
    return _current.set(Deadline(seconds, now + seconds, now + ceiling))


def note_dependency_trouble() -> None:
    """An AWS call of this unit of work was slow or failing (its budget, if spent, is ours)."""
    deadline = _current.get()
    if deadline is not None:
        deadline.trouble['aws'] = True


def end(token: Token) -> None:
    _current.reset(token)


def current() -> Deadline | None:
    return _current.get()


def remaining(*, ceiling: bool = False) -> float:
    """Seconds left of the current unit of work's budget, or with ``ceiling`` of its hard
    ceiling (``inf`` when none was started)."""
    deadline = _current.get()
    return math.inf if deadline is None else deadline.remaining(ceiling)


def check(what: str) -> None:
    """Raise ``BudgetExceeded`` naming ``what`` when the budget is spent."""
    deadline = _current.get()
    if deadline is not None and time.monotonic() >= deadline.ends:
        if deadline.trouble:   # AWS was slow or failing meanwhile: the cause is ours
            raise BudgetSpentWaiting(what, deadline.seconds)
        raise BudgetExceeded(what, deadline.seconds)


def for_request(lambda_context, default_seconds: float) -> float:
    """A request's budget: the configured figure, capped by API Gateway's timeout and, on
    Lambda, by the invocation's remaining time (less a second to answer)."""
    seconds = min(default_seconds, GATEWAY_SECONDS - SAFETY_SECONDS)
    remaining_ms = getattr(lambda_context, 'get_remaining_time_in_millis', None)
    if callable(remaining_ms):
        seconds = min(seconds, remaining_ms() / 1000 - SAFETY_SECONDS)
    return max(seconds, 0.0)
