"""Document families (docs/api/documents.md):

* ``documentStatus`` is written as ``{id}`` or ``{slug}`` of a document status of the family's
  own project (another project's, or an unknown one, is 400); the stored record replaces it, so
  every read carries the whole DocumentStatus;
* an uploaded family's ``size`` is the size of its file (a body's ``size`` is ignored); its
  upload fields (contentType, storageKey, contentObjectId, documentVersion, documentKey) are the
  server's (registry ``server``);
* the store's byte counter moves with uploaded families' creates and deletes;
* deleting a family deletes its content objects and linked deltas first, then (after the
  family's own transaction) its files.
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core.errors import BadRequest
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


class DocumentFamilyHook(Hook):
    # a stored file's size stays what was stored; the status is resolved to its record
    guards = frozenset({'size', 'storageKey', 'documentStoreId', 'documentStatus'})

    def prepare_body(self, family, principal, body, id_):
        value = body.get('documentStatus')
        if not isinstance(value, dict):
            return body
        if id_ is None:
            project_id = body.get('projectId') if isinstance(body.get('projectId'), str) else None
        else:
            try:
                stored = table.get(family.path, str(uuid.UUID(str(id_))))
            except ValueError:
                return body    # the generic update answers the bad id
            if stored is None:
                return body
            project_id = stored.data.get('projectId')
        return {**body, 'documentStatus': {'id': _status_id(value, project_id)}}

    def before_update(self, family, principal, new, stored):
        if stored.data.get('storageKey'):
            new['size'] = stored.data.get('size')

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
        documents.delete_files(stored)


HOOK = DocumentFamilyHook()
