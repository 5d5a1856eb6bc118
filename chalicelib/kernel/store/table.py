"""The single-table layout: every key shape, and every named read (access pattern).

| item          | pk                                      | sk                    | notes                      |
|---------------|-----------------------------------------|-----------------------|----------------------------|
| entity        | ``{family}#{id}``                       | ``#``                 | index keys: see below      |
| unique value  | ``UQ#{family}#{scope}#{field}#{value}`` | ``#``                 | ``ref`` = owner id         |
| counter shard | ``CNT#{family}#{tenant}``, ``CNT{p}#…`` | shard no.             | ``cnt``; summed on read    |
| member count  | ``MEMBERS#{orgId}``                     | ``#``                 | ``cnt``; unsharded         |
| user ACL      | ``users#{userId}``                      | ``ACL``               | roles, live keys, subject  |
| rate gate     | ``RATE#{userId}``                       | ``M#{minute}``        | counts, ttl (identity/gate) |
| API key       | ``users#{userId}``                      | ``KEY#{sha256(key)}`` | identity/credentials.py    |
| key pointer   | ``KEY#{sha256(key)}``                   | ``#``                 | keys not naming their user |
| value counter | ``CNT#{family}#{tenant}#{field}={value}`` | shard no.           | records per indexed value  |

Entity index attributes (removed when an entity is soft-deleted, so it leaves every list):
  tpk  ``{family}#{tenant}``  tenant partition: organization id, or ``ALL`` for global families
  ppk  ``{family}#P#{projectId}`` (project-scoped) or ``memberships#U#{userId}`` (memberships)
  tpk, a project's ppk and x1..x5 are spread over INDEX_SHARDS keys by the record's id:
  ``~{s}#{key}`` for shard s > 0, the key itself for shard 0 (``spread_pk``; reads merge all)
  csk  ``{createdOn}#{id}``   usk ``{updatedOn}#{id}``   nsk ``name_sort_key(name, id)``
  (a ``name_keyed`` family, events: ``1{name}\\x01{hash}\\x01{createdOn}#{id}``, whose runs
  serve its name's equality filters in createdOn order: ``walk_name``)

  x1..x5  ``{family}#{tenant}#{field}={value}``: the equality-indexed fields of the family's
       registry declaration (``Family.indexed``: each field names its slot n); absent when
       the field has no string value (and on soft-deleted records)
  ixv  1 when the item's indexed values are keyed and counted (every listed entity written by
       this code; items written before equality indexes existed lack it until
       ``python -m chalicelib.ops.backfill_indexes`` has keyed and counted them)

GSIs (kernel/store/model.py), all KEYS_ONLY (a write moves only its entries' keys, never a copy of
the record: docs/scale.md "Projections"): by_created / by_updated / by_name (a tenant's records
in an order: pages walk keys, then BatchGet the page; a filtered read of a tenant takes all its
by_created keys, then the records), parent_keys (a project's records, a user's memberships),
x{n}_created, one per slot: the records holding one value of one field, by createdOn (none
by updatedOn: docs/scale.md "Value indexes by createdOn only"; none for a name_keyed family's
name: docs/scale.md "Events records"). Being keys of the entity item, these entries
are written, moved and removed by DynamoDB with the entity itself (nothing to keep in step).

Reads are named for what they serve (``query_tenant``, ``walk_index``, ``memberships_of``...):
services never see a key condition, an index name or a client.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import random
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from chalicelib.core import budget
from chalicelib.core.config import get_config
from chalicelib.core.errors import ServiceUnavailable, aws_unavailable
from chalicelib.kernel.registry import BY_PATH
from chalicelib.kernel.store.model import Item, client, configure, create_table, table_name
from chalicelib.kernel.tenancy import MEMBERSHIPS, ORGANIZATIONS

ENTITY_SK = '#'
UNIQUE_VALUE_BYTES = 1024  # longer unique values are keyed by their SHA-256
GLOBAL_TENANT = 'ALL'
WALKABLE = {'createdOn': 'by_created', 'updatedOn': 'by_updated', 'name': 'by_name'}
# The mark ending the createdOn key of a changed record of a sparse_updated family (events:
# kernel/registry.py): its updatedOn key places it in updatedOn order, so a walk in that order
# skips its createdOn entry, knowing it from the key alone (``_merged_updated``).
CHANGED = '#u'


# ----------------------------------------------------------------------------- key shapes

def entity_pk(family: str, id_: str) -> str:
    return f'{family}#{id_}'


def tenant_pk(family: str, tenant: str) -> str:
    return f'{family}#{tenant}'


def project_pk(family: str, project_id: str) -> str:
    """Partition of one project's records of a project-scoped family (parent_keys)."""
    return f'{family}#P#{project_id}'


def member_pk(user_id: str) -> str:
    """Partition of one user's memberships (parent_keys)."""
    return f'memberships#U#{user_id}'


def counter_pk(family: str, tenant: str) -> str:
    return f'CNT#{tenant_pk(family, tenant)}'


# A counter's shards spread over COUNTER_PARTITIONS partition keys (docs/scale.md "Counters"):
# shard n lives under partition n % COUNTER_PARTITIONS, partition 0 being the counter's own key
# ``CNT#…`` (where every shard lived before, so a count needs no migration) and partition p > 0
# ``CNT{p}#…``. With 144 shards a given shard is held by one write in 144 and a partition key
# written by one in 16: DynamoDB's 1,000 WCU/s per partition then takes 16,000 counted writes a
# second per counter.
COUNTER_PARTITIONS = 16


def counter_partition_pk(pk: str, shard: int) -> str:
    """The partition key of shard ``shard`` of the counter ``pk`` (``CNT#…``)."""
    p = shard % COUNTER_PARTITIONS
    return pk if p == 0 else f'CNT{p}#{pk[4:]}'


def counter_base_pk(pk: str) -> str:
    """The counter a partition key belongs to: ``CNT{p}#…`` -> ``CNT#…`` (others unchanged)."""
    if pk.startswith('CNT') and not pk.startswith('CNT#'):
        head, sep, rest = pk.partition('#')
        if sep and head[3:].isdigit():
            return 'CNT#' + rest
    return pk


# Every index partition key an entity carries (``tpk``, a project's ``ppk``, ``x1``..``x5``) is
# spread over INDEX_SHARDS keys by the entity's id (docs/scale.md "Index partitions"): shard 0 is
# the key itself (where every entry lived before, so nothing needs moving for reads to be
# right), shard s > 0 is ``~{s}#{key}`` (no key of the table starts with ``~``, so a shard
# cannot be mistaken for a value). One project's task writes then land on 16 partitions of
# parent_keys, not one: one in 16 of its writes on each. A read asks all 16
# shards at once (one round) and merges them in the index's order.
INDEX_SHARDS = 16


def index_shard(id_: str) -> int:
    """The index shard of a record: a stable function of its id (crc32, spread evenly)."""
    return zlib.crc32(id_.encode('utf-8', 'surrogatepass')) % INDEX_SHARDS


def spread_pk(key: str, id_: str) -> str:
    """The shard of index partition ``key`` the record ``id_`` is written under."""
    shard = index_shard(id_)
    return key if shard == 0 else f'~{shard}#{key}'


def spread_keys(key: str) -> list[str]:
    """Every shard of index partition ``key`` (what a read of it asks)."""
    return [key, *(f'~{shard}#{key}' for shard in range(1, INDEX_SHARDS))]


def index_base_pk(key: str) -> str:
    """The index partition a shard key belongs to: ``~{s}#{key}`` -> ``key`` (others unchanged)."""
    if key.startswith('~'):
        head, sep, rest = key.partition('#')
        if sep and head[1:].isdigit():
            return rest
    return key


def members_pk(org_id: str) -> str:
    """An organization's membership count (repository.move_members)."""
    return f'MEMBERS#{org_id}'


def value_pk(family: str, tenant: str, field_name: str, value: str) -> str:
    """Partition of one value of one indexed field in one tenant (long values by their hash)."""
    if len(value.encode('utf-8', 'surrogatepass')) > UNIQUE_VALUE_BYTES:
        value = 'sha256:' + hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()
    return f'{family}#{tenant}#{field_name}={value}'


def value_counter_pk(family: str, tenant: str, field_name: str, value: str) -> str:
    return f'CNT#{value_pk(family, tenant, field_name, value)}'


def unique_key(family: str, *, scope: str, field_name: str, value: Any) -> str:
    text = str(value)
    if len(text.encode('utf-8', 'surrogatepass')) > UNIQUE_VALUE_BYTES:  # a partition key stops at 2048 bytes
        text = 'sha256:' + hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()
    return f'UQ#{family}#{scope}#{field_name}#{text}'


def name_sort_key(value: object, id_: str, *, created: str | None = None) -> str:
    """Sort key for ordering by name: missing first, then case-insensitive text, then id.

    ``\\x01`` separates name and id so that "ab" sorts before "ab c" (it is below every
    printable character); the in-memory sort of lists uses the same order
    (kernel/listing.py ``_value_key``).

    ``created`` (the record's createdOn, for a ``name_keyed`` family: events) puts a hash of
    the exact name and the createdOn key between the name and the id: ``1{name}\\x01{hash}\\x01
    {createdOn}#{id}``. The records holding one exact name are then one run of the index
    (``name_prefix``), in createdOn order; names equal but for letter case follow one another,
    each in a run of its own.
    """
    tail = id_ if created is None else f'{created}#{id_}'
    if value is None or value == '':
        return f'0\x01{tail}'
    text = str(value)
    # A sort key stops at 1024 bytes: keep at most 300 characters and 900 bytes of the name.
    name = text.lower()[:300].encode('utf-8', 'surrogatepass')[:900].decode('utf-8', 'ignore')
    if created is None:
        return f'1{name}\x01{tail}'
    return f'1{name}\x01{name_hash(text)}\x01{tail}'


def name_hash(text: str) -> str:
    """8 characters naming an exact name in a name_keyed family's name key (``name_sort_key``):
    48 bits of BLAKE2b, base64url; a full name of any length or letter case keys its own run."""
    digest = hashlib.blake2b(text.encode('utf-8', 'surrogatepass'), digest_size=6).digest()
    return base64.urlsafe_b64encode(digest).decode('ascii')


def name_prefix(value: str) -> str:
    """The start shared by the name keys of a name_keyed family's records holding exactly
    ``value`` (``name_sort_key`` with ``created``): what an equality filter reads of by_name."""
    return name_sort_key(value, '', created='')[:-1]   # '1{name}\x01{hash}\x01', without the '#'


def ensure_table() -> None:
    """Create the table, its indexes and TTL if missing (local run, tests, first deploy)."""
    create_table()


def ping() -> None:
    """One cheap eventually consistent read of a key that never exists: raises when the table
    does not answer (the health check)."""
    model = configure()
    try:
        model.get('HEALTH#', ENTITY_SK, consistent_read=False)
    except model.DoesNotExist:
        pass


# ----------------------------------------------------------------------------- entities

@dataclass
class Stored:
    """A stored entity: its resource body (``data``) and bookkeeping."""
    family: str
    data: dict[str, Any]
    seq: int
    org: str | None
    indexed: bool = False   # its indexed values are counted (``ixv``): a write may move them
    guarded: int = 0   # the guard layout it counts in (``gv``, kernel/parents.py); 0: legacy counters

    @property
    def id(self) -> str:
        return self.data['id']


def sorted_keys(data: dict[str, Any], *, sparse_updated: bool = False, seq: int = 1) -> tuple[str, str | None]:
    """(csk, usk) of a record: ``{createdOn}#{id}``, ``{updatedOn}#{id}``. In a sparse_updated
    family a record never changed (``seq`` 1) has no usk, its csk serving both orders (one index
    entry fewer per record and per indexed value), and a changed one has both, its csk marked
    CHANGED."""
    id_ = data['id']
    csk, usk = f"{data['createdOn']}#{id_}", f"{data['updatedOn']}#{id_}"
    if not sparse_updated:
        return csk, usk
    return (csk, None) if seq <= 1 else (csk + CHANGED, usk)


def stored_from(item: Item | None) -> Stored | None:
    if item is None or item.data is None:
        return None
    data = item.data.as_dict()
    if data.get('deleted') is True:
        return None
    if 'uuid' not in data:   # a log family's record is written without copies (features/events/outbox.py)
        family = BY_PATH.get(item.kind)
        if family is not None and family.log:
            data['uuid'] = data['id']
            data.setdefault('name', data.get(family.name_field))
    return Stored(family=item.kind, data=data, seq=int(item.seq or 0), org=item.org, indexed=item.ixv is not None,
                  guarded=int(item.gv or 0))


def get(family: str, id_: str, consistent: bool = True) -> Stored | None:
    """One entity by id (GetItem); a missing or soft-deleted one is None."""
    model = configure()
    try:
        item = model.get(entity_pk(family, id_), ENTITY_SK, consistent_read=consistent)
    except model.DoesNotExist:
        return None
    return stored_from(item)


def batch_get(keys: Iterable[tuple[str, str]], *, consistent: bool = False) -> dict[str, Stored]:
    """Entities by (family, id), in BatchGetItem calls of 100; missing or deleted ones are absent
    (``consistent``: strongly consistent reads, e.g. a write's reference checks)."""
    model = configure()
    wanted = list(dict.fromkeys((entity_pk(f, i), ENTITY_SK) for f, i in keys))
    out: dict[str, Stored] = {}
    for start in range(0, len(wanted), 100):
        for item in model.batch_get(wanted[start:start + 100], consistent_read=consistent):
            stored = stored_from(item)
            if stored is not None:
                out[stored.id] = stored
    return out


# ----------------------------------------------------------------------------- lists

def plain(value: Any) -> Any:
    """boto3's Decimals back to int/float, recursively."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


_index_pool = None


def _pool():
    """The index reads' own pool (never used from inside itself)."""
    global _index_pool
    if _index_pool is None:
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - lazy: only lists need it
        _index_pool = ThreadPoolExecutor(max_workers=INDEX_SHARDS, thread_name_prefix='index')
    return _index_pool


def in_parallel(fn, items: list[Any]) -> list[Any]:
    """``fn`` of each of ``items``, in order, up to INDEX_SHARDS calls in flight (the store's
    pool; one item is called here). For independent calls of one unit of work: the events
    records of a chunk put one by one (features/events/tally.py ``put_all_marked``)."""
    return list(_pool().map(fn, items)) if len(items) > 1 else [fn(i) for i in items]


def _each_shard(key: str, read) -> list[Any]:
    """``read(shard key)`` for every shard of index partition ``key``, all in flight at once
    (one round), in shard order."""
    return list(_pool().map(read, spread_keys(key)))


def _key_query(index: str, key_attr: str, key: str) -> dict[str, Any]:
    """The low-level Query arguments reading index partition (shard) ``key``."""
    return {'TableName': table_name(), 'IndexName': index, 'KeyConditionExpression': '#k = :k',
            'ExpressionAttributeNames': {'#k': key_attr}, 'ExpressionAttributeValues': {':k': {'S': key}}}


def _partition_pks(index: str, key_attr: str, key: str) -> list[str]:
    """The entity keys (``pk``) of every entry of index partition ``key``, all its shards asked
    in one round (KEYS_ONLY: ~150 bytes an entry, ~7,000 a 1 MB page), in shard then sort order."""
    def one(shard: str) -> list[str]:
        kwargs = _key_query(index, key_attr, shard)
        out: list[str] = []
        while True:
            page = client().query(**kwargs)
            out.extend(i['pk']['S'] for i in page.get('Items', []))
            if 'LastEvaluatedKey' not in page:
                return out
            kwargs['ExclusiveStartKey'] = page['LastEvaluatedKey']
    return [pk for part in _each_shard(key, one) for pk in part]


BATCH_GET = 100   # keys per BatchGetItem (DynamoDB's limit)


def _records(pks: list[str]) -> list[dict[str, Any]]:
    """The records of entity keys ``pks``, in that order (BatchGetItem calls of 100, eventually
    consistent like the index they were listed from, 16 in flight at a time, the unit of work's
    budget checked between those rounds: core/budget.py); missing and soft-deleted ones are
    left out."""
    model = configure()
    chunks = [[(pk, ENTITY_SK) for pk in pks[at:at + BATCH_GET]] for at in range(0, len(pks), BATCH_GET)]

    def one(chunk: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for item in model.batch_get(chunk, consistent_read=False):
            stored = stored_from(item)
            if stored is not None:
                found[item.pk] = stored.data
        return found
    got: dict[str, dict[str, Any]] = {}
    for wave in range(0, len(chunks), INDEX_SHARDS):   # 16 calls in flight, then the budget's word
        if wave:
            budget.check(f'reading {len(pks):,} records stopped after {wave * BATCH_GET:,}; narrow the '
                         'filter (an indexed field, a project)')
        todo = chunks[wave:wave + INDEX_SHARDS]
        for part in (_pool().map(one, todo) if len(todo) > 1 else map(one, todo)):
            got.update(part)
    return [got[pk] for pk in pks if pk in got]


def records_of(family: str, ids: Iterable[str]) -> list[dict[str, Any]]:
    """The records of ``family`` with ``ids`` (listed from an index: eventually consistent), in
    parallel waves of BatchGetItems with the unit of work's budget checked between them
    (``_records``); missing and deleted ones are left out."""
    return _records([entity_pk(family, i) for i in dict.fromkeys(ids)])


def _listed(index: str, key_attr: str, key: str, keep=None) -> list[dict[str, Any]]:
    """Every listed record of index partition ``key`` that ``keep`` (a test of the record's body)
    accepts: the partition's keys from its KEYS_ONLY index, then the records. No index projects
    records (docs/scale.md "Projections"): a write moves only the keys of its entries, and a
    filter is decided here, on the records, not in DynamoDB."""
    records = _records(_partition_pks(index, key_attr, key))
    return records if keep is None else [r for r in records if keep(r)]


def query_tenant(family: str, tenant: str, keep=None, *, has_field: str | None = None) -> list[dict[str, Any]]:
    """Every listed record of ``family`` in one tenant (by_created's keys, then the records),
    those ``keep`` accepts and (``has_field``) holding a value in that field."""
    if has_field is not None:
        wanted = keep

        def keep(record: dict[str, Any]) -> bool:
            return record.get(has_field) is not None and (wanted is None or wanted(record))
    return _listed('by_created', 'tpk', tenant_pk(family, tenant), keep)


def query_tenant_naming(family: str, tenant: str, field_name: str, value: str) -> list[dict[str, Any]]:
    """The listed records of ``family`` in one tenant whose ``field_name`` is ``value`` (the
    tenant's records, tested here: for a field that has no equality index)."""
    return query_tenant(family, tenant, lambda record: record.get(field_name) == value)


def query_project(family: str, project_id: str, keep=None) -> list[dict[str, Any]]:
    """Every listed record of a project-scoped ``family`` in one project (parent_keys' keys,
    then the records), those ``keep`` accepts."""
    return _listed('parent_keys', 'ppk', project_pk(family, project_id), keep)


def query_project_page(family: str, project_id: str, *, start: dict[str, Any] | None = None,
                       limit: int = 100) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """One page (at most ``limit`` entries read) of a project's listed records of ``family``
    (parent_keys, its shards one after the other, then the page's records), and where the next
    page starts (None: the end). The key is plain strings (the shard's number under ``shard``),
    so a caller may carry it in a message and resume there (features/work/pipelines.py)."""
    shards = spread_keys(project_pk(family, project_id))
    start = dict(start or {})
    shard = int(start.pop('shard', 0) or 0)
    if not 0 <= shard < len(shards):
        return [], None
    limit = max(1, int(limit))
    pks: list[str] = []
    following: dict[str, Any] | None = None
    while True:   # on through the following shards while the page has room
        kwargs = {**_key_query('parent_keys', 'ppk', shards[shard]), 'Limit': limit - len(pks)}
        if start:
            kwargs['ExclusiveStartKey'] = {k: {'S': str(v)} for k, v in start.items()}
        page = client().query(**kwargs)
        pks += [i['pk']['S'] for i in page.get('Items', [])]
        last = page.get('LastEvaluatedKey')
        if last:
            following = {**{k: v['S'] for k, v in last.items()}, 'shard': str(shard)}
            break
        shard, start = shard + 1, {}
        if shard == len(shards):
            break
        if len(pks) >= limit:
            following = {'shard': str(shard)}
            break
    return _records(pks), following


def project_has(family: str, project_id: str) -> bool:
    """Whether a project holds at least one listed record of a project-scoped ``family``
    (one Query of one key per shard of parent_keys, in one round)."""
    index = configure().parent_keys
    return any(_each_shard(project_pk(family, project_id),
                           lambda shard: next(iter(index.query(shard, limit=1)), None) is not None))


def _first_round(limit: int) -> int:
    """Entries asked of each shard first, for the first ``limit`` of a partition: its share with
    room to spare (1.5 x limit / 16 + 2), never more than ``limit``."""
    return min(limit, -(-limit * 3 // (2 * INDEX_SHARDS)) + 2)


def _merged(key: str, index_name: str, attr: str, *, descending: bool, limit: int | None,
            begins: str | None = None) -> list[tuple[str, str]]:
    """(sort key, id) of the first ``limit`` entries (all when None) of index partition ``key``
    in the index's order, merged from its shards. Keys only, never the items. ``begins``: only
    the entries whose sort key starts with it (a range key condition: nothing else is read).

    Each shard is asked for its share first (``_first_round``), all at once. The merge is exact
    when no shard that has more could hold an entry before the ``limit``-th merged one; a shard
    that could (its last entry comes before it, or too few were found) is asked, in a second
    round, for as many more as the page could still take from it. About 1.5 x ``limit`` + 32
    keys read, not 16 x ``limit``; a second round when one shard holds far more than its share
    of the page (~5 % of 10-item first pages)."""
    index = getattr(configure(), index_name)
    forward = not descending

    def read(shard: str, count: int | None, start=None) -> tuple[list[tuple[str, str]], Any]:
        kwargs: dict[str, Any] = {'scan_index_forward': forward}
        if begins is not None:
            kwargs['range_key_condition'] = getattr(configure(), attr).startswith(begins)
        if count is not None:
            kwargs.update(limit=count, page_size=min(count, 2000))
        if start is not None:
            kwargs['last_evaluated_key'] = start
        found = index.query(shard, **kwargs)
        entries = [(getattr(k, attr), k.pk.split('#', 1)[1]) for k in found]
        more = count is not None and len(entries) == count and found.last_evaluated_key is not None
        return entries, (found.last_evaluated_key if more else None)

    if limit is not None and limit <= 0:
        return []
    if limit is None:
        parts = _each_shard(key, lambda shard: read(shard, None)[0])
        return sorted((e for part in parts for e in part), reverse=descending)
    shards = spread_keys(key)
    first = _first_round(limit)
    got = dict(zip(shards, _each_shard(key, lambda shard: read(shard, first)), strict=True))
    merged = sorted((e for entries, _ in got.values() for e in entries), reverse=descending)
    bound = merged[limit - 1] if len(merged) >= limit else None

    def before_bound(entry: tuple[str, str]) -> bool:
        return bound is None or (entry < bound if forward else entry > bound)
    again = [s for s, (entries, start) in got.items() if start is not None and before_bound(entries[-1])]
    if again:
        more = _pool().map(lambda s: read(s, limit - len(got[s][0]), got[s][1])[0], again)
        merged = sorted(merged + [e for part in more for e in part], reverse=descending)
    return merged[:limit]


def _merged_updated(key: str, created_index: str, updated_index: str, *, descending: bool,
                    limit: int | None) -> list[tuple[str, str]]:
    """``_merged`` in updatedOn order for a sparse_updated family (``sorted_keys``): its changed
    records from the updatedOn index, the others from the createdOn index (their createdOn is
    their updatedOn), where the entries of changed records, marked CHANGED, are skipped. When
    skipped entries leave the createdOn walk short it is read again, twice as far (changed
    records are the exception in such a family), the unit of work's budget checked in between."""
    changed = _merged(key, updated_index, 'usk', descending=descending, limit=limit)
    ask = limit
    while True:
        entries = _merged(key, created_index, 'csk', descending=descending, limit=ask)
        fresh = [e for e in entries if not e[0].endswith(CHANGED)]
        if ask is None or len(fresh) >= limit or len(entries) < ask:
            break
        budget.check(f'walking {key} in updatedOn order stopped after {ask:,} keys; narrow the filter')
        ask *= 2
    merged = sorted(changed + fresh, reverse=descending)
    return merged if limit is None else merged[:limit]


def walk_index(family: str, tenant: str, *, order: str, descending: bool, limit: int,
               sparse_updated: bool = False) -> list[str]:
    """Ids of the first ``limit`` records of a tenant in ``order`` ('createdOn', 'updatedOn' or
    'name'), read from a KEYS_ONLY index: keys only, never the items. ``sparse_updated``: the
    family keys only its changed records by updatedOn (``sorted_keys``)."""
    key = tenant_pk(family, tenant)
    if order == 'updatedOn' and sparse_updated:
        entries = _merged_updated(key, 'by_created', 'by_updated', descending=descending, limit=limit)
    else:
        attr = {'createdOn': 'csk', 'updatedOn': 'usk', 'name': 'nsk'}[order]
        entries = _merged(key, WALKABLE[order], attr, descending=descending, limit=limit)
    return [id_ for _, id_ in entries]


_count_pool = None


def _sum_counters(pks: list[str], *, consistent: bool = False) -> list[int]:
    """The sums of the counters ``pks``: one Query per partition of each, all in flight at once
    (one round; a partition holds at most 9 shards, plus in partition 0 the shards written
    before partitions, ~1 RCU)."""
    global _count_pool
    parts = [(i, counter_partition_pk(pk, p)) for i, pk in enumerate(pks) for p in range(COUNTER_PARTITIONS)]
    model = configure()

    def one(part: str) -> int:
        return sum(int(i.cnt or 0) for i in model.query(part, consistent_read=consistent))
    if _count_pool is None:
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - lazy: only counts need it
        _count_pool = ThreadPoolExecutor(max_workers=COUNTER_PARTITIONS, thread_name_prefix='count')
    totals = [0] * len(pks)
    for (i, _), n in zip(parts, _count_pool.map(one, [part for _, part in parts]), strict=True):
        totals[i] += n
    return totals


def count(family: str, tenant: str) -> int:
    """Records of ``family`` in a tenant: the sum of its counter shards (one round of Queries)."""
    return _sum_counters([counter_pk(family, tenant)])[0]


def value_counts(family: str, tenant: str, field_name: str, values: list[str]) -> list[int]:
    """Records of ``family`` in a tenant holding each of ``values`` in an indexed field (one
    round of Queries for all of them: COUNTER_PARTITIONS per value)."""
    return _sum_counters([value_counter_pk(family, tenant, field_name, value) for value in values])


def count_value(family: str, tenant: str, field_name: str, value: str) -> int:
    """Records of ``family`` in a tenant holding ``value`` in an indexed field (one round)."""
    return _sum_counters([value_counter_pk(family, tenant, field_name, value)])[0]


def counter_total(pk: str) -> int:
    """What the counter ``pk`` holds now, over all its partitions (strongly consistent)."""
    return _sum_counters([pk], consistent=True)[0]


def count_values(family: str, parts: list[tuple[str, str]], field_name: str) -> int:
    """The records of ``family`` holding, in the indexed field, any of the (tenant, value) pairs
    ``parts`` (one round for all of them)."""
    return sum(_sum_counters([value_counter_pk(family, tenant, field_name, value) for tenant, value in parts]))


def counter_shards(pk: str) -> dict[str, int]:
    """The shards of one checked counter as they are now (strongly consistent Query): shard ->
    count. A checked counter keeps its few shards under its own key (repository.move_counter_at)."""
    return {i.sk: int(i.cnt or 0) for i in configure().query(pk, consistent_read=True)}


def guard_state(pk: str) -> tuple[bool, str | None] | None:
    """A guard shard as it is now (consistent GetItem): (closed, the token of the delete that
    closed it ahead of its transaction, if any); None when it does not exist (open, zero)."""
    try:
        item = configure().get(pk, ENTITY_SK, consistent_read=True)
    except Item.DoesNotExist:
        return None
    return (item.dead is not None, item.ref)


def org_of(family: str, id_: str) -> str | None:
    """The organization of a live entity, None when there is none (one eventually consistent
    GetItem of its ``org`` and ``tpk`` only: ~0.5 RCU whatever the record's size)."""
    item = configure()._get_connection().get_item(entity_pk(family, id_), ENTITY_SK,
                                                   attributes_to_get=['org', 'tpk'])
    found = item.get('Item') or {}
    return (found.get('org') or {}).get('S') if 'tpk' in found else None


def alive(family: str, id_: str) -> bool:
    """The entity exists and is not deleted (consistent GetItem of its keys and ``tpk`` only)."""
    item = configure()._get_connection().get_item(entity_pk(family, id_), ENTITY_SK, consistent_read=True,
                                                   attributes_to_get=['pk', 'tpk'])
    return 'tpk' in (item.get('Item') or {})


def walk_value(family: str, tenant: str, *, slot: int, field_name: str, value: str,
               descending: bool, limit: int | None) -> list[tuple[str, str]]:
    """(sort key, id) of the first ``limit`` records (all when None) holding ``value`` in the
    indexed field of ``slot``, in createdOn order: keys only. (No value index is kept in
    updatedOn order: docs/scale.md "Value indexes by createdOn only".)"""
    key = value_pk(family, tenant, field_name, value)
    return _merged(key, f'x{slot}_created', 'csk', descending=descending, limit=limit)


def walk_name(family: str, tenant: str, *, value: str, descending: bool, limit: int | None,
              legacy: tuple[int, str] | None = None) -> list[tuple[str, str]]:
    """(``{createdOn}#{id}``, id) of the first ``limit`` records (all when None) of a
    ``name_keyed`` family (events) whose name is exactly ``value``, in createdOn order: the run
    of by_name its ``name_prefix`` starts (keys only). A name holding ``\\x01`` can make another
    record's key start the same way: the caller keeps only the records holding ``value``.

    ``legacy`` (slot, field): also the records still keyed under the value's x{slot} index
    (written before the family was name_keyed, until migrate_scale moves them), read at the same
    time (the walks' shards, 32 queries in one round) and merged."""
    prefix = name_prefix(value)

    def named() -> list[tuple[str, str]]:
        entries = _merged(tenant_pk(family, tenant), 'by_name', 'nsk', descending=descending, limit=limit,
                          begins=prefix)
        return [(key[len(prefix):], id_) for key, id_ in entries]
    if legacy is None:
        return named()
    slot, field_name = legacy
    found: dict[str, Any] = {}

    def old() -> None:
        try:
            found['entries'] = walk_value(family, tenant, slot=slot, field_name=field_name, value=value,
                                          descending=descending, limit=limit)
        except BaseException as exc:   # noqa: BLE001 - raised again on the caller's thread
            found['error'] = exc
    import threading  # noqa: PLC0415 - lazy: lists of a name_keyed family only
    # Its own thread, not the index pool's: each walk fans out on that pool (never used from
    # inside itself, ``_pool``).
    thread = threading.Thread(target=old, name='index-legacy', daemon=True)
    thread.start()
    entries = named()
    thread.join()
    if 'error' in found:
        raise found['error']
    entries += [(key.removesuffix(CHANGED), id_) for key, id_ in found['entries']]   # a changed one's mark
    merged = sorted(dict((id_, key) for key, id_ in entries).items(), key=lambda e: e[1], reverse=descending)
    out = [(key, id_) for id_, key in merged]
    return out if limit is None else out[:limit]


# ----------------------------------------------------------------------------- operator tools

def scan_page(start: dict[str, Any] | None = None, *, limit: int = 500) -> tuple[list[Item], dict[str, Any] | None]:
    """One page of the whole table and where the next one starts (None: the end). For the
    operator tools of chalicelib/ops only: no request path scans."""
    model = configure()
    kwargs: dict[str, Any] = {'limit': limit, 'page_size': limit}
    if start is not None:
        kwargs['last_evaluated_key'] = start
    result = model.scan(**kwargs)
    items = list(result)
    return items, result.last_evaluated_key


# ----------------------------------------------------------------------------- memberships, unique values

INVITED = 'INVITED'   # a membership the user has not accepted yet grants nothing


def memberships_of(user_id: str, *, invited: bool = False) -> list[dict[str, Any]]:
    """A user's membership records, from their membership partition (its keys, then the
    records): the active ones, or (``invited``) the invitations they have not answered."""
    return [data for data in _records([k.pk for k in configure().parent_keys.query(member_pk(user_id))])
            if data.get('organizationId') and data.get('role') and (data.get('status') == INVITED) == invited]


def member_user_ids(org_id: str) -> set[str]:
    """Ids of the users holding an active membership of an organization."""
    return {m['userId'] for m in query_tenant(MEMBERSHIPS, org_id)
            if m.get('userId') and m.get('status') != INVITED}


def organizations(org_ids: Iterable[str]) -> dict[str, Stored]:
    """organization id -> its record (strongly consistent: one GetItem for one organization,
    else BatchGetItem); an organization that does not exist is absent."""
    wanted = list(dict.fromkeys(org_ids))
    if len(wanted) == 1:
        found = get(ORGANIZATIONS, wanted[0])
        return {found.id: found} if found is not None else {}
    model = configure()
    out: dict[str, Stored] = {}
    keys = [(entity_pk(ORGANIZATIONS, o), ENTITY_SK) for o in wanted]
    for start in range(0, len(keys), 100):
        for item in model.batch_get(keys[start:start + 100], consistent_read=True):
            stored = stored_from(item)
            if stored is not None:
                out[stored.id] = stored
    return out


def organization_statuses(org_ids: Iterable[str]) -> dict[str, str]:
    """organization id -> organizationStatus (``organizations``); absent when it does not exist."""
    return {o: s.data.get('organizationStatus', 'ACTIVE') for o, s in organizations(org_ids).items()}


def unique_owner(family: str, *, scope: str, field_name: str, value: Any) -> str | None:
    """Id of the record holding a unique value, or None (one consistent GetItem)."""
    model = configure()
    try:
        key = unique_key(family, scope=scope, field_name=field_name, value=value)
        return model.get(key, ENTITY_SK, consistent_read=True).ref
    except model.DoesNotExist:
        return None


def get_by_ref(family: str, *, scope: str, ref: str) -> Stored | None:
    """A record named by its id, or by its ``slug`` unique in ``scope`` (a project's or an
    organization's id): how steps and options name a bridge, an agent, a data store or a data
    definition. The caller checks that a record found by id belongs to the scope."""
    try:
        return get(family, str(uuid.UUID(ref)))
    except ValueError:
        owner = unique_owner(family, scope=scope, field_name='slug', value=ref)
        return get(family, owner) if owner else None


def unique_exists(family: str, *, scope: str, field_name: str, value: Any) -> bool:
    return unique_owner(family, scope=scope, field_name=field_name, value=value) is not None



# ----------------------------------------------------------------------------- reads under faults

class ReadUnavailable(ServiceUnavailable):
    """The table kept throttling, failing or timing out a read for the whole retry budget."""

    def __init__(self) -> None:
        super().__init__('The database is busy; retry shortly', retry_after=2)


def _available(read):
    """A read that throttling, internal errors or timeouts do not turn into a 500: retried with
    jittered backoff inside ``STORE_RETRY_BUDGET_SECONDS`` (after the SDK's own retries), then
    503 with Retry-After (issue 16: under faults, never a 500)."""
    @functools.wraps(read)
    def wrapped(*args, **kwargs):
        # an iterator argument (``batch_get``'s keys are often a generator) is read once, here:
        # a retry handed the spent iterator would read nothing and answer "none of them exists"
        # (a 400 "refers to a label that does not exist" under throttling, chaos run of 20c7b32)
        args = tuple(list(a) if isinstance(a, Iterator) else a for a in args)
        kwargs = {k: list(v) if isinstance(v, Iterator) else v for k, v in kwargs.items()}
        retry_budget = get_config().store_retry_budget_seconds
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return read(*args, **kwargs)
            except Exception as exc:
                if not aws_unavailable(exc):   # the table cannot answer now
                    raise
                delay = random.uniform(0, min(0.8, 0.05 * 2 ** attempt))
                if time.monotonic() - started + delay > retry_budget:
                    raise ReadUnavailable() from None
                attempt += 1
                time.sleep(delay)
    wrapped.__wrapped_read__ = read
    return wrapped


for _read in (get, batch_get, _partition_pks, _records, walk_index, count, count_value, count_values,
              counter_shards, counter_total, guard_state, alive,
              walk_value, memberships_of, organizations, organization_statuses, unique_owner,
              project_has):
    globals()[_read.__name__] = _available(_read)
