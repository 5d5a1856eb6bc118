"""Where extraction's records live in the single table (docs/api/extraction.md "Storage"):

* a data object is one ``data-objects`` record (kernel/registry.py) holding its attributes: an
  attribute is never an item of its own, so an extracted object is one entity item and its
  index entries (store, family), written in the transaction of its chunk. The SDK's
  ``/dataObjects/{id}/attributes`` reads them from the object.
* an exception is one ``data-exceptions`` record, indexed by ``storeState`` =
  ``{dataStoreId}#{OPEN|CLOSED}``: the open exceptions of a store are one run of one value
  index, so listing them costs the same whether the store holds 10 or 10,000 objects (and
  however many closed ones), and by ``documentFamilyId``.
* equality indexes: an object's store, family, and the pair (store, definition) that tells
  which definitions a store's objects name (``definitions_used``: the taxonomies); an
  exception's store state and family. Each costs every record an index entry and a counter
  move, so no more than these. A run's records (``sourceKey``) and an object's children
  (``parentId``) are found through the family's index and filtered: a family holds one
  document's objects, a few hundred at most.
* a write holds only its own items: records of one extraction go in transactions of as many
  records as 100 items hold (their entities, counter moves summed per shard, their
  parents' guard shards); nothing names the store, the definition or the family item.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.principal import Principal
from chalicelib.kernel import records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.table import Stored

OBJECTS = family_of('data-objects')
EXCEPTIONS = family_of('data-exceptions')
MAX_ITEMS = 100     # items of one TransactWriteItems


def store_state(store_id: str, state: str) -> str:
    return f'{store_id}#{state}'


def keyed(family, org: str, field_name: str, value: str, *, limit: int | None = None) -> list[Stored]:
    """The records of ``family`` holding ``value`` in an indexed field (keys, then one BatchGet)."""
    keys = table.walk_value(family.path, org, slot=family.slot_of(field_name), field_name=field_name,
                            value=value, descending=False, limit=limit)
    found = table.batch_get((family.path, i) for _, i in keys)
    return [found[i] for _, i in keys if i in found]


def _family_of_run(source_key: str) -> str:
    return source_key.split(':', 1)[0]   # service.source_key: '{familyId}:{digest}'


def objects_of_run(org: str, source_key: str) -> list[Stored]:
    """A run's objects: the family's (its value index), those of this run."""
    return [s for s in keyed(OBJECTS, org, 'documentFamilyId', _family_of_run(source_key))
            if s.data.get('sourceKey') == source_key]


def exceptions_of_run(org: str, source_key: str) -> list[Stored]:
    return [s for s in keyed(EXCEPTIONS, org, 'documentFamilyId', _family_of_run(source_key))
            if s.data.get('sourceKey') == source_key]


def exceptions_of_family(org: str, family_id: str) -> list[Stored]:
    return keyed(EXCEPTIONS, org, 'documentFamilyId', family_id)


def get(family, id_: str) -> Stored | None:
    return table.get(family.path, id_)


def get_many(family, ids: list[str]) -> dict[str, Stored]:
    return table.batch_get((family.path, i) for i in ids)


STORE_DEFINITION = 'dataStoreId+dataDefinitionId'   # the objects' pair index (declarations.py)
DEFINITIONS_PER_ROUND = 50   # definitions counted in one round of Queries (16 each)


def definitions_used(org: str, store_id: str) -> list[str]:
    """Ids of the organization's data definitions that objects of the store name: the
    organization's definition ids (by_created keys: as many as it has, never the objects), then
    for each one the counter of the objects' (store, definition) pair (16 Queries per
    definition, ``DEFINITIONS_PER_ROUND`` definitions a round, the request's budget checked
    between rounds). Flat in the number of objects; an object counts from its create, as
    ``totalElements`` does (docs/api/extraction.md "Reading")."""
    from chalicelib.core import budget  # noqa: PLC0415 - lazy: only this read needs it
    definitions = family_of('data-definitions')
    total = table.count(definitions.path, org)
    ids = table.walk_index(definitions.path, org, order='createdOn', descending=False, limit=max(total, 1))
    used: list[str] = []
    for start in range(0, len(ids), DEFINITIONS_PER_ROUND):
        budget.check(f'counting the objects of {len(ids):,} data definitions in a store stopped after {start:,}')
        chunk = ids[start:start + DEFINITIONS_PER_ROUND]
        counts = table.value_counts(OBJECTS.path, org, STORE_DEFINITION, [f'{store_id}#{i}' for i in chunk])
        used += [i for i, n in zip(chunk, counts, strict=True) if n > 0]
    return used


def _in_transactions(items: list[Any], ops_of) -> None:
    """Commit ``ops_of(chunk)`` for chunks of ``items`` as large as DynamoDB's 100 items per
    transaction allow (after merging: counter moves summed per shard)."""
    chunk: list[Any] = []
    ops: list = []
    for item in items:
        tentative = records.merged(ops_of([*chunk, item]))
        if chunk and len(tentative) > MAX_ITEMS:
            records.commit(ops)
            chunk, tentative = [], records.merged(ops_of([item]))
        chunk.append(item)
        ops = tentative
    if chunk:
        records.commit(ops)


def create(family, rows: list[dict[str, Any]], principal: Principal) -> None:
    """New records in as few transactions as possible: their entities, their project's guard
    shards, counter moves summed per shard, one outbox item for the chunk's event."""
    _in_transactions(rows, lambda chunk: records.create_ops(family, chunk, principal))


def delete(family, stored: list[Stored], principal: Principal) -> None:
    _in_transactions(stored, lambda chunk: [op for s in chunk for op in records.delete_ops(family, s, principal)])


def replace(family, new: dict[str, Any], stored: Stored, principal: Principal, *,
            action: str = 'updated') -> list:
    """The operations of one record's update (locked on its sequence); ``action`` names its
    domain event (``reviewed``: ``data-objects.reviewed``)."""
    return records.update_ops(family, new, stored, principal=principal, action=action)


def commit(ops: list) -> None:
    records.commit(ops)


def new_record(family, values: dict[str, Any], *, principal: Principal, org: str, project_id: str) -> dict[str, Any]:
    return records.new_record(family, values, principal=principal, org=org, project_id=project_id)


def set_family_summary(family_id: str, summary: dict[str, Any]) -> bool:
    """The family's ``extraction`` field: a side write moving neither its sequence nor updatedOn;
    False when the family is gone."""
    from chalicelib.kernel.store import repository  # noqa: PLC0415 - lazy: cold start
    return repository.set_side_field('document-families', family_id, 'extraction', summary)


def find(family_path: str, project_id: str, ref: str) -> Stored | None:
    """A project's record by id or slug."""
    stored = table.get_by_ref(family_path, scope=project_id, ref=ref)
    return stored if stored is not None and stored.data.get('projectId') == project_id else None


def find_org(family_path: str, org: str, ref: str) -> Stored | None:
    """An organization's record by id or slug."""
    stored = table.get_by_ref(family_path, scope=org, ref=ref)
    return stored if stored is not None and stored.org == org else None


def stores_with_slug(org: str, slug: str) -> list[Stored]:
    return keyed(family_of('data-stores'), org, 'slug', slug, limit=10)


def family_record(family_id: str) -> Stored | None:
    return table.get('document-families', family_id)


def objects_of_store(org: str, store_id: str) -> list[Stored]:
    return keyed(OBJECTS, org, 'dataStoreId', store_id)
