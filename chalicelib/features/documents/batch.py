"""POST /api/batch-update (docs/api/documents.md): one save of many writes, each reporting its own
outcome.

* Writes that matter (each family's labels + status + auto-lock, family deletes, the task
  update, the task-group update) report ``{success, error?, reason?}``; one failing does not
  undo another. Each family's writes are ONE transaction (its entity, locked on its
  changeSequence, re-read and re-applied when someone else wrote it meanwhile). The family's
  hook (features/documents/families.py) decides the lock, as for every other write path: a
  final status locks the family in that transaction, a locked family's change is refused (409).
* Optional bookkeeping (notes) that fails becomes a warning; the save still succeeds.
* A write reported ``success: true`` is stored.
* Bounded (docs/api/limits.md): at most ``MAX_FAMILIES`` ids per list and ``MAX_NOTES`` notes;
  the request's time budget (core/budget.py) is checked before each write, never inside one: a
  write not started when it runs out reports ``success: false`` with the 422 naming the limit
  (a note, a warning), and what was written before stays written, each reported.
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core import budget, limits
from chalicelib.core.clock import now_iso
from chalicelib.core.errors import ApiError, BadRequest
from chalicelib.core.principal import Principal
from chalicelib.features.documents.families import _status_id
from chalicelib.kernel import access, crud, records, writes
from chalicelib.kernel.hooks import hook_for
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict
from chalicelib.kernel.store.table import Stored

FAMILIES = family_of('document-families')
MAX_FAMILIES = limits.MAX_BATCH_FAMILIES
MAX_NOTES = 100
NOTE_EVENT = 'document.note'


def _ids(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_FAMILIES:
        raise BadRequest(f"Field '{name}' must be a list of at most {MAX_FAMILIES} ids")
    out = []
    for item in value:
        try:
            out.append(str(uuid.UUID(str(item))))
        except ValueError:
            raise BadRequest(f"Field '{name}' holds '{str(item)[:64]}', which is not an id") from None
    return list(dict.fromkeys(out))


def _object(body: dict[str, Any], name: str) -> dict[str, Any]:
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"Field '{name}' must be an object")
    return value


def _failed(exc: ApiError) -> dict[str, Any]:
    return {'success': False, 'error': exc.error, 'reason': exc.message}


def batch_update(body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    project_id = body.get('projectId')
    if not isinstance(project_id, str) or not project_id:
        raise BadRequest("Field 'projectId' is required")
    project = crud.load_visible('projects', project_id, principal)
    family_ids = _ids(body.get('documentFamilyIds'), 'documentFamilyIds')
    labels = _object(body, 'labelUpdates')
    added = _ids(labels.get('newLabels'), 'labelUpdates.newLabels')
    removed = labels.get('removedLabels') or []   # any value held, even of a label deleted since
    if not isinstance(removed, list) or not all(isinstance(x, str) for x in removed):
        raise BadRequest("Field 'labelUpdates.removedLabels' must be a list of label ids")
    deletes = _ids(_object(body, 'deletes').get('documentFamilyIds'), 'deletes.documentFamilyIds')
    notes = _object(body, 'notes')
    new_notes = notes.get('newNotes') or []
    if not isinstance(new_notes, list) or len(new_notes) > MAX_NOTES:
        raise BadRequest(f"Field 'notes.newNotes' must be a list of at most {MAX_NOTES} notes")
    deleted_notes = _ids(notes.get('deletedNotes'), 'notes.deletedNotes')
    task, group = _object(body, 'task'), _object(body, 'taskGroup')
    for name, value in (('task', task), ('taskGroup', group)):
        if value and not isinstance(value.get('id'), str):
            raise BadRequest(f"Field '{name}.id' is required")
    status = None
    if body.get('documentStatus') is not None:
        if not isinstance(body['documentStatus'], dict):
            raise BadRequest("Field 'documentStatus' must be an object {id} or {slug}")
        status = table.get('document-statuses', _status_id(body['documentStatus'], project.id))
    access.require_write(principal, FAMILIES, project.org)   # a batch is a write, whatever it holds
    known = table.batch_get(('labels', i) for i in added)
    unknown = [i for i in added if i not in known or known[i].org != project.org]
    if unknown:
        raise BadRequest(f"Field 'labelUpdates.newLabels' refers to a label that does not exist: {unknown[0]}")

    updates: list[dict[str, Any]] = []
    if family_ids and (status is not None or added or removed):
        stored = table.batch_get(('document-families', i) for i in family_ids)
        for fid in family_ids:
            entry: dict[str, Any] = {'documentFamilyId': fid}
            try:
                budget.check(f'batch update of {len(family_ids)} document families stopped before {fid}')
                entry.update(success=True, documentFamily=_update_family(
                    fid, stored.get(fid), project.id, status, added, removed, principal))
            except ApiError as exc:
                entry.update(_failed(exc))
            updates.append(entry)
    for fid in deletes:
        entry = {'documentFamilyId': fid, 'deleted': True}
        try:
            budget.check(f'batch delete of {len(deletes)} document families stopped before {fid}')
            found = table.get('document-families', fid)
            if found is None or found.data.get('projectId') != project.id:
                raise BadRequest(f'No document family {fid} in project {project.id}')
            crud.delete(FAMILIES, fid, principal)
            entry['success'] = True
        except ApiError as exc:
            entry.update(_failed(exc))
        updates.append(entry)

    warnings: list[str] = []
    targets = family_ids or deletes
    for i, note in enumerate(new_notes):
        text = note.get('content', note.get('text')) if isinstance(note, dict) else note
        if not isinstance(text, str):
            warnings.append(f'note {i} was not saved: a note is a string or {{content}}')
            continue
        try:
            budget.check(f'batch update stopped before note {i}')
            crud.create('events', {
                'organizationId': project.org, 'eventType': NOTE_EVENT, 'source': 'batch-update',
                'description': text, 'name': text[:100],
                'payload': {'projectId': project.id, 'documentFamilyIds': targets}}, principal)
        except ApiError as exc:
            warnings.append(f'note {i} was not saved: {exc.message}')
    for note_id in deleted_notes:
        try:
            budget.check(f'batch update stopped before deleting note {note_id}')
            found = table.get('events', note_id)
            if found is None or found.data.get('eventType') != NOTE_EVENT or found.org != project.org:
                raise BadRequest(f'No note {note_id}')
            crud.delete('events', note_id, principal)
        except ApiError as exc:
            warnings.append(f'note {note_id} was not deleted: {exc.message}')

    out: dict[str, Any] = {'contentObjectUpdates': updates, 'task': None, 'warnings': warnings}
    if task:
        out['task'] = _update('tasks', task, 'task', principal)
    if group:
        out['taskGroup'] = _update('task-groups', group, 'taskGroup', principal)
    return out


def _update(path: str, change: dict[str, Any], key: str, principal: Principal) -> dict[str, Any]:
    fields = {k: v for k, v in change.items() if k != 'id'}
    try:
        budget.check(f'batch update stopped before the {key} update')
        if path == 'tasks' and 'statusSlug' in fields:
            stored = crud.load_visible('tasks', change['id'], principal)
            slug = fields['statusSlug']
            if not table.unique_exists('task-statuses', scope=stored.org, field_name='slug', value=slug):
                raise BadRequest(f"Field 'statusSlug' refers to a task status that does not exist: {slug}")
        return {'success': True, key: crud.update(path, change['id'], fields, principal=principal)}
    except ApiError as exc:
        return _failed(exc)


def _update_family(fid: str, stored: Stored | None, project_id: str, status: Stored | None, added: list[str],
                   removed: list[str], principal: Principal) -> dict[str, Any]:
    """One family's labels, status and auto-lock: one transaction, re-read and re-applied over
    concurrent writes (kernel/writes.py)."""
    if stored is None or stored.data.get('projectId') != project_id:
        raise BadRequest(f'No document family {fid} in project {project_id}')
    access.require_active(principal, stored.org)
    crud.require_write(FAMILIES, principal, stored, op='update')
    current = [stored]

    def attempt() -> dict[str, Any]:
        stored = current[-1]
        if stored is None or stored.data.get('projectId') != project_id:
            raise BadRequest(f'No document family {fid} in project {project_id}')
        new = dict(stored.data)
        labels = [x for x in (new.get('labels') or []) if x not in removed]
        labels += [x for x in added if x not in labels]
        new['labels'] = labels
        if status is not None:
            new['documentStatus'] = status.data
        hook_for(FAMILIES).before_update(FAMILIES, principal, new, stored)   # the lock (families.py)
        new['updatedOn'] = now_iso()
        new['changeSequence'] = stored.seq + 1
        try:
            records.commit(records.update_ops(FAMILIES, new, stored, principal=principal))
        except WriteConflict as exc:
            if exc.code != 'TransactionConflict' and not (exc.op is not None and exc.op.tag.get('what') == 'entity'):
                raise writes.busy() from None
            current.append(table.get('document-families', fid))
            raise writes.Again() from None
        return new
    return writes.retry_write(attempt, tries=writes.UNBOUNDED_TRIES)
