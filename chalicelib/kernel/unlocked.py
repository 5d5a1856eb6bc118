"""Unlocked changes of plain fields: one UpdateItem, no read-modify-write (issue 16).

Rule 5 of the update semantics says a PUT without ``changeSequence`` skips locking. Written as
read, change, put-if-unchanged, such a PUT loses to every concurrent writer of the same record
and has to start over; under contention most gave up (409). A change that touches only *plain*
fields does not need the stored record at all: ``store/repository.update_fields`` sets the sent
fields, removes the cleared ones and bumps the sequence in one conditional UpdateItem, and
DynamoDB serialises concurrent ones, each moving the sequence by exactly one.

A field is plain when no other item depends on its value:
* not unique (its uniqueness item must move with it in a transaction),
* not equality-indexed, nor the object an indexed path reads (its index key and per-value
  counters move with it),
* not a reference, by id or by slug (checked before the write, against the value it replaces),
* not an embedded record (resolved by id to the stored record),
* not a field the family's hook guards (kernel/hooks.py ``guards``: the fields its update rules
  read, or follow with other items; a hook that declares none guards every field).
Anything else keeps the read-modify-write path of kernel/crud.py, which stays correct under
contention (it re-reads and re-applies with jittered backoff: kernel/writes.py).

The record is still read first, for visibility and permission (and its organization's status):
that read decides *whether* the caller may write, never *what* is written.

A family whose hook names a lock field (kernel/hooks.py ``locks``) keeps this path: a change
naming any other field is conditioned on the lock not being true, in the same UpdateItem. A
record read as locked, or a failed condition, goes to the read-modify-write path (``apply``
returns None), which reads it once and answers: 404, 409 locked, or the write (one that
changes nothing is allowed).
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.clock import now_iso
from chalicelib.core.errors import BadRequest, NotFound
from chalicelib.core.principal import Principal
from chalicelib.kernel import embedding, records
from chalicelib.kernel.hooks import hook_for
from chalicelib.kernel.registry import Family
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store.repository import InvalidItem
from chalicelib.kernel.store.table import Stored


def plain(family: Family, values: dict[str, Any], nulls: set[str]) -> bool:
    """Whether a change of ``values`` and ``nulls`` can skip the read-modify-write."""
    if not (values or nulls) or family.sparse_updated:   # its first change moves its csk too (table.sorted_keys)
        return False
    guarded = hook_for(family).guarded(family) if family.hook is not None else frozenset()
    if guarded is None:
        return False
    keyed = {part.split('.')[0] for name in family.indexed for part in name.split('+')}   # 'a+b': both
    bound = set(family.unique) | keyed | set(family.slug_refs) | guarded
    for name in (*values, *nulls):
        spec = family.writable.get(name)
        if spec is None or name in bound or spec.ref or _embedded(spec):
            return False
    return True


def _embedded(spec) -> bool:
    if spec.type != 'object':
        return False
    from chalicelib.kernel.models import embedded_family  # noqa: PLC0415 - lazy: pydantic (as resources)
    return embedded_family(spec) is not None


def lock_for(family: Family, values: dict[str, Any], nulls: set[str]) -> str | None:
    """The lock field this change must be conditioned on: the hook's ``locks`` when the change
    names another field (setting the lock alone, e.g. unlocking, needs none)."""
    lock = hook_for(family).locks if family.hook is not None else None
    if lock is None or not (set(values) | nulls) - {lock}:
        return None
    return lock


def apply(family: Family, stored: Stored, values: dict[str, Any], nulls: set[str],
          principal: Principal, *, action: str = 'updated') -> dict[str, Any] | None:
    """Write the change to the record ``stored`` (read for permission only) -> the new record.

    ``null`` clears a field back to its default, or removes it (the rule of the general path).
    The write's domain event rides on the same UpdateItem (the item's ``obx`` attribute, which
    the table-stream handler publishes: features/events/outbox.py), so it is as atomic as the outbox item
    of a transaction without making this write one.

    None (nothing written) when the change must meet the family's lock (``lock_for``) and the
    record is locked, as read or at the write, or gone at the write: the caller's
    read-modify-write path reads it once and answers (404, 409 locked, or the write)."""
    lock = lock_for(family, values, nulls)
    if lock is not None and stored.data.get(lock) is True:
        return None
    values = dict(values)
    for name in nulls:
        default = family.writable[name].default
        if default is not None and name not in values:
            values[name] = default
    remove = {name for name in nulls if name not in values}
    name_sort = None
    if family.name_field in values or family.name_field in remove:
        name_sort = records.name_key(family, {**stored.data, family.name_field: values.get(family.name_field)})
    changed = [k for k in (*values, *remove) if stored.data.get(k) != values.get(k)]
    event = records.domain_event(family, action, [stored.data], principal, changed)
    try:
        new = repo.update_fields(family.path, stored.id, org=stored.org, values=values, remove=remove,
                                 updated_on=now_iso(), name_sort=name_sort, event=event, unless_true=lock)
    except InvalidItem as exc:
        raise BadRequest(f'The resource cannot be stored: {exc}') from None
    if new is None and lock is not None:
        return None
    if new is None:
        raise NotFound(f'No {family.entity} with id {stored.id}')
    return embedding.embed_written(family, new.data, principal)
