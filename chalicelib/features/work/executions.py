"""Executions: status transitions and the activity's work count.

* Through the generic PUT, a status may only move along the lifecycle (PENDING -> RUNNING ->
  SUCCEEDED | FAILED | CANCELLED, PENDING -> CANCELLED | FAILED, RUNNING -> PENDING
  for a retry); a finished execution keeps its status: anything else is 409 (the write itself
  is conditional on the stored changeSequence). ``endReason`` (TIMED_OUT: the last attempt ran
  out of its time) goes with FAILED only: written with another status it is 400.
* Whoever ends an execution of an activity's plan (the worker, cancelExecution, an agent
  runtime's PUT, a DELETE of one not yet ended), the same transaction moves the activity's
  work count (features/work/store.py): one fewer ``remaining``, and one more ``failed`` when it failed
  under ``onExhausted: FAIL``. The activity finishes when ``remaining`` reaches zero
  (features/work/service.py ``finish_activity``), also when its last unfinished execution is
  deleted (``after_delete``).
"""
from __future__ import annotations

from chalicelib.core.errors import BadRequest, Conflict
from chalicelib.features.work import store as work_store
from chalicelib.features.work.statuses import (
    CANCELLED,
    FAILED,
    FAILURES,
    PENDING,
    RUNNING,
    SUCCEEDED,
    TERMINAL,
)
from chalicelib.features.work.step_shapes import policy_of
from chalicelib.kernel.hooks import Hook

ALLOWED = {
    PENDING: {RUNNING, CANCELLED, FAILED},
    RUNNING: {PENDING, SUCCEEDED, FAILED, CANCELLED},
}


def check_transition(old: str, new: str) -> None:
    if old != new and new not in ALLOWED.get(old, set()):
        raise Conflict(f'Execution status cannot change from {old} to {new}')


def check_end_reason(data: dict) -> None:
    status = data.get('status', PENDING)
    if data.get('endReason') is not None and status != FAILED:
        raise BadRequest(f"endReason {data['endReason']} goes with status FAILED only, not {status}")


class ExecutionHook(Hook):
    def before_create(self, family, principal, data, body):
        check_end_reason(data)

    def before_update(self, family, principal, new, stored):
        check_transition(stored.data.get('status', 'PENDING'), new.get('status', 'PENDING'))
        check_end_reason(new)

    def audit_ops(self, family, principal, action, data, stored):
        if action == 'CREATE' or not data.get('activityId') or not isinstance(data.get('step'), dict):
            return []
        before = stored.data.get('status', 'PENDING')
        after = CANCELLED if action == 'DELETE' else data.get('status', 'PENDING')   # deleted: no longer awaited
        if before in TERMINAL or after not in TERMINAL:
            return []
        ops = [work_store.work_move(data['activityId'], 'remaining', -1)]
        if after in FAILURES and policy_of(data['step'])['onExhausted'] == 'FAIL':
            ops.append(work_store.work_move(data['activityId'], 'failed', 1))
        return ops

    def after_delete(self, family, principal, stored):
        """An execution deleted before it ended was the activity's last unfinished one: the
        activity finishes now (it does not stay RUNNING with nothing left to run)."""
        activity_id = stored.data.get('activityId')
        if activity_id and stored.data.get('status', 'PENDING') not in TERMINAL:
            from chalicelib.features.work import service as work_service  # noqa: PLC0415 - lazy: the worker's module
            work_service.finish_activity(activity_id)


HOOK = ExecutionHook()
