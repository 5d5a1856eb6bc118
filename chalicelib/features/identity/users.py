"""Users: e-mail is the identity (lowercased, unique); who may see, create and change users.

An e-mail address is the identity provider's to assert, so it is not a user's to change:
a user's own PUT that changes ``email`` is 400 (a platform admin may change it). Otherwise a
user could probe whether an address is registered anywhere on the platform (the 409 of a taken
address) and reserve someone's address so that their first sign-in lands in an account the
prober holds. Users are created directly by platform admins only; an organization's managers
add people by e-mail invitation (features/identity/memberships.py), whose answer is the same whether
the address is known or not.
"""
from __future__ import annotations

from chalicelib.core.errors import BadRequest
from chalicelib.kernel import access
from chalicelib.kernel.hooks import Hook


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

    def visible(self, family, principal, stored):
        # Yourself, a platform admin, or an active member of one of your organizations.
        if principal.platform_admin or stored.id == principal.user_id:
            return True
        return access.shares_organization(principal, stored.id)


HOOK = UserHook()
