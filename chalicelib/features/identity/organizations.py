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

Deleting an organization is a platform admin's action (docs/api/lifecycle.md). Its memberships
(members and invitations, with the members' ACL items) and its built-in roles and permissions
end with it: access ends with the organization. Up to ``INLINE_MEMBERSHIPS`` memberships are
removed in the organization's own delete transaction, which also checks that the membership
count (``MEMBERS#{orgId}``) is exactly the number it removes; a membership's own transaction
moves that count and checks the organization exists, so none can slip in at that moment (one
that does: 409, DELETE again). A larger organization is first SUSPENDED (every member loses
access at once, kernel/access.py), then its memberships are removed in transactions of
as many as fit in ``TRANSACTION_ITEMS``, then it is deleted; a failure part-way leaves it
SUSPENDED with fewer members, and DELETE again finishes. Over ``MAX_MEMBERSHIPS`` the DELETE is refused (409 naming
the cap). Other records it owns (projects, teams, ...) are the no-orphans rule's
(kernel/parents.py): 409 naming them, before anything is changed.
"""
from __future__ import annotations

import datetime as dt
import re
import secrets
from typing import Any

from chalicelib.core.clock import now, now_iso, parse_instant
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
        return True

    def before_delete(self, family, principal, stored):
        """A large organization: suspended, then its memberships removed page by page (module
        docstring); the delete's transaction takes the last ``INLINE_MEMBERSHIPS`` itself."""
        members = _memberships(stored.id)
        if len(members) > MAX_MEMBERSHIPS:
            raise Conflict(f'The organization has {len(members)} memberships; a DELETE removes at most '
                           f'{MAX_MEMBERSHIPS} with it: remove some first')
        if len(members) <= INLINE_MEMBERSHIPS:
            return
        if stored.data.get('organizationStatus') != access.SUSPENDED:
            new = {**stored.data, 'organizationStatus': access.SUSPENDED, 'updatedOn': now_iso(),
                   'changeSequence': stored.seq + 1}
            records.commit(records.update_ops(family, new, stored, principal=principal))
        memberships = family_of('memberships')
        for page, ops in _pages(members[:len(members) - INLINE_MEMBERSHIPS], principal):
            records.commit(ops + records.outbox_ops(memberships, 'deleted', [m.data for m in page], principal, []))

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
        members = _memberships(org_id)
        if len(members) > INLINE_MEMBERSHIPS:   # before_delete removed the rest; more came since
            raise Conflict(_changed_message())
        return [*_membership_removal_ops(org_id, members, principal), *access.builtin_delete_ops(org_id)]


# Memberships removed in the organization's own delete transaction (up to 7 items each: the
# membership, its userId unique claim, the member's ACL item, its count and value-counter shards)
# next to the organization's own items (entity, slug claim, counters, legacy child-counter checks,
# built-in roles and permissions with their name claims, events: 29 items) and its 32 guard shards
# (kernel/parents.py): 29 + 7 x 4 + 32 = 89, under TransactWriteItems' 100 items. More go first,
# in transactions packed by their actual item count (_pages).
INLINE_MEMBERSHIPS = 4
TRANSACTION_ITEMS = 100   # DynamoDB: items in one TransactWriteItems
MAX_MEMBERSHIPS = 2000


def _pages(members: list, principal: Principal):
    """``members`` in pages whose delete items (and the page's one outbox item) fit one transaction:
    (page, its delete ops without outbox items)."""
    memberships = family_of('memberships')
    page: list = []
    ops: list = []
    for member in members:
        mine = [op for op in records.delete_ops(memberships, member, principal) if op.tag.get('what') != 'outbox']
        if page and len(ops) + len(mine) + 1 > TRANSACTION_ITEMS:
            yield page, ops
            page, ops = [], []
        page.append(member)
        ops.extend(mine)
    if page:
        yield page, ops


def _memberships(org_id: str) -> list:
    """The organization's memberships as stored (consistent reads), oldest id first."""
    ids = [m['id'] for m in table.query_tenant('memberships', org_id)]
    found = table.batch_get(('memberships', i) for i in ids)
    return [found[i] for i in sorted(found)]


def _membership_removal_ops(org_id: str, members: list, principal: Principal) -> list:
    """The items of ``members`` leaving with their organization, and the condition that they are
    all it has: their membership-count moves become one conditional update (repo.members_removed)."""
    if not members:
        return [repo.check_no_members(org_id, what='holds', message=_changed_message())]
    memberships = family_of('memberships')
    count_key = table.members_pk(org_id)
    ops = [op for m in members for op in records.delete_ops(memberships, m, principal)
           if op.tag.get('what') != 'outbox' and not (op.kind == 'add' and op.item.pk == count_key)]
    ops.append(repo.members_removed(org_id, len(members), what='holds', message=_changed_message()))
    return ops + records.outbox_ops(memberships, 'deleted', [m.data for m in members], principal, [])


def _changed_message() -> str:
    return ('The organization gained memberships while it was being deleted (members or invitations): '
            'DELETE it again')


HOOK = OrganizationHook()
