"""Tallies: new items put one PutItem each, yet each counted exactly once (docs/scale.md
"Events records").

A transaction writes each item at 2 WCU per KB; a PutItem at 1. The events records of a stream
batch (features/events/outbox.py ``record_all``) are put on their own and counted like this:

1. ``begin``: a *tally* item names the ids about to be put (``TALLY#{token}``; 16 bytes per
   UUID id, so the ids of 40 records fit in one write unit);
2. ``put_marked``: each item is put on its own, only if it does not exist, marked ``tb = token``;
3. one transaction moves the counters of the items that were put and closes the tally
   (``close_op``: only if it is still open), noting which of its ids it counted (``cb``, a bit
   per position). A closed tally stays until its TTL: deleted, its key would be free again, and
   the put of step 1, answered late and landing after the close (a slow call the client gave up
   on, then retried), would open it again, counting its items twice.

A writer that dies between 1 and 3 leaves its tally behind, and its items are delivered again
(the stream retries a batch until its handler succeeds). Whoever puts one of them again finds
it there, marked with a token whose tally is still open (``mark_of``, ``state``): it *settles*
that tally: it reads the items the tally names (``marked``: consistent reads), counts those
bearing its token, and moves those counters in the transaction that closes the tally. A tally
is closed once (the condition), so each item is counted once, however often and however split
its batch comes again. An item put under a tally that lands late, after the tally was settled
without it (its put was slow), is found by its own redelivery: marked with a closed tally that
did not count it (``state``: its bit is clear), it is counted then, with its bit set in the
same transaction (``amend_op``). The invariant checker reports a tally no one came back for
(docs/operations/invariant-checker.md ``tallies``).

Only one writer at a time handles a given item: the stream hands a shard's records, and the
same item's records, to one invocation at a time, and redelivers a batch only after the
invocation that had it ended. A tally is therefore never settled while its writer still runs.

| item  | pk                | sk    | notes                                                  |
|-------|-------------------|-------|--------------------------------------------------------|
| tally | ``TALLY#{token}`` | ``#`` | kind ``tally``; ``data.ids``: packed UUIDs (else       |
|       |                   |       | ``data.list``); ``dead`` 1 and ``cb`` once closed; ``ttl`` |
|       |                   |       | TALLY_TTL_SECONDS                                      |

Written here, not with a library: the counting has to share the transaction of the family's
counter shards (kernel/records.py ``count_ops``), which no DynamoDB helper library knows.
"""
from __future__ import annotations

import base64
import os
import time
import uuid
from typing import Any

from chalicelib.kernel.store.model import Item, configure
from chalicelib.kernel.store.repository import Op, WriteConflict, commit
from chalicelib.kernel.store.table import ENTITY_SK, Stored, in_parallel, stored_from

PREFIX = 'TALLY#'
# Longer than a stream keeps its records (24 h): after that no one delivers them again, and a
# tally still there is the checker's to settle.
TALLY_TTL_SECONDS = 3 * 86400


def _pack(ids: list[str]) -> dict[str, Any]:
    try:
        return {'ids': b''.join(uuid.UUID(i).bytes for i in ids)}
    except (ValueError, TypeError, AttributeError):
        return {'list': list(ids)}


def _unpack(data: dict[str, Any]) -> list[str]:
    if 'ids' in data:
        raw = bytes(data['ids'])
        return [str(uuid.UUID(bytes=raw[at:at + 16])) for at in range(0, len(raw), 16)]
    return [str(i) for i in data.get('list') or []]


def begin(ids: list[str]) -> str:
    """Put a new tally naming ``ids``; its token."""
    model = configure()
    refused: WriteConflict | None = None
    for _ in range(3):
        # 64 random bits in 11 characters: the mark rides on every record (a task's create event
        # is 1,006 bytes with it, under the 1 KB step); two tallies never share one (the
        # condition). A put refused by it is a token taken, or our own put landed with its
        # answer lost: either way another token (a tally naming records that bear none of its
        # mark is settled as counting nothing)
        token = base64.urlsafe_b64encode(os.urandom(8)).rstrip(b'=').decode()
        item = model(PREFIX + token, ENTITY_SK, kind='tally', data=_pack(ids),
                     ttl=int(time.time()) + TALLY_TTL_SECONDS)
        try:
            commit([Op('put', item=item, condition=model.pk.does_not_exist(), tag={'what': 'tally'})])
            return token
        except WriteConflict as exc:
            refused = exc
    raise refused


def put_marked(item: Item, token: str) -> bool:
    """Put ``item`` marked with ``token``, only if no item has its key: True when put, False
    when one was there already (``mark_of`` tells whose)."""
    model = configure()
    item.tb = token
    try:
        commit([Op('put', item=item, condition=model.pk.does_not_exist(), tag={'what': 'entity'})])
    except WriteConflict as exc:
        if exc.code == 'ConditionalCheckFailed':
            return False
        raise
    return True


def put_all_marked(items: list[Item], token: str) -> list[bool | Exception]:
    """``put_marked`` of each item, several in flight (``table.in_parallel``): True (put),
    False (there already) or the exception that failed it (its outcome unknown: the answer may
    have been lost after it landed)."""
    def put(item: Item) -> bool | Exception:
        try:
            return put_marked(item, token)
        except Exception as exc:  # noqa: BLE001 - the caller decides: that chunk is left to its redelivery
            return exc
    return in_parallel(put, items)


def mark_of(pk: str) -> str | None:
    """The token an item was put with (consistent read); None when it has none or is gone."""
    try:
        item = configure().get(pk, ENTITY_SK, consistent_read=True, attributes_to_get=['pk', 'tb'])
    except Item.DoesNotExist:
        return None
    return item.tb


def state(token: str) -> tuple[bool, list[str], int] | None:
    """(open, the ids it names, the bits of those it counted) of the tally ``token``
    (consistent read); None when it is gone (past its TTL)."""
    try:
        item = configure().get(PREFIX + token, ENTITY_SK, consistent_read=True)
    except Item.DoesNotExist:
        return None
    return item.dead is None, ids_of({'data': item.data}), int(item.cb or 0)


def bits(ids: list[str], counted: list[str]) -> int:
    """The bits of ``counted`` among a tally's ``ids`` (one per position)."""
    where = {id_: at for at, id_ in enumerate(ids)}
    return sum(1 << where[i] for i in set(counted) if i in where)


def is_open(raw: dict[str, Any]) -> bool:
    """A tally item (its raw attributes) not closed yet."""
    return raw.get('dead') is None


def ids_of(raw: dict[str, Any]) -> list[str]:
    """The ids a tally item names (its raw attributes, as the checker reads them)."""
    data = raw.get('data')
    return _unpack(data.as_dict() if hasattr(data, 'as_dict') else dict(data or {}))


def opened_at(raw: dict[str, Any]) -> float | None:
    """When a tally item was opened (epoch seconds, from its ``ttl``), None when unknown."""
    ttl = raw.get('ttl')
    return float(ttl) - TALLY_TTL_SECONDS if ttl is not None else None


def token_of(pk: str) -> str:
    return pk[len(PREFIX):]


def marked(family_pk: Any, ids: list[str], token: str) -> list[Stored]:
    """The records among ``ids`` (``family_pk(id)`` their keys) that bear ``token``, read
    consistently."""
    model = configure()
    out = []
    keys = [(family_pk(i), ENTITY_SK) for i in dict.fromkeys(ids)]
    for at in range(0, len(keys), 100):
        for item in model.batch_get(keys[at:at + 100], consistent_read=True):
            stored = stored_from(item)
            if item.tb == token and stored is not None:
                out.append(stored)
    return out


def close_op(token: str, counted: int) -> Op:
    """Close the tally ``token`` (in the transaction that counts its items), noting the bits
    ``counted``, only if it is still open: a WriteConflict when another writer settled it
    first. It stays, closed, until its TTL (module docstring: a late put must not open it again)."""
    model = configure()
    return Op('update', item=model(PREFIX + token, ENTITY_SK), actions=[model.dead.set(1), model.cb.set(counted)],
              condition=model.pk.exists() & model.dead.does_not_exist(), tag={'what': 'tally', 'token': token})


def amend_op(token: str, before: int, after: int) -> Op:
    """Note more counted bits on a closed tally (items that landed after it was settled), only
    if its bits are still ``before``: a WriteConflict when someone counted meanwhile."""
    model = configure()
    condition = model.dead.exists() & ((model.cb == before) if before else model.cb.does_not_exist() | (model.cb == 0))
    return Op('update', item=model(PREFIX + token, ENTITY_SK), actions=[model.cb.set(after)], condition=condition,
              tag={'what': 'tally', 'token': token})

