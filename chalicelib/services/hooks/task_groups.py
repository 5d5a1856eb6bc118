"""Task groups keep a history: every create, update and delete writes a task-group-history
entry (who, what, which fields changed) in the same transaction as the change itself."""
from __future__ import annotations

from chalicelib.domain.registry import family as family_of
from chalicelib.services import records

from . import Hook

BOOKKEEPING = {'updatedOn', 'changeSequence'}


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
        return records.create_ops(history, [entry], principal)


HOOK = TaskGroupHook()
