"""Reading extraction's results the SDK's way and the REST way (docs/api/extraction.md "Reading"):

  GET /api/stores/{orgSlug}/{storeSlug}/dataObjects?path=&documentFamilyId=&filter=&page=&pageSize=
      a page of the store's data objects (``format=json|csv``: the export instead)
  GET /api/stores/{orgSlug}/{storeSlug}/dataObjects/{id}          one object with its attributes
  GET /api/stores/{orgSlug}/{storeSlug}/dataObjects/{id}/attributes   its attributes (a JSON list)
  GET /api/stores/{orgSlug}/{storeSlug}/dataObjects/{id}/children     the objects under it
  GET /api/stores/{orgSlug}/{storeSlug}/attributes?filter=        attributes across the store
  GET /api/stores/{orgSlug}/{storeSlug}/taxonomies                the definitions the store holds
  GET /api/exceptions?dataStoreId=&state=&documentFamilyId=&taxon=&filter=
  GET /api/stores/{orgSlug}/{storeSlug}                           the data store itself, when no document
      store holds the slug (the SDK's get_object_by_ref('store', ...): ``store_view``)

The object lists are the kernel's lists over the ``data-objects`` family pinned to the store
(its ``dataStoreId`` value index), so every filter of the list language works on an object's
fields; the attribute list evaluates the same language over each attribute (``taxon ==
'invoice/total' and typedValue > 1000``) of the store's objects, and is capped at
``MAX_SCANNED_OBJECTS`` objects read (a 422 names it beyond).
"""
from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

from chalicelib.core import budget
from chalicelib.core.errors import ApiError, BadRequest, Conflict, NotFound
from chalicelib.core.principal import Principal
from chalicelib.features.extraction import review, storage
from chalicelib.features.extraction import taxons as taxon_rules
from chalicelib.kernel import access, crud, listing, org_reads
from chalicelib.kernel.query import evaluate
from chalicelib.kernel.query.parser import FilterError, parse
from chalicelib.kernel.query.schema import DictSchema
from chalicelib.kernel.registry import family as family_of

STORES = family_of('data-stores')
MAX_SCANNED_OBJECTS = 10_000     # objects one attribute list or export reads
ATTRIBUTE_SCHEMA = DictSchema({'taxon': 'string', 'tag': 'string', 'path': 'string', 'label': 'string',
                               'type': 'string', 'value': 'string', 'typedValue': 'any', 'confidence': 'number',
                               'confirmed': 'boolean', 'reviewStatus': 'string', 'dataObjId': 'string',
                               'currency': 'string', 'dataFeatures': 'any', 'exceptionCount': 'integer',
                               'documentFamilyId': 'string', 'objectPath': 'string'})
EXCEPTION_PARAMS = ('dataStoreId', 'documentFamilyId', 'taxon', 'dataObjectId', 'exceptionType')


def resolve_store(org_slug: str, store_slug: str, principal: Principal):
    org_id = org_reads.organization_id(org_slug, principal)
    stores = [s for s in storage.stores_with_slug(org_id, store_slug.strip()[:255])
              if crud.visible(STORES, principal, s)]
    if not stores:
        try:
            found = crud.load_visible(STORES, store_slug, principal)
        except (NotFound, BadRequest, ApiError):
            found = None
        if found is None or found.org != org_id:
            raise NotFound(f'No data store with slug {store_slug[:100]!r} in organization {org_slug[:100]!r}')
        stores = [found]
    if len(stores) > 1:
        raise Conflict(f'Organization {org_slug[:100]!r} has {len(stores)} data stores with slug {store_slug[:100]!r}: '
                       'give one of them another slug')
    return stores[0]


def store_view(org_slug: str, store_slug: str, principal: Principal) -> dict[str, Any]:
    """The data store at ``{orgSlug}/{storeSlug}`` as the SDK reads a store: the record plus type
    "store", storeType "TABLE" (the SDK's name for a data store: it answers a DataStoreEndpoint),
    slug and orgSlug. Asked by the store-by-slug route after no document store held the slug."""
    try:
        store = resolve_store(org_slug, store_slug, principal)
    except NotFound:
        raise NotFound(f'No document or data store with slug {store_slug.strip()[:100]!r} in organization '
                       f'{org_slug.strip()[:100]!r}') from None
    return {**store.data, 'type': 'store', 'storeType': 'TABLE', 'slug': store.data.get('slug'),
            'orgSlug': org_slug.strip().lower()}


def _object_view(data: dict[str, Any], org_slug: str, store) -> dict[str, Any]:
    return {**data, 'storeRef': f"{org_slug}/{store.data.get('slug')}"}


def _params_one(params: dict[str, list[str]], name: str) -> str | None:
    values = params.get(name) or []
    return values[-1] if values and values[-1] != '' else None


def list_objects(org_slug: str, store_slug: str, params: dict[str, list[str]], principal: Principal,
                 *, parent_id: str | None = None, one_based: bool = False) -> Any:
    store = resolve_store(org_slug, store_slug, principal)
    fmt = (_params_one(params, 'format') or '').lower()
    if fmt in ('csv', 'json'):
        return export(store, org_slug, params, principal, fmt)
    filters = [f"dataStoreId == '{store.id}'"]
    path = _params_one(params, 'path')
    if parent_id:   # its family's objects (an index), then the parent's children among them
        parent, _ = load_object(org_slug, store_slug, parent_id, principal)
        filters = [f"documentFamilyId == '{_safe(parent.data.get('documentFamilyId') or '')}'",
                   f"parentId == '{_safe(parent_id)}'", *filters]
    elif path and path != '/':
        filters.append(f"path == '{_safe(path.strip('/'))}'")
    family_id = _params_one(params, 'documentFamilyId')
    if family_id:   # first: the first indexed equality is the one the list reads (kernel/listing.py)
        filters.insert(0, f"documentFamilyId == '{_safe(family_id)}'")
    q = {k: v for k, v in params.items() if k not in ('path', 'documentFamilyId', 'storeRef', 'format')}
    if not q.get('sort'):
        q['sort'] = ['sourceOrdering']
    req = listing.parse_request(storage.OBJECTS, q, one_based=one_based)
    req.filters = [*filters, *req.filters]
    page = listing.list_resources(storage.OBJECTS, req, principal)
    page['content'] = [_object_view(o, org_slug, store) for o in page['content']]
    return page


def _safe(value: str) -> str:
    return value.replace('\\', '\\\\').replace("'", "\\'")[:500]


def load_object(org_slug: str | None, store_slug: str | None, object_id: str, principal: Principal):
    obj = crud.load_visible(storage.OBJECTS, object_id, principal)
    if org_slug is not None:
        store = resolve_store(org_slug, store_slug or '', principal)
        if obj.data.get('dataStoreId') != store.id:
            raise NotFound(f'No DataObject with id {object_id} in store {org_slug}/{store_slug}')
        return obj, store
    return obj, None


def get_object(org_slug: str, store_slug: str, object_id: str, principal: Principal) -> dict[str, Any]:
    obj, store = load_object(org_slug, store_slug, object_id, principal)
    return _object_view(obj.data, org_slug, store)


def attributes(org_slug: str, store_slug: str, object_id: str, principal: Principal) -> list[dict[str, Any]]:
    obj, _ = load_object(org_slug, store_slug, object_id, principal)
    return list(obj.data.get('attributes') or [])


def put_attribute(org_slug: str | None, store_slug: str | None, object_id: str, attribute_id: str,
                  body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    obj, _ = load_object(org_slug, store_slug, object_id, principal)
    crud.require_write(storage.OBJECTS, principal, obj, op='update')
    new, followed = review.update_attribute(obj, attribute_id, body, principal)
    return next(a for a in new['attributes'] if a['id'] == attribute_id) | {'dataObject': {
        'id': new['id'], 'exceptionCount': new.get('exceptionCount'), 'dataExceptions': new.get('dataExceptions')},
        **followed}


def _store_objects(store, principal: Principal, family_id: str | None = None) -> list[dict[str, Any]]:
    if family_id:
        found = [s for s in storage.keyed(storage.OBJECTS, store.org, 'documentFamilyId', family_id)
                 if s.data.get('dataStoreId') == store.id]
    else:
        found = storage.objects_of_store(store.org, store.id)
    if len(found) > MAX_SCANNED_OBJECTS:
        raise ApiError(f'the store holds more than {MAX_SCANNED_OBJECTS:,} data objects: narrow the request to a '
                       f'document family (documentFamilyId) (limit maxScannedObjects)', status=422,
                       limit='maxScannedObjects', maximum=MAX_SCANNED_OBJECTS)
    budget.check('reading the data objects of a store')
    return sorted((s.data for s in found),
                  key=lambda d: (d.get('documentFamilyId') or '', d.get('sourceOrdering') or ''))


def list_attributes(org_slug: str, store_slug: str, params: dict[str, list[str]],
                    principal: Principal) -> dict[str, Any]:
    store = resolve_store(org_slug, store_slug, principal)
    try:
        nodes = [parse(f, ATTRIBUTE_SCHEMA) for f in params.get('filter') or [] if f.strip()]
    except FilterError as exc:
        raise BadRequest(f'Invalid filter: {exc}') from None
    req = listing.parse_request(storage.OBJECTS, {k: v for k, v in params.items() if k in ('page', 'pageSize')})
    matched = []
    for obj in _store_objects(store, principal, _params_one(params, 'documentFamilyId')):
        for attr in obj.get('attributes') or []:
            item = {**attr, 'documentFamilyId': obj.get('documentFamilyId'), 'objectPath': obj.get('path'),
                    'exceptionCount': len(attr.get('dataExceptions') or [])}
            if all(evaluate(n, item) for n in nodes):
                matched.append(item)
    start = req.page * req.size
    return listing.envelope(matched[start:start + req.size], len(matched), req)


def taxonomies(org_slug: str, store_slug: str, principal: Principal) -> list[dict[str, Any]]:
    """The data definitions whose objects the store holds, whatever their number: the
    organization's definitions (their ids, from an index), each counted in the store by the
    objects' (store, definition) index (storage.definitions_used), then the used ones read."""
    store = resolve_store(org_slug, store_slug, principal)
    ids = storage.definitions_used(store.org, store.id)
    found = storage.get_many(family_of('data-definitions'), ids)
    return [taxon_rules.taxonomy_view({**found[i].data, 'organizationSlug': org_slug})
            for i in sorted(ids) if i in found and found[i].org == store.org]


# ----------------------------------------------------------------------------- export

def export(store, org_slug: str, params: dict[str, list[str]], principal: Principal, fmt: str) -> Any:
    """One row per object of a group path (``path``; every path for JSON), a column per taxon."""
    path = (_params_one(params, 'path') or '').strip('/')
    if fmt == 'csv' and not path:
        raise BadRequest('A CSV export needs path: the group taxon whose objects are the rows')
    include_ids = (_params_one(params, 'includeIds') or 'true').lower() != 'false'
    include_exc = (_params_one(params, 'includeExceptions') or 'false').lower() == 'true'
    objects = _store_objects(store, principal, _params_one(params, 'documentFamilyId'))
    rows = []
    columns: list[str] = []
    for obj in objects:
        if path and obj.get('path') != path:
            continue
        row: dict[str, Any] = {}
        if include_ids:
            row.update(id=obj['id'], parentId=obj.get('parentId'), documentFamilyId=obj.get('documentFamilyId'),
                       path=obj.get('path'))
        for attr in obj.get('attributes') or []:
            row[attr.get('tag')] = attr.get('typedValue') if attr.get('typedValue') is not None else attr.get('value')
            if attr.get('tag') not in columns:
                columns.append(attr.get('tag'))
        if include_exc:
            row['exceptions'] = [x.get('message') for x in obj.get('dataExceptions') or []]
        rows.append(row)
    if fmt == 'json':
        from chalice import Response  # noqa: PLC0415 - lazy: only exports answer text
        return Response(body=json.dumps({'storeRef': f"{org_slug}/{store.data.get('slug')}", 'path': path or None,
                                         'rows': rows}, default=str), status_code=200,
                        headers={'Content-Type': 'application/json'})
    head = (['id', 'parentId', 'documentFamilyId', 'path'] if include_ids else []) + columns + \
        (['exceptions'] if include_exc else [])
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(head)
    for row in rows:
        writer.writerow(['; '.join(row.get(h) or []) if h == 'exceptions' else
                         ('' if row.get(h) is None else row.get(h)) for h in head])
    from chalice import Response  # noqa: PLC0415 - lazy: only exports answer text
    return Response(body=buf.getvalue(), status_code=200, headers={'Content-Type': 'text/csv; charset=utf-8'})


# ----------------------------------------------------------------------------- exceptions

def list_exceptions(params: dict[str, list[str]], principal: Principal, *, one_based: bool = False) -> dict[str, Any]:
    """The exceptions the caller may see; ``dataStoreId`` with ``state`` (OPEN, the default, or
    CLOSED) reads one value index, flat in the store's size (features/extraction/storage.py)."""
    filters = []
    sdk_store, rest = _sdk_store_filter(params.get('filter') or [])
    store_id = _params_one(params, 'dataStoreId') or _params_one(params, 'storeId') or sdk_store
    state = (_params_one(params, 'state') or '').upper() or None
    if state not in (None, 'OPEN', 'CLOSED', 'ALL'):
        raise BadRequest('state must be OPEN, CLOSED or ALL')
    if store_id and state != 'ALL':
        filters.append(f"storeState == '{_safe(store_id)}#{state or 'OPEN'}'")
    elif store_id:
        filters.append(f"dataStoreId == '{_safe(store_id)}'")
    elif state in ('OPEN', 'CLOSED'):
        filters.append(f"state == '{state}'")
    for name in EXCEPTION_PARAMS[1:]:
        value = _params_one(params, name)
        if value:
            filters.append(f"{name} == '{_safe(value)}'")
    q = {k: v for k, v in params.items() if k not in (*EXCEPTION_PARAMS, 'state', 'storeId')}
    q['filter'] = rest
    req = listing.parse_request(storage.EXCEPTIONS, q, one_based=one_based)
    req.filters = [*filters, *req.filters]
    return listing.list_resources(storage.EXCEPTIONS, req, principal)


_SDK_STORE = re.compile(r"^\s*dataObject\.store\.id\s*(?::|==)\s*'([^']*)'\s*(?:AND\s*\((.*)\)\s*)?$",
                        re.IGNORECASE | re.DOTALL)


def _sdk_store_filter(filters: list[str]) -> tuple[str | None, list[str]]:
    """The SDK's ``dataObject.store.id: '<id>' [AND (<filter>)]`` (DataStoreEndpoint
    ``get_data_exceptions``) as the store's id and the rest; its ``dataObject.store.slug=...`` is
    dropped (docs/api/extraction.md "Exceptions")."""
    store, rest = None, []
    for f in filters:
        m = _SDK_STORE.match(f)
        if m:
            store = m.group(1)
            if m.group(2) and m.group(2).strip():
                rest.append(m.group(2))
        elif not f.strip().startswith('dataObject.store.') and f.strip():
            rest.append(f)
    return store, rest


def put_exception(exception_id: str, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    exc = crud.load_visible(storage.EXCEPTIONS, exception_id, principal)
    access.require_write(principal, storage.OBJECTS, exc.org)
    return review.close_exception(exc, body, principal)
