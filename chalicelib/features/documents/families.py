"""Document families (docs/api/documents.md):

* ``documentStatus`` is written as ``{id}`` or ``{slug}`` of a document status of the family's
  own project (another project's, or an unknown one, is 400); the stored record replaces it, so
  every read carries the whole DocumentStatus;
* an uploaded family's ``size`` is the size of its file (a body's ``size`` is ignored); its
  upload fields (contentType, storageKey, contentObjectId, documentVersion, documentKey) are the
  server's (registry ``server``);
* the store's byte counter moves with uploaded families' creates and deletes;
* deleting a family deletes its content objects and linked deltas first, then (after the
  family's own transaction) its files;
* ``labels`` are label ids of the family's organization (issue 40: one representation, the
  SDK's): a write adding a value that is not one is 400; values already held stay (a label
  deleted since included). A SCRIPT step may name labels by name: features/work/pipelines.py
  resolves them to ids before its update;
* ``locked`` (docs/api/documents.md "Locked families"): a write that changes the status to one
  whose statusType is final locks the family in the same write; a locked family refuses every
  change but ``locked: false`` alone (409), on every path that writes it: a PUT or any update
  through the generic service (batch-update, a SCRIPT step, MCP) meets ``before_update``; the
  document's content (features/documents/deltas.py) calls ``require_unlocked``. A PUT of plain
  fields keeps the one-UpdateItem path (kernel/unlocked.py): the hook's ``locks`` puts the lock
  into that write's condition, and a locked family (as read, or at the write) goes to the
  read-modify-write path, where ``before_update`` answers 409 or writes a change of nothing.
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core.errors import BadRequest, Conflict
from chalicelib.kernel import crud
from chalicelib.kernel.hooks import Hook
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table


def _status_id(value: dict[str, Any], project_id: str | None) -> str:
    """The id of the document status ``value`` names ({id} or {slug}) in ``project_id``."""
    if value.get('id') is not None:
        try:
            status_id = str(uuid.UUID(str(value['id'])))
        except ValueError:
            raise BadRequest(f"Field 'documentStatus' refers to a DocumentStatus that does not exist: "
                             f"{str(value['id'])[:64]}") from None
        stored = table.get('document-statuses', status_id)
        if stored is None or stored.data.get('projectId') != project_id:
            raise BadRequest(f"Field 'documentStatus' refers to a DocumentStatus that does not exist in the "
                             f"family's project: {status_id}")
        return status_id
    slug = value.get('slug')
    if not isinstance(slug, str) or not slug:
        raise BadRequest("Field 'documentStatus' must name a document status by id or by slug")
    owner = table.unique_owner('document-statuses', scope=project_id or '', field_name='slug', value=slug) \
        if project_id else None
    if owner is None:
        raise BadRequest(f"Field 'documentStatus' refers to a DocumentStatus that does not exist in the "
                         f"family's project: slug {slug[:100]}")
    return owner


# A status of one of these statusTypes is final: setting it locks the family (docs/api/documents.md).
FINAL_STATUS_TYPES = frozenset({'RESOLVED', 'COMPLETE', 'COMPLETED', 'DONE', 'FINAL', 'CLOSED'})
# What a locked family still lets change: the lock itself, and the server's bookkeeping.
UNLOCKED_FIELDS = frozenset({'locked', 'updatedOn', 'changeSequence', 'processing'})


def require_unlocked(stored, what: str = 'changed') -> None:
    """409 when the family ``stored`` is locked (docs/api/documents.md "Locked families")."""
    if stored is not None and stored.data.get('locked') is True:
        raise Conflict(f'Document family {stored.id} is locked: it cannot be {what} until it is unlocked '
                       f'(PUT {{"locked": false}}, alone)', locked=True)


def _status_key(value: Any) -> Any:
    return value.get('id') if isinstance(value, dict) else value


def changed_fields(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """The fields a write changes, the lock and the server's bookkeeping left out."""
    out = []
    for name in sorted((set(new) | set(old)) - UNLOCKED_FIELDS):
        a, b = new.get(name), old.get(name)
        if name == 'documentStatus':
            a, b = _status_key(a), _status_key(b)
        if a != b:
            out.append(name)
    return out


def is_final(status: Any) -> bool:
    """Whether a document status (its record, or ``{id}``) has a final statusType."""
    if not isinstance(status, dict):
        return False
    kind = status.get('statusType')
    if kind is None and status.get('id'):
        stored = table.get('document-statuses', str(status['id']))
        kind = stored.data.get('statusType') if stored is not None else None
    return str(kind or '').upper() in FINAL_STATUS_TYPES


def check_labels(labels: Any, held: list[str], org: str | None) -> None:
    """Every value of ``labels`` not already ``held`` must be the id of a label of ``org``."""
    if not isinstance(labels, list):
        return   # the field's type is validated by the generic service
    added = [x for x in dict.fromkeys(labels) if x not in held]
    if not added:
        return
    ids = []
    for value in added:
        try:
            ids.append(str(uuid.UUID(str(value))))
        except ValueError:
            raise BadRequest(f"Field 'labels' holds '{str(value)[:100]}', which is not a label id "
                             f'(a document holds the ids of its labels)') from None
    found = table.batch_get(('labels', i) for i in ids)
    unknown = [i for i in ids if i not in found or found[i].org != org]
    if unknown:
        raise BadRequest(f"Field 'labels' refers to a label that does not exist: {unknown[0]}")


class DocumentFamilyHook(Hook):
    # A stored file's size stays what was stored; the status is resolved to its record (and a
    # final one locks the family). Other fields take the one-UpdateItem path (kernel/unlocked.py),
    # conditioned on the lock (``locks``): docs/api/documents.md "Locked families".
    guards = frozenset({'size', 'storageKey', 'documentStoreId', 'documentStatus'})
    locks = 'locked'

    def prepare_body(self, family, principal, body, id_):
        value = body.get('documentStatus')
        if not isinstance(value, dict) and (id_ is None or 'labels' not in body):
            return body
        if id_ is None:
            project_id = body.get('projectId') if isinstance(body.get('projectId'), str) else None
        else:
            try:
                stored = table.get(family.path, str(uuid.UUID(str(id_))))
            except ValueError:
                return body    # the generic update answers the bad id
            if stored is None or not crud.visible(family, principal, stored):
                return body    # the generic update answers 404 (another organization's: no hint)
            project_id = stored.data.get('projectId')
            # labels checked against the values the family holds (batch-update checks its own)
            check_labels(body.get('labels'), list(stored.data.get('labels') or []), stored.org)
        if not isinstance(value, dict):
            return body
        return {**body, 'documentStatus': {'id': _status_id(value, project_id)}}

    def before_create(self, family, principal, data, body):
        check_labels(data.get('labels'), [], data.get('organizationId'))
        if is_final(data.get('documentStatus')):
            data['locked'] = True

    def before_update(self, family, principal, new, stored):
        if stored.data.get('storageKey'):
            new['size'] = stored.data.get('size')
        if stored.data.get('locked') is True:
            changed = changed_fields(new, stored.data)
            if changed:
                require_unlocked(stored, f"changed ({', '.join(changed[:5])})")
        if _status_key(new.get('documentStatus')) != _status_key(stored.data.get('documentStatus')) and \
                is_final(new.get('documentStatus')):
            new['locked'] = True

    def audit_ops(self, family, principal, action, data, stored):
        from chalicelib.features.documents.service import bytes_tenant  # noqa: PLC0415 - documents imports hooks
        if action not in ('CREATE', 'DELETE') or not data.get('storageKey') or not data.get('documentStoreId'):
            return []
        size = int(data.get('size') or 0)
        return [repo.move_counter('document-stores', bytes_tenant(data['documentStoreId']),
                                  size if action == 'CREATE' else -size)] if size else []

    def before_delete(self, family, principal, stored):
        from chalicelib.features.documents import service as documents  # noqa: PLC0415 - documents imports hooks
        documents.delete_dependents(stored, principal)

    def after_delete(self, family, principal, stored):
        from chalicelib.features.documents import service as documents  # noqa: PLC0415 - documents imports hooks
        documents.sweep_dependents(stored, principal)
        documents.delete_files(stored)


HOOK = DocumentFamilyHook()
