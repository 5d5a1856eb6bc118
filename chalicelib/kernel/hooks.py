"""Per-family hooks: the few rules a family adds on top of the generic CRUD service.

A hook is looked up by the family's ``hook`` name in the registry. Each method receives the
write being prepared and may change its data, add transaction operations, or refuse it.

A hook declares the fields it guards (``guards``): the fields whose change its ``before_update``
or ``audit_ops`` reads, checks or follows with other items. A PUT without ``changeSequence``
that touches none of them (and no unique, indexed, reference or embedded field) takes the
one-UpdateItem path (kernel/unlocked.py) and never meets a concurrent writer; one that touches a
guarded field keeps the read-modify-write path of kernel/crud.py (re-applied with jittered
backoff, kernel/writes.py). A hook that declares nothing (``None``) guards every field.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from chalicelib.core.principal import Principal
from chalicelib.kernel.registry import Family
from chalicelib.kernel.store.repository import Op
from chalicelib.kernel.store.table import Stored

EVERY_FIELD = None   # ``guards`` of a hook whose rules read the whole record on every update


class Hook:
    # The fields this hook's update rules read (module docstring); None: all of them.
    guards: frozenset[str] | None = EVERY_FIELD

    def guarded(self, family: Family) -> frozenset[str] | None:
        """The fields of ``family`` this hook guards (a hook serving several families may differ)."""
        return self.guards

    def prepare_body(self, family: Family, principal: Principal, body: dict[str, Any],
                     id_: str | None) -> dict[str, Any]:
        """Rewrite a create (``id_`` None) or update body before it is validated (a reference
        given by slug becomes an id, ...)."""
        return body

    def create_instead(self, family: Family, principal: Principal, body: dict[str, Any]) -> dict[str, Any] | None:
        """Handle a create entirely (a linked delta applied to its document); None: generic."""
        return None

    def before_delete(self, family: Family, principal: Principal, stored: Stored) -> None:
        """Runs before a delete's transaction (delete dependent records first: no orphans)."""

    def after_delete(self, family: Family, principal: Principal, stored: Stored) -> None:
        """Runs after a delete committed (clean up outside the table: stored files)."""

    def before_create(self, family: Family, principal: Principal, data: dict[str, Any],
                      body: dict[str, Any]) -> None:
        """Adjust a new resource before it is stored."""

    def before_update(self, family: Family, principal: Principal, new: dict[str, Any],
                      stored: Stored) -> None:
        """Adjust an updated resource before it is stored."""

    def extra_create_ops(self, family: Family, principal: Principal, data: dict[str, Any]) -> list[Op]:
        """More items to write in the create transaction."""
        return []

    def create_checks(self, family: Family, principal: Principal, data: dict[str, Any]) -> list[Op]:
        """Conditions a client's create (kernel/crud.py ``create``) adds to its transaction;
        records created as part of another write (records.create_ops) do not get them."""
        return []

    def audit_ops(self, family: Family, principal: Principal, action: str, data: dict[str, Any],
                  stored: Stored | None) -> list[Op]:
        """Items recording the write (history), written in the same transaction."""
        return []

    def can_create(self, family: Family, principal: Principal) -> bool | None:
        """True/False to decide create permission here; None for the generic rule."""
        return None

    def can_write(self, family: Family, principal: Principal, stored: Stored, op: str) -> bool | None:
        """True/False to decide update/delete permission here; None for the generic rule."""
        return None

    def visible(self, family: Family, principal: Principal, stored: Stored) -> bool | None:
        """True/False to decide read visibility here; None for the generic rule."""
        return None

    def list_filters(self, family: Family, principal: Principal) -> list[str]:
        """Filter expressions (the list filter language) AND-ed to every list of the family for
        this caller: what ``visible`` hides from a get must be hidden from lists too."""
        return []


_DEFAULT = Hook()
_cache: dict[str, Hook] = {}


# The module of each hook name the registry uses (loaded on first use: cold start).
_MODULES = {
    'organizations': 'chalicelib.features.identity.organizations',
    'users': 'chalicelib.features.identity.users',
    'access': 'chalicelib.features.identity.memberships',
    'tasks': 'chalicelib.features.tasks.hooks',
    'task_groups': 'chalicelib.features.tasks.groups',
    'document_families': 'chalicelib.features.documents.families',
    'linked_deltas': 'chalicelib.features.documents.linked_deltas',
    'executions': 'chalicelib.features.work.executions',
    'scheduled_jobs': 'chalicelib.features.work.scheduled_jobs',
    'service_bridges': 'chalicelib.features.bridges.hooks',
    'events': 'chalicelib.features.events.hooks',
}


def hook_for(family: Family) -> Hook:
    if family.hook is None:
        return _DEFAULT
    if family.hook not in _cache:
        _cache[family.hook] = import_module(_MODULES[family.hook]).HOOK
    return _cache[family.hook]
