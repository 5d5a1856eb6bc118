"""The store file API of the platform's SDK and CLI (docs/api/sdk-compatibility.md):

  GET    /api/stores/{orgSlug}/{storeSlug}                  the document store, as the SDK reads a store
  POST   /api/stores/{orgSlug}/{storeSlug}[/{version}]/fs?path=   a small file -> 201 DocumentFamily
  GET    .../fs?path=                                       307 to the newest family's bytes (?meta=true: the family)
  DELETE .../fs?path=                                       every family at that path -> 204

``{orgSlug}/{storeSlug}`` names the organization's document store with that slug. Store slugs
are unique per project, so an organization may hold several: found through the stores' ``slug``
equality index (one Query, keys only), one store is the answer, several are 409 (never a guess:
a file written into the wrong project's store is worse than an error). A family is found by
store and path through the families' ``path`` index (the organization's families holding that
path, newest first), filtered by store: the cost is the number of the organization's families
at that path, whatever the store's size.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.errors import BadRequest, Conflict, NotFound
from chalicelib.core.principal import Principal
from chalicelib.features.documents import service as documents
from chalicelib.kernel import access, crud, embedding, org_reads
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.table import Stored

STORES = family_of('document-stores')
FAMILIES = family_of('document-families')
MAX_SLUG = 255
AMBIGUOUS_SHOWN = 10


def resolve_store(org_slug: str, store_slug: str, principal: Principal) -> tuple[str, Stored]:
    """(organization slug as stored, the store) for ``{orgSlug}/{storeSlug}``: 404 for an
    organization or store the caller may not see, 409 when several of its stores hold the slug."""
    org_id = org_reads.organization_id(org_slug, principal)
    slug = store_slug.strip()
    if not slug or len(slug) > MAX_SLUG:
        raise NotFound(f'No document store with slug {slug[:100]!r} in organization {org_slug[:100]!r}')
    keys = table.walk_value(STORES.path, org_id, slot=STORES.slot_of('slug'), field_name='slug',
                            value=slug, descending=False, limit=AMBIGUOUS_SHOWN)
    found = table.batch_get((STORES.path, i) for _, i in keys)
    stores = [found[i] for _, i in keys if i in found and crud.visible(STORES, principal, found[i])]
    if not stores:
        raise NotFound(f'No document store with slug {slug[:100]!r} in organization {org_slug[:100]!r}')
    if len(stores) > 1:
        raise Conflict(f'Organization {org_slug[:100]!r} has {len(stores)} document stores with slug '
                       f'{slug[:100]!r} (ids {", ".join(s.id for s in stores)}, in different projects): '
                       f'give one of them another slug, or use /api/document-stores/{{id}}')
    return org_slug.strip().lower(), stores[0]   # organization slugs are stored lower-case


def get_store(org_slug: str, store_slug: str, principal: Principal) -> dict[str, Any]:
    """The document store record, plus the fields the SDK reads a store by."""
    org_slug, store = resolve_store(org_slug, store_slug, principal)
    data = embedding.embed_one(STORES, store.data, principal)
    return {**data, 'type': 'store', 'storeType': 'DOCUMENT', 'slug': store.data.get('slug'), 'orgSlug': org_slug}


def upload(org_slug: str, store_slug: str, *, path: str | None, data: bytes | None, content_type: str | None,
           principal: Principal) -> dict[str, Any]:
    _, store = resolve_store(org_slug, store_slug, principal)
    access.require_write(principal, FAMILIES, store.org)
    return documents.store_small(store, path=path, data=data, content_type=content_type, principal=principal,
                                 form_metadata=True)


def families_at(store: Stored, path: str) -> list[Stored]:
    """The store's families at ``path`` (normalised as uploads are), newest first."""
    keys = table.walk_value(FAMILIES.path, store.org, slot=FAMILIES.slot_of('path'), field_name='path',
                            value=path, descending=True, limit=None)
    found = table.batch_get((FAMILIES.path, i) for _, i in keys)
    return [found[i] for _, i in keys if i in found and found[i].data.get('documentStoreId') == store.id]


def _required_path(raw: str | None) -> str:
    if raw is None or raw.strip() == '':
        raise BadRequest("Parameter 'path' is required: the file's path in the store")
    return documents.normalise_path(raw)


def newest(org_slug: str, store_slug: str, raw_path: str | None, principal: Principal) -> Stored:
    path = _required_path(raw_path)
    _, store = resolve_store(org_slug, store_slug, principal)
    for family in families_at(store, path):
        if crud.visible(FAMILIES, principal, family):
            return family
    raise NotFound(f'No document family at path {path[:200]!r} in this document store')


def family_at(org_slug: str, store_slug: str, raw_path: str | None, principal: Principal) -> dict[str, Any]:
    return embedding.embed_one(FAMILIES, newest(org_slug, store_slug, raw_path, principal).data, principal)


def content_url_at(org_slug: str, store_slug: str, raw_path: str | None, principal: Principal) -> str:
    return documents.content_url_of(newest(org_slug, store_slug, raw_path, principal))


def delete_at(org_slug: str, store_slug: str, raw_path: str | None, principal: Principal) -> int:
    """Deletes every family of the store at the path (each with its cascade); 404 when none."""
    path = _required_path(raw_path)
    _, store = resolve_store(org_slug, store_slug, principal)
    access.require_write(principal, FAMILIES, store.org)
    found = [f for f in families_at(store, path) if crud.visible(FAMILIES, principal, f)]
    if not found:
        raise NotFound(f'No document family at path {path[:200]!r} in this document store')
    deleted = 0
    for family in found:
        try:
            crud.delete(FAMILIES, family.id, principal)
            deleted += 1
        except NotFound:
            continue   # deleted meanwhile: the path is as asked
    return deleted
