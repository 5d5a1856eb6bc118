"""Scheduled jobs: EventBridge schedule expressions, the next run, and the scheduler tick.

``scheduleExpression`` takes EventBridge's two forms:

* ``rate(N minute|minutes|hour|hours|day|days)`` (N >= 1; ``1 minute``, not ``1 minutes``, as
  EventBridge wants): runs every N units from the time of the write;
* ``cron(minutes hours day-of-month month day-of-week year)`` in UTC: six fields, exactly one of
  day-of-month / day-of-week is ``?``; day-of-week is 1-7 (1 = Sunday) or SUN-SAT; ``L``, ``W``
  and ``#`` as EventBridge allows. Evaluated with ``cronsim`` after translation to five fields.

On every write of a job, ``nextRunOn`` is computed (server field: a client's value is ignored)
and its schedule entry (store/work.py) is written in the same transaction, present only while
the job is ``active``. ``tick`` (the ``@app.schedule('rate(1 minute)')`` handler, and
``make run``'s timer) reads the due entries through that index, claims each job with a
conditional write (the job's changeSequence and its nextRunOn unchanged: of concurrent ticks
exactly one wins), then starts its target.

Targets: ``targetType`` ``ACTIVITY_PLAN`` (``targetId`` = a plan of the job's organization;
``options.inputs`` become the start's inputs) starts an activity through the same SQS path as
``POST /api/activity-plans/{id}/start``, with ``requestId`` = ``schedule:{jobId}:{nextRunOn}``, so
one run is one activity even if a start is retried.
"""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from chalicelib.core import clock, observability
from chalicelib.core.errors import BadRequest
from chalicelib.domain.registry import family as family_of
from chalicelib.store import table
from chalicelib.store import work as work_store
from chalicelib.store.repository import WriteConflict

from . import records

log = observability.get_logger('schedules')

TARGET_TYPES = ('ACTIVITY_PLAN',)
_RATE = re.compile(r'^rate\(\s*(\d{1,6})\s+(minute|minutes|hour|hours|day|days)\s*\)$')
_CRON = re.compile(r'^cron\((.*)\)$')
_UNIT = {'minute': 60, 'hour': 3600, 'day': 86400}
_DOW_NAMES = ('SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT')
_YEAR = re.compile(r'^(\*|\d{4}(-\d{4})?(/\d+)?)(,\d{4}(-\d{4})?)*$')
MAX_YEAR = 2199


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def _parse_iso(text: str) -> datetime:
    return datetime.strptime(text, '%Y-%m-%dT%H:%M:%S.%fZ').replace(tzinfo=UTC)


def _dow(field: str) -> str:
    """EventBridge day-of-week (1-7, 1 = Sunday) -> cron's (0-6, 0 = Sunday)."""
    def number(match: re.Match) -> str:
        value = int(match.group(0))
        if not 1 <= value <= 7:
            raise ValueError(f'day-of-week {value} is not 1-7')
        return str(value - 1)
    head, hash_, tail = field.partition('#')   # "6#3": the third Friday; the part after # is no day
    head = re.sub(r'\d+', number, head)
    return head + hash_ + tail


def _years(field: str) -> set[int] | None:
    if field == '*':
        return None
    if not _YEAR.fullmatch(field):
        raise ValueError(f'year field {field!r} is not valid')
    years: set[int] = set()
    for part in field.split(','):
        span, _, step = part.partition('/')
        low, _, high = span.partition('-')
        years |= set(range(int(low), int(high or low) + 1, int(step or 1)))
    return years


def parse(expression: Any) -> tuple[str, Any]:
    """('rate', seconds) or ('cron', (five fields, years)); ValueError with the reason."""
    if not isinstance(expression, str):
        raise ValueError('must be a string')
    text = expression.strip()
    rate = _RATE.fullmatch(text)
    if rate:
        amount, unit = int(rate.group(1)), rate.group(2)
        if amount < 1:
            raise ValueError('a rate must be at least 1')
        if (amount == 1) != (not unit.endswith('s')):
            raise ValueError(f'write rate({amount} {unit.rstrip("s") + ("" if amount == 1 else "s")})')
        return 'rate', amount * _UNIT[unit.rstrip('s')]
    cron = _CRON.fullmatch(text)
    if not cron:
        raise ValueError("expected rate(N unit) or cron(minutes hours day-of-month month day-of-week year)")
    fields = cron.group(1).split()
    if len(fields) != 6:
        raise ValueError('cron(...) takes six fields: minutes hours day-of-month month day-of-week year')
    minute, hour, dom, month, dow, year = fields
    if (dom == '?') == (dow == '?'):
        raise ValueError('exactly one of day-of-month and day-of-week must be ?')
    dow = dow.upper()
    five = f'{minute} {hour} {"*" if dom == "?" else dom} {month} {"*" if dow == "?" else _dow(dow)}'
    years = _years(year)
    from cronsim import CronSim, CronSimError  # noqa: PLC0415 - lazy: only schedule writes and ticks
    try:
        CronSim(five, datetime(2026, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ValueError(str(exc)) from None
    return 'cron', (five, years)


def next_run(expression: str, after: datetime) -> datetime | None:
    """The first run strictly after ``after`` (None: the schedule never runs again)."""
    kind, spec = parse(expression)
    if kind == 'rate':
        return after + timedelta(seconds=spec)
    from cronsim import CronSim  # noqa: PLC0415 - lazy
    five, years = spec
    for moment in CronSim(five, after.replace(second=0, microsecond=0)):
        if moment <= after:
            continue
        if moment.year > MAX_YEAR or (years is not None and moment.year > max(years)):
            return None
        if years is None or moment.year in years:
            return moment
    return None


def check(expression: Any) -> None:
    try:
        parse(expression)
    except ValueError as exc:
        raise BadRequest(f"Field 'scheduleExpression': {exc}") from None


def plan_next(data: dict[str, Any]) -> None:
    """Set (or clear) ``nextRunOn`` of a job about to be written."""
    expression = data.get('scheduleExpression')
    if not data.get('active', True) or not expression:
        data.pop('nextRunOn', None)
        return
    upcoming = next_run(expression, clock.now())
    if upcoming is None:
        data.pop('nextRunOn', None)
    else:
        data['nextRunOn'] = _iso(upcoming)


# ----------------------------------------------------------------------------- the tick

def tick(now: datetime | None = None) -> dict[str, int]:
    """Claim and start every due job; {'due', 'started', 'lost', 'failed'}. Safe to run
    concurrently: a job is claimed by exactly one tick."""
    from . import work  # noqa: PLC0415 - work imports this module for validation
    now = now or clock.now()
    due = work_store.due_jobs(_iso(now))
    stats = {'due': len(due), 'started': 0, 'lost': 0, 'failed': 0}
    for job_id, run_on in due:
        claimed = _claim(job_id, run_on, now)
        if claimed is None:
            stats['lost'] += 1
            continue
        try:
            with observability.work(correlation_id=f'schedule:{job_id}:{run_on}'):
                work.start_scheduled(claimed, run_on)
            stats['started'] += 1
        except Exception as exc:  # noqa: BLE001 - one failing job must not stop the others
            stats['failed'] += 1
            log.warning('scheduled job %s (run %s) failed to start: %s', job_id, run_on, exc)
    return stats


def _claim(job_id: str, run_on: str, now: datetime) -> dict[str, Any] | None:
    """Move a due job to its next run (lastRunOn = the run claimed), conditional on its
    sequence: the job as claimed, or None when another tick (or a write) got there first."""
    fam = family_of('scheduled-jobs')
    stored = table.get(fam.path, job_id)
    if stored is None or not stored.data.get('active', True) or stored.data.get('nextRunOn') != run_on:
        return None
    new = dict(stored.data)
    new['lastRunOn'] = run_on
    upcoming = next_run(new['scheduleExpression'], max(now, _parse_iso(run_on)))
    if upcoming is None:
        new.pop('nextRunOn', None)
    else:
        new['nextRunOn'] = _iso(upcoming)
    new['updatedOn'] = clock.now_iso()
    new['changeSequence'] = stored.seq + 1
    from chalicelib.services.internal import SERVICE  # noqa: PLC0415 - internal imports resources
    try:
        records.commit(records.update_ops(fam, new, stored, principal=SERVICE))
    except WriteConflict:
        return None
    return new


def require_target(data: dict[str, Any]) -> None:
    target_type = data.get('targetType')
    if target_type is None and data.get('targetId') is None:
        return
    if target_type not in TARGET_TYPES:
        raise BadRequest(f"Field 'targetType' must be one of {', '.join(TARGET_TYPES)}")
    plan_id = data.get('targetId')
    plan = table.get('activity-plans', str(plan_id)) if isinstance(plan_id, str) else None
    if plan is None or plan.org != data.get('organizationId'):
        raise BadRequest(f"Field 'targetId' refers to an activity plan that does not exist: {str(plan_id)[:64]}")

