"""Users: e-mail is the identity (lowercased, unique); who may see and create users."""
from __future__ import annotations

from chalicelib.core.errors import BadRequest
from chalicelib.services import access

from . import Hook


def _email(value: str) -> str:
    email = value.strip().lower()
    if '@' not in email or len(email) > 254 or email.startswith('@') or email.endswith('@'):
        raise BadRequest("Field 'email' must be an e-mail address")
    return email


class UserHook(Hook):
    def can_create(self, family, principal):
        return access.can_create_organization(principal)  # platform admins and organization managers

    def before_create(self, family, principal, data, body):
        data['email'] = _email(data['email'])

    def before_update(self, family, principal, new, stored):
        new['email'] = _email(new['email'])

    def can_write(self, family, principal, stored, op):
        return principal.platform_admin or (op == 'update' and stored.id == principal.user_id)

    def visible(self, family, principal, stored):
        # Yourself, a platform admin, or a member of one of your organizations.
        if principal.platform_admin or stored.id == principal.user_id:
            return True
        return access.shares_organization(principal, stored.id)


HOOK = UserHook()
