"""No dangling references on delete (issue 24, finding 11; docs/api/lifecycle.md): a record that
other live records still name in a reference field (``>family`` in the registry) is not deleted:
409 naming who still refers to it ("still referred to by 3 tasks.teamId"), nothing changed.

Which families refuse this way is a decision per family, its declaration's
``refuse_delete_if_referred`` (kernel/registry.py; the others'
references are cleaned by their own hooks, or are refused by the no-orphans rule of
kernel/parents.py). The referrers are looked for in the organizations given by the caller: the
record's own organization for an organization-scoped record (a team), the organizations of the
user's memberships for a user (features/identity/users.py). An activity is refused while
executions name it (delete them first: each one deleted that had not ended finishes the activity,
features/work/executions.py).

How it stays true under concurrency: a referring field with an equality index has a value
counter (kernel/records.py), read here with a strong read; the delete's transaction checks that
each shard still holds what was read (``checks``), and a referrer's own write moves that counter,
so either the referrer lands first (the delete fails its condition: 409) or the delete does (the
referrer's reference check fails: 400). A field without an index (``task-groups.teamId``,
``projects.ownerId``, ``messages.userId``) is read with one filtered Query of the organization's
records of that family: refused the same way, but a referrer landing between that read and the
delete is not caught (the invariant checker's ``references`` check reports it).
"""
from __future__ import annotations

from chalicelib.core.errors import Conflict
from chalicelib.kernel.registry import FAMILIES, Family
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import Op
from chalicelib.kernel.tenancy import MEMBERSHIPS, USERS


def _fields(target: str) -> list[tuple[Family, str]]:
    return [(fam, name) for fam in FAMILIES if fam.scope in ('org', 'project') and not fam.read_only
            for name, spec in fam.writable.items() if spec.ref == target and fam.path != MEMBERSHIPS]


def organizations_of(family: Family, stored: table.Stored) -> list[str]:
    """Where records naming ``stored`` may be: its organization, or a user's organizations
    (active memberships and invitations)."""
    if family.path == USERS:
        return sorted({m['organizationId'] for invited in (False, True)
                       for m in table.memberships_of(stored.id, invited=invited) if m.get('organizationId')})
    return [stored.org] if stored.org else []


def refuse_if_referred(family: Family, stored: table.Stored, orgs: list[str] | None = None) -> list[Op]:
    """409 when records of ``orgs`` name ``stored``; else the transaction conditions that keep it
    so (one per shard of each indexed referring field's value counter)."""
    if not family.refuse_delete_if_referred:
        return []
    if orgs is None:
        orgs = organizations_of(family, stored)
    found: dict[str, int] = {}
    checks: list[Op] = []
    for org in orgs:
        for fam, name in _fields(family.path):
            if name in fam.indexed:
                pk = table.value_counter_pk(fam.path, org, name, stored.id)
                shards = table.counter_shards(pk)   # the shards under its own key, checked below
                n = table.counter_total(pk)          # and what all its partitions hold
                checks += repo.check_counter(pk, shards, what='holds', message=_message(family, None))
            else:
                n = len(table.query_tenant_naming(fam.path, org, name, stored.id))
            if n > 0:
                key = f'{fam.path}.{name}'
                found[key] = found.get(key, 0) + n
    if found:
        raise Conflict(_message(family, found))
    return checks


def _message(family: Family, found: dict[str, int] | None) -> str:
    what = ', '.join(f'{n} {key}' for key, n in sorted(found.items())) if found else 'records created meanwhile'
    return (f'The {family.entity.lower()} is still referred to by {what}: change or delete them first '
            f'(a {family.entity.lower()} is never deleted while records name it)')
