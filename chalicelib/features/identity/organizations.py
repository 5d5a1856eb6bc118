"""Organizations: slug rules, the creator becomes the new organization's manager, the fields
that are the platform's, and deletion.

Platform fields (``organizationStatus``, ``supportAccess``, ``supportAccessExpiresAt``,
``paymentCustomerId``, ``enterpriseOrganization``) describe the tenant's standing with the
platform: only a platform admin changes them (anyone else: 403 naming the field; sending a
stored value back unchanged is fine, so a GET body still goes back as a PUT). One exception:
the organization's managers grant and revoke **support access** themselves, a grant always with
an expiry (``supportAccessExpiresAt`` in the future, at most ``SUPPORT_ACCESS_MAX_DAYS``, default
30, ahead); revoking (``supportAccess`` false) clears the expiry. On create, a manager may send
only the values the server would set anyway.

Deleting an organization is a platform admin's action, and is refused (409) while the
organization still has memberships (members or invitations): no access can outlive it. Its
built-in roles and permissions go with it, in the same transaction, which also checks that its
membership count (``MEMBERS#{orgId}``) is still zero; a membership's own transaction moves that
count and checks the organization exists, so none can slip in at that moment. Other records it owns are the
no-orphans rule's (docs/reliability.md).
"""
from __future__ import annotations

import datetime as dt
import re
import secrets
from typing import Any

from chalicelib.core.clock import now, parse_instant
from chalicelib.core.config import get_config
from chalicelib.core.errors import BadRequest, Conflict, Forbidden
from chalicelib.core.principal import Principal
from chalicelib.kernel import access, records
from chalicelib.kernel.hooks import Hook
from chalicelib.kernel.registry import Family
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table

SLUG = re.compile(r'^[a-z0-9-]{3,100}$')
PLATFORM_FIELDS = ('organizationStatus', 'supportAccess', 'supportAccessExpiresAt', 'paymentCustomerId',
                   'enterpriseOrganization')
SUPPORT_FIELDS = ('supportAccess', 'supportAccessExpiresAt')
# What a new organization holds when the creator sends none of the platform fields.
CREATE_BASELINE = {'organizationStatus': 'ACTIVE', 'supportAccess': False}


def normalize_slug(value: Any) -> str:
    slug = str(value).strip().lower()
    if not SLUG.match(slug):
        raise BadRequest("Field 'slug' must be 3-100 characters of a-z, 0-9 and '-'")
    return slug


def slug_from_name(name: str) -> str:
    base = re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')[:80] or 'org'
    return f'{base}-{secrets.token_hex(3)}' if len(base) < 3 else base


def check_platform_fields(principal: Principal, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Refuse changes of the platform fields the caller may not make (module docstring); a
    support-access revocation also clears its expiry in ``new``."""
    if principal.platform_admin:
        return
    for name in PLATFORM_FIELDS:
        if name not in SUPPORT_FIELDS and new.get(name) != old.get(name):
            raise Forbidden(f"Field '{name}' can only be changed by a platform administrator")
    if all(new.get(n) == old.get(n) for n in SUPPORT_FIELDS):
        return
    if not new.get('supportAccess'):
        if old.get('supportAccess') or new.get('supportAccessExpiresAt') is None:
            new.pop('supportAccessExpiresAt', None)   # revoked (or cleared): no expiry left behind
            return
        raise Forbidden("Field 'supportAccessExpiresAt' can only be changed by a platform administrator, "
                        "or with a support-access grant")
    max_days = get_config().support_access_max_days
    expires = new.get('supportAccessExpiresAt')
    when = parse_instant(expires) if isinstance(expires, str) else None
    if when is None or when <= now() or when > now() + dt.timedelta(days=max_days):
        raise BadRequest(f"A support-access grant needs 'supportAccessExpiresAt' in the future, at most "
                         f"{max_days} days ahead (no open-ended grant)")


class OrganizationHook(Hook):
    def can_create(self, family: Family, principal: Principal) -> bool:
        return access.can_create_organization(principal)

    def before_create(self, family, principal, data, body):
        if 'slug' in data:
            data['slug'] = normalize_slug(data['slug'])
        else:
            data['slug'] = slug_from_name(data.get('name', ''))
        check_platform_fields(principal, CREATE_BASELINE, data)

    def before_update(self, family, principal, new, stored):
        if 'slug' in new:
            new['slug'] = normalize_slug(new['slug'])
        check_platform_fields(principal, stored.data, new)

    def can_write(self, family, principal, stored, op):
        if op != 'delete':
            return None   # organization:manage in that organization (and the platform fields above)
        if not principal.platform_admin:
            raise Forbidden('Only a platform administrator may delete an organization')
        held = table.count('memberships', stored.id)
        if held > 0:
            raise Conflict(_holds_message(held))
        return True

    def extra_create_ops(self, family, principal, data):
        ops = access.builtin_ops(data['id'], principal)  # built-in roles and permissions
        if principal.credential in ('system', 'service'):
            return ops  # no user behind the call
        # The creator manages the new organization (a platform admin too: it is then in their lists).
        memberships = family_of('memberships')
        membership = records.new_record(memberships, {'userId': principal.user_id, 'role': 'MANAGE',
                                                      'status': 'ACTIVE'},
                                        principal=principal, org=data['id'])
        return ops + records.create_ops(memberships, [membership], principal)

    def audit_ops(self, family, principal, action, data, stored):
        if action != 'DELETE' or stored is None:
            return []
        org_id = stored.id
        return [repo.check_no_members(org_id, what='holds', message=_holds_message(None)),
                *access.builtin_delete_ops(org_id)]


def _holds_message(count: int | None) -> str:
    what = f'{count} memberships' if count is not None else 'memberships'
    return (f'The organization still has {what} (members or invitations): remove them before deleting it, '
            'so that no access outlives it')


HOOK = OrganizationHook()
