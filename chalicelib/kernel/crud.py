"""Generic create/read/update/delete for every registered family: the contract's update
semantics live here, once.

1. a sent value (false and 0 included) is stored; 2. an omitted field keeps its value;
3. null clears a nullable field, and is 400 on a non-nullable one; 4. a GET body sent back
as a PUT changes nothing but updatedOn/changeSequence (server and ownership fields, and
fields the family does not declare, are ignored); 5. a non-null changeSequence is checked
(stale -> 409 carrying the current value), and every write increments it; 6/7. bad values
and dangling references are 400, uniqueness violations 409. Every write is one conditional
PutItem or one TransactWriteItems (its items are assembled by kernel/records.py).

References (fields declared ``>family``) may only name what the caller may see, checked inside
the write's transaction: a record of the same organization (an organization- or project-scoped
target), a catalogue record (global), or, for a user, a user holding an active membership of the
record's organization (``reference_ops``; platform admins included: the rule is about the
record, so a task is never assigned to someone who cannot see it). Anything else is the same 400
"does not exist" as a random id. A record of a SUSPENDED organization is 403 to its members
(kernel/access.py).

A write the table cannot take now (another transaction holds an item, throttling, an internal
error), or an unlocked update that lost to a concurrent writer, is retried with jittered
backoff (kernel/writes.py, the one retry rule); when the tries or the request's budget run out
it is 503 with ``Retry-After`` and nothing was written.

Every function takes parsed values (a dict, as a JSON object body parses) and the caller's
``Principal``: the REST routes, the MCP tools, workers and schedules all call them alike.
``family`` is a registry ``Family`` or its path.
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core import observability
from chalicelib.core.clock import now_iso
from chalicelib.core.errors import BadRequest, Conflict, Forbidden, NotFound
from chalicelib.core.principal import Principal, prefetched
from chalicelib.kernel import access, embedding, parents, records, references, referrers, unlocked, writes
from chalicelib.kernel.hooks import hook_for
from chalicelib.kernel.registry import OWNERSHIP_FIELDS, SERVER_FIELDS, Family
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import acl, table
from chalicelib.kernel.store.repository import Op, WriteConflict
from chalicelib.kernel.store.table import Stored
from chalicelib.kernel.tenancy import ORGANIZATIONS, PROJECTS, USERS

MAX_RETRIES = 3
# An unlocked update that must read-modify-write (unique, indexed or reference fields, fields a
# hook guards) and lost to a concurrent writer re-reads and re-applies, with jittered backoff,
# for as long as the request's budget allows (kernel/writes.py): 50 concurrent writers of one
# record all land. Then 503 with Retry-After (nothing written), never a 409: the caller did not
# ask for locking.
UNLOCKED_RETRIES = writes.UNBOUNDED_TRIES
# A transaction cancelled with TransactionConflict (one of its items, e.g. a counter shard, was
# in another transaction at that moment) wrote nothing: it is retried, with jittered backoff.
# Every create of a tenant touches a child-counter shard fixed by its id (kernel/parents.py)
# and its parent's item: more than one try may meet a busy item, so the tries are more.
CONFLICT_RETRIES = writes.DEFAULT_TRIES


def _family(family: Family | str) -> Family:
    return family_of(family) if isinstance(family, str) else family


def _transient(exc: WriteConflict) -> bool:
    return exc.code == 'TransactionConflict'


# ----------------------------------------------------------------------------- reading

def check_id(family: Family, id_: str) -> str:
    try:
        return str(uuid.UUID(id_))
    except (ValueError, AttributeError, TypeError):
        raise BadRequest(f"'{str(id_)[:64]}' is not a valid {family.entity} id (a UUID)") from None


def load_visible(family: Family | str, id_: str, principal: Principal, *, ahead: bool = False) -> Stored:
    """The stored record, or 404 when it does not exist or the caller may not see it.
    ``ahead``: read what answering it needs (its organization's status, the records it embeds
    and their ACL items) in one BatchGetItem first (kernel/embedding.py ``read_ahead``)."""
    family = _family(family)
    id_ = check_id(family, id_)
    read, stored = prefetched(principal, family.path, id_)   # read with the admission
    if not read:
        stored = table.get(family.path, id_)
    if stored is not None and ahead:
        embedding.read_ahead(family, stored, principal)
    if stored is None or not visible(family, principal, stored):
        raise NotFound(f'No {family.entity} with id {id_}')
    observability.annotate(organization_id=stored.org)
    access.require_active(principal, stored.org)
    return stored


visible = access.visible   # the read rule (a hook's answer, else the organization's): kernel/access.py


def get(family: Family | str, id_: str, principal: Principal) -> dict[str, Any]:
    """GET by id: with the admission's reads, two rounds of DynamoDB calls at most (the record
    with the authentication, then everything answering it needs in one BatchGetItem)."""
    family = _family(family)
    return embedding.embed_one(family, load_visible(family, id_, principal, ahead=True).data, principal)


def sequence(family: Family | str, id_: str, principal: Principal) -> int:
    return load_visible(family, id_, principal).seq


# ----------------------------------------------------------------------------- input

def known_fields(family: Family) -> frozenset[str]:
    """The fields a create or update body may name: what the family's GET answers (its fields,
    the references it embeds, its collections), whether writable or not. Anything else is a
    400 at the REST door (kernel/http/request.py ``unknown_names``; docs/api/conventions.md).
    The server and ownership fields of any family are known too (ignored, as always)."""
    return frozenset({*family.fields, *family.references, *family.collections, *SERVER_FIELDS, *OWNERSHIP_FIELDS})


def sendable_fields(family: Family, *, creating: bool) -> frozenset[str]:
    """What a client may write in a create (``creating``) or update body: the family's writable
    fields, the references it takes as ``{"id"}`` objects, its ownership ids on create, and
    ``changeSequence`` on update: the properties of ``<Entity>CreateRequest`` /
    ``<Entity>UpdateRequest`` in /v3/api-docs (kernel/http/openapi.py). An unknown field's 400
    lists these, never the server fields ``known_fields`` also accepts (docs/api/conventions.md).
    Asked on every create and update: made once per family and kind of write."""
    key = (family.path, creating)
    made = _SENDABLE.get(key)
    if made is None:
        made = _SENDABLE[key] = _sendable(family, creating)
    return made


_SENDABLE: dict[tuple[str, bool], frozenset[str]] = {}


def _sendable(family: Family, creating: bool) -> frozenset[str]:
    names = set(family.writable) | set(family.references)
    if creating:   # the owner named by its id: an organization's, or a project's (which implies its organization)
        names |= {'org': {'organizationId'}, 'project': {'projectId'}}.get(family.scope, set())
    else:          # ownership never moves
        names -= OWNERSHIP_FIELDS
        names -= {ref for ref, (id_field, _) in family.references.items() if id_field in OWNERSHIP_FIELDS}
        names.add('changeSequence')
    return frozenset(names)


def clean_input(family: Family, body: dict[str, Any], *, creating: bool = False) -> tuple[dict[str, Any], set[str]]:
    """Validate the writable fields of a body -> (values to store, fields to clear). Null is
    400 for a required field; for any other it is "not given" on create (the caller ignores the
    returned nulls) and "clear" on update (kernel/references.py)."""
    values: dict[str, Any] = {}
    nulls: set[str] = set()
    for key, value in body.items():
        spec = family.writable.get(key)
        if spec is None:
            continue  # server, ownership and undeclared fields are ignored (docs/api/conventions.md)
        if value is None:
            if spec.required or (key in family.unique and family.scope == 'global' and not creating):
                # required, or an identity unique platform-wide (organization slug, user e-mail)
                raise BadRequest(f"Field '{key}' cannot be null")
            nulls.add(key)
        else:
            values[key] = value
    if values:
        values = _validated(family, values)
    return values, nulls


def _validated(family: Family, values: dict[str, Any]) -> dict[str, Any]:
    # lazy: pydantic and the generated models cost ~170 ms; reads never need them
    from pydantic import ValidationError  # noqa: PLC0415

    from chalicelib.kernel.models import input_model  # noqa: PLC0415
    try:
        model = input_model(family).model_validate(values)
    except ValidationError as exc:
        problems = '; '.join(
            f"'{'.'.join(str(p) for p in err['loc'])}': {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()[:5])
        raise BadRequest(f'Invalid field value: {problems}') from None
    return {k: getattr(model, k) for k in values}


def resolve_embedded(family: Family, values: dict[str, Any], org: str | None) -> None:
    """An object field that holds a whole record of another family (``documentStatus`` on
    document families, ``productGroup`` on products, ...) is written by id: the stored record
    replaces what was sent, and the matching ``<field>Id`` is set. Unknown id -> 400."""
    from chalicelib.kernel.models import embedded_family  # noqa: PLC0415 - lazy: pydantic (see _validated)
    for name, value in list(values.items()):
        spec = family.writable.get(name)
        target = embedded_family(spec) if spec is not None else None
        if target is None or not isinstance(value, dict):
            continue
        stored = table.get(target.path, _ref_id(name, str(value.get('id'))))
        if stored is None or (target.scope != 'global' and stored.org != org):
            raise BadRequest(f"Field '{name}' refers to a {target.entity} that does not exist: {value.get('id')}")
        values[name] = stored.data
        if f'{name}Id' in family.writable:
            values[f'{name}Id'] = stored.id


def _sequence_from(body: dict[str, Any]) -> int | None:
    value = body.get('changeSequence')
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest("Field 'changeSequence' must be an integer")
    return value


# ----------------------------------------------------------------------------- ownership and references

def _owner(family: Family, principal: Principal, body: dict[str, Any]) -> tuple[str | None, Stored | None]:
    """(organization id, project) a new resource belongs to; 400 for a missing/unknown owner."""
    if family.scope == 'global':
        return None, None
    if family.scope == 'project':
        project_id = body.get('projectId')
        if not isinstance(project_id, str) or not project_id:
            raise BadRequest("Field 'projectId' is required")
        project = table.get(PROJECTS, _ref_id('projectId', project_id))
        if project is None or not access.can_see_org(principal, project.org):
            raise BadRequest(f"Field 'projectId' refers to a project that does not exist: {project_id}")
        return project.org, project
    org_id = body.get('organizationId')
    if org_id is None:
        org_id = principal.default_org
        if org_id is None:
            raise BadRequest("Field 'organizationId' is required (you belong to several or no organizations)")
    if not isinstance(org_id, str):
        raise BadRequest("Field 'organizationId' must be a string")
    org_id = _ref_id('organizationId', org_id)
    if not access.can_see_org(principal, org_id) or table.get(ORGANIZATIONS, org_id) is None:
        raise BadRequest(f"Field 'organizationId' refers to an organization that does not exist: {org_id}")
    return org_id, None


def _ref_id(field: str, value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise BadRequest(f"Field '{field}' refers to a record that does not exist: {str(value)[:64]}") from None


def reference_ops(family: Family, values: dict[str, Any], org: str | None,
                  project_id: str | None = None) -> list[Op]:
    """Every reference names a record the caller may see (module docstring), checked by reads
    before the write (issue 27: the referenced record is not held in the write's transaction,
    so writes naming one user or one status never queue on it). Reads are strongly consistent:
    one BatchGetItem for the records, one GetItem of the ACL item per referenced user. A record
    deleted between this read and the commit leaves a dangling reference: the invariant
    checker reports it and reads answer it as ``{id}`` (docs/scale.md). 400 for the first
    reference that fails; no operation is returned (kept a list for its callers). Slug references
    (``statusSlug``) are checked first, by kernel/references.py ``slug_checks``."""
    references.slug_checks(family, values, org, project_id)
    wanted: list[tuple[str, Family, str, Any]] = []
    for name, value in values.items():
        spec = family.writable.get(name)
        if spec is None or not spec.ref or value is None:
            continue
        wanted.append((name, family_of(spec.ref), _ref_id(name, value), value))
    if not wanted:
        return []
    found = table.batch_get([(target.path, ref_id) for _, target, ref_id, _ in wanted], consistent=True)
    for name, target, ref_id, value in wanted:
        stored = found.get(ref_id)
        if stored is None or stored.family != target.path or \
                (target.scope != 'global' and org is not None and stored.org != org) or \
                (target.path == USERS and name != family.joins and org is not None
                 and org not in acl.orgs_of(ref_id)):
            raise BadRequest(f"Field '{name}' refers to a record that does not exist: {value}")
    return []


def _raise_for(exc: WriteConflict) -> None:
    tag = exc.op.tag if exc.op is not None else {}
    if tag.get('what') == 'unique':
        if tag.get('scope') == table.GLOBAL_TENANT:   # the holder may be another tenant: no echo
            raise Conflict(f"That {tag['field']} is not available")
        raise Conflict(f"{tag['field']} '{tag['value']}' is already in use")
    if tag.get('what') == 'reference':
        raise BadRequest(f"Field '{tag['field']}' refers to a record that does not exist: {tag['value']}")
    if tag.get('what') == 'holds':
        raise Conflict(tag['message'])
    if _transient(exc):
        raise writes.busy() from None
    raise exc


def require_write(family: Family, principal: Principal, stored: Stored, *, op: str) -> None:
    allowed = hook_for(family).can_write(family, principal, stored, op)
    if allowed is None:
        access.require_write(principal, family, stored.org)
    elif not allowed:
        raise Forbidden(f'You may not {op} this {family.entity}')


# ----------------------------------------------------------------------------- writes

def create(family: Family | str, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    family = _family(family)
    hook = hook_for(family)
    body = references.normalize(family, body)
    body = hook.prepare_body(family, principal, body, None)
    instead = hook.create_instead(family, principal, body)
    if instead is not None:
        return instead
    values, _ = clean_input(family, body, creating=True)
    org, project = _owner(family, principal, body)
    access.require_active(principal, org)
    resolve_embedded(family, values, org)
    allowed = hook.can_create(family, principal)
    if allowed is None:
        access.require_write(principal, family, org)
    elif not allowed:
        raise Forbidden(f'You may not create {family.path}')
    for spec in family.writable.values():
        if spec.required and spec.name not in values:
            raise BadRequest(f"Field '{spec.name}' is required")
        if spec.default is not None and spec.name not in values:
            values[spec.name] = spec.default
    observability.annotate(organization_id=org)
    data = records.new_record(family, values, principal=principal, org=org,
                              project_id=project.id if project is not None else None)
    hook.before_create(family, principal, data, body)
    org = records.record_org(family, data)

    def attempt() -> dict[str, Any]:
        ops = records.create_ops(family, [data], principal)  # a new random counter shard each try
        ops += reference_ops(family, values, org, data.get('projectId')) + hook.create_checks(family, principal, data)
        # The project's existence: its guard shard, moved by create_ops (kernel/parents.py, issue 27).
        ops += parents.create_checks(family, org, ops)   # no orphans: the organization still exists
        try:
            records.commit(ops)
        except WriteConflict as exc:
            if _transient(exc):
                raise writes.Again() from None
            _raise_for(exc)
        return embedding.embed_written(family, data, principal)
    return writes.retry_write(attempt, tries=CONFLICT_RETRIES)


def update(family: Family | str, id_: str, body: dict[str, Any], *, principal: Principal,
           action: str = 'updated', loaded: Stored | None = None) -> dict[str, Any]:
    """Update the record ``id_`` with ``body`` (the update semantics of docs/api). ``action``
    names the write's domain event (``<family>.<action>``: a status change is
    ``tasks.statusChanged``, docs/api/work.md). ``loaded``: the record as the caller has just
    read it with ``load_visible`` (an action that checks something of the record first): the
    first attempt writes over it instead of reading it again; a conflict re-reads as usual."""
    family = _family(family)
    body = references.normalize(family, body)
    body = hook_for(family).prepare_body(family, principal, body, id_)
    expected = _sequence_from(body)
    values, nulls = clean_input(family, body)
    first = [loaded] if loaded is not None and loaded.id == id_ else []
    if expected is None and unlocked.plain(family, values, nulls):   # no read-modify-write (unlocked.py)
        stored = first.pop() if first else load_visible(family, id_, principal)
        require_write(family, principal, stored, op='update')
        written = unlocked.apply(family, stored, values, nulls, principal, action=action)
        if written is not None:
            return written
        # locked (as read, or at the write) or gone: read-modify-write answers (kernel/unlocked.py)
        first = [stored] if stored.data.get(unlocked.lock_for(family, values, nulls)) is True else []
    embedded: list[bool] = []

    def attempt() -> dict[str, Any]:
        stored = first.pop() if first else load_visible(family, id_, principal)
        require_write(family, principal, stored, op='update')
        if expected is not None and expected != stored.seq:
            raise Conflict('The resource was changed by someone else (stale changeSequence)',
                           changeSequence=stored.seq)
        if not embedded:
            resolve_embedded(family, values, stored.org)
            embedded.append(True)
        new = dict(stored.data)
        new.update(values)
        for name in nulls:   # null clears: back to the field's default, or absent
            new.pop(name, None)
            if family.writable[name].default is not None:
                new[name] = family.writable[name].default
        hook_for(family).before_update(family, principal, new, stored)
        new['updatedOn'] = now_iso()
        new['changeSequence'] = stored.seq + 1
        ops = records.update_ops(family, new, stored, principal=principal, action=action)
        ops += reference_ops(family, {k: v for k, v in values.items() if stored.data.get(k) != v}, stored.org,
                             stored.data.get('projectId'))
        try:
            records.commit(ops)
        except WriteConflict as exc:
            if _transient(exc):   # another transaction held an item: nothing written, try again
                raise writes.Again() from None
            if exc.op.tag.get('what') == 'entity':
                if expected is not None:
                    raise Conflict('The resource was changed by someone else (stale changeSequence)',
                                   changeSequence=sequence(family, id_, principal)) from None
                raise writes.Again() from None   # a concurrent writer won: re-read and apply again
            _raise_for(exc)
        return embedding.embed_written(family, new, principal)
    return writes.retry_write(attempt, tries=UNLOCKED_RETRIES, max_wait=writes.RACE_MAX_WAIT)


def delete(family: Family | str, id_: str, principal: Principal) -> None:
    family = _family(family)
    races: list[bool] = []

    def attempt() -> None:
        stored = load_visible(family, id_, principal)
        require_write(family, principal, stored, op='delete')
        parents.refuse_if_held(family, stored)   # 409 naming what it holds (kernel/parents.py)
        referred = referrers.refuse_if_referred(family, stored)   # 409 naming who names it (kernel/referrers.py)
        soft = None
        if family.soft_delete:
            now = now_iso()
            soft = {**stored.data, 'deleted': True, 'deleteUserId': principal.user_id,
                    'deleteUserEmail': principal.email, 'deletedDate': now, 'updatedOn': now,
                    'changeSequence': stored.seq + 1}
        hook_for(family).before_delete(family, principal, stored)
        closing = None
        try:
            closing = parents.close_ahead(family, stored)   # the shards its transaction cannot hold
            records.commit(records.delete_ops(family, stored, principal, soft=soft) + referred)
        except BaseException as exc:
            parents.reopen(family, stored, closing)   # the delete did not happen: nothing stays closed
            if not isinstance(exc, WriteConflict):
                raise
            if _transient(exc):
                raise writes.Again() from None
            if exc.op.tag.get('what') == 'entity':
                races.append(True)
                if len(races) >= MAX_RETRIES:
                    raise Conflict('The resource is being changed concurrently; retry') from None
                raise writes.Again() from None
            _raise_for(exc)
        hook_for(family).after_delete(family, principal, stored)
    writes.retry_write(attempt, tries=CONFLICT_RETRIES)
