"""Task groups keep a history: every create, update and delete writes a task-group-history
entry (who, what, which fields changed) in the same transaction as the change itself.

A group's ``assigneeId`` cascades to its tasks in that same transaction: every member task whose
assignee differs gets the group's (cleared with it), through the same record-write builder as
any task update (its equality indexes, counters and whatever else a task write carries). The
members are found through the tasks' ``taskGroupId`` index. One transaction holds at most 100
items, so a group of more than ``MAX_CASCADE`` tasks cannot change its assignee (400): nothing is
ever half-assigned. (features/tasks/hooks.py: the per-task side of the rule.)"""
from __future__ import annotations

import time

from chalicelib.core.clock import now_iso
from chalicelib.core.errors import BadRequest
from chalicelib.kernel import records
from chalicelib.kernel.hooks import Hook
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table

BOOKKEEPING = {'updatedOn', 'changeSequence'}
MAX_CASCADE = 35   # member tasks re-assigned in one transaction (each is one item, plus its event)
INDEX_WAITS = 3


def member_tasks(group_id: str, org: str) -> list[table.Stored]:
    tasks = family_of('tasks')
    slot = tasks.slot_of('taskGroupId')
    keys = table.walk_value('tasks', org, slot=slot, field_name='taskGroupId', value=group_id,
                            descending=False, limit=None)
    found = table.batch_get(('tasks', id_) for _, id_ in keys)
    return [found[id_] for _, id_ in keys if id_ in found and found[id_].data.get('taskGroupId') == group_id]


def _members_now(group_id: str, org: str) -> tuple[list[table.Stored], str, dict[str, int]]:
    """The group's tasks and its member counter (the per-value counter of taskGroupId, moved in
    the transaction of every join and leave). The counter is read strongly, the index may trail
    it on AWS: fewer members found than counted is read again, briefly."""
    counter = table.value_counter_pk('tasks', org, 'taskGroupId', group_id)
    for attempt in range(INDEX_WAITS):
        shards = table.counter_shards(counter)
        members = member_tasks(group_id, org)
        if len(members) >= sum(shards.values()):
            break
        time.sleep(0.1 * (attempt + 1))
    return members, counter, shards


def cascade_ops(principal, group: dict, stored) -> list:
    """Member tasks take the group's new assignee, in the group's transaction, which also checks
    that no task joined or left since they were read (the member counter's shards unchanged: a
    task joining in between makes this write fail and be tried again by resources.update)."""
    assignee = group.get('assigneeId')
    everyone, counter, shards = _members_now(group['id'], stored.org)
    members = [m for m in everyone if m.data.get('assigneeId') != assignee]
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
    return ops + repo.check_counter(counter, shards, what='entity')


class TaskGroupHook(Hook):
    # every update writes a history entry in its transaction (and an assignee change cascades)
    guards = None

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
