"""Memberships: only a platform admin may grant (or hold out) the PLATFORM_ADMIN role."""
from __future__ import annotations

from chalicelib.core.errors import Forbidden

from . import Hook


class MembershipHook(Hook):
    def _guard(self, principal, role):
        if role == 'PLATFORM_ADMIN' and not principal.platform_admin:
            raise Forbidden('Only a platform admin may grant the PLATFORM_ADMIN role')

    def before_create(self, family, principal, data, body):
        self._guard(principal, data.get('role'))

    def before_update(self, family, principal, new, stored):
        if new.get('role') != stored.data.get('role') or stored.data.get('role') == 'PLATFORM_ADMIN':
            self._guard(principal, new.get('role'))
            self._guard(principal, stored.data.get('role'))


HOOK = MembershipHook()
