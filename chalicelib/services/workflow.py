"""Task and execution actions the contract names beyond plain CRUD: set a task's status,
cancel an execution, read a task group's history. Each is a change through the generic
service (same permission, locking and audit path as PUT)."""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core import jsonbody
from chalicelib.core.errors import BadRequest, Conflict
from chalicelib.domain.registry import family as family_of
from chalicelib.store import table

from . import resources

TERMINAL_EXECUTION = {'SUCCEEDED', 'FAILED', 'CANCELLED'}


def task_status_exists(org_id: str, slug: str) -> bool:
    from chalicelib.store.repository import unique_key
    model = table.configure()
    try:
        model.get(unique_key('task-statuses', org_id, 'slug', slug), '#', consistent_read=True)
        return True
    except model.DoesNotExist:
        return False


def set_task_status(task_id: str, raw_body: bytes | None) -> dict[str, Any]:
    body = jsonbody.loads_object(raw_body)
    slug = body.get('statusSlug', body.get('status', body.get('slug')))
    if not isinstance(slug, str) or not slug:
        raise BadRequest("Field 'statusSlug' is required")
    task = resources.load_visible(family_of('tasks'), task_id)
    if not task_status_exists(task.org, slug):
        raise BadRequest(f"Field 'statusSlug' refers to a task status that does not exist: {slug}")
    change: dict[str, Any] = {'statusSlug': slug}
    if 'changeSequence' in body:
        change['changeSequence'] = body['changeSequence']
    return resources.update('tasks', task_id, json.dumps(change).encode())


def cancel_execution(execution_id: str) -> dict[str, Any]:
    execution = resources.load_visible(family_of('executions'), execution_id)
    status = execution.data.get('status')
    if status in TERMINAL_EXECUTION:
        raise Conflict(f'Execution is already {status}')
    return resources.update('executions', execution_id, json.dumps(
        {'status': 'CANCELLED', 'changeSequence': execution.seq}).encode())


def task_group_history(group_id: str, params: dict[str, list[str]]) -> dict[str, Any]:
    from .listing import list_resources
    group = resources.load_visible(family_of('task-groups'), group_id)
    params = dict(params)
    params['filter'] = list(params.get('filter') or []) + [f"taskGroupId == '{group.id}'"]
    params.setdefault('sort', ['createdOn:desc'])
    return list_resources('task-group-history', params)
