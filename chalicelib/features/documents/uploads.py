"""Upload session items (features/documents/service.py): one item per S3 multipart upload.

upload session: pk ``UPLOAD#{uploadId}``, sk ``#``; kind ``upload-session``, org, ttl (= expiresAt,
epoch seconds), data: uploadId, storageKey, storeId, projectId, organizationId, userId, familyId
(chosen up front), path, contentType, contentLength?, expiresAt, createdOn, state (OPEN /
COMPLETING / COMPLETED / ABORTED), claim and claimUntil (epoch seconds) while COMPLETING.

open-session slot (the cap on open sessions per store and user, features/documents/service.py):
pk ``UPSLOTS#{storeId}#{userId}``, sk the slot number ``0..cap-1``; kind ``upload-slot``, ttl (=
the session's expiry), data: uploadId, until (epoch seconds). A session takes a free slot (absent,
or its holder expired) with a conditional put, and gives it back when it is completed or
aborted; an expired session's slot is free again by its ``until`` even before TTL removes it.

Never listed (no index keys). The state moves only by conditional writes: OPEN -> COMPLETING
(a claim with a lease, so one caller completes the S3 upload at a time) -> COMPLETED (in the
same transaction as the family it created) or back to OPEN (the client's parts were wrong);
OPEN -> ABORTED.
"""
from __future__ import annotations

from typing import Any

from chalicelib.kernel.store.model import configure
from chalicelib.kernel.store.repository import Op, WriteConflict, commit
from chalicelib.kernel.store.table import ENTITY_SK

KIND = 'upload-session'


def session_pk(upload_id: str) -> str:
    return f'UPLOAD#{upload_id}'


def put_session(data: dict[str, Any], *, org: str, ttl: int) -> Op:
    model = configure()
    item = model(session_pk(data['uploadId']), ENTITY_SK, kind=KIND, data=data, org=org, ttl=ttl)
    return Op('put', item=item, condition=model.pk.does_not_exist(), tag={'what': 'session'})


def get_session(upload_id: str) -> dict[str, Any] | None:
    model = configure()
    try:
        item = model.get(session_pk(upload_id), ENTITY_SK, consistent_read=True)
    except model.DoesNotExist:
        return None
    if item.kind != KIND or item.data is None:
        return None
    return item.data.as_dict()


def claim(upload_id: str, token: str, *, now: int, lease: int) -> Op:
    """OPEN (or COMPLETING with an expired lease) -> COMPLETING held by ``token``."""
    model = configure()
    state = model.data['state']
    cond = model.pk.exists() & ((state == 'OPEN') | ((state == 'COMPLETING') & (model.data['claimUntil'] < now)))
    return Op('update', item=model(session_pk(upload_id), ENTITY_SK),
              actions=[state.set('COMPLETING'), model.data['claim'].set(token),
                       model.data['claimUntil'].set(now + lease)],
              condition=cond, tag={'what': 'session'})


def finish(upload_id: str, token: str, family_id: str) -> Op:
    """COMPLETING held by ``token`` -> COMPLETED (in the family's transaction)."""
    model = configure()
    return Op('update', item=model(session_pk(upload_id), ENTITY_SK),
              actions=[model.data['state'].set('COMPLETED'), model.data['familyId'].set(family_id),
                       model.data['claim'].remove(), model.data['claimUntil'].remove()],
              condition=(model.data['state'] == 'COMPLETING') & (model.data['claim'] == token),
              tag={'what': 'session'})


def release(upload_id: str, token: str, state: str = 'OPEN') -> Op:
    """Give a claim back (the parts were wrong: OPEN again) or end it (ABORTED)."""
    model = configure()
    return Op('update', item=model(session_pk(upload_id), ENTITY_SK),
              actions=[model.data['state'].set(state), model.data['claim'].remove(),
                       model.data['claimUntil'].remove()],
              condition=(model.data['state'] == 'COMPLETING') & (model.data['claim'] == token),
              tag={'what': 'session'})


def check_unchanged(family: str, id_: str, seq: int, **tag) -> Op:
    """Transaction condition: the entity still exists at sequence ``seq`` (a FAILED delta is
    recorded only against the family version it was evaluated on, and never after the family's
    delete collected its deltas)."""
    from chalicelib.kernel.store.table import entity_pk  # noqa: PLC0415 - small; kept beside its one use
    model = configure()
    return Op('check', model_key=(entity_pk(family, id_), ENTITY_SK), condition=model.seq == seq,
              tag={'what': 'entity', **tag})


def abort(upload_id: str) -> Op:
    """OPEN -> ABORTED."""
    model = configure()
    return Op('update', item=model(session_pk(upload_id), ENTITY_SK),
              actions=[model.data['state'].set('ABORTED')],
              condition=model.data['state'] == 'OPEN', tag={'what': 'session'})


SLOT_KIND = 'upload-slot'


def slots_pk(store_id: str, user_id: str) -> str:
    return f'UPSLOTS#{store_id}#{user_id}'


def held_slots(store_id: str, user_id: str, *, now: int) -> dict[int, int]:
    """Slot number -> until (epoch seconds) of the slots held by sessions not yet expired (one
    strongly consistent Query of a partition of at most ``cap`` items)."""
    model = configure()
    out = {}
    for item in model.query(slots_pk(store_id, user_id), consistent_read=True):
        data = item.data.as_dict() if item.data is not None else {}
        if item.kind == SLOT_KIND and int(data.get('until') or 0) > now:
            out[int(item.sk)] = int(data['until'])
    return out


def take_slot(store_id: str, user_id: str, slot: int, upload_id: str, *, now: int, until: int) -> Op:
    """Hold slot ``slot`` for ``upload_id`` until ``until``: only if it is free (absent or expired)."""
    model = configure()
    item = model(slots_pk(store_id, user_id), str(slot), kind=SLOT_KIND, data={'uploadId': upload_id, 'until': until},
                 ttl=until)
    return Op('put', item=item, condition=model.pk.does_not_exist() | (model.data['until'] < now),
              tag={'what': 'slot'})


def give_back_slot(store_id: str, user_id: str, upload_id: str) -> None:
    """Free the slot ``upload_id`` holds (none: nothing to do). Best effort: a slot not given back
    is free again when its session expires."""
    model = configure()
    for item in model.query(slots_pk(store_id, user_id), consistent_read=True):
        data = item.data.as_dict() if item.data is not None else {}
        if data.get('uploadId') == upload_id:
            try:
                commit([Op('delete', item=item, condition=model.data['uploadId'] == upload_id, tag={'what': 'slot'})])
            except WriteConflict:
                pass   # taken by another session meanwhile (ours had expired): not ours to free
