"""Task groups keep a history: every create, update and delete writes a task-group-history
entry (who, what, which fields changed) in the same transaction as the change itself.

A group's ``assigneeId`` cascades to its tasks in that same transaction: every member task whose
assignee differs gets the group's (cleared with it), through the same record-write builder as
any task update (its equality indexes, counters and whatever else a task write carries). The
members are found through the tasks' ``taskGroupId`` index. One transaction holds at most 100
items, so a group of more than ``MAX_CASCADE`` tasks cannot change its assignee (400): nothing is
ever half-assigned. (hooks/tasks.py: the per-task side of the rule.)"""
from __future__ import annotations

from chalicelib.core.clock import now_iso
from chalicelib.core.errors import BadRequest
from chalicelib.domain.registry import family as family_of
from chalicelib.services import records
from chalicelib.store import table

from . import Hook

BOOKKEEPING = {'updatedOn', 'changeSequence'}
MAX_CASCADE = 40   # member tasks re-assigned in one transaction (each is one item, plus its event)


def member_tasks(group_id: str, org: str) -> list[table.Stored]:
    tasks = family_of('tasks')
    slot = tasks.indexed.index('taskGroupId') + 1
    keys = table.walk_value('tasks', org, slot=slot, field_name='taskGroupId', value=group_id,
                            order='createdOn', descending=False, limit=None)
    found = table.batch_get(('tasks', id_) for _, id_ in keys)
    return [found[id_] for _, id_ in keys if id_ in found and found[id_].data.get('taskGroupId') == group_id]


def cascade_ops(principal, group: dict, stored) -> list:
    """Member tasks take the group's new assignee, in the group's transaction."""
    assignee = group.get('assigneeId')
    members = [m for m in member_tasks(group['id'], stored.org) if m.data.get('assigneeId') != assignee]
    if len(members) > MAX_CASCADE:
        raise BadRequest(f"Task group {group['id']} has {len(members)} tasks to re-assign; at most "
                         f'{MAX_CASCADE} change assignee with their group in one write')
    tasks = family_of('tasks')
    ops = []
    for member in members:
        new = dict(member.data)
        if assignee:
            new['assigneeId'] = assignee
        else:
            new.pop('assigneeId', None)
        new['updatedOn'] = now_iso()
        new['changeSequence'] = member.seq + 1
        ops += records.update_ops(tasks, new, member, principal=principal)
    return ops


class TaskGroupHook(Hook):
    def audit_ops(self, family, principal, action, data, stored):
        before = stored.data if stored is not None and action == 'UPDATE' else {}
        if action == 'UPDATE':
            changes = {k: v for k, v in data.items() if before.get(k) != v and k not in BOOKKEEPING}
            changes.update({k: None for k in before if k not in data})
        elif action == 'CREATE':
            changes = {k: v for k, v in data.items() if k not in BOOKKEEPING}
        else:
            changes = {}
        history = family_of('task-group-history')
        entry = records.new_record(history, {'taskGroupId': data['id'], 'action': action, 'userId': principal.user_id,
                                             'userEmail': principal.email, 'changes': changes},
                                   principal=principal, org=data['organizationId'], project_id=data['projectId'])
        ops = records.create_ops(history, [entry], principal)
        if action == 'UPDATE' and 'assigneeId' in changes:
            ops += cascade_ops(principal, data, stored)
        return ops


HOOK = TaskGroupHook()
