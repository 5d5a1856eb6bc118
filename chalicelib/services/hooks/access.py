"""Memberships, roles and permissions: the access rules of the Manage area that the generic
permission check (organization:manage) cannot express (the rules live in services/access.py),
and the ACL items authentication reads: every membership write also writes, in the same
transaction, the ``ACL#{orgId}`` item in the member's partition (store/credentials.py)."""
from __future__ import annotations

from chalicelib.core.errors import Forbidden
from chalicelib.services import access
from chalicelib.store import credentials

from . import Hook


class AccessHook(Hook):
    def before_create(self, family, principal, data, body):
        if family.path == 'memberships':
            access.check_role_grant(principal, None, data.get('role'))
        else:  # roles, permissions: a client never creates a built-in record
            data['builtIn'] = False

    def before_update(self, family, principal, new, stored):
        if family.path == 'memberships':
            access.check_membership_update(principal, stored.data, new)
        else:
            new['builtIn'] = bool(stored.data.get('builtIn'))

    def extra_create_ops(self, family, principal, data):
        if family.path != 'memberships':
            return []
        return [credentials.acl_put(data['userId'], data['organizationId'], data['role'])]

    def audit_ops(self, family, principal, action, data, stored):
        """Keeps the member's ACL item in step on update and delete (create: extra_create_ops)."""
        if family.path != 'memberships' or stored is None:
            return []
        if action == 'DELETE':
            return [credentials.acl_delete(stored.data['userId'], stored.org)]
        return [credentials.acl_put(data['userId'], stored.org, data['role'])]   # userId never changes

    def can_write(self, family, principal, stored, op):
        if family.path in access.BUILTIN_FAMILIES and stored.data.get('builtIn'):
            raise Forbidden(f'Built-in {family.path} are read-only')
        if family.path == 'memberships' and op == 'delete' and \
                not access.may_remove_membership(principal, stored.data.get('role')):
            raise Forbidden('Only a platform administrator may remove the PLATFORM_ADMIN role')
        return None  # the generic rule: organization:manage in the record's organization


HOOK = AccessHook()
