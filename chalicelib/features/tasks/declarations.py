"""The tasks feature's families, declared: each one's fields, references, indexes, hook and
rules (kernel/registry.py ``Family``), installed into the kernel by chalicelib/features/__init__.py.

Tasks, their statuses and groups, and the groups' history.
"""
from __future__ import annotations

from chalicelib.kernel.registry import TEXT_FIELDS, declare

# The enumerations its fields name (kernel/fields.py ``install_enums``), and the contract's input
# alias: a task status type sent as TODO is stored as OPEN.
ENUMS = {'TaskStatusType': ('OPEN', 'IN_PROGRESS', 'DONE', 'BLOCKED', 'PENDING')}
ENUM_ALIASES = {'TaskStatusType': {'TODO': 'OPEN'}}

FAMILIES = (
    declare('task-statuses', 'TaskStatus', 'org',
        'label slug color icon description statusType=OPEN@TaskStatusType sortOrder:int',
        name_field='label'),
    declare('tasks', 'Task', 'project',
        'title description searchText statusSlug taskGroupId>task-groups? assigneeId>users? '
        'teamId>teams? createdByActivityId? dueDate:datetime? priority:int? metadata:object '
        'data:object plan:object', name_field='title', summary_omit=('plan',), hook='tasks',
        slug_refs={'statusSlug': 'task-statuses'},
        indexed={'statusSlug': 1, 'assigneeId': 2, 'teamId': 3, 'taskGroupId': 4, 'createdByActivityId': 5},
        embeds=('project', 'assignee')),
    # a group's statusSlug is its own label, not a slug reference (docs/api/conventions.md)
    declare('task-groups', 'TaskGroup', 'project',
        f'{TEXT_FIELDS} statusSlug assigneeId>users? teamId>teams? metadata:object plan:object',
        collections={'memberTask': ('tasks', 'taskGroupId')}, hook='task_groups',
        indexed={'statusSlug': 1, 'assigneeId': 2}),
    declare('task-group-history', 'TaskGroupHistory', 'project',
        'taskGroupId>task-groups action@AuditAction userId userEmail changes:object',
        name_field='action', read_only=True,
        publishes=False),
)
