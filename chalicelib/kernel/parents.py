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

import contextlib
import time
import uuid
import zlib
from typing import Any

from chalicelib.core.errors import Conflict, ServiceUnavailable
from chalicelib.core.observability import get_logger
from chalicelib.kernel.registry import FAMILIES, Family
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import Op
from chalicelib.kernel.tenancy import MEMBERSHIPS, ORGANIZATIONS, PROJECTS

log = get_logger('parents')
KIDS_PREFIX = 'KIDS#'
GUARD_PREFIX = 'GUARD#'
PARENTS = (ORGANIZATIONS, PROJECTS)
# The organization's log (a family declared ``log``, kernel/registry.py: events records, written
# by the platform from the table stream after the write they tell of, features/events/outbox.py).
# They neither hold their organization (nobody could delete it once its first event was
# recorded) nor are checked against it (the stream records an organization's last events as it
# is deleted): they outlive it as the record of what happened (docs/api/lifecycle.md).
# Fixed, not COUNTER_SHARDS: a child must be uncounted from the shard it was counted in.
KIDS_SHARDS = 4
# Guard layouts, by the version a record carries in ``gv`` (a child is uncounted from the shard
# it was counted in, so a layout never changes: a new one gets a new version). Version 1 (88
# project shards) was written before the two-step delete; version 2's 144 project shards let
# one create in 144 hold a given shard: 1,000 creates a second per project at 10 % conflicts
# (docs/scale.md).
GUARD_LAYOUTS = {1: {PROJECTS: 88, ORGANIZATIONS: 32}, 2: {PROJECTS: 144, ORGANIZATIONS: 32}}
GUARD_VERSION = 2
GUARD_SHARDS = GUARD_LAYOUTS[GUARD_VERSION]
# Per parent family, the shards its delete closes in its own transaction (at most 100 items, its
# own included: a project's delete writes ~6 more; an organization's 29 with its built-in roles,
# the legacy counter checks and events, plus 4 per membership it takes along, up to
# organizations.INLINE_MEMBERSHIPS: 29 + 7 x 4 + 32 = 89). The others are closed just before, in
# one transaction of their own (``close_ahead``), and reopened if the delete's fails.
INLINE_GUARDS = {PROJECTS: 88, ORGANIZATIONS: 32}
# A shard closed ahead by a delete whose transaction has not run for this long was left by a
# delete that stopped between its two transactions (a timeout): the next create under the
# still-living parent reopens it (``wait_if_closing``). Beyond any request's 29 s.
CLOSING_SECONDS = 60
# How long a create waits for a delete in flight to end (its two transactions), re-reading.
CLOSING_WAIT_SECONDS = 2.0


def kids_pk(parent_family: str, parent_id: str) -> str:
    return f'{KIDS_PREFIX}{parent_family}#{parent_id}'


def counted_in(family: Family, data: dict[str, Any]) -> list[tuple[str, str]]:
    """(parent family, parent id) of the parents a live record of ``family`` counts in."""
    if family.scope == 'project' and data.get('projectId'):
        return [(PROJECTS, data['projectId'])]
    if family.scope == 'org' and family.path != MEMBERSHIPS and not family.log \
            and not data.get('builtIn') and data.get('organizationId'):
        return [(ORGANIZATIONS, data['organizationId'])]
    return []


def counted_parents(family: Family, data: dict[str, Any]) -> list[str]:
    """The legacy child counters a live record of ``family`` written before guards counts in."""
    return [kids_pk(pf, pid) for pf, pid in counted_in(family, data)]


def shard_of(child_id: str) -> str:
    """A legacy child counter's shard of a child."""
    return str(zlib.crc32(child_id.encode()) % KIDS_SHARDS)


def guard_shard(parent_family: str, child_id: str, version: int = GUARD_VERSION) -> int:
    return zlib.crc32(child_id.encode()) % GUARD_LAYOUTS[version][parent_family]


def guard_of(parent_family: str, parent_id: str, child_id: str, version: int = GUARD_VERSION) -> str:
    """The guard shard (its partition key) a child counts in, in guard layout ``version``."""
    return repo.guard_pk(parent_family, parent_id, guard_shard(parent_family, child_id, version))


def guards(family: Family, data: dict[str, Any], version: int = GUARD_VERSION) -> list[str]:
    """The guard shards a live record of ``family`` counts in."""
    return [guard_of(pf, pid, data['id'], version) for pf, pid in counted_in(family, data)]


def moves(family: Family, records: list[dict[str, Any]], amount: int, *, guarded: bool | int = True) -> list[Op]:
    """Guard moves for creating (+1: only under an open shard) or deleting (-1) ``records``;
    ``guarded``: True for the current layout, or the layout version the records count in (their
    ``gv``); 0/False: records written before guards, uncounted from their legacy counter."""
    version = GUARD_VERSION if guarded is True else int(guarded)
    by_shard: dict[str, int] = {}
    field: dict[str, tuple[str, str]] = {}
    for data in records:
        for pf, pid in counted_in(family, data):
            key = guard_of(pf, pid, data['id'], version) if version else \
                f'{kids_pk(pf, pid)}\x00{shard_of(data["id"])}'
            by_shard[key] = by_shard.get(key, 0) + amount
            field[key] = ('projectId' if pf == PROJECTS else 'organizationId', pid)
    out = []
    for key, n in by_shard.items():
        if not n:
            continue
        if version:
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
            for n in range(INLINE_GUARDS[family.path])] + \
        repo.check_counter_zero(kids_pk(family.path, stored.id), KIDS_SHARDS, what='holds', message=message)


def close_ahead(family: Family, stored: table.Stored) -> str | None:
    """Close the guard shards a parent's delete transaction cannot hold (past ``INLINE_GUARDS``),
    each required to hold zero, in one transaction of their own, marked with a token naming this
    delete and its time; the token (None: nothing to close). A ``WriteConflict`` tagged ``holds``
    when one of them holds a child. The caller reopens them (``reopen``) if its transaction fails."""
    if family.path not in PARENTS or GUARD_SHARDS[family.path] <= INLINE_GUARDS[family.path]:
        return None
    token = f'{int(time.time())}:{uuid.uuid4().hex}'
    message = _message(family, None)
    repo.commit([repo.close_guard_ahead(repo.guard_pk(family.path, stored.id, n), token, what='holds', message=message)
                 for n in range(INLINE_GUARDS[family.path], GUARD_SHARDS[family.path])])
    return token


def reopen(family: Family, stored: table.Stored, token: str | None) -> None:
    """Reopen the shards ``close_ahead`` closed with ``token`` (the delete did not happen). Shards
    another writer reopened meanwhile are left (best effort: a shard still closed is reopened
    by the next create that meets it, once ``CLOSING_SECONDS`` have passed)."""
    if token is None:
        return
    ops = [repo.reopen_guard(repo.guard_pk(family.path, stored.id, n), token)
           for n in range(INLINE_GUARDS[family.path], GUARD_SHARDS[family.path])]
    try:
        try:
            repo.commit(ops)
        except repo.WriteConflict:
            for op in ops:
                with contextlib.suppress(repo.WriteConflict):
                    repo.commit([op])
    except Exception as exc:  # noqa: BLE001 - the delete's own failure is what the caller reports
        log.warning('guard shards of %s %s left closed (reopened by the next create after %d s): %s',
                    family.path, stored.id, CLOSING_SECONDS, exc)


def wait_if_closing(op: Op) -> bool:
    """A create's guard move ``op`` was refused (its shard is closed): True when that was a
    delete in flight, now over or undone, so the create may be tried again; False when the
    parent is gone (the refusal stands). Waits at most ``CLOSING_WAIT_SECONDS``; a shard closed
    ahead by a delete that stopped midway (older than ``CLOSING_SECONDS``) is reopened, on
    condition that the parent still lives. ``ServiceUnavailable`` when the delete outlasts the wait."""
    pk = op.item.pk
    parent_family, parent_id = pk[len(GUARD_PREFIX):].rsplit('#', 1)[0].split('#', 1)
    deadline = time.monotonic() + CLOSING_WAIT_SECONDS
    while True:
        state = table.guard_state(pk)
        if state is None or not state[0]:
            return True   # reopened meanwhile
        token = state[1]
        if token is None or not table.alive(parent_family, parent_id):
            return False  # closed by a delete that happened
        if time.time() - closed_at(token) > CLOSING_SECONDS:
            model_check = repo.check_exists(parent_family, parent_id, None, what='parent')
            with contextlib.suppress(repo.WriteConflict):
                repo.commit([model_check, repo.reopen_guard(pk, token)])
            continue
        if time.monotonic() >= deadline:
            raise ServiceUnavailable('The parent is being deleted; nothing was changed, retry shortly', retry_after=1)
        time.sleep(0.05)


def closed_at(token: str) -> float:
    """When a delete closed a shard ahead (its token: ``{epoch}:{hex}``); 0 when unreadable."""
    try:
        return float(token.split(':', 1)[0])
    except ValueError:
        return 0.0


def create_checks(family: Family, org: str | None, ops: list[Op]) -> list[Op]:
    """Conditions of a client's create: its organization still exists, for organization-scoped
    families that do not count in its guard shards (memberships, built-in records written with
    the organization itself); the others' guard move is that condition."""
    if family.scope != 'org' or org is None or family.log:
        return []
    key = (table.entity_pk(ORGANIZATIONS, org), table.ENTITY_SK)
    prefix = f'{GUARD_PREFIX}organizations#{org}#'
    if any(op.model_key == key or (op.item is not None and ((op.item.pk, op.item.sk) == key
                                                             or op.item.pk.startswith(prefix)))
           for op in ops):
        return []
    return [repo.check_exists(ORGANIZATIONS, org, None, field='organizationId', value=org)]


def held(family: Family, stored: table.Stored) -> dict[str, int | None]:
    """What a parent holds: child family path -> how many (None: some, not counted)."""
    out: dict[str, int | None] = {}
    if family.path == ORGANIZATIONS:
        for child in FAMILIES:
            if child.scope != 'org' or child.path == MEMBERSHIPS or child.log:
                continue   # memberships: the organization hook's own refusal; the log outlives it
            n = table.count(child.path, stored.id)
            if child.builtin and n > 0:
                n = sum(1 for r in table.query_tenant(child.path, stored.id) if not r.get('builtIn'))
            if n > 0:
                out[child.path] = n
    elif family.path == PROJECTS:
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
