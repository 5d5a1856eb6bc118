"""The items a write of a record touches, assembled in one place.

A record of any family is stored as its entity item (carrying its list and equality-index
keys) plus, in the same transaction, the unique-value items of its unique fields, a counter
shard of its tenant, a counter shard per value of each equality-indexed field (moved when the
value changes, so an indexed filter's ``totalElements`` reads no matches), and whatever its
family hook adds (memberships: the member's ACL item; task groups: a history entry;
organizations: built-in roles and the creator's membership). ``create_ops``, ``update_ops``
and ``delete_ops`` build those operations; hooks that create further records (a membership,
a history entry, built-in roles) call ``new_record`` + ``create_ops`` again, so every record
is written the same way whoever creates it.

The rules deciding *whether* a write may happen (validation, permissions, locking) live in
kernel/crud.py; this module only knows the shape of the write.
"""
from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from chalicelib.core import observability
from chalicelib.core.clock import now_iso
from chalicelib.core.errors import BadRequest
from chalicelib.core.principal import Principal
from chalicelib.kernel import parents
from chalicelib.kernel.hooks import hook_for
from chalicelib.kernel.registry import Family
from chalicelib.kernel.store import outbox as outbox_store
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import InvalidItem, Op
from chalicelib.kernel.store.table import Stored
from chalicelib.kernel.tenancy import MEMBERSHIPS, ORGANIZATIONS


def record_org(family: Family, data: dict[str, Any]) -> str | None:
    """The organization a record belongs to (an organization belongs to itself)."""
    if family.path == ORGANIZATIONS:
        return data['id']
    return data.get('organizationId') if family.scope in ('org', 'project') else None


def tenant(family: Family, org: str | None) -> str:
    return table.GLOBAL_TENANT if family.scope == 'global' else org


def unique_scope(family: Family, data: dict[str, Any], org: str | None) -> str:
    if family.scope == 'global':
        return table.GLOBAL_TENANT
    if family.scope == 'project':
        return data['projectId']
    return org


def _parent(family: Family, data: dict[str, Any]) -> str | None:
    if family.scope == 'project':   # spread by the record's id (kernel/store/table.py INDEX_SHARDS)
        return table.spread_pk(table.project_pk(family.path, data['projectId']), data['id'])
    if family.path == MEMBERSHIPS:
        return table.member_pk(data['userId'])
    return None


def indexed_values(family: Family, data: dict[str, Any]) -> dict[int, tuple[str, str]]:
    """Equality-index slot -> (field, value) for the indexed fields holding a non-empty string
    (a pair of fields, ``a+b``: both non-empty, the value ``{a}#{b}``; kernel/registry.py)."""
    out: dict[int, tuple[str, str]] = {}
    for name, slot in family.indexed.items():   # the slot each field names (kernel/registry.py)
        if '+' in name:
            parts = [data.get(part) for part in name.split('+')]
            if all(isinstance(v, str) and v for v in parts):
                out[slot] = (name, '#'.join(parts))
            continue
        value: Any = data
        for part in name.split('.'):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, str) and value:
            out[slot] = (name, value)
    return out


def value_keys(family: Family, data: dict[str, Any], owner: str) -> dict[int, str]:
    """Equality-index slot -> the partition key a record is written under: its value's key,
    spread by the record's id (kernel/store/table.py INDEX_SHARDS). None for the name field of
    a ``name_keyed`` family: its name key serves its equality filters (``name_key``)."""
    return {slot: table.spread_pk(table.value_pk(family.path, owner, name, value), data['id'])
            for slot, (name, value) in indexed_values(family, data).items()
            if not (family.name_keyed and name == family.name_field)}


def name_key(family: Family, data: dict[str, Any]) -> str:
    """A record's by_name sort key (kernel/store/table.py ``name_sort_key``): with its createdOn
    in a ``name_keyed`` family (kernel/registry.py)."""
    created = (data.get('createdOn') or '') if family.name_keyed else None
    return table.name_sort_key(data.get(family.name_field), data['id'], created=created)


def entity(family: Family, data: dict[str, Any], *, seq: int, org: str | None, listed: bool = True,
           guarded: bool | int = True):
    """The entity item of a record; ``listed=False`` keeps it out of every list (soft delete);
    ``guarded``: it counts in its parents' guard shards, not their legacy counters (kernel/parents.py)."""
    keys = None
    if listed and family.indexed:
        owner = tenant(family, org)
        keys = value_keys(family, data, owner)
    if family.log:
        guarded = 0   # counts in no parent (kernel/parents.py): no layout to remember
    return repo.entity_item(family.path, data, seq=seq, org=org, tenant=tenant(family, org) if listed else None,
                            parent=_parent(family, data), name_key=name_key(family, data), value_keys=keys,
                            guarded=parents.GUARD_VERSION if guarded is True else int(guarded),
                            sparse_updated=family.sparse_updated)


def _checked_fields() -> frozenset[tuple[str, str]]:
    """(family, field) of the value counters a transaction checks whole: a family's declared
    collections (a task group's member tasks: features/tasks/groups.py)."""
    from chalicelib.kernel.registry import FAMILIES  # noqa: PLC0415 - the registry is loaded by now
    return frozenset(target for fam in FAMILIES for target in fam.collections.values())


_CHECKED: frozenset[tuple[str, str]] | None = None


def _value_counter_moves(family: Family, owner: str, before: dict[str, Any] | None,
                         after: dict[str, Any] | None) -> dict[str, int]:
    """Counter key -> amount, for the indexed values a write removes (-1) and adds (+1)."""
    moves: dict[str, int] = {}
    for data, amount in ((before, -1), (after, 1)):
        for name, value in (indexed_values(family, data).values() if data is not None else ()):
            key = table.value_counter_pk(family.path, owner, name, value)
            moves[key] = moves.get(key, 0) + amount
    return {key: amount for key, amount in moves.items() if amount}


def _value_moves(family: Family, owner: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[Op]:
    """The counter moves of ``_value_counter_moves``: narrow shards for a checked counter."""
    return _counter_ops(family, _value_counter_moves(family, owner, before, after))


def _counter_ops(family: Family, moves: dict[str, int]) -> list[Op]:
    """One move per value counter (counter key -> amount): narrow shards for a checked counter."""
    global _CHECKED
    if _CHECKED is None:
        _CHECKED = _checked_fields()
    checked = {f'CNT#{family.path}#{name}' for path, name in _CHECKED if path == family.path}
    return [repo.move_counter_at(counter, n, checked=_is_checked(counter, checked))
            for counter, n in moves.items() if n]


def _is_checked(counter: str, checked: set[str]) -> bool:
    """``CNT#{family}#{tenant}#{field}={value}`` names a checked (family, field)."""
    if not checked:
        return False
    family_path, _, rest = counter[len('CNT#'):].partition('#')
    _, _, field_value = rest.partition('#')
    return f'CNT#{family_path}#{field_value.split("=", 1)[0]}' in checked


BOOKKEEPING = frozenset({'updatedOn', 'changeSequence'})


def domain_event(family: Family, action: str, records: list[dict[str, Any]], principal: Principal,
                 changed: list[str]) -> dict[str, Any] | None:
    """The domain event of a write (docs/api/work.md): ``<family>.<action>`` (``tasks.updated``,
    or the action a caller names: ``tasks.statusChanged``); None for families that publish none."""
    if not family.publishes or not records:   # events, audit history (kernel/registry.py)
        return None
    first = records[0]
    event = {'id': str(uuid.uuid4()), 'eventType': f'{family.path}.{action}', 'family': family.path,
             'resourceId': first.get('id'), 'organizationId': record_org(family, first),
             'projectId': first.get('projectId'), 'actorId': principal.user_id,
             'changedFields': sorted(changed), 'occurredOn': now_iso(),
             'correlationId': observability.correlation_id()}
    if len(records) > 1:
        event['resourceIds'] = [r.get('id') for r in records]
    return {k: v for k, v in event.items() if v is not None}


def outbox_ops(family: Family, action: str, records: list[dict[str, Any]], principal: Principal,
               changed: list[str], *, carrier: Op | None = None) -> list[Op]:
    """The domain event of a write, published by the table-stream handler: on ``carrier`` (the
    put of the record's own entity item, as its ``obx`` attribute: the stream's INSERT or MODIFY
    of that item carries it, no item of its own) or else as an outbox item in the write's
    transaction (a delete, a write of several records). A write that is one UpdateItem carries
    it the same way (kernel/unlocked.py). Carried, an event costs no write unit of its own: the
    outbox item was 2 WCU of every create and locked update (docs/scale.md "The outbox")."""
    event = domain_event(family, action, records, principal, changed)
    if event is None:
        return []
    if carrier is not None and len(records) == 1:
        carrier.item.obx = event
        return []
    return [outbox_store.outbox_op(event)]


def new_record(family: Family, values: dict[str, Any], *, principal: Principal, org: str | None = None,
               project_id: str | None = None, id_: str | None = None) -> dict[str, Any]:
    """A new record's body: the bookkeeping fields, its ownership, then ``values``.

    ``id_`` gives a derived record (built-in roles) a stable id; it is its uuid as well."""
    now = now_iso()
    rid = id_ or str(uuid.uuid4())
    data: dict[str, Any] = {'id': rid, 'uuid': rid if id_ else str(uuid.uuid4()), 'createdOn': now,
                            'updatedOn': now, 'changeSequence': 1, 'createdByUserId': principal.user_id}
    if family.scope in ('org', 'project'):
        data['organizationId'] = org
    if project_id is not None:
        data['projectId'] = project_id
    data.update(values)
    return data


def create_ops(family: Family, records: list[dict[str, Any]], principal: Principal) -> list[Op]:
    """Operations storing new records of one family: entities, unique claims, one counter move
    for all of them (a transaction may touch a counter shard once), and the hook's items."""
    hook = hook_for(family)
    ops: list[Op] = []
    for data in records:
        org = record_org(family, data)
        ops.append(repo.put_entity(entity(family, data, seq=1, org=org), None))
        scope = unique_scope(family, data, org)
        ops += [repo.claim_unique(family.path, scope=scope, field_name=name, value=data[name], owner_id=data['id'])
                for name in family.unique if data.get(name) is not None]
    ops += count_ops(family, records, 1)
    ops += parents.moves(family, records, 1)   # guard shards (kernel/parents.py: no orphans)
    for data in records:
        ops += hook.extra_create_ops(family, principal, data)
        ops += hook.audit_ops(family, principal, 'CREATE', data, None)
    ops += outbox_ops(family, 'created', records, principal, [k for k in records[0] if k not in BOOKKEEPING]
                      if records else [], carrier=ops[0] if ops else None)
    return ops


def count_ops(family: Family, records: list[dict[str, Any]], amount: int) -> list[Op]:
    """Counter moves for ``records`` entering (1) or leaving (-1) their family: one move per
    counter for all of them (a transaction may touch a counter shard once), its family total per
    tenant and each indexed value's. A create's transaction holds them, as does the transaction
    recording up to 40 domain events' records at once (features/events/outbox.py ``record_all``)."""
    by_tenant: dict[str, int] = {}
    by_value: dict[str, int] = {}
    for data in records:
        key = tenant(family, record_org(family, data))
        by_tenant[key] = by_tenant.get(key, 0) + amount
        for counter, n in _value_counter_moves(family, key, None, data).items():
            by_value[counter] = by_value.get(counter, 0) + n * amount
    return _counter_ops(family, by_value) + \
        [repo.move_counter(family.path, key, n) for key, n in by_tenant.items() if n]


def update_ops(family: Family, new: dict[str, Any], stored: Stored, *, principal: Principal,
               action: str = 'updated') -> list[Op]:
    """Operations replacing ``stored`` by ``new`` (locked on the stored sequence); ``action``
    names its domain event (``statusChanged``: ``tasks.statusChanged``)."""
    ops = [repo.put_entity(entity(family, new, seq=new['changeSequence'], org=stored.org, guarded=stored.guarded),
                           stored.seq)]
    scope = unique_scope(family, new, stored.org)
    for name in family.unique:
        old_value, new_value = stored.data.get(name), new.get(name)
        if old_value != new_value:
            if new_value is not None:
                ops.append(repo.claim_unique(family.path, scope=scope, field_name=name, value=new_value,
                                             owner_id=new['id']))
            if old_value is not None:
                ops.append(repo.release_unique(family.path, scope=scope, field_name=name, value=old_value))
    owner = tenant(family, stored.org)
    counted = stored.data if stored.indexed else None   # not yet backfilled: nothing to move away from
    ops += _value_moves(family, owner, counted, new)
    ops += hook_for(family).audit_ops(family, principal, 'UPDATE', new, stored)
    changed = [k for k in set(new) | set(stored.data)
               if k not in BOOKKEEPING and new.get(k) != stored.data.get(k)]
    ops += outbox_ops(family, action, [new], principal, changed, carrier=ops[0])
    return ops


def delete_ops(family: Family, stored: Stored, principal: Principal, *, soft: dict[str, Any] | None = None) -> list[Op]:
    """Operations deleting ``stored``; ``soft`` is the record as kept by a soft delete (unlisted)."""
    if soft is not None:
        ops = [repo.put_entity(entity(family, soft, seq=soft['changeSequence'], org=stored.org, listed=False),
                               stored.seq)]
    else:
        ops = [repo.delete_entity(family.path, stored.id, stored.seq)]
    scope = unique_scope(family, stored.data, stored.org)
    ops += [repo.release_unique(family.path, scope=scope, field_name=name, value=stored.data[name])
            for name in family.unique if stored.data.get(name) is not None]
    owner = tenant(family, stored.org)
    ops.append(repo.move_counter(family.path, owner, -1))
    ops += _value_moves(family, owner, stored.data if stored.indexed else None, None)
    ops += parents.moves(family, [stored.data], -1, guarded=stored.guarded) + parents.delete_checks(family, stored)
    ops += hook_for(family).audit_ops(family, principal, 'DELETE', stored.data, stored)
    ops += outbox_ops(family, 'deleted', [stored.data], principal, [])
    return ops


def commit(ops: list[Op]) -> None:
    """Run the operations as one write; an item DynamoDB refuses is the caller's data: 400, in
    our words (kernel/store/repository.py never passes DynamoDB's message on). A table that stays
    throttled or failing is 503 with Retry-After (StoreUnavailable). A create meeting a guard
    shard that a parent's delete closed ahead of its transaction waits for that delete
    (kernel/parents.py ``wait_if_closing``)."""
    ops = merged(ops)
    try:
        try:
            repo.commit(ops)
        except repo.WriteConflict as exc:
            # a guard shard closed by a parent's delete in flight (kernel/parents.py close_ahead):
            # once that delete is over or undone, the same write again; else the refusal stands
            if exc.code == 'TransactionConflict' or not (_is_guard_move(exc.op) and parents.wait_if_closing(exc.op)):
                raise
            repo.commit(ops)
    except InvalidItem as exc:
        raise BadRequest(f'The resource cannot be stored: {exc}') from None


def _is_guard_move(op: Op | None) -> bool:
    return op is not None and op.kind == 'add' and op.amount > 0 and op.item.pk.startswith(parents.GUARD_PREFIX)


def merged(ops: list[Op]) -> list[Op]:
    """A transaction may touch an item once: counter moves of one shard are summed (a write of
    several records, e.g. a task group's assignee cascading to its tasks, moves one counter many
    times) and conditions on one item are AND-ed (a reference check and a sequence check of the
    same record); a condition tagged ``holds`` explains the merged failure."""
    out: list[Op] = []
    seen: dict[tuple, int] = {}
    for op in ops:
        if op.kind == 'add':
            key: tuple = ('add', op.item.pk, op.item.sk)
        elif op.kind == 'check':
            key = ('check', *op.model_key)
        else:
            out.append(op)
            continue
        if key not in seen:
            seen[key] = len(out)
            out.append(replace(op))
            continue
        first = out[seen[key]]
        if op.kind == 'add':
            first.amount += op.amount
        else:
            first.condition = first.condition & op.condition
            if op.tag.get('what') == 'holds':
                first.tag = op.tag
    return [op for op in out if op.kind != 'add' or op.amount]
