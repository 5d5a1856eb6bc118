"""Several tasks joining a task group in one write (the MCP tool add_tasks_to_group; REST moves
one task at a time with PUT /api/tasks/{id} {"taskGroupId"}). Each task goes through the same
rules as that PUT: visible to the caller (else 404), writable by them (403), the tasks hook
(features/tasks/hooks.py: it takes the group's assignee, its transaction checks the group's sequence,
the group's history records the move), the same record-write builder. All of it is one
transaction: either every task joins or none does."""
from __future__ import annotations

from typing import Any

from chalicelib.core.clock import now_iso
from chalicelib.core.errors import BadRequest, Conflict
from chalicelib.core.principal import Principal
from chalicelib.kernel import access, crud, records
from chalicelib.kernel.hooks import hook_for
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store.repository import WriteConflict

MAX_TASKS_PER_CALL = 15   # each task: its entity, history entries (joined, left) and its event: fits one transaction
RETRIES = 3


def add_tasks(group_id: str, task_ids: list[str], principal: Principal, *,
              change_sequence: int | None = None) -> dict[str, Any]:
    tasks = family_of('tasks')
    ids = list(dict.fromkeys(task_ids))
    if not 1 <= len(ids) <= MAX_TASKS_PER_CALL:
        raise BadRequest(f'Give 1 to {MAX_TASKS_PER_CALL} task ids')
    for attempt in range(RETRIES):
        group = crud.load_visible('task-groups', group_id, principal)
        if change_sequence is not None and change_sequence != group.seq:
            raise Conflict('The task group was changed by someone else (stale changeSequence)',
                           changeSequence=group.seq)
        ops = []
        written = []
        for task_id in ids:
            stored = crud.load_visible(tasks, task_id, principal)
            access.require_write(principal, tasks, stored.org)
            if stored.data.get('projectId') != group.data.get('projectId'):
                raise BadRequest(f'Task {stored.id} is in another project than task group {group.id}')
            if stored.data.get('taskGroupId') == group.id:
                written.append(stored.data)
                continue
            new = dict(stored.data)
            new['taskGroupId'] = group.id
            hook_for(tasks).before_update(tasks, principal, new, stored)
            new['updatedOn'] = now_iso()
            new['changeSequence'] = stored.seq + 1
            ops += records.update_ops(tasks, new, stored, principal=principal)
            written.append(new)
        if not ops:
            return {'taskGroup': group.data, 'tasks': written}
        try:
            records.commit(ops)
            return {'taskGroup': group.data, 'tasks': written}
        except WriteConflict:
            # a task or the group changed meanwhile (or another transaction held an item):
            # nothing was written; read again and apply again
            if attempt + 1 < RETRIES and change_sequence is None:
                continue
            raise Conflict('A task or the task group changed meanwhile; nothing was changed, retry',
                           changeSequence=crud.sequence('task-groups', group_id, principal)) from None
    raise Conflict('The tasks are being changed concurrently; retry')
