"""Per-family hooks: the few rules a family adds on top of the generic CRUD service.

A hook is looked up by the family's ``hook`` name in the registry. Each method receives the
write being prepared and may change its data, add transaction operations, or refuse it.

The kernel does not know the features: the table from hook name to hook is theirs
(chalicelib/features/hooks.py, plain imports inside one function per hook: go-to-definition
and import-linter see them, ``import app`` loads none) and is installed here once, when the
``chalicelib.features`` package is imported (docs/architecture.md "Hooks"). Fail closed: a
family naming a hook the table lacks stops the install, and a hook asked for before any
install raises instead of quietly running the generic rules.

A hook declares the fields it guards (``guards``): the fields whose change its ``before_update``
or ``audit_ops`` reads, checks or follows with other items. A PUT without ``changeSequence``
that touches none of them (and no unique, indexed, reference or embedded field) takes the
one-UpdateItem path (kernel/unlocked.py) and never meets a concurrent writer; one that touches a
guarded field keeps the read-modify-write path of kernel/crud.py (re-applied with jittered
backoff, kernel/writes.py). A hook that declares nothing (``None``) guards every field.

A hook may also name a boolean field that locks the record (``locks``): while it is true, no
field but itself may change. The one-UpdateItem path then writes on condition that the lock is
not true (whenever the change names another field), so the lock costs no read and no
transaction; a record read as locked, or whose condition failed, takes the read-modify-write
path, where ``before_update`` answers (409, or a write that changes nothing).

**After a create** (``after_create``): a feature may ask to be told of a family's new records once
their write committed, without the writing feature importing it (the table of listeners,
hook name -> functions returning a callable, is installed with the hooks). Used for the parse
trigger sent at upload (features/work/pipelines.py ``trigger_created``; docs/operations/worker.md
"Fairness between organizations"). A listener is a shortcut with a fallback (the table stream's
events): its failure is logged and never fails the write that committed.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # types only: the kernel's store must not load at `import app` (cold start)
    from chalicelib.core.principal import Principal
    from chalicelib.kernel.registry import Family
    from chalicelib.kernel.store.repository import Op
    from chalicelib.kernel.store.table import Stored

EVERY_FIELD = None   # ``guards`` of a hook whose rules read the whole record on every update


class Hook:
    # The fields this hook's update rules read (module docstring); None: all of them.
    guards: frozenset[str] | None = EVERY_FIELD
    # A boolean field that, while true, refuses changes to every other field (module docstring).
    locks: str | None = None

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
_loaders: dict[str, Callable[[], Hook]] | None = None
_cache: dict[str, Hook] = {}
_created: dict[str, tuple[Callable[[], Callable[[list[dict[str, Any]]], None]], ...]] = {}


class HooksNotInstalled(RuntimeError):
    """A family's hook was asked for and no table provides it: a wiring bug, never a default."""


def install(loaders: Mapping[str, Callable[[], Hook]],
            created: Mapping[str, tuple[Callable[[], Callable[[list[dict[str, Any]]], None]], ...]] | None = None,
            ) -> None:
    """Install the table hook name -> function returning the hook (called on first use), and
    the listeners of new records (``after_create``). Refuses a table that misses a hook some
    family of the registry names."""
    global _loaders
    from chalicelib.kernel.registry import FAMILIES  # noqa: PLC0415 - lazy: the table is checked once
    missing = sorted({f.hook for f in FAMILIES if f.hook is not None} - set(loaders))
    if missing:
        raise HooksNotInstalled(f'no hook installed for {", ".join(missing)} (chalicelib/features/hooks.py)')
    _created.clear()
    _created.update(created or {})
    if _loaders is not None and dict(loaders) == _loaders:
        return
    _loaders = dict(loaders)
    _cache.clear()


def installed() -> dict[str, Callable[[], Hook]]:
    return dict(_loaders or {})


def hook_for(family: Family) -> Hook:
    if family.hook is None:
        return _DEFAULT
    hook = _cache.get(family.hook)
    if hook is None:
        if _loaders is None:
            raise HooksNotInstalled('the family hooks are not installed: import chalicelib.features first')
        if family.hook not in _loaders:
            raise HooksNotInstalled(f'family {family.path} names hook {family.hook!r}, which is not installed')
        hook = _loaders[family.hook]()
        if not isinstance(hook, Hook):
            raise HooksNotInstalled(f'hook {family.hook!r} is not a kernel Hook: {hook!r}')
        _cache[family.hook] = hook
    return hook


def after_create(family: Family, created: list[dict[str, Any]]) -> None:
    """Tell the listeners of ``family``'s hook about records whose create committed (module
    docstring): each listener called once with them; a failure is logged, never raised."""
    if not created or family.hook is None:
        return
    for loader in _created.get(family.hook, ()):
        try:
            loader()(created)
        except Exception as exc:  # noqa: BLE001 - a shortcut: the stream's events are the fallback
            from chalicelib.core.observability import get_logger  # noqa: PLC0415 - lazy: rare path
            get_logger('hooks').warning('after-create listener failed', extra={
                'hook': family.hook, 'listener': getattr(loader, '__name__', '?'),
                'reason': f'{type(exc).__name__}: {exc}'[:300]})
