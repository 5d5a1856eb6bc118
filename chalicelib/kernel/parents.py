"""No orphans (issue 16): a parent cannot be deleted while it holds children.

Per family (docs/reliability.md), the choice is **refuse with 409 while it holds children**:

* an **organization** holds its projects and the records of every organization-scoped family
  (its memberships through ``MEMBERS#{orgId}``, features/identity/organizations.py; its built-in
  roles and permissions are not children: they are deleted with it);
* a **project** holds the records of every project-scoped family.

How it stays true under concurrency: every parent has a sharded **child counter**
``KIDS#{parentFamily}#{parentId}`` (shards ``0..KIDS_SHARDS-1``), moved in the transaction of
every create and delete of a child (``moves``). A child always counts in the same shard (chosen
by its id, not at random like the record counters), so each shard holds the number of live
children hashed to it and is never negative: the parent's delete transaction checks that every
shard is zero (``delete_checks``), and a child's create transaction
checks that its parent still exists (projects: ``check_exists`` of the project, already there;
organizations: ``create_checks``). Either the child's transaction comes first (the delete's
condition then fails: 409) or the delete does (the create's condition fails: 400 "refers to an
organization/project that does not exist"); never both.

Before that transaction, the delete reads what the parent holds (``refuse_if_held``), so the 409
names it ("still holds 3 projects, 2 teams"), and records written before the counters existed
(not counted) are refused too. Soft-deleted records (prompts, assistants) have left their
parent: they do not hold it.
"""
from __future__ import annotations

import zlib
from typing import Any

from chalicelib.core.errors import Conflict
from chalicelib.kernel.registry import FAMILIES, Family
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import Op

KIDS_PREFIX = 'KIDS#'
PARENTS = ('organizations', 'projects')
# Fixed, not COUNTER_SHARDS: a child must be uncounted from the shard it was counted in.
KIDS_SHARDS = 4


def kids_pk(parent_family: str, parent_id: str) -> str:
    return f'{KIDS_PREFIX}{parent_family}#{parent_id}'


def counted_parents(family: Family, data: dict[str, Any]) -> list[str]:
    """The child counters a live record of ``family`` counts in."""
    if family.scope == 'project' and data.get('projectId'):
        return [kids_pk('projects', data['projectId'])]
    if family.scope == 'org' and family.path != 'memberships' and not data.get('builtIn') \
            and data.get('organizationId'):
        return [kids_pk('organizations', data['organizationId'])]
    return []


def shard_of(child_id: str) -> str:
    return str(zlib.crc32(child_id.encode()) % KIDS_SHARDS)


def moves(family: Family, records: list[dict[str, Any]], amount: int) -> list[Op]:
    """Counter moves for creating (+1) or deleting (-1) ``records``: one op per parent shard."""
    by_shard: dict[tuple[str, str], int] = {}
    for data in records:
        for key in counted_parents(family, data):
            at = (key, shard_of(data['id']))
            by_shard[at] = by_shard.get(at, 0) + amount
    return [repo.move_counter_shard(key, shard, n) for (key, shard), n in by_shard.items() if n]


def delete_checks(family: Family, stored: table.Stored) -> list[Op]:
    """Conditions of a parent's delete transaction: it holds no counted child."""
    if family.path not in PARENTS:
        return []
    return repo.check_counter_zero(kids_pk(family.path, stored.id), KIDS_SHARDS,
                                   what='holds', message=_message(family, None))


def create_checks(family: Family, org: str | None, ops: list[Op]) -> list[Op]:
    """Conditions of a client's create: its organization still exists (organization-scoped
    families; a project's existence is checked by kernel/crud.py already)."""
    if family.scope != 'org' or org is None:
        return []
    key = (table.entity_pk('organizations', org), table.ENTITY_SK)
    if any(op.model_key == key or (op.item is not None and (op.item.pk, op.item.sk) == key) for op in ops):
        return []
    return [repo.check_exists('organizations', org, None, field='organizationId', value=org)]


def held(family: Family, stored: table.Stored) -> dict[str, int | None]:
    """What a parent holds: child family path -> how many (None: some, not counted)."""
    out: dict[str, int | None] = {}
    if family.path == 'organizations':
        for child in FAMILIES:
            if child.scope != 'org' or child.path == 'memberships':
                continue   # memberships: the organization hook's own refusal
            n = table.count(child.path, stored.id)
            if child.path in ('roles', 'permissions') and n > 0:
                n = sum(1 for r in table.query_tenant(child.path, stored.id) if not r.get('builtIn'))
            if n > 0:
                out[child.path] = n
    elif family.path == 'projects':
        for child in FAMILIES:
            if child.scope == 'project' and table.project_has(child.path, stored.id):
                out[child.path] = None
    return out


def refuse_if_held(family: Family, stored: table.Stored) -> None:
    """409 naming what the parent still holds (module docstring)."""
    if family.path not in PARENTS:
        return
    found = held(family, stored)
    if found:
        raise Conflict(_message(family, found))


def _message(family: Family, found: dict[str, int | None] | None) -> str:
    what = 'records'
    if found:
        what = ', '.join(f'{n} {path}' if n is not None else path for path, n in sorted(found.items()))
    return (f'The {family.entity.lower()} still holds {what}: delete them first '
            f'(a {family.entity.lower()} is never deleted with children left behind)')
