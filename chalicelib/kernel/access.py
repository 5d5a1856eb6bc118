"""Who may do what: the one table of roles and permissions, and the checks every path calls.

Reads of another organization's resource answer 404 (never a 403 that confirms it exists);
a caller who can see a resource but lacks the permission to change it gets 403.

Roles are held through memberships (userId, organizationId, role). PLATFORM_ADMIN in any
organization makes the user a platform administrator; only a platform administrator may grant,
change or remove that role (a manager of one organization cannot promote anyone, themselves
included, to the whole platform).

The ``roles`` and ``permissions`` families show this table: every organization is created with
one read-only ``builtIn`` record per role and per permission (``builtin_ops``, called by the
organizations hook in the creating transaction), so the generic list/get/filter/sort/paging
serve them like any other record. Managers may add custom roles and permissions (documentation
records: a membership's role is always one of the built-in roles); built-in records cannot be
changed or deleted, and a client can never mark a record built-in.
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core.errors import BadRequest, Forbidden
from chalicelib.core.principal import Principal
from chalicelib.kernel import records, tenancy
from chalicelib.kernel.hooks import hook_for
from chalicelib.kernel.registry import Family
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import acl, table
from chalicelib.kernel.store import repository as repo

# Named permissions: name -> (category, description).
PERMISSIONS: dict[str, tuple[str, str]] = {
    'resource:read': ('resource', "Read the organization's resources"),
    'resource:write': ('resource', "Create, change and delete the organization's resources"),
    'organization:manage': ('organization', 'Administer the organization: its settings, suspension, '
                                            'support access, memberships, teams, roles and permissions'),
    'platform:admin': ('platform', 'Administer the whole platform: every organization, all users and '
                                   'the product catalogue'),
}
# The one table: built-in role -> the permissions it grants.
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    'VIEWER': frozenset({'resource:read'}),
    'MEMBER': frozenset({'resource:read', 'resource:write'}),
    'MANAGE': frozenset({'resource:read', 'resource:write', 'organization:manage'}),
    'PLATFORM_ADMIN': frozenset({'resource:read', 'resource:write', 'organization:manage',
                                 'platform:admin'}),
}
ROLE_DESCRIPTIONS: dict[str, str] = {
    'VIEWER': "Reads the organization's resources",
    'MEMBER': "Reads and writes the organization's resources",
    'MANAGE': 'Administers the organization (the Manage area) and its resources',
    'PLATFORM_ADMIN': 'Administers the whole platform',
}
_BUILTIN_NS = uuid.UUID('6f1c54a2-7b0e-4c55-9a53-2f0d3c1e8b11')


def has(principal: Principal, org_id: str | None, permission: str) -> bool:
    role = principal.role_in(org_id)
    return role is not None and permission in ROLE_PERMISSIONS.get(role, frozenset())


def write_permission(family: Family) -> str:
    """The permission a write of the family needs: its declaration's ``write_needs`` (the Manage
    area: organization:manage; the platform catalogue: platform:admin; kernel/registry.py)."""
    return family.write_needs


def can_see_org(principal: Principal, org_id: str | None) -> bool:
    return principal.platform_admin or (org_id is not None and org_id in principal.memberships)


def shares_organization(principal: Principal, user_id: str) -> bool:
    """Is the user an active member of one of the caller's organizations that is not suspended?
    (the user's ACL item: one GetItem, unless this request read it already, ``principal.reads.orgs_of``:
    a GET by id reads those of the users it embeds with its references, kernel/embedding.py
    ``read_ahead``; the organizations' status once per request)"""
    known = principal.reads.orgs_of
    orgs = known.get(user_id)
    if orgs is None:
        orgs = known[user_id] = frozenset(acl.orgs_of(user_id))
    shared = orgs & set(principal.memberships)
    return bool(shared - suspended(principal, shared))


# ----------------------------------------------------------------------------- suspension
# A SUSPENDED organization gives its members nothing: any request of theirs that names it (a
# record of it, a create in it, a list pinned to it, the organization itself) is 403
# "organization suspended", and lists spanning several organizations leave its records out.
# Platform administrators are not affected. Cost: one strongly consistent read of the
# organization item per request that touches an organization (a BatchGetItem for a list over
# several), remembered for the rest of the request; none for platform administrators. The
# request's admission (features/identity/admission.py) reads the statuses of the organizations the caller
# held on their previous request in the same BatchGetItem as the user and the record, at the
# same time as the gate; ``suspended`` reads only those it did not. Never cached across
# requests: suspension applies on the next request.

SUSPENDED = 'SUSPENDED'


def suspended(principal: Principal, org_ids) -> set[str]:
    """Those of ``org_ids`` that are suspended (always none for a platform administrator)."""
    org_ids = [o for o in org_ids if o]
    if principal.platform_admin or not org_ids:
        return set()
    known = principal.reads.organization_status
    missing = [o for o in org_ids if o not in known]
    if missing:
        found = table.organizations(missing)
        known.update({o: found[o].data.get('organizationStatus', 'ACTIVE') if o in found else None
                      for o in missing})
        # kept for the response's embedded organizations (kernel/embedding.py): no second read
        principal.reads.records.update({(tenancy.ORGANIZATIONS, o): s for o, s in found.items()})
    return {o for o in org_ids if known.get(o) == SUSPENDED}


def require_active(principal: Principal, org_id: str | None) -> None:
    if org_id and suspended(principal, [org_id]):
        raise Forbidden('organization suspended: its resources are unavailable until a platform '
                        'administrator reactivates it')


def usable_orgs(principal: Principal, org_ids) -> list[str]:
    """``org_ids`` without the suspended ones."""
    org_ids = list(org_ids)
    gone = suspended(principal, org_ids)
    return [o for o in org_ids if o not in gone]


def require_write(principal: Principal, family: Family, org_id: str | None) -> None:
    permission = write_permission(family)
    if family.scope == 'global' and family.path != tenancy.ORGANIZATIONS:
        ok = principal.platform_admin
    else:
        ok = has(principal, org_id, permission)
    if not ok:
        raise Forbidden(f'Permission {permission} is required to change {family.path}')


def can_create_organization(principal: Principal) -> bool:
    return principal.platform_admin or any(
        'organization:manage' in ROLE_PERMISSIONS.get(r, frozenset()) for r in principal.memberships.values())


# ----------------------------------------------------------------------------- memberships

def check_role_grant(principal: Principal, old_role: str | None, new_role: str | None) -> None:
    """Only a platform admin may grant PLATFORM_ADMIN, or change a membership that holds it."""
    if 'PLATFORM_ADMIN' in (old_role, new_role) and not principal.platform_admin:
        raise Forbidden('Only a platform administrator may grant, change or remove the PLATFORM_ADMIN role')


def check_membership_update(principal: Principal, old: dict, new: dict) -> None:
    """A membership belongs to one user for good (moving it would hand its role to another
    user: delete it and create one instead); PLATFORM_ADMIN rules as above."""
    if new.get('userId') != old.get('userId'):
        raise BadRequest("A membership's userId cannot change: delete it and create another")
    check_role_grant(principal, old.get('role'), new.get('role'))


def may_remove_membership(principal: Principal, role: str | None) -> bool:
    return role != 'PLATFORM_ADMIN' or principal.platform_admin


# ----------------------------------------------------------------------------- built-in records

def builtin_id(org_id: str, family: str, name: str) -> str:
    """Stable ids: the same built-in record has the same id every time it is derived."""
    return str(uuid.uuid5(_BUILTIN_NS, f'{org_id}/{family}/{name}'))


def builtin_records(org_id: str) -> dict[str, list[dict[str, Any]]]:
    """family -> the built-in records of one organization (without the common fields)."""
    # a role's ``permissions`` field (written as a keyword: the text would read as the family's path,
    # tests/unit/test_kernel_names_no_family.py)
    roles = [dict(id=builtin_id(org_id, tenancy.ROLES, role), name=role, slug=role.lower().replace('_', '-'),
                  description=ROLE_DESCRIPTIONS[role], permissions=sorted(perms), builtIn=True)
             for role, perms in ROLE_PERMISSIONS.items()]
    permissions = [{'id': builtin_id(org_id, tenancy.PERMISSIONS, name), 'name': name,
                    'slug': name.replace(':', '-'), 'category': category, 'description': text,
                    'builtIn': True}
                   for name, (category, text) in PERMISSIONS.items()]
    return {tenancy.ROLES: roles, tenancy.PERMISSIONS: permissions}


def builtin_delete_ops(org_id: str) -> list:
    """Transaction operations that remove an organization's built-in roles and permissions (one
    counter move per family: a transaction touches a counter shard once)."""
    ops = []
    for path, derived in builtin_records(org_id).items():
        family = family_of(path)
        for record in derived:
            ops.append(repo.delete_plain(path, record['id']))
            ops += [repo.release_unique(path, scope=org_id, field_name=name, value=record[name])
                    for name in family.unique if record.get(name) is not None]
        ops.append(repo.move_counter(path, org_id, -len(derived)))
    return ops


def builtin_ops(org_id: str, principal: Principal) -> list:
    """Transaction operations that store an organization's built-in roles and permissions."""
    ops = []
    for path, derived in builtin_records(org_id).items():
        family = family_of(path)
        made = [records.new_record(family, {k: v for k, v in record.items() if k != 'id'}, principal=principal,
                                   org=org_id, id_=record['id']) for record in derived]
        ops += records.create_ops(family, made, principal)
    return ops


def visible(family: Family, principal: Principal, stored: Any) -> bool:
    """May the caller read this stored record: the family's hook decides where it has a rule,
    else global families are public and the rest belong to an organization the caller sees."""
    decided = hook_for(family).visible(family, principal, stored)
    if decided is not None:
        return decided
    if family.scope == 'global' and family.path != tenancy.ORGANIZATIONS:
        return True
    return can_see_org(principal, stored.org)
