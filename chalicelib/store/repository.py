"""Writes: one conditional PutItem/DeleteItem, or one TransactWriteItems.

Services describe a write as a list of operations (entity put or delete, unique claims and
releases, reference checks, counter moves, attribute updates) built by the functions below;
``commit`` runs them as a single transaction (or a single conditional call when there is
only one put/delete) and turns a cancellation into a ``WriteConflict`` naming the operation
that failed, so the service can explain it (409 for a unique value, 400 for a reference...).
Reads live in store/table.py.
"""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from pynamodb.exceptions import DeleteError, PutError, TransactWriteError
from pynamodb.expressions.condition import Condition

from chalicelib.core.config import get_config

from .model import Item, configure
from .table import ENTITY_SK, counter_pk, entity_pk, name_sort_key, tenant_pk, unique_key


class WriteConflict(Exception):
    def __init__(self, op: Op | None, code: str) -> None:
        super().__init__(code)
        self.op = op
        self.code = code


class InvalidItem(Exception):
    """DynamoDB refused the item itself (over 400 KB, a value it cannot hold)."""


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
                parent: str | None, name_value: Any) -> Item:
    """The item of an entity; ``tenant`` None leaves it out of every list (soft delete)."""
    model = configure()
    id_ = data['id']
    item = model(entity_pk(family, id_), ENTITY_SK, kind=family, data=data, seq=seq, org=org)
    if tenant is not None:
        item.tpk = tenant_pk(family, tenant)
        item.csk = f"{data['createdOn']}#{id_}"
        item.usk = f"{data['updatedOn']}#{id_}"
        item.nsk = name_sort_key(name_value, id_)
        if parent is not None:
            item.ppk = parent
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


def check_exists(family: str, id_: str, org: str | None, **tag: Any) -> Op:
    """The referenced entity exists, is not deleted and (when org is given) lives in org."""
    model = configure()
    cond = model.pk.exists() & model.tpk.exists()
    if org is not None:
        cond = cond & (model.org == org)
    return Op('check', model_key=(entity_pk(family, id_), ENTITY_SK), condition=cond,
              tag={'what': 'reference', **tag})


# ----------------------------------------------------------------------------- unique values, counters

def claim_unique(family: str, *, scope: str, field_name: str, value: Any, owner_id: str) -> Op:
    model = configure()
    key = unique_key(family, scope=scope, field_name=field_name, value=value)
    item = model(key, ENTITY_SK, kind='unique', ref=owner_id)
    return Op('put', item=item, condition=model.pk.does_not_exist(),
              tag={'what': 'unique', 'field': field_name, 'value': value})


def release_unique(family: str, *, scope: str, field_name: str, value: Any) -> Op:
    model = configure()
    key = unique_key(family, scope=scope, field_name=field_name, value=value)
    return Op('delete', item=model(key, ENTITY_SK),
              tag={'what': 'unique-release'})


def move_counter(family: str, tenant: str, amount: int) -> Op:
    """Counters are sharded: concurrent creates in one tenant touch different items."""
    model = configure()
    shard = str(random.randrange(get_config().counter_shards))
    return Op('add', item=model(counter_pk(family, tenant), shard), amount=amount, tag={'what': 'counter'})


def update_item(pk: str, sk: str, actions: list[Any], *, condition: Condition | None = None, **tag: Any) -> Op:
    """Apply pynamodb update actions to any item (ACL attributes and the like)."""
    model = configure()
    return Op('update', item=model(pk, sk), actions=actions, condition=condition, tag=tag)


# ----------------------------------------------------------------------------- commit

def _invalid(exc: Exception) -> None:
    """DynamoDB refused the item itself: the caller's data is at fault (the service answers 400)."""
    if getattr(exc, 'cause_response_code', None) == 'ValidationException':
        raise InvalidItem(getattr(exc, 'cause_response_message', '') or 'invalid item') from None


def commit(ops: list[Op]) -> None:
    if len(ops) == 1 and ops[0].kind in ('put', 'delete'):
        _commit_one(ops[0])
        return
    from pynamodb.transactions import TransactWrite  # noqa: PLC0415 - lazy: only multi-item writes need it
    model = configure()
    try:
        with TransactWrite(connection=model._get_connection().connection,
                           client_request_token=str(uuid.uuid4())) as tx:
            for op in ops:
                if op.kind == 'put':
                    tx.save(op.item, condition=op.condition)
                elif op.kind == 'delete':
                    tx.delete(op.item, condition=op.condition)
                elif op.kind == 'check':
                    tx.condition_check(model, op.model_key[0], op.model_key[1], condition=op.condition)
                elif op.kind == 'add':
                    tx.update(op.item, actions=[model.cnt.add(op.amount)])
                elif op.kind == 'update':
                    tx.update(op.item, actions=op.actions, condition=op.condition)
    except TransactWriteError as exc:
        reasons = exc.cancellation_reasons or []
        # pynamodb sends condition checks, then deletes, puts and updates: reasons follow that order.
        sent = [op for kind in ('check', 'delete', 'put') for op in ops if op.kind == kind] + \
            [op for op in ops if op.kind in ('add', 'update')]
        for op, reason in zip(sent, reasons, strict=False):
            if reason is not None and reason.code not in (None, 'None'):
                raise WriteConflict(op, reason.code) from None
        if exc.cause_response_code in ('TransactionConflictException', 'TransactionCanceledException'):
            raise WriteConflict(None, 'TransactionConflict') from None
        _invalid(exc)
        raise


def _commit_one(op: Op) -> None:
    try:
        if op.kind == 'put':
            op.item.save(condition=op.condition)
        else:
            op.item.delete(condition=op.condition)
    except (PutError, DeleteError) as exc:
        if exc.cause_response_code == 'ConditionalCheckFailedException':
            raise WriteConflict(op, 'ConditionalCheckFailed') from None
        _invalid(exc)
        raise
