"""The layout memory's records (docs/api/extraction.md "Layout memory"): a reviewer's correction
by ``nodeIds`` teaches the definition where a field stands on that kind of document; the next
extraction run of a document of the same kind reads it there. What a fingerprint and a place
are: features/extraction/layout_memory.py (pure).

Storage: one ``layout-memories`` record (features/extraction/declarations.py) per (definition,
fingerprint), its id derived from the pair (``memory_id``): a run finds the memories of its
document with ONE BatchGetItem of its (at most two) fingerprints' ids, whatever the number of
memories; each record is its own partition (no hot key: every definition and fingerprint has
its own). Listed through its ``dataDefinitionId`` value index. Bounded: ``MAX_MEMORIES`` per
definition (a new fingerprint past it is not kept: the correction reports why) and
``MAX_FIELDS`` per memory (the field taught longest ago gives way).

Writes: after the correction committed (features/extraction/review.py), never turning it into
an error (the report says what could not follow: ``layoutMemory: {kept: false, reason}``). A
write's transaction holds the memory record's own items only (its entity, its index counters,
its organization's guard shard, as every organization record's create does): never the
definition, the data object or a tenant-wide item.

Who: a member who may correct a value (resource:write) teaches and may remove a memory; a
viewer reads them; another organization's definition or memory is a 404.
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core import clock, observability
from chalicelib.core.errors import ApiError, Conflict, NotFound
from chalicelib.core.principal import Principal
from chalicelib.features.extraction import layout_memory
from chalicelib.features.extraction.document import Document
from chalicelib.features.extraction.pointing import Pointed
from chalicelib.kernel import access, crud, listing, records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table

log = observability.get_logger('extraction')

FAMILY = 'layout-memories'
MAX_MEMORIES = 200     # fingerprints one definition remembers (limit maxLayoutMemories)
MAX_FIELDS = 50        # taxon paths one memory holds (the oldest taught gives way)
WRITE_TRIES = 3
_NS = uuid.UUID('0b6c1f3e-8d2a-4f57-9c1e-5a7d3e2b9f40')


def memory_id(definition_id: str, fingerprint: str) -> str:
    return str(uuid.uuid5(_NS, f'{definition_id}|{fingerprint}'))


# ----------------------------------------------------------------------------- a run reads

def recall_for(org: str, definition_id: str):
    """The engine's ``recall``: given the document, its memories' places (one BatchGetItem of
    its fingerprints' records), or None when it has no fingerprint or no memory."""
    def recall(doc: Document) -> layout_memory.Recalled | None:
        prints = layout_memory.fingerprints(doc)
        if not prints:
            return None
        ids = [memory_id(definition_id, p.key) for p in prints]
        found = table.batch_get((FAMILY, i) for i in ids)
        fields: dict[str, dict[str, Any]] = {}
        used = []
        for i in ids:   # the strongest fingerprint's places first
            stored = found.get(i)
            if stored is None or stored.org != org or stored.data.get('dataDefinitionId') != definition_id:
                continue
            used.append(i)
            for path, place in (stored.data.get('fields') or {}).items():
                fields.setdefault(path, place)
        return layout_memory.Recalled(doc, fields, used) if fields else None
    return recall


# ----------------------------------------------------------------------------- a correction teaches

def _in_one_group(path: str, taxon_of: dict[str, dict[str, Any]]) -> bool:
    parts = path.split('/')
    return all((taxon_of.get('/'.join(parts[:k])) or {}).get('cardinality') != 'many' for k in range(1, len(parts)))


def learn(obj, attr: dict[str, Any], taxon_of: dict[str, dict[str, Any]], doc: Document, pointed: Pointed,
          principal: Principal) -> dict[str, Any]:
    """Keep where the reviewer pointed for the attribute's taxon, under the document's strongest
    fingerprint. Answers the report ``{kept, memoryId?, fingerprint?, reason?}``; raises nothing
    the caller must handle (features/extraction/review.py reports an unexpected failure)."""
    path = attr.get('taxon') or ''
    definition_id = obj.data.get('dataDefinitionId')
    if not definition_id or path not in taxon_of:
        return {'kept': False, 'reason': 'the attribute names no taxon of a data definition'}
    if not _in_one_group(path, taxon_of):
        return {'kept': False, 'reason': 'values of a many group (line items) are not learned: their place '
                                         'changes with their row'}
    prints = layout_memory.fingerprints(doc)
    if not prints:
        return {'kept': False, 'reason': 'the document has no fingerprint (no IBAN or VAT id, fewer than '
                                         f'{layout_memory.MIN_LABELS} labels on page 1)'}
    place = layout_memory.place_of(layout_memory.Pages(doc), pointed.page, pointed.words)
    if place is None:
        return {'kept': False, 'reason': 'the words pointed at have no page size or boxes to find them again by'}
    place.update(taughtBy=principal.user_id, taughtOn=clock.now_iso())
    fp = prints[0]
    rid = memory_id(definition_id, fp.key)
    fam = family_of(FAMILY)
    from chalicelib.kernel.store.repository import WriteConflict  # noqa: PLC0415 - lazy: write path only
    for _ in range(WRITE_TRIES):
        stored = table.get(FAMILY, rid)
        try:
            if stored is None:
                if table.count_value(FAMILY, obj.org, 'dataDefinitionId', definition_id) >= MAX_MEMORIES:
                    return {'kept': False, 'reason': f'the data definition holds {MAX_MEMORIES} layout memories '
                                                     '(limit maxLayoutMemories): delete some '
                                                     '(DELETE /api/data-definitions/{id}/layout-memories/{memoryId})'}
                data = records.new_record(fam, {'dataDefinitionId': definition_id, 'fingerprint': fp.key,
                                                'kind': fp.kind, 'hint': fp.hint, 'fields': {path: place},
                                                'fieldCount': 1}, principal=principal, org=obj.org, id_=rid)
                records.commit(records.create_ops(fam, [data], principal))
            else:
                fields = dict(stored.data.get('fields') or {})
                fields[path] = place
                while len(fields) > MAX_FIELDS:   # the field taught longest ago gives way
                    fields.pop(min(fields, key=lambda p: fields[p].get('taughtOn') or ''))
                new = {**stored.data, 'fields': fields, 'fieldCount': len(fields), 'hint': fp.hint,
                       'changeSequence': stored.seq + 1, 'updatedOn': clock.now_iso()}
                records.commit(records.update_ops(fam, new, stored, principal=principal))
            return {'kept': True, 'memoryId': rid, 'fingerprint': {'kind': fp.kind, 'hint': fp.hint}, 'taxon': path}
        except WriteConflict:
            continue   # another correction of the same kind of document wrote meanwhile: read it again
    return {'kept': False, 'reason': 'other corrections of the same kind of document were writing its memory: '
                                     'correct it again to teach it'}


# ----------------------------------------------------------------------------- listed and removed

def _definition(definition_id: str, principal: Principal):
    return crud.load_visible('data-definitions', definition_id, principal)


def list_memories(definition_id: str, params: dict[str, list[str]], principal: Principal, *,
                  one_based: bool = False) -> dict[str, Any]:
    """A page of the definition's memories (the list parameters of every list)."""
    definition = _definition(definition_id, principal)
    fam = family_of(FAMILY)
    req = listing.parse_request(fam, params, one_based=one_based)
    req.filters = [f"dataDefinitionId == '{definition.id}'", *req.filters]
    return listing.list_resources(fam, req, principal)


def delete_memory(definition_id: str, memory_id_: str, principal: Principal) -> None:
    definition = _definition(definition_id, principal)
    fam = family_of(FAMILY)
    try:
        stored = crud.load_visible(fam, memory_id_, principal)
    except ApiError:
        stored = None
    if stored is None or stored.data.get('dataDefinitionId') != definition.id:
        raise NotFound(f'No LayoutMemory with id {memory_id_[:100]} in data definition {definition.id}')
    access.require_write(principal, family_of('data-objects'), stored.org)   # who may correct may forget
    from chalicelib.kernel.store.repository import WriteConflict  # noqa: PLC0415 - lazy: write path only
    try:
        records.commit(records.delete_ops(fam, stored, principal))
    except WriteConflict:
        raise Conflict('The layout memory changed meanwhile (a correction taught it): read it again, retry') from None


def forget_definition(org: str, definition_id: str, principal: Principal) -> int:
    """A deleted definition's memories go with it (its hook, after the delete): at most
    MAX_MEMORIES records, each its own transaction; what fails is logged and left (a memory of a
    deleted definition is never read: its id names the definition)."""
    fam = family_of(FAMILY)
    keys = table.walk_value(FAMILY, org, slot=fam.slot_of('dataDefinitionId'), field_name='dataDefinitionId',
                            value=definition_id, descending=False, limit=MAX_MEMORIES + 10)
    gone = 0
    for stored in table.batch_get((FAMILY, i) for _, i in keys).values():
        try:
            records.commit(records.delete_ops(fam, stored, principal))
            gone += 1
        except Exception:   # noqa: BLE001 - one memory left behind must not fail the definition's delete
            log.warning('layout memory not deleted with its definition', extra={'memoryId': stored.id})
    return gone
