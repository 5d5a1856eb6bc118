"""Scheduled jobs: EventBridge schedule expressions, the next run, and the scheduler tick.

``scheduleExpression`` takes EventBridge's two forms:

* ``rate(N minute|minutes|hour|hours|day|days)`` (N >= 1; ``1 minute``, not ``1 minutes``, as
  EventBridge wants): runs every N units from the time of the write;
* ``cron(minutes hours day-of-month month day-of-week year)`` in UTC: six fields, exactly one of
  day-of-month / day-of-week is ``?``; day-of-week is 1-7 (1 = Sunday) or SUN-SAT; ``L``, ``W``
  and ``#`` as EventBridge allows. Evaluated with ``cronsim`` after translation to five fields.

On every write of a job, ``nextRunOn`` is computed (server field: a client's value is ignored)
and its schedule entry (features/work/store.py) is written in the same transaction, present only while
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

from datetime import datetime
from typing import Any

from chalicelib.core import clock, observability
from chalicelib.core.errors import BadRequest
from chalicelib.features.work import store as work_store
from chalicelib.features.work.schedule_shapes import next_run, parse
from chalicelib.kernel import records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict

log = observability.get_logger('schedules')

def check(expression: Any) -> None:
    if expression is None:
        return
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
        data['nextRunOn'] = clock.iso(upcoming)


# ----------------------------------------------------------------------------- the tick

def tick(now: datetime | None = None) -> dict[str, int]:
    """Claim and start every due job; {'due', 'started', 'lost', 'failed'}. Safe to run
    concurrently: a job is claimed by exactly one tick."""
    from chalicelib.features.work import service as work_service  # noqa: PLC0415 - work imports this module for validation
    now = now or clock.now()
    due = work_store.due_jobs(clock.iso(now))
    stats = {'due': len(due), 'started': 0, 'lost': 0, 'failed': 0}
    for job_id, run_on in due:
        claimed = _claim(job_id, run_on, now)
        if claimed is None:
            stats['lost'] += 1
            continue
        try:
            with observability.work(correlation_id=f'schedule:{job_id}:{run_on}'):
                work_service.start_scheduled(claimed, run_on)
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
    upcoming = next_run(new['scheduleExpression'], max(now, clock.parse_instant(run_on)))
    if upcoming is None:
        new.pop('nextRunOn', None)
    else:
        new['nextRunOn'] = clock.iso(upcoming)
    new['updatedOn'] = clock.now_iso()
    new['changeSequence'] = stored.seq + 1
    from chalicelib.features.identity.service_token import SERVICE  # noqa: PLC0415 - internal imports resources
    try:
        records.commit(records.update_ops(fam, new, stored, principal=SERVICE))
    except WriteConflict:
        return None
    return new


def require_target(data: dict[str, Any]) -> None:
    """A job naming a plan (``targetId``, checked to exist in the organization by the write
    itself) is an ACTIVITY_PLAN job."""
    if data.get('targetId') is not None and data.get('targetType') is None:
        data['targetType'] = 'ACTIVITY_PLAN'
