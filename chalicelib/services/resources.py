"""Generic create/read/update/delete for every registered family: the contract's update
semantics live here, once.

1. a sent value (false and 0 included) is stored; 2. an omitted field keeps its value;
3. null clears a nullable field, and is 400 on a non-nullable one; 4. a GET body sent back
as a PUT changes nothing but updatedOn/changeSequence (server and ownership fields, and
fields the family does not declare, are ignored); 5. a non-null changeSequence is checked
(stale -> 409 carrying the current value), and every write increments it; 6/7. bad bodies
and dangling references are 400, uniqueness violations 409. Every write is one conditional
PutItem or one TransactWriteItems.
"""
from __future__ import annotations

import random
import time
import uuid
from typing import Any

from pydantic import ValidationError

from chalicelib.core import jsonbody
from chalicelib.core.clock import now_iso
from chalicelib.core.errors import BadRequest, Conflict, Forbidden, NotFound
from chalicelib.core.principal import Principal, current
from chalicelib.domain.models import input_model
from chalicelib.domain.registry import (OWNERSHIP_FIELDS, SERVER_FIELDS, Family, family as family_of)
from chalicelib.store import repository as repo
from chalicelib.store.repository import Op, Stored, WriteConflict

from . import access
from .hooks import hook_for

MAX_RETRIES = 3
# A transaction cancelled with TransactionConflict (one of its items, e.g. a counter shard, was
# in another transaction at that moment) wrote nothing: it is retried, with jittered backoff.
CONFLICT_RETRIES = 6
CONFLICT_BACKOFF = 0.02  # seconds; attempt n waits up to CONFLICT_BACKOFF * 2**n


def _transient(exc: WriteConflict) -> bool:
    return exc.code == 'TransactionConflict'


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0, CONFLICT_BACKOFF * 2 ** attempt))


# ----------------------------------------------------------------------------- reading

def check_id(family: Family, id_: str) -> str:
    try:
        return str(uuid.UUID(id_))
    except (ValueError, AttributeError, TypeError):
        raise BadRequest(f"'{id_[:64]}' is not a valid {family.entity} id (a UUID)") from None


def load_visible(family: Family, id_: str, principal: Principal | None = None) -> Stored:
    principal = principal or current()
    id_ = check_id(family, id_)
    stored = repo.get(family.path, id_)
    if stored is None or not visible(family, principal, stored):
        raise NotFound(f'No {family.entity} with id {id_}')
    return stored


def visible(family: Family, principal: Principal, stored: Stored) -> bool:
    decided = hook_for(family).visible(family, principal, stored)
    if decided is not None:
        return decided
    if family.scope == 'global' and family.path != 'organizations':
        return True
    return access.can_see_org(principal, stored.org)


def get(path: str, id_: str) -> dict[str, Any]:
    return load_visible(family_of(path), id_).data


def sequence(path: str, id_: str) -> int:
    return load_visible(family_of(path), id_).seq


# ----------------------------------------------------------------------------- input

def clean_input(family: Family, body: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """Validate the writable fields of a body -> (values to store, fields to clear)."""
    values: dict[str, Any] = {}
    nulls: set[str] = set()
    for key, value in body.items():
        spec = family.writable.get(key)
        if spec is None:
            continue  # server, ownership and undeclared fields are ignored (README)
        if value is None:
            if not spec.nullable:
                raise BadRequest(f"Field '{key}' cannot be null")
            nulls.add(key)
        else:
            values[key] = value
    if values:
        try:
            model = input_model(family).model_validate(values)
        except ValidationError as exc:
            problems = '; '.join(
                f"'{'.'.join(str(p) for p in err['loc'])}': {err['msg']}" for err in exc.errors()[:5])
            raise BadRequest(f'Invalid field value: {problems}') from None
        values = {k: getattr(model, k) for k in values}
    return values, nulls


def resolve_embedded(family: Family, values: dict[str, Any], org: str | None) -> None:
    """An object field that holds a whole record of another family (``documentStatus`` on
    document families, ``productGroup`` on products, ...) is written by id: the stored record
    replaces what was sent, and the matching ``<field>Id`` is set. Unknown id -> 400."""
    from chalicelib.domain.models import embedded_family
    for name, value in list(values.items()):
        spec = family.writable.get(name)
        target = embedded_family(spec) if spec is not None else None
        if target is None or not isinstance(value, dict):
            continue
        stored = repo.get(target.path, _ref_id(name, str(value.get('id'))))
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


# ----------------------------------------------------------------------------- ownership

def _owner(family: Family, principal: Principal, body: dict[str, Any]) -> tuple[str | None, Stored | None]:
    """(organization id, project) a new resource belongs to; 400 for a missing/unknown owner."""
    if family.scope == 'global':
        return None, None
    if family.scope == 'project':
        project_id = body.get('projectId')
        if not isinstance(project_id, str) or not project_id:
            raise BadRequest("Field 'projectId' is required")
        project = repo.get('projects', _ref_id('projectId', project_id))
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
    if not access.can_see_org(principal, org_id) or repo.get('organizations', org_id) is None:
        raise BadRequest(f"Field 'organizationId' refers to an organization that does not exist: {org_id}")
    return org_id, None


def _ref_id(field: str, value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise BadRequest(f"Field '{field}' refers to a record that does not exist: {str(value)[:64]}") from None


def _tenant(family: Family, org: str | None) -> str:
    return 'ALL' if family.scope == 'global' else org


def _parent(family: Family, data: dict[str, Any]) -> str | None:
    if family.scope == 'project':
        return f"{family.path}#P#{data['projectId']}"
    if family.path == 'memberships':
        return f"memberships#U#{data['userId']}"
    return None


def _unique_scope(family: Family, data: dict[str, Any], org: str | None) -> str:
    if family.scope == 'global':
        return 'ALL'
    if family.scope == 'project':
        return data['projectId']
    return org


def _reference_ops(family: Family, values: dict[str, Any], org: str | None) -> list[Op]:
    ops = []
    for name, value in values.items():
        spec = family.writable.get(name)
        if spec is None or not spec.ref or value is None:
            continue
        target = family_of(spec.ref)
        ops.append(repo.check_exists(target.path, _ref_id(name, value),
                                     None if target.scope == 'global' else org, field=name, value=value))
    return ops


def _raise_for(exc: WriteConflict, stored: Stored | None = None) -> None:
    tag = exc.op.tag if exc.op is not None else {}
    if tag.get('what') == 'unique':
        raise Conflict(f"{tag['field']} '{tag['value']}' is already in use")
    if tag.get('what') == 'reference':
        raise BadRequest(f"Field '{tag['field']}' refers to a record that does not exist: {tag['value']}")
    if _transient(exc):
        raise Conflict('The resource is being changed concurrently; retry') from None
    raise exc


# ----------------------------------------------------------------------------- writes

def create(path: str, raw_body: bytes | None) -> dict[str, Any]:
    family = family_of(path)
    principal = current()
    body = jsonbody.loads_object(raw_body)
    hook = hook_for(family)
    values, _ = clean_input(family, body)
    org, project = _owner(family, principal, body)
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
    now = now_iso()
    data: dict[str, Any] = {'id': str(uuid.uuid4()), 'uuid': str(uuid.uuid4()), 'createdOn': now,
                            'updatedOn': now, 'changeSequence': 1, 'createdByUserId': principal.user_id}
    if family.scope in ('org', 'project'):
        data['organizationId'] = org
    if project is not None:
        data['projectId'] = project.id
    data.update(values)
    hook.before_create(family, principal, data, body)
    if family.path == 'organizations':
        org = data['id']
    for attempt in range(CONFLICT_RETRIES):
        ops = [repo.put_entity(_entity(family, data, 1, org), None)]
        scope = _unique_scope(family, data, org)
        for name in family.unique:
            if data.get(name) is not None:
                ops.append(repo.claim_unique(family.path, scope, name, data[name], data['id']))
        ops += _reference_ops(family, values, org)
        if project is not None:
            ops.append(repo.check_exists('projects', project.id, org, field='projectId', value=project.id))
        ops.append(repo.move_counter(family.path, _tenant(family, org), 1))  # a new random shard each try
        ops += hook.extra_create_ops(family, principal, data)
        ops += hook.audit_ops(family, principal, 'CREATE', data, None)
        try:
            repo.commit(ops)
            return data
        except WriteConflict as exc:
            if _transient(exc) and attempt + 1 < CONFLICT_RETRIES:
                _backoff(attempt)
                continue
            _raise_for(exc)
    raise AssertionError('unreachable')


def _entity(family: Family, data: dict[str, Any], seq: int, org: str | None, listed: bool = True):
    return repo.entity_item(family.path, data, seq, org, _tenant(family, org) if listed else None,
                            _parent(family, data), data.get(family.name_field))


def _require_write(family: Family, principal: Principal, stored: Stored, op: str) -> None:
    allowed = hook_for(family).can_write(family, principal, stored, op)
    if allowed is None:
        access.require_write(principal, family, stored.org)
    elif not allowed:
        raise Forbidden(f'You may not {op} this {family.entity}')


def update(path: str, id_: str, raw_body: bytes | None) -> dict[str, Any]:
    family = family_of(path)
    principal = current()
    body = jsonbody.loads_object(raw_body)
    expected = _sequence_from(body)
    values, nulls = clean_input(family, body)
    for attempt in range(MAX_RETRIES):
        stored = load_visible(family, id_, principal)
        _require_write(family, principal, stored, 'update')
        if expected is not None and expected != stored.seq:
            raise Conflict('The resource was changed by someone else (stale changeSequence)',
                           changeSequence=stored.seq)
        if attempt == 0:
            resolve_embedded(family, values, stored.org)
        new = dict(stored.data)
        new.update(values)
        for name in nulls:
            new.pop(name, None)
        hook_for(family).before_update(family, principal, new, stored)
        new['updatedOn'] = now_iso()
        new['changeSequence'] = stored.seq + 1
        ops = [repo.put_entity(_entity(family, new, stored.seq + 1, stored.org), stored.seq)]
        scope = _unique_scope(family, new, stored.org)
        for name in family.unique:
            old_value, new_value = stored.data.get(name), new.get(name)
            if old_value != new_value:
                if new_value is not None:
                    ops.append(repo.claim_unique(family.path, scope, name, new_value, new['id']))
                if old_value is not None:
                    ops.append(repo.release_unique(family.path, scope, name, old_value))
        changed_refs = {k: v for k, v in values.items() if stored.data.get(k) != v}
        ops += _reference_ops(family, changed_refs, stored.org)
        ops += hook_for(family).audit_ops(family, principal, 'UPDATE', new, stored)
        try:
            repo.commit(ops)
            return new
        except WriteConflict as exc:
            if _transient(exc) and attempt + 1 < MAX_RETRIES:
                _backoff(attempt)
                continue
            if exc.op is None or exc.op.tag.get('what') == 'entity':
                if expected is not None:
                    current_seq = sequence(path, id_)
                    raise Conflict('The resource was changed by someone else (stale changeSequence)',
                                   changeSequence=current_seq) from None
                continue  # a concurrent writer won: re-read and apply the change again
            _raise_for(exc)
    raise Conflict('The resource is being changed concurrently; retry')


def delete(path: str, id_: str) -> None:
    family = family_of(path)
    principal = current()
    for attempt in range(MAX_RETRIES):
        stored = load_visible(family, id_, principal)
        _require_write(family, principal, stored, 'delete')
        scope = _unique_scope(family, stored.data, stored.org)
        if family.soft_delete:
            data = dict(stored.data)
            data.update(deleted=True, deleteUserId=principal.user_id, deleteUserEmail=principal.email,
                        deletedDate=now_iso(), updatedOn=now_iso(), changeSequence=stored.seq + 1)
            ops = [repo.put_entity(_entity(family, data, stored.seq + 1, stored.org, listed=False), stored.seq)]
        else:
            ops = [repo.delete_entity(family.path, stored.id, stored.seq)]
        for name in family.unique:
            if stored.data.get(name) is not None:
                ops.append(repo.release_unique(family.path, scope, name, stored.data[name]))
        ops.append(repo.move_counter(family.path, _tenant(family, stored.org), -1))
        ops += hook_for(family).audit_ops(family, principal, 'DELETE', stored.data, stored)
        try:
            repo.commit(ops)
            return
        except WriteConflict as exc:
            if _transient(exc) and attempt + 1 < MAX_RETRIES:
                _backoff(attempt)
                continue
            if exc.op is None or exc.op.tag.get('what') == 'entity':
                continue
            _raise_for(exc)
    raise Conflict('The resource is being changed concurrently; retry')
