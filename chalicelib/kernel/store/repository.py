"""Writes: one conditional PutItem/DeleteItem, or one TransactWriteItems.

Services describe a write as a list of operations (entity put or delete, unique claims and
releases, reference checks, counter moves, attribute updates) built by the functions below;
``commit`` runs them as a single transaction (or a single conditional call when there is
only one put/delete) and sorts every way it can fail by what the caller should do:

* a condition failed (``ConditionalCheckFailed``): ``WriteConflict`` naming the operation, so
  the service can explain it (409 for a unique value, 400 for a reference, a re-read for a
  stale entity);
* another transaction held one of the items (``TransactionConflict``): ``WriteConflict`` with
  that code; the service rebuilds its operations (a fresh counter shard) and tries again;
* the table throttled or failed (``ThrottlingError``, ``ProvisionedThroughputExceeded``,
  ``InternalServerError``, ``ServiceUnavailable``, ...): retried here, the same request with the
  same ``ClientRequestToken`` (so an attempt that did commit is not applied twice), with jittered
  exponential backoff inside ``STORE_RETRY_BUDGET_SECONDS``; then ``StoreUnavailable`` (503 with
  ``Retry-After``): nothing was written;
* no answer came (a timeout or a lost connection, after botocore's own retries): retried the
  same way, since the token makes a transaction that did land a no-op; if the budget runs
  out the 503 says the change may have been applied (an answer lost is not a refusal);
* DynamoDB refused the item itself (``ValidationException``/``ValidationError``: too large,
  nested too deep): ``InvalidItem`` with a reason in our words (never DynamoDB's message).

A write of one item is a plain conditional PutItem/DeleteItem, which has no idempotency token:
as with the SDK's own retries, one retried after an internal error that had in fact applied
meets its own write (an update then re-reads and applies its change again; a stale explicit
``changeSequence`` is a 409 with the current value).

Reads live in kernel/store/table.py.
"""
from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pynamodb.exceptions import DeleteError, PutError, TransactWriteError
from pynamodb.expressions.condition import Condition

from chalicelib.core.config import get_config
from chalicelib.core.errors import AWS_UNAVAILABLE_CODES, ServiceUnavailable, aws_unavailable
from chalicelib.core.observability import get_logger
from chalicelib.kernel.store.model import Item, configure
from chalicelib.kernel.store.table import (
    ENTITY_SK,
    Stored,
    counter_partition_pk,
    counter_pk,
    entity_pk,
    members_pk,
    sorted_keys,
    spread_pk,
    stored_from,
    tenant_pk,
    unique_key,
)

log = get_logger('store')

RETRY_BASE_SECONDS = 0.05
RETRY_CAP_SECONDS = 0.8
sleep: Callable[[float], None] = time.sleep   # tests patch this


class WriteConflict(Exception):
    def __init__(self, op: Op | None, code: str) -> None:
        super().__init__(code)
        self.op = op
        self.code = code


class InvalidItem(Exception):
    """DynamoDB refused the item itself (over 400 KB, nested too deep); the message is ours."""


class StoreUnavailable(ServiceUnavailable):
    """The table kept throttling or failing for the whole retry budget: nothing was written. Or
    an attempt got no answer at all (``unanswered``): that attempt may still have been applied."""

    def __init__(self, *, unanswered: bool = False) -> None:
        super().__init__('The database did not answer in time; the change may have been applied: read the '
                         'resource before sending it again' if unanswered else
                         'The database is busy; nothing was changed, retry shortly', retry_after=2)


class _Transient(Exception):
    def __init__(self, code: str, *, unanswered: bool = False) -> None:
        super().__init__(code)
        self.code = code
        self.unanswered = unanswered   # a timeout or a lost connection: the attempt may have been applied


def _error(exc: Exception) -> dict[str, Any]:
    """DynamoDB's ``Error`` of a pynamodb error ({} when no answer came: a timeout, a lost
    connection). pynamodb's own ``cause_response_code`` raises AttributeError then: every write
    that timed out was a 500 (found by the chaos run)."""
    response = getattr(getattr(exc, 'cause', None), 'response', None)
    return (response.get('Error') or {}) if isinstance(response, dict) else {}


def _error_code(exc: Exception) -> str | None:
    return _error(exc).get('Code')


def _error_message(exc: Exception) -> str:
    return str(_error(exc).get('Message') or '')


def _transient(exc: Exception) -> _Transient | None:
    """The retryable failure ``exc`` is (throttled, failing, not answering), else None."""
    if not aws_unavailable(exc):
        return None
    code = _error_code(exc)
    return _Transient(code or type(getattr(exc, 'cause', None) or exc).__name__, unanswered=not code)


@dataclass
class Op:
    kind: str                       # put | delete | check | add | update
    item: Item | None = None
    condition: Condition | None = None
    model_key: tuple[str, str] | None = None
    amount: int = 0
    actions: list[Any] | None = None  # update: pynamodb update actions (SET/REMOVE/ADD)
    tag: dict[str, Any] = field(default_factory=dict)  # what the service needs to explain a failure


# ----------------------------------------------------------------------------- entities

def entity_item(family: str, data: dict[str, Any], *, seq: int, org: str | None, tenant: str | None,
                parent: str | None, name_key: str, value_keys: dict[int, str] | None = None,
                guarded: int = 0, sparse_updated: bool = False) -> Item:
    """The item of an entity; ``tenant`` None leaves it out of every list (soft delete).
    ``name_key``: its by_name sort key (kernel/records.py ``name_key``).
    ``value_keys``: equality-index slot -> its partition key (kernel/store/table.py value_pk,
    spread by the record's id: kernel/records.py value_keys); ``tpk`` is spread here.
    ``sparse_updated``: a record never changed (``seq`` 1) gets no ``usk`` (its ``csk`` serves
    updatedOn order), a changed one gets ``usk`` and a marked ``csk`` (table.sorted_keys)."""
    model = configure()
    id_ = data['id']
    item = model(entity_pk(family, id_), ENTITY_SK, kind=family, data=data, seq=seq, org=org)
    if guarded:
        item.gv = int(guarded)   # the guard layout it counts in (kernel/parents.py GUARD_LAYOUTS)
    if tenant is not None:
        item.tpk = spread_pk(tenant_pk(family, tenant), id_)
        item.csk, item.usk = sorted_keys(data, sparse_updated=sparse_updated, seq=seq)
        item.nsk = name_key
        if parent is not None:
            item.ppk = parent
        if value_keys is not None:
            item.ixv = 1
            for slot, key in value_keys.items():
                setattr(item, f'x{slot}', key)
    return item


def put_entity(item: Item, expected_seq: int | None, **tag: Any) -> Op:
    """Write an entity: new (must not exist) when ``expected_seq`` is None, else only over
    that sequence (optimistic locking)."""
    model = configure()
    cond = model.pk.does_not_exist() if expected_seq is None else (model.seq == expected_seq)
    return Op('put', item=item, condition=cond, tag={'what': 'entity', **tag})


def delete_entity(family: str, id_: str, expected_seq: int, **tag: Any) -> Op:
    model = configure()
    item = model(entity_pk(family, id_), ENTITY_SK)
    return Op('delete', item=item, condition=(model.seq == expected_seq), tag={'what': 'entity', **tag})


def key_values(item: Item, seq: int, value_keys: dict[int, str]) -> Op:
    """Give an entity written before equality indexes existed its index keys and mark it
    counted, only if it is still that version and not yet marked (backfill; idempotent)."""
    model = configure()
    actions = [model.ixv.set(1)] + [getattr(model, f'x{slot}').set(key) for slot, key in value_keys.items()]
    return Op('update', item=model(item.pk, item.sk), actions=actions,
              condition=(model.seq == seq) & model.ixv.does_not_exist() & model.tpk.exists(),
              tag={'what': 'entity'})


def key_new_values(item: Item, seq: int, value_keys: dict[int, str]) -> Op:
    """Give a counted entity the keys of equality-index slots declared after it was written,
    only if it is still that version and those slots are still unkeyed (backfill; idempotent)."""
    model = configure()
    condition = (model.seq == seq) & model.ixv.exists() & model.tpk.exists()
    for slot in value_keys:
        condition = condition & getattr(model, f'x{slot}').does_not_exist()
    return Op('update', item=model(item.pk, item.sk),
              actions=[getattr(model, f'x{slot}').set(key) for slot, key in value_keys.items()],
              condition=condition, tag={'what': 'entity'})


def check_exists(family: str, id_: str, org: str | None, **tag: Any) -> Op:
    """The referenced entity exists, is not deleted and (when org is given) lives in org."""
    model = configure()
    cond = model.pk.exists() & model.tpk.exists()
    if org is not None:
        cond = cond & (model.org == org)
    return Op('check', model_key=(entity_pk(family, id_), ENTITY_SK), condition=cond,
              tag={'what': 'reference', **tag})


def check_sequence(family: str, id_: str, seq: int, **tag: Any) -> Op:
    """Transaction condition: the entity still exists at sequence ``seq`` (a write that copied
    a value from it, such as a task group's assignee onto a joining task, holds only then)."""
    model = configure()
    return Op('check', model_key=(entity_pk(family, id_), ENTITY_SK),
              condition=model.pk.exists() & model.tpk.exists() & (model.seq == seq), tag=tag)


# ----------------------------------------------------------------------------- unique values, counters

# A counter whose every shard a transaction checks (a task group's member counter:
# features/tasks/groups.py) keeps few shards: a transaction holds at most 100 items. It is moved
# only by the writes of that one group, so no tenant-wide write queues on it.
CHECKED_COUNTER_SHARDS = 4


def check_counter(pk: str, shards: dict[str, int], **tag: Any) -> list[Op]:
    """Transaction conditions: every shard of the checked counter ``pk`` still holds what was
    read (``shards``, from table.counter_shards; a shard not read must still be zero or absent)."""
    model = configure()
    ops = []
    for shard in (str(n) for n in range(CHECKED_COUNTER_SHARDS)):
        value = shards.get(shard, 0)
        cond = (model.cnt == value) if value else (model.cnt.does_not_exist() | (model.cnt == 0))
        ops.append(Op('check', model_key=(pk, shard), condition=cond, tag=tag))
    return ops


def claim_unique(family: str, *, scope: str, field_name: str, value: Any, owner_id: str) -> Op:
    model = configure()
    key = unique_key(family, scope=scope, field_name=field_name, value=value)
    item = model(key, ENTITY_SK, kind='unique', ref=owner_id)
    return Op('put', item=item, condition=model.pk.does_not_exist(),
              tag={'what': 'unique', 'field': field_name, 'value': value, 'scope': scope})


def release_unique(family: str, *, scope: str, field_name: str, value: Any) -> Op:
    model = configure()
    key = unique_key(family, scope=scope, field_name=field_name, value=value)
    return Op('delete', item=model(key, ENTITY_SK),
              tag={'what': 'unique-release'})


def move_counter(family: str, tenant: str, amount: int) -> Op:
    """Counters are sharded: concurrent creates in one tenant touch different items."""
    return move_counter_at(counter_pk(family, tenant), amount)


def move_counter_at(pk: str, amount: int, *, checked: bool = False) -> Op:
    """Add ``amount`` to a random shard of the counter ``pk`` (kernel/store/table.py counter keys):
    one of COUNTER_SHARDS (144 by default: one write in 144 holds a given shard, docs/scale.md),
    under the partition key of its shard (table.counter_partition_pk: one write in 16 per key),
    or of CHECKED_COUNTER_SHARDS under ``pk`` itself for a counter a transaction checks whole."""
    model = configure()
    if checked:   # all its shards under its own key: a transaction checks them whole
        return Op('add', item=model(pk, str(random.randrange(CHECKED_COUNTER_SHARDS))), amount=amount,
                  tag={'what': 'counter'})
    shard = random.randrange(get_config().counter_shards)
    return Op('add', item=model(counter_partition_pk(pk, shard), str(shard)), amount=amount, tag={'what': 'counter'})


def move_counter_shard(pk: str, shard: str, amount: int) -> Op:
    """Add ``amount`` to one chosen shard of the counter ``pk`` (a child counter: a child is
    counted and uncounted in the same shard, kernel/parents.py)."""
    model = configure()
    return Op('add', item=model(pk, shard), amount=amount, tag={'what': 'counter'})


def move_members(org_id: str, amount: int) -> Op:
    """The organization's membership count (one unsharded item, ``MEMBERS#{orgId}``): moved by
    every membership create and delete, checked by the organization's deletion. Memberships are
    written rarely, so one item per organization is no hot spot."""
    model = configure()
    return Op('add', item=model(members_pk(org_id), ENTITY_SK), amount=amount, tag={'what': 'counter'})


def check_no_members(org_id: str, **tag: Any) -> Op:
    """Transaction condition: the organization has no memberships (its count is zero or unset)."""
    model = configure()
    return Op('check', model_key=(members_pk(org_id), ENTITY_SK),
              condition=model.cnt.does_not_exist() | (model.cnt == 0), tag=tag)


def members_removed(org_id: str, amount: int, **tag: Any) -> Op:
    """Transaction operation: ``amount`` memberships leave the organization, and they were all it
    had (its count is exactly ``amount``): an organization's deletion taking its last memberships
    with it (features/identity/organizations.py). One op on the item: it replaces both
    ``move_members`` and ``check_no_members``, which a transaction may not hold together."""
    model = configure()
    return update_item(members_pk(org_id), ENTITY_SK, [model.cnt.add(-amount)],
                       condition=model.cnt == amount, **tag)


def check_counter_zero(pk: str, shards: int, **tag: Any) -> list[Op]:
    """Transaction conditions: every shard of the sharded counter ``pk`` is zero or unset
    (a parent's child counter, kernel/parents.py)."""
    model = configure()
    return [Op('check', model_key=(pk, str(shard)), condition=model.cnt.does_not_exist() | (model.cnt == 0),
               tag=tag) for shard in range(shards)]


def delete_plain(family: str, id_: str, **tag: Any) -> Op:
    """Delete an entity whatever its sequence (derived records that are never edited)."""
    model = configure()
    return Op('delete', item=model(entity_pk(family, id_), ENTITY_SK), tag={'what': 'entity', **tag})


def update_item(pk: str, sk: str, actions: list[Any], *, condition: Condition | None = None, **tag: Any) -> Op:
    """Apply pynamodb update actions to any item (ACL attributes and the like)."""
    model = configure()
    return Op('update', item=model(pk, sk), actions=actions, condition=condition, tag=tag)


def update_fields(family: str, id_: str, *, org: str | None, values: dict[str, Any], remove: Iterable[str],
                  updated_on: str, name_sort: str | None = None,
                  event: dict[str, Any] | None = None, unless_true: str | None = None) -> Stored | None:
    """An unlocked change of plain fields as ONE UpdateItem, no read-modify-write: SET
    ``data.<f>`` for each value, REMOVE ``data.<f>`` for each cleared field, ``data.updatedOn``
    and its list key ``usk`` (``nsk`` when the name changes), ``seq = seq + 1`` and
    ``data.changeSequence = seq + 1`` (both right-hand sides read the item as it was before
    this update, so they agree), on condition that the record still exists, is listed (not
    soft-deleted) and belongs to ``org``. Concurrent writers never conflict: DynamoDB applies
    them one after the other, each bumping the sequence once. Only for fields that no other
    item depends on (not unique, not indexed, not a reference): kernel/crud.py decides.

    ``event``: the write's domain event, SET as the item's ``obx`` attribute in the same
    UpdateItem; the table-stream handler publishes it from the MODIFY record (features/work/store.py
    ``outbox_event``), as it publishes a transaction's outbox item from its INSERT.

    ``unless_true``: a boolean field (a hook's ``locks``, kernel/hooks.py) the condition also
    requires not to be true (absent, or anything but true): the write's lock check, in the write.

    Returns the record as stored after this update (ReturnValues ALL_NEW), None when the condition
    failed (the record is gone, or ``unless_true`` was true). Throttling and internal errors are
    retried like ``commit``'s (a call that in fact applied and is retried applies the change
    again: the sequence moves twice, the fields are the same).
    """
    model = configure()
    actions: list[Any] = [model.data[name].set(value) for name, value in values.items()]
    actions += [model.data[name].remove() for name in remove if name not in values]
    actions += [model.data['updatedOn'].set(updated_on), model.usk.set(f'{updated_on}#{id_}'),
                model.seq.set(model.seq + 1), model.data['changeSequence'].set(model.seq + 1)]
    if name_sort is not None:
        actions.append(model.nsk.set(name_sort))
    if event is not None:
        actions.append(model.obx.set(event))
    condition = model.pk.exists() & model.tpk.exists()
    if org is not None:
        condition = condition & (model.org == org)
    if unless_true is not None:
        flag = model.data[unless_true]
        condition = condition & (flag.does_not_exist() | (flag != True))  # noqa: E712 - a condition, not a test
    item = model(entity_pk(family, id_), ENTITY_SK)
    return stored_from(item) if _update_one(item, actions, condition) else None


def set_side_field(family: str, id_: str, name: str, value: Any) -> bool:
    """SET ``data.<name>`` of a record in one UpdateItem that moves neither its sequence nor its
    updatedOn and publishes no event: for a server-kept summary shown on the record (a document
    family's ``processing``, features/work/pipelines.py) that must not make a client's
    optimistic lock stale. False when the record is gone."""
    model = configure()
    item = model(entity_pk(family, id_), ENTITY_SK)
    return _update_one(item, [model.data[name].set(value)], model.pk.exists() & model.tpk.exists())


def _update_one(item: Any, actions: list[Any], condition: Any) -> bool:
    """One conditional UpdateItem of ``item``, retried like ``commit``'s writes: False when the
    condition failed (the record is gone), InvalidItem when DynamoDB refused the values."""
    from pynamodb.exceptions import UpdateError  # noqa: PLC0415 - lazy: only this path needs it

    def apply() -> None:
        try:
            item.update(actions=actions, condition=condition)
        except UpdateError as exc:
            if _error_code(exc) == 'ConditionalCheckFailedException':
                raise WriteConflict(None, 'ConditionalCheckFailed') from None
            transient = _transient(exc)
            if transient is not None:
                raise transient from None
            _invalid(exc)
            raise

    try:
        _retrying(apply)
    except WriteConflict:
        return False
    return True


# ----------------------------------------------------------------------------- commit

def _invalid_reason(message: str) -> str:
    """Our words for why DynamoDB refused an item (its own message is never shown)."""
    text = message.lower()
    if 'size' in text:
        return 'the resource would be larger than the 400 KB a record may hold'
    if 'nest' in text:
        return 'the resource is nested too deeply (at most 32 levels)'
    if 'empty' in text:
        return 'the resource holds an empty value where one is not allowed'
    return 'the resource holds a value the database cannot store'


def _invalid(exc: Exception) -> None:
    """DynamoDB refused the item itself: the caller's data is at fault (the service answers 400)."""
    if _error_code(exc) == 'ValidationException':
        raise InvalidItem(_invalid_reason(_error_message(exc))) from None


def commit(ops: list[Op]) -> None:
    """Run ``ops`` as one write (module docstring: what each failure becomes)."""
    token = str(uuid.uuid4())   # the same token on every retry of this write: applied at most once
    ops = _coalesced(ops)

    def apply() -> None:
        if len(ops) == 1 and ops[0].kind in ('put', 'delete'):
            _commit_one(ops[0])
        else:
            _transact(ops, token)
    _retrying(apply)


def _coalesced(ops: list[Op]) -> list[Op]:
    """Counter moves of one write that landed on the same shard become one move (a transaction
    may touch an item once; e.g. a task group and its history entry both count in the project)."""
    out: list[Op] = []
    adds: dict[tuple[str, str], Op] = {}
    for op in ops:
        if op.kind != 'add':
            out.append(op)
            continue
        key = (op.item.pk, op.item.sk)
        if key in adds:
            adds[key].amount += op.amount
        else:
            adds[key] = Op('add', item=op.item, amount=op.amount, condition=op.condition, tag=op.tag)
            out.append(adds[key])
    return out


def _retrying(apply: Callable[[], None]) -> None:
    """Call ``apply`` until it does not raise ``_Transient``, with jittered exponential backoff
    inside ``STORE_RETRY_BUDGET_SECONDS``; then ``StoreUnavailable``."""
    budget = get_config().store_retry_budget_seconds
    started = time.monotonic()
    attempt = 0
    unanswered = False
    while True:
        try:
            apply()
            return
        except _Transient as exc:
            unanswered = unanswered or exc.unanswered
            delay = random.uniform(0, min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** attempt))
            if time.monotonic() - started + delay > budget:
                log.warning('write gave up after %d attempts: %s', attempt + 1, exc.code)
                raise StoreUnavailable(unanswered=unanswered) from None
            attempt += 1
            sleep(delay)


def _transact(ops: list[Op], token: str) -> None:
    from pynamodb.transactions import TransactWrite  # noqa: PLC0415 - lazy: only multi-item writes need it
    model = configure()
    try:
        with TransactWrite(connection=model._get_connection().connection, client_request_token=token) as tx:
            for op in ops:
                if op.kind == 'put':
                    tx.save(op.item, condition=op.condition)
                elif op.kind == 'delete':
                    tx.delete(op.item, condition=op.condition)
                elif op.kind == 'check':
                    tx.condition_check(model, op.model_key[0], op.model_key[1], condition=op.condition)
                elif op.kind == 'add':
                    tx.update(op.item, actions=[model.cnt.add(op.amount)], condition=op.condition)
                elif op.kind == 'update':
                    tx.update(op.item, actions=op.actions, condition=op.condition)
    except TransactWriteError as exc:
        reasons = exc.cancellation_reasons or []
        # pynamodb sends condition checks, then deletes, puts and updates: reasons follow that order.
        sent = [op for kind in ('check', 'delete', 'put') for op in ops if op.kind == kind] + \
            [op for op in ops if op.kind in ('add', 'update')]
        failed = [(op, reason) for op, reason in zip(sent, reasons, strict=False)
                  if reason is not None and reason.code not in (None, 'None')]
        codes = {reason.code for _, reason in failed}
        # A failed condition decides the answer whatever else happened: it fails again on retry.
        for op, reason in failed:
            if reason.code == 'ConditionalCheckFailed':
                raise WriteConflict(op, reason.code) from None
        if 'ValidationError' in codes:
            raise InvalidItem(_invalid_reason(next(r.message or '' for _, r in failed
                                                   if r.code == 'ValidationError'))) from None
        if 'TransactionConflict' in codes or _error_code(exc) == 'TransactionConflictException':
            raise WriteConflict(None, 'TransactionConflict') from None
        if codes & AWS_UNAVAILABLE_CODES:
            raise _Transient(sorted(codes & AWS_UNAVAILABLE_CODES)[0]) from None
        transient = _transient(exc)
        if transient is not None:
            raise transient from None
        if _error_code(exc) == 'TransactionCanceledException' and not failed:
            raise WriteConflict(None, 'TransactionConflict') from None   # cancelled, no reason given
        _invalid(exc)
        raise


def _commit_one(op: Op) -> None:
    try:
        if op.kind == 'put':
            op.item.save(condition=op.condition)
        else:
            op.item.delete(condition=op.condition)
    except (PutError, DeleteError) as exc:
        if _error_code(exc) == 'ConditionalCheckFailedException':
            raise WriteConflict(op, 'ConditionalCheckFailed') from None
        transient = _transient(exc)
        if transient is not None:
            raise transient from None
        _invalid(exc)
        raise


# ----------------------------------------------------------------------------- guard shards (kernel/parents.py)

GUARD_TOMBSTONE_SECONDS = 7 * 86400   # a deleted parent's closed shards expire (TTL) after this


def guard_pk(parent_family: str, parent_id: str, shard: int) -> str:
    """One guard shard of a parent: its own partition key, so a parent's children spread their
    transactions over as many partitions as it has shards (kernel/parents.py)."""
    return f'GUARD#{parent_family}#{parent_id}#{shard}'


def move_guard(pk: str, amount: int, **tag: Any) -> Op:
    """Count a child in (``amount`` > 0: only while the shard is open, i.e. carries no ``dead``
    mark) or out of (< 0: whatever the mark) one guard shard."""
    model = configure()
    condition = model.dead.does_not_exist() if amount > 0 else None
    return Op('add', item=model(pk, ENTITY_SK), amount=amount, condition=condition, tag=tag)


def close_guard_ahead(pk: str, token: str, **tag: Any) -> Op:
    """A parent's delete, ahead of its transaction (the shards past those it holds,
    kernel/parents.py ``close_ahead``): as ``close_guard``, marked with the delete's ``token``
    (``ref``) so that it can be reopened if that transaction fails."""
    model = configure()
    return Op('update', item=model(pk, ENTITY_SK),
              actions=[model.dead.set(1), model.kind.set('guard'), model.ref.set(token),
                       model.ttl.set(int(time.time()) + GUARD_TOMBSTONE_SECONDS)],
              condition=model.cnt.does_not_exist() | (model.cnt == 0), tag=tag)


def reopen_guard(pk: str, token: str, **tag: Any) -> Op:
    """Undo ``close_guard_ahead`` of the delete ``token`` (its transaction failed)."""
    model = configure()
    return Op('update', item=model(pk, ENTITY_SK),
              actions=[model.dead.remove(), model.ref.remove(), model.ttl.remove()],
              condition=model.ref == token, tag=tag)


def close_guard(pk: str, **tag: Any) -> Op:
    """A parent's delete: the shard holds no child (``cnt`` zero or unset) and is closed
    (``dead``) from now on; the closed item expires after GUARD_TOMBSTONE_SECONDS."""
    model = configure()
    return Op('update', item=model(pk, ENTITY_SK),
              actions=[model.dead.set(1), model.kind.set('guard'),
                       model.ttl.set(int(time.time()) + GUARD_TOMBSTONE_SECONDS)],
              condition=model.cnt.does_not_exist() | (model.cnt == 0), tag=tag)
