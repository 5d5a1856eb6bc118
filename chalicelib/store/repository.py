"""Entity persistence: one GetItem per read, one TransactWriteItems per multi-item write.

Services describe a write as a list of operations (entity put, unique claims and releases,
reference checks, counter moves); ``commit`` runs them as a single transaction, or as a
single conditional PutItem/DeleteItem when there is only one, and turns a cancellation into
a ``WriteConflict`` naming the operation that failed.
"""
from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable

from pynamodb.exceptions import DeleteError, PutError, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition

from chalicelib.core.config import get_config

from .table import ENTITY_SK, Item, configure, entity_pk, name_sort_key, tenant_pk


UNIQUE_VALUE_BYTES = 1024  # longer unique values are keyed by their SHA-256


@dataclass
class Stored:
    """A stored entity: its resource body (``data``) and bookkeeping."""
    family: str
    data: dict[str, Any]
    seq: int
    org: str | None

    @property
    def id(self) -> str:
        return self.data['id']


class WriteConflict(Exception):
    def __init__(self, op: 'Op | None', code: str) -> None:
        super().__init__(code)
        self.op = op
        self.code = code


@dataclass
class Op:
    kind: str                       # put | delete | check | add | update
    item: Item | None = None
    condition: Condition | None = None
    model_key: tuple[str, str] | None = None
    amount: int = 0
    actions: list[Any] | None = None  # update: pynamodb update actions (SET/REMOVE/ADD)
    tag: dict[str, Any] = field(default_factory=dict)  # what the service needs to explain a failure


def _from_item(item: Item) -> Stored | None:
    if item is None or item.data is None:
        return None
    data = item.data.as_dict()
    if data.get('deleted') is True:
        return None
    return Stored(family=item.kind, data=data, seq=int(item.seq or 0), org=item.org)


def get(family: str, id_: str, consistent: bool = True) -> Stored | None:
    model = configure()
    try:
        item = model.get(entity_pk(family, id_), ENTITY_SK, consistent_read=consistent)
    except model.DoesNotExist:
        return None
    return _from_item(item)


def batch_get(keys: Iterable[tuple[str, str]]) -> dict[str, Stored]:
    """Entities by (family, id); missing or deleted ones are absent from the answer."""
    model = configure()
    wanted = [(entity_pk(f, i), ENTITY_SK) for f, i in keys]
    out: dict[str, Stored] = {}
    for start in range(0, len(wanted), 100):
        for item in model.batch_get(wanted[start:start + 100]):
            stored = _from_item(item)
            if stored is not None:
                out[stored.id] = stored
    return out


def entity_item(family: str, data: dict[str, Any], seq: int, org: str | None, tenant: str | None,
                parent: str | None, name_value: Any) -> Item:
    model = configure()
    id_ = data['id']
    item = model(entity_pk(family, id_), ENTITY_SK, kind=family, data=data, seq=seq, org=org)
    if tenant is not None:  # listed entities carry index keys; soft-deleted ones do not
        item.tpk = tenant_pk(family, tenant)
        item.csk = f"{data['createdOn']}#{id_}"
        item.usk = f"{data['updatedOn']}#{id_}"
        item.nsk = name_sort_key(name_value, id_)
        if parent is not None:
            item.ppk = parent
    return item


def put_entity(item: Item, expected_seq: int | None, **tag: Any) -> Op:
    model = configure()
    cond = model.pk.does_not_exist() if expected_seq is None else (model.seq == expected_seq)
    return Op('put', item=item, condition=cond, tag={'what': 'entity', **tag})


def delete_entity(family: str, id_: str, expected_seq: int, **tag: Any) -> Op:
    model = configure()
    item = model(entity_pk(family, id_), ENTITY_SK)
    return Op('delete', item=item, condition=(model.seq == expected_seq), tag={'what': 'entity', **tag})


def unique_key(family: str, scope: str, field_name: str, value: Any) -> str:
    text = str(value)
    if len(text.encode('utf-8', 'surrogatepass')) > UNIQUE_VALUE_BYTES:  # a partition key stops at 2048 bytes
        text = 'sha256:' + hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()
    return f'UQ#{family}#{scope}#{field_name}#{text}'


def claim_unique(family: str, scope: str, field_name: str, value: Any, owner_id: str) -> Op:
    model = configure()
    item = model(unique_key(family, scope, field_name, value), ENTITY_SK, kind='unique', ref=owner_id)
    return Op('put', item=item, condition=model.pk.does_not_exist(),
              tag={'what': 'unique', 'field': field_name, 'value': value})


def release_unique(family: str, scope: str, field_name: str, value: Any) -> Op:
    model = configure()
    return Op('delete', item=model(unique_key(family, scope, field_name, value), ENTITY_SK),
              tag={'what': 'unique-release'})


def check_exists(family: str, id_: str, org: str | None, **tag: Any) -> Op:
    """The referenced entity exists, is not deleted and (when org is given) lives in org."""
    model = configure()
    cond = model.pk.exists() & model.tpk.exists()
    if org is not None:
        cond = cond & (model.org == org)
    return Op('check', model_key=(entity_pk(family, id_), ENTITY_SK), condition=cond,
              tag={'what': 'reference', **tag})


def move_counter(family: str, tenant: str, amount: int) -> Op:
    """Counters are sharded: concurrent creates in one tenant touch different items."""
    model = configure()
    shard = str(random.randrange(get_config().counter_shards))
    return Op('add', item=model(f'CNT#{tenant_pk(family, tenant)}', shard), amount=amount,
              tag={'what': 'counter'})


def count(family: str, tenant: str) -> int:
    model = configure()
    return sum(int(i.cnt or 0) for i in model.query(f'CNT#{tenant_pk(family, tenant)}'))


def _invalid(exc: Exception) -> None:
    """DynamoDB refused the item itself (over 400 KB, a value it cannot hold): the client's
    data is at fault, so it is a 400, not a 500."""
    if getattr(exc, 'cause_response_code', None) == 'ValidationException':
        from chalicelib.core.errors import BadRequest
        raise BadRequest(f'The resource cannot be stored: {getattr(exc, "cause_response_message", "")}') from None


def commit(ops: list[Op]) -> None:
    model = configure()
    if len(ops) == 1 and ops[0].kind in ('put', 'delete'):
        op = ops[0]
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
        return
    from pynamodb.transactions import TransactWrite
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
        for op, reason in zip(sent, reasons):
            if reason is not None and reason.code not in (None, 'None'):
                raise WriteConflict(op, reason.code) from None
        if exc.cause_response_code in ('TransactionConflictException', 'TransactionCanceledException'):
            raise WriteConflict(None, 'TransactionConflict') from None
        _invalid(exc)
        raise
    except UpdateError:
        raise
