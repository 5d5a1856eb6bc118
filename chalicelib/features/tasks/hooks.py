"""Tasks: a grouped task's assignee is set through its task group.

- A task that belongs to a group (``taskGroupId``) carries the group's ``assigneeId``: a task
  created in a group, or joining one (PUT ``taskGroupId``, the MCP add_tasks_to_group), takes
  the group's assignee (none when the group has none); sending another assignee with it is 400.
- Changing the ``assigneeId`` of a task that stays in its group is 400 naming the group (REST
  PUT and the MCP assign_task/unassign_task alike); sending the stored value back is fine.
  The group's own assignee change cascades to its tasks in the same transaction
  (features/tasks/groups.py).
- The write that copies the group's assignee checks, in its transaction, that the group is
  still at the sequence it was read at, so a task never joins with an assignee the group just
  dropped; it also records the move in the group's history (``taskAdded`` / ``taskRemoved``).
- Leaving a group keeps the task's assignee (it is then the task's own).
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.errors import BadRequest, Conflict
from chalicelib.kernel import records
from chalicelib.kernel.hooks import Hook
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.table import Stored


def group_message(task_id: str, group: Stored) -> str:
    name = group.data.get('name')
    named = f"task group '{name}' ({group.id})" if name else f'task group {group.id}'
    return (f'Task {task_id} belongs to {named}: its assignee is set through the group '
            f'(PUT /api/task-groups/{group.id} or the assign_task_group tool), not per task')


def _group(group_id: Any, org: str | None) -> Stored | None:
    """The task's group when it is one of the task's organization; anything else is unknown
    here (the write's reference check answers it with the usual 400, whoever holds the id)."""
    group = table.get('task-groups', group_id) if isinstance(group_id, str) and group_id else None
    return group if group is not None and group.org == org else None


def _take_group_assignee(data: dict[str, Any], group: Stored) -> None:
    assignee = group.data.get('assigneeId')
    if assignee:
        data['assigneeId'] = assignee
    else:
        data.pop('assigneeId', None)


class TaskHook(Hook):
    # the group decides a grouped task's assignee; a group change writes the group's history
    guards = frozenset({'taskGroupId', 'assigneeId'})

    def before_create(self, family, principal, data, body):
        group = _group(data.get('taskGroupId'), data.get('organizationId'))
        if group is None:
            return   # no group (or an unknown one: the reference check answers 400)
        sent = body.get('assigneeId')
        if sent is not None and sent != group.data.get('assigneeId'):
            raise BadRequest(group_message(data['id'], group))
        _take_group_assignee(data, group)

    def before_update(self, family, principal, new, stored):
        group_id = new.get('taskGroupId')
        group = _group(group_id, stored.org)
        if group is None:
            return
        before = stored.data.get('assigneeId')
        if stored.data.get('taskGroupId') == group_id:   # stays in its group
            if new.get('assigneeId') != before:
                raise BadRequest(group_message(stored.id, group))
            return
        # joining a group: an assignee sent along must be the group's
        if new.get('assigneeId') != before and new.get('assigneeId') != group.data.get('assigneeId'):
            raise BadRequest(group_message(stored.id, group))
        _take_group_assignee(new, group)

    def audit_ops(self, family, principal, action, data, stored):
        before = stored.data.get('taskGroupId') if stored is not None else None
        after = data.get('taskGroupId') if action != 'DELETE' else None
        if before == after:
            return []
        ops = []
        if after:
            group = _group(after, data.get('organizationId'))
            if group is not None:
                if group.data.get('assigneeId') != data.get('assigneeId'):
                    raise Conflict(f'Task group {group.id} changed meanwhile; retry')
                ops.append(repo.check_sequence('task-groups', group.id, group.seq, what='holds',
                                               message=f'Task group {group.id} changed meanwhile; retry'))
                ops += _history(principal, group, {'taskAdded': data['id']})
        if before:
            group = _group(before, data.get('organizationId'))
            if group is not None:
                ops += _history(principal, group, {'taskRemoved': data['id']})
        return ops


def _history(principal, group: Stored, changes: dict[str, Any]) -> list:
    history = family_of('task-group-history')
    entry = records.new_record(history, {'taskGroupId': group.id, 'action': 'UPDATE', 'userId': principal.user_id,
                                         'userEmail': principal.email, 'changes': changes},
                               principal=principal, org=group.org, project_id=group.data.get('projectId'))
    return records.create_ops(history, [entry], principal)


HOOK = TaskHook()
