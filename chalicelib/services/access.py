"""Who may do what: the one table of roles and permissions, and the checks every path calls.

Reads of another organization's resource answer 404 (never a 403 that confirms it exists);
a caller who can see a resource but lacks the permission to change it gets 403.
"""
from __future__ import annotations

from chalicelib.core.errors import Forbidden, NotFound
from chalicelib.core.principal import Principal
from chalicelib.domain.registry import Family

# Named permissions, granted to the built-in roles (exposed by the roles/permissions families).
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    'VIEWER': frozenset({'resource:read'}),
    'MEMBER': frozenset({'resource:read', 'resource:write'}),
    'MANAGE': frozenset({'resource:read', 'resource:write', 'organization:manage'}),
    'PLATFORM_ADMIN': frozenset({'resource:read', 'resource:write', 'organization:manage',
                                 'platform:admin'}),
}
# Families that make up the Manage area: changing them administers the organization.
MANAGE_FAMILIES = frozenset({'memberships', 'teams', 'roles', 'permissions', 'organizations'})
# Platform-wide catalogue: everyone signed in reads it, platform admins write it.
CATALOGUE_FAMILIES = frozenset({'products', 'product-groups', 'product-project-templates'})


def has(principal: Principal, org_id: str | None, permission: str) -> bool:
    role = principal.role_in(org_id)
    return role is not None and permission in ROLE_PERMISSIONS.get(role, frozenset())


def write_permission(family: Family) -> str:
    if family.path in CATALOGUE_FAMILIES:
        return 'platform:admin'
    if family.path in MANAGE_FAMILIES:
        return 'organization:manage'
    return 'resource:write'


def can_see_org(principal: Principal, org_id: str | None) -> bool:
    return principal.platform_admin or (org_id is not None and org_id in principal.memberships)


def require_visible(principal: Principal, family: Family, org_id: str | None, id_: str) -> None:
    """404 unless the caller may see a resource of ``family`` owned by ``org_id``."""
    if family.scope == 'global' and family.path != 'organizations':
        return  # users are checked by their hook; the catalogue is readable by everyone
    if not can_see_org(principal, org_id):
        raise NotFound(f'No {family.entity} with id {id_}')


def require_write(principal: Principal, family: Family, org_id: str | None) -> None:
    permission = write_permission(family)
    if family.scope == 'global' and family.path != 'organizations':
        ok = principal.platform_admin
    else:
        ok = has(principal, org_id, permission)
    if not ok:
        raise Forbidden(f'Permission {permission} is required to change {family.path}')


def can_create_organization(principal: Principal) -> bool:
    return principal.platform_admin or any(
        'organization:manage' in ROLE_PERMISSIONS.get(r, frozenset()) for r in principal.memberships.values())
