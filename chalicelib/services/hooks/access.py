"""Memberships, roles and permissions: the access rules of the Manage area that the generic
permission check (organization:manage) cannot express. The rules live in services/access.py."""
from __future__ import annotations

from chalicelib.core.errors import Forbidden
from chalicelib.services import access

from . import Hook


class AccessHook(Hook):
    def before_create(self, family, principal, data, body):
        if family.path == 'memberships':
            access.check_role_grant(principal, None, data.get('role'))
        else:  # roles, permissions: a client never creates a built-in record
            data['builtIn'] = False

    def before_update(self, family, principal, new, stored):
        if family.path == 'memberships':
            access.check_role_grant(principal, stored.data.get('role'), new.get('role'))
        else:
            new['builtIn'] = bool(stored.data.get('builtIn'))

    def can_write(self, family, principal, stored, op):
        if family.path in access.BUILTIN_FAMILIES and stored.data.get('builtIn'):
            raise Forbidden(f'Built-in {family.path} are read-only')
        if family.path == 'memberships' and op == 'delete' and \
                not access.may_remove_membership(principal, stored.data.get('role')):
            raise Forbidden('Only a platform administrator may remove the PLATFORM_ADMIN role')
        return None  # the generic rule: organization:manage in the record's organization


HOOK = AccessHook()
