"""No orphans (issue 16): a parent cannot be deleted while it holds children.

Per family (docs/reliability.md), the choice is **refuse with 409 while it holds children**:

* an **organization** holds its projects and the records of every organization-scoped family
  (its memberships through ``MEMBERS#{orgId}``, features/identity/organizations.py; its built-in
  roles and permissions are not children: they are deleted with it);
* a **project** holds the records of every project-scoped family.

How it stays true under concurrency (issue 27: without the parent's item in any child's
transaction). Every parent has **guard shards**, each its own partition key
``GUARD#{parentFamily}#{parentId}#{n}`` (``GUARD_SHARDS[parentFamily]`` of them). A child
counts in the shard its id picks (``guard_shard``): its create's transaction ADDs 1 there on
condition that the shard is open (no ``dead`` mark), its delete ADDs -1. The parent's delete
transaction closes every shard at once (``delete_checks``): each must hold zero, and gets the
``dead`` mark. Either the child's transaction comes first (the shard is not zero: the delete is
409) or the delete's (the shard is closed: the create is 400 "refers to a project that does
not exist"); never both. A shard that does not exist yet is open and holds zero: a parent's
create writes nothing, and a deleted parent's closed shards expire after a week (TTL), long
after any create that read the parent alive can still commit.

One child in ``GUARD_SHARDS`` holds a given shard, so concurrent creates under one parent
conflict on it that much less (docs/scale.md); the parent's delete takes every shard in one
transaction, which caps the shards below DynamoDB's 100 items per transaction together with
the delete's own items (the organization's delete also removes its built-in roles).

Records written before guard shards existed (no ``gv`` mark on their item) were counted in the
legacy child counter ``KIDS#{parentFamily}#{parentId}`` (shards ``0..KIDS_SHARDS-1``, sort keys
of one partition): their delete still uncounts them there and the parent's delete still
checks those shards are zero, until ``python -m chalicelib.ops.migrate_scale`` has moved them.

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
GUARD_PREFIX = 'GUARD#'
PARENTS = ('organizations', 'projects')
# The organization's log: events records are written by the platform from the table stream
# (features/events/outbox.py), after the write they tell of. They neither hold their
# organization (nobody could delete it once its first event was recorded) nor are checked
# against it (the stream records an organization's last events as it is deleted): they outlive
# it as the record of what happened (docs/api/lifecycle.md).
LOG_FAMILIES = ('events',)
# Fixed, not COUNTER_SHARDS: a child must be uncounted from the shard it was counted in.
KIDS_SHARDS = 4
# Per parent family: a delete takes every shard in one transaction (at most 100 items, its own
# included: a project's delete writes ~6 more; an organization's 29 with its built-in roles, the
# legacy counter checks and events, plus 4 per membership it takes along, up to
# organizations.INLINE_MEMBERSHIPS: 29 + 7 x 4 + 32 = 89).
GUARD_SHARDS = {'projects': 88, 'organizations': 32}


def kids_pk(parent_family: str, parent_id: str) -> str:
    return f'{KIDS_PREFIX}{parent_family}#{parent_id}'


def counted_in(family: Family, data: dict[str, Any]) -> list[tuple[str, str]]:
    """(parent family, parent id) of the parents a live record of ``family`` counts in."""
    if family.scope == 'project' and data.get('projectId'):
        return [('projects', data['projectId'])]
    if family.scope == 'org' and family.path != 'memberships' and family.path not in LOG_FAMILIES \
            and not data.get('builtIn') and data.get('organizationId'):
        return [('organizations', data['organizationId'])]
    return []


def counted_parents(family: Family, data: dict[str, Any]) -> list[str]:
    """The legacy child counters a live record of ``family`` written before guards counts in."""
    return [kids_pk(pf, pid) for pf, pid in counted_in(family, data)]


def shard_of(child_id: str) -> str:
    """A legacy child counter's shard of a child."""
    return str(zlib.crc32(child_id.encode()) % KIDS_SHARDS)


def guard_shard(parent_family: str, child_id: str) -> int:
    return zlib.crc32(child_id.encode()) % GUARD_SHARDS[parent_family]


def guard_of(parent_family: str, parent_id: str, child_id: str) -> str:
    """The guard shard (its partition key) a child counts in."""
    return repo.guard_pk(parent_family, parent_id, guard_shard(parent_family, child_id))


def guards(family: Family, data: dict[str, Any]) -> list[str]:
    """The guard shards a live record of ``family`` counts in."""
    return [guard_of(pf, pid, data['id']) for pf, pid in counted_in(family, data)]


def moves(family: Family, records: list[dict[str, Any]], amount: int, *, guarded: bool = True) -> list[Op]:
    """Guard moves for creating (+1: only under an open shard) or deleting (-1) ``records``;
    ``guarded=False``: a record written before guards, uncounted from its legacy counter."""
    by_shard: dict[str, int] = {}
    field: dict[str, tuple[str, str]] = {}
    for data in records:
        for pf, pid in counted_in(family, data):
            key = guard_of(pf, pid, data['id']) if guarded else f'{kids_pk(pf, pid)}\x00{shard_of(data["id"])}'
            by_shard[key] = by_shard.get(key, 0) + amount
            field[key] = ('projectId' if pf == 'projects' else 'organizationId', pid)
    out = []
    for key, n in by_shard.items():
        if not n:
            continue
        if guarded:
            name, value = field[key]
            out.append(repo.move_guard(key, n, what='reference', field=name, value=value))
        else:
            pk, shard = key.split('\x00')
            out.append(repo.move_counter_shard(pk, shard, n))
    return out


def delete_checks(family: Family, stored: table.Stored) -> list[Op]:
    """Conditions of a parent's delete transaction: it holds no counted child, and every guard
    shard is closed (module docstring)."""
    if family.path not in PARENTS:
        return []
    message = _message(family, None)
    return [repo.close_guard(repo.guard_pk(family.path, stored.id, n), what='holds', message=message)
            for n in range(GUARD_SHARDS[family.path])] + \
        repo.check_counter_zero(kids_pk(family.path, stored.id), KIDS_SHARDS, what='holds', message=message)


def create_checks(family: Family, org: str | None, ops: list[Op]) -> list[Op]:
    """Conditions of a client's create: its organization still exists, for organization-scoped
    families that do not count in its guard shards (memberships, built-in records written with
    the organization itself); the others' guard move is that condition."""
    if family.scope != 'org' or org is None or family.path in LOG_FAMILIES:
        return []
    key = (table.entity_pk('organizations', org), table.ENTITY_SK)
    prefix = f'{GUARD_PREFIX}organizations#{org}#'
    if any(op.model_key == key or (op.item is not None and ((op.item.pk, op.item.sk) == key
                                                             or op.item.pk.startswith(prefix)))
           for op in ops):
        return []
    return [repo.check_exists('organizations', org, None, field='organizationId', value=org)]


def held(family: Family, stored: table.Stored) -> dict[str, int | None]:
    """What a parent holds: child family path -> how many (None: some, not counted)."""
    out: dict[str, int | None] = {}
    if family.path == 'organizations':
        for child in FAMILIES:
            if child.scope != 'org' or child.path == 'memberships' or child.path in LOG_FAMILIES:
                continue   # memberships: the organization hook's own refusal; the log outlives it
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
