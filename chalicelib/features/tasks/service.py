"""Task and execution actions the contract names beyond plain CRUD: set a task's status,
cancel an execution, read a task group's history. Each is a change through the generic
service (same permission, locking and audit path as PUT)."""
from __future__ import annotations

from typing import Any

from chalicelib.core.errors import BadRequest, Conflict
from chalicelib.core.principal import Principal
from chalicelib.features.work.statuses import TERMINAL as TERMINAL_EXECUTION
from chalicelib.kernel import crud
from chalicelib.kernel.listing import ListRequest, list_resources


def set_task_status(task_id: str, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """``{statusSlug (or status / slug), changeSequence?}``: the slug must be one of the
    organization's task statuses, checked by the kernel as on every write of a task (the tasks
    family's slug reference, features/tasks/declarations.py; kernel/references.py
    ``slug_checks``: 400 "Field 'statusSlug' refers to a task status that does not exist").
    One read of the task: the update writes over the record read here (``loaded``), re-reading
    it only when a concurrent write wins."""
    slug = body.get('statusSlug', body.get('status', body.get('slug')))
    if not isinstance(slug, str) or not slug:
        raise BadRequest("Field 'statusSlug' is required")
    task = crud.load_visible('tasks', task_id, principal)
    change: dict[str, Any] = {'statusSlug': slug}
    if 'changeSequence' in body:
        change['changeSequence'] = body['changeSequence']
    return crud.update('tasks', task_id, change, principal=principal, loaded=task, action='statusChanged')


def cancel_execution(execution_id: str, principal: Principal) -> dict[str, Any]:
    execution = crud.load_visible('executions', execution_id, principal)
    status = execution.data.get('status')
    if status in TERMINAL_EXECUTION:
        raise Conflict(f'Execution is already {status}')
    cancelled = crud.update('executions', execution_id, {'status': 'CANCELLED', 'changeSequence': execution.seq},
                            principal=principal, action='cancelled')
    if cancelled.get('activityId'):   # its last execution ended: the activity finishes (features/work/service.py)
        from chalicelib.features.work import service as work_service  # noqa: PLC0415 - lazy: the worker's module
        work_service.finish_activity(cancelled['activityId'])
    return cancelled


def task_group_history(group_id: str, req: ListRequest, principal: Principal) -> dict[str, Any]:
    """The history page of one task group (newest first unless ``req`` sorts otherwise)."""
    group = crud.load_visible('task-groups', group_id, principal)
    req.filters = [*req.filters, f"taskGroupId == '{group.id}'"]
    if not req.sort:
        req.sort = [('createdOn', True)]
    return list_resources('task-group-history', req, principal)
