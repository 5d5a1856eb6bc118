"""Users: e-mail is the identity (lowercased, unique); who may see, create and change users.

An e-mail address is the identity provider's to assert, so it is not a user's to change:
a user's own PUT that changes ``email`` is 400 (a platform admin may change it). Otherwise a
user could probe whether an address is registered anywhere on the platform (the 409 of a taken
address) and reserve someone's address so that their first sign-in lands in an account the
prober holds. Users are created directly by platform admins only; an organization's managers
add people by e-mail invitation (features/identity/memberships.py), whose answer is the same whether
the address is known or not.

Deleting a user (platform admins; docs/api/lifecycle.md): their memberships and invitations (up to
``MAX_MEMBERSHIPS``) and their roles in the ACL item end with them, in the same transaction;
records of their organizations that still name them (tasks and task groups assigned to them,
projects they own, chat messages they wrote) refuse the delete (kernel/referrers.py: 409 naming
them).
"""
from __future__ import annotations

from chalicelib.core.errors import BadRequest, Conflict
from chalicelib.kernel import access, records
from chalicelib.kernel.hooks import Hook
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import acl, table

# Memberships removed in the user's delete transaction: up to 14 items each (the membership, its
# unique claim, its count and value-counter shards, its organization's event, and the checks that
# no task or task group of that organization still names the user: 4 counter shards each), next
# to the user's own 5 (entity, e-mail claim, ACL item, event, count): 5 + 14 x 6 = 89 of
# TransactWriteItems' 100. Measured in tests/api/test_lifecycle.py.
MAX_MEMBERSHIPS = 6


def normalize_email(value: str) -> str:
    email = value.strip().lower()
    if '@' not in email or len(email) > 254 or email.startswith('@') or email.endswith('@'):
        raise BadRequest("Field 'email' must be an e-mail address")
    return email


class UserHook(Hook):
    guards = frozenset({'email'})   # normalised; only a platform admin may change it

    def can_create(self, family, principal):
        return principal.platform_admin

    def before_create(self, family, principal, data, body):
        data['email'] = normalize_email(data['email'])

    def before_update(self, family, principal, new, stored):
        new['email'] = normalize_email(new['email'])
        if new['email'] != stored.data.get('email') and not principal.platform_admin:
            raise BadRequest("Field 'email' cannot be changed through the API: your identity provider "
                             "asserts it (a platform administrator can change it)")

    def can_write(self, family, principal, stored, op):
        return principal.platform_admin or (op == 'update' and stored.id == principal.user_id)

    def audit_ops(self, family, principal, action, data, stored):
        """A deleted user's memberships and roles end with them (module docstring)."""
        if action != 'DELETE' or stored is None:
            return []
        ids = [m['id'] for invited in (False, True) for m in table.memberships_of(stored.id, invited=invited)]
        found = table.batch_get(('memberships', i) for i in ids)
        members = [found[i] for i in sorted(found)]
        if len(members) > MAX_MEMBERSHIPS:
            raise Conflict(f'The user has {len(members)} memberships; a DELETE removes at most {MAX_MEMBERSHIPS} '
                           f'with them: remove some first')
        if not members:
            return []
        memberships = family_of('memberships')
        ops = [op for m in members for op in records.delete_ops(memberships, m, principal)
               if op.tag.get('what') not in ('acl', 'outbox')]
        ops.append(acl.acl_delete_all(stored.id, {m.org for m in members}))
        for org in sorted({m.org for m in members}):   # one event per organization, as its own delete would
            ops += records.outbox_ops(memberships, 'deleted', [m.data for m in members if m.org == org], principal, [])
        return ops

    def visible(self, family, principal, stored):
        # Yourself, a platform admin, or an active member of one of your organizations.
        if principal.platform_admin or stored.id == principal.user_id:
            return True
        return access.shares_organization(principal, stored.id)


HOOK = UserHook()
