"""References embedded in responses (kernel/embeds.py says which): ``x`` next to ``xId``.

One BatchGetItem per response or list page, whatever the number of records and references:
the ids of every embedded reference of every record are collected, deduplicated, fetched
together (table.batch_get: BatchGetItem, 100 keys a call, so one call up to 100 distinct
referenced records), and each record gets its objects. A family without embedded references,
or a page whose records hold none, costs nothing.

Visibility: the object is the referenced record as the caller's own GET of it would show it
(less the target family's heavy fields, its declaration's ``heavy``: kernel/embeds.py). A record the caller may not see
is ``{"id": ...}`` only. One that no longer exists, and an absent ``xId``, mean no ``x`` (the
id stays as stored). An
embedded record of an organization whose organization is embedded in the same response (a
project's status) carries that ``organization`` too (the SDK's ProjectStatus requires it).

Every record answered here is first ``presented``: a field whose shape has a ``present`` form
(kernel/shapes.py) is shown in it.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.observability import get_logger
from chalicelib.core.principal import Principal
from chalicelib.kernel import access
from chalicelib.kernel.embeds import embeds_of, heavy_of
from chalicelib.kernel.fields import ENUM_RETIRED, retired_value
from chalicelib.kernel.registry import Family
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.shapes import SHAPES
from chalicelib.kernel.store import table
from chalicelib.kernel.tenancy import ORGANIZATIONS, USERS

log = get_logger('embedding')


def read_ahead(family: Family, stored: table.Stored, principal: Principal) -> None:
    """Everything answering a GET by id of ``stored`` needs, in ONE BatchGetItem, kept in
    ``principal.reads`` (core/principal.py ``RequestReads``) for this request: the records it
    embeds (``records``, None for one that is gone), its organization's status unless the
    admission read it or the caller is a platform administrator (``organization_status``), and
    the ACL items of the users whose visibility decides what is shown (``orgs_of``: the embedded
    users, the record itself when it is a user). Nothing to read: no call."""
    from chalicelib.kernel.store import acl  # noqa: PLC0415 - with the model (cold start)
    records = principal.reads.records
    statuses = principal.reads.organization_status
    orgs_of = principal.reads.orgs_of
    wanted = [(target, stored.data[id_field]) for id_field, target in embeds_of(family.path).values()
              if isinstance(stored.data.get(id_field), str)]
    wanted = [key for key in dict.fromkeys(wanted) if key not in records]
    if not principal.platform_admin and stored.org and stored.org not in statuses:
        wanted.append((ORGANIZATIONS, stored.org))
    users = [ref for target, ref in wanted if target == USERS]
    if family.path == USERS and not principal.platform_admin and stored.id != principal.user_id:
        users.append(stored.id)
    users = [u for u in dict.fromkeys(users) if u not in orgs_of]
    if not wanted and not users:
        return
    got = acl.read(None, wanted, acls=users)
    for key, found in got.entities.items():
        records[key] = found
        if key[0] == ORGANIZATIONS:
            statuses[key[1]] = found.data.get('organizationStatus', 'ACTIVE') if found is not None else None
    for user_id, access_item in got.acls.items():
        orgs_of[user_id] = frozenset(access_item.roles)


def embed_one(family: Family, data: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """``data`` with its references embedded (a new dict; ``data`` is not changed)."""
    return embed_page(family, [data], principal)[0]


def embed_written(family: Family, data: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """``embed_one`` for the answer to a write that is already committed: a read that fails now
    (throttling, ...) must not report the write as failed (a client would retry a create), so the
    record is then answered with its ids only, and the failure logged."""
    try:
        return embed_one(family, data, principal)
    except Exception:  # noqa: BLE001 - the write stands; only the embedding is missing
        log.warning('embedding after a committed %s write failed; answered with ids only', family.path,
                    exc_info=True)
        return data


_PRESENTERS: dict[str, list[tuple[str, Any]]] = {}


class _Whole:
    """A stored value its enumeration retired, answered as its replacement (kernel/fields.py
    ``Retired``: the value and the fields ``also`` set beside it), so a record written before the
    retirement reads as one written after it. Changes the whole (copied) record."""

    def __init__(self, field_name: str, enum: str) -> None:
        self.field_name, self.enum = field_name, enum

    def __call__(self, data: dict[str, Any]) -> None:
        retired = retired_value(self.enum, data.get(self.field_name))
        if retired is not None:
            data[self.field_name] = retired.value
            for name, value in retired.also:
                data.setdefault(name, value)


def _presenters(family: Family) -> list[tuple[str, Any]]:
    found = _PRESENTERS.get(family.path)
    if found is None:   # the shapes are installed before any family is read (kernel/registry.py)
        found = [(f.name, SHAPES[f.shape].present) for f in family.fields.values()
                 if f.shape and SHAPES[f.shape].present is not None]
        found += [(f.name, _Whole(f.name, f.enum)) for f in family.fields.values()
                  if f.enum and ENUM_RETIRED.get(f.enum)]
        _PRESENTERS[family.path] = found
    return found


def presented(family: Family, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as answered: each field whose shape has a ``present`` form shown in it, a retired
    enumeration value as its replacement (a new dict when one applies; ``data`` is not changed)."""
    presenters = [(name, fn) for name, fn in _presenters(family) if data.get(name) is not None]
    if not presenters:
        return data
    out = dict(data)
    for name, fn in presenters:
        if isinstance(fn, _Whole):
            fn(out)
        else:
            out[name] = fn(out[name])
    return out


def embed_page(family: Family, items: list[dict[str, Any]], principal: Principal) -> list[dict[str, Any]]:
    """The page's records, presented, with their references embedded (new dicts)."""
    embeds = embeds_of(family.path)
    if _presenters(family):
        items = [presented(family, item) for item in items]
    if not embeds or not items:
        return items
    wanted = {(target, item[id_field]) for item in items for id_field, target in embeds.values()
              if isinstance(item.get(id_field), str)}
    # records this request has read already (the caller's organizations, read with the
    # admission for their status: features/identity/admission.py) cost no second read
    known = principal.reads.records
    missing = sorted(key for key in wanted if key not in known)
    found = table.batch_get(missing) if missing else {}
    found.update({ref_id: known[(target, ref_id)] for target, ref_id in wanted
                  if known.get((target, ref_id)) is not None})
    shown: dict[str, dict[str, Any] | None] = {}
    for target, ref_id in wanted:
        stored = found.get(ref_id)
        if stored is None or stored.family != target:
            # deleted since (a reference is checked by a read before its write, not held in the
            # write's transaction: kernel/crud.py): the id alone, as for a record not visible
            shown[ref_id] = {'id': ref_id}
        elif not _visible(target, principal, stored):
            shown[ref_id] = {'id': ref_id}
        else:
            heavy = heavy_of(target)
            shown[ref_id] = {k: v for k, v in stored.data.items() if k not in heavy}
    out = []
    for item in items:
        new = dict(item)
        for name, (id_field, _target) in embeds.items():
            ref_id = item.get(id_field)
            if isinstance(ref_id, str) and shown[ref_id] is not None:
                new[name] = dict(shown[ref_id])
            else:
                new.pop(name, None)
        for name in embeds:
            org = (new.get(name) or {}).get('organizationId')
            if name != 'organization' and org is not None and len(shown.get(org) or {}) > 1:
                new[name]['organization'] = shown[org]
        out.append(new)
    return out


def _visible(target: str, principal: Principal, stored: table.Stored) -> bool:
    if not access.visible(family_of(target), principal, stored):
        return False
    # a SUSPENDED organization's records are ids only to its members (its status is read once per
    # request, and the holder's own organization was read already: kernel/access.py)
    return stored.org is None or not access.suspended(principal, [stored.org])
