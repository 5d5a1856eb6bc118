"""Task groups keep a history: every create, update and delete writes a task-group-history
entry (who, what, which fields changed) in the same transaction as the change itself."""
from __future__ import annotations

import uuid

from chalicelib.core.clock import now_iso
from chalicelib.domain.registry import family as family_of
from chalicelib.store import repository as repo

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
        now = now_iso()
        entry = {'id': str(uuid.uuid4()), 'uuid': str(uuid.uuid4()), 'createdOn': now, 'updatedOn': now,
                 'changeSequence': 1, 'organizationId': data['organizationId'], 'projectId': data['projectId'],
                 'taskGroupId': data['id'], 'action': action, 'userId': principal.user_id,
                 'userEmail': principal.email, 'createdByUserId': principal.user_id, 'changes': changes}
        history = family_of('task-group-history')
        item = repo.entity_item(history.path, entry, 1, data['organizationId'], data['organizationId'],
                                f"{history.path}#P#{data['projectId']}", action)
        return [repo.put_entity(item, None), repo.move_counter(history.path, data['organizationId'], 1)]


HOOK = TaskGroupHook()
