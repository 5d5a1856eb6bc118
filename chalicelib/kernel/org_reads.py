"""Reads by organization slug: the same records and pages as the id routes, found through the
slugs' unique items (one consistent GetItem each), with the same visibility.

Organization-slug paths (read-only) serve the template-like families, as the platform's Python
SDK addresses them (``ComponentEndpoint``: ``/api/prompts/{orgSlug}/{slug}``); a family declares
them with ``org_slug_paths`` (and ``versioned``: kernel/registry.py), kernel/http/routes.py
registers them:

  GET /api/{family}/{orgSlug}/{slug}[/{version}]   the record with that slug in that organization
  GET /api/{family}/{orgSlug}                      that organization's list page (a segment that
                                                   is not a UUID; a UUID is the record's id)

API Gateway allows one variable name per path level, so the organization slug travels in the
family's ``{id}`` segment.

An organization the caller may not see and one that does not exist are the same 404; so are a
slug, or a version, that the organization does not hold.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.errors import NotFound
from chalicelib.core.principal import Principal
from chalicelib.kernel import access, crud, listing
from chalicelib.kernel.registry import Family
from chalicelib.kernel.store import table
from chalicelib.kernel.tenancy import ORGANIZATIONS


def organization_id(org_slug: str, principal: Principal) -> str:
    org_id = table.unique_owner(ORGANIZATIONS, scope=table.GLOBAL_TENANT, field_name='slug',
                                value=org_slug.strip().lower()[:200])
    if org_id is None or not access.can_see_org(principal, org_id):
        raise NotFound(f'No organization with slug {org_slug[:100]!r}')
    access.require_active(principal, org_id)
    return org_id


def get_by_slug(family: Family, org_slug: str, slug: str, version: str | None,
                principal: Principal) -> dict[str, Any]:
    org_id = organization_id(org_slug, principal)
    record_id = table.unique_owner(family.path, scope=org_id, field_name='slug', value=slug[:2000])
    if record_id is None:
        raise NotFound(f'No {family.entity} with slug {slug[:100]!r} in organization {org_slug[:100]!r}')
    data = crud.get(family, record_id, principal)
    if version is not None and data.get('version') != version:
        raise NotFound(f'No version {version[:100]!r} of {family.entity} {slug[:100]!r}')
    return data


def list_for_organization(family: Family, org_slug: str, req: listing.ListRequest,
                          principal: Principal) -> dict[str, Any]:
    org_id = organization_id(org_slug, principal)
    req.filters = [*req.filters, f"organizationId == '{org_id}'"]
    return listing.list_resources(family, req, principal)
