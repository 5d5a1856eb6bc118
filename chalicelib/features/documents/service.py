"""Documents in S3: upload sessions (S3 multipart with presigned part URLs), small uploads, the
content read-back link, and the cascade when a family is deleted (docs/api/documents.md).

A finished upload is one logical step: the S3 object, then ONE transaction holding the
document family, its first content object, the store's byte counter and the session's move to
COMPLETED. When that transaction fails the object is deleted, so no family points at nothing and
no object outlives a family that was never stored. Completing is idempotent on the uploadId: the
session item is claimed (a lease) before S3 is completed, so concurrent completes cannot both
finish the upload, and a complete after success answers the family it created.

Storage keys (never a client string): ``documents/{orgId}/{storeId}/{familyId}/native`` for
the uploaded file, ``documents/{orgId}/families/{familyId}/document/v{n}-{rand}.json`` for the
document content versions (features/documents/deltas.py).
"""
from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

from chalicelib.core import clock, limits
from chalicelib.core.config import get_config
from chalicelib.core.errors import BadRequest, Conflict, NotFound, PayloadTooLarge
from chalicelib.core.observability import get_logger
from chalicelib.core.principal import Principal
from chalicelib.features.documents import blobs, uploads
from chalicelib.kernel import access, crud, hooks, records, writes
from chalicelib.kernel.registry import dependents_of
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict
from chalicelib.kernel.store.table import Stored

log = get_logger('documents')

FAMILIES = family_of('document-families')
CONTENT_OBJECTS = family_of('content-objects')
MAX_PART_NUMBER = limits.MAX_PART_NUMBER
MIN_PART_SIZE = limits.MIN_PART_SIZE
MAX_PART_SIZE = limits.MAX_PART_SIZE
MAX_OPEN_SESSIONS = limits.MAX_OPEN_UPLOAD_SESSIONS
MAX_PARTS_PER_URL_REQUEST = limits.MAX_PARTS_PER_URL_REQUEST
CLAIM_LEASE_SECONDS = 60
MAX_PATH = limits.MAX_DOCUMENT_PATH
NATIVE_CONTENT_TYPE = 0               # ContentObject.contentType: 0 the uploaded file, 1 the document
DEFAULT_MIME = 'application/octet-stream'
_MIME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}'
                   r'(\s*;\s*[A-Za-z0-9!#$&^_.+-]+=("[^"\x00-\x1f]*"|[A-Za-z0-9!#$&^_.+-]+))*$')


# ----------------------------------------------------------------------------- parsing

def normalise_path(raw: str | None) -> str:
    """A target path inside the store: ``\\`` read as ``/``, empty and ``.`` segments dropped, no
    ``..``, no leading ``/``; default a generated name."""
    if raw is None or raw.strip() == '':
        return f"upload-{clock.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
    if len(raw) > MAX_PATH:
        raise BadRequest(f"Parameter 'path' is longer than {MAX_PATH} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise BadRequest("Parameter 'path' contains control characters")
    parts = [p for p in raw.replace('\\', '/').split('/') if p not in ('', '.')]
    if '..' in parts:
        raise BadRequest("Parameter 'path' must not contain '..' segments")
    if not parts:
        raise BadRequest("Parameter 'path' names no file")
    return '/'.join(parts)


def content_type_of(raw: str | None, name: str = 'contentType') -> str:
    if raw is None or raw.strip() == '':
        return DEFAULT_MIME
    value = raw.strip()
    if len(value) > 255 or not _MIME.match(value):
        raise BadRequest(f"Parameter '{name}' is not a MIME type (type/subtype)")
    return value


def content_length_of(raw: str | None) -> int | None:
    if raw is None or raw == '':
        return None
    limit = get_config().upload_max_bytes
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        raise BadRequest("Parameter 'contentLength' must be a positive integer (bytes)")
    if int(raw) > limit:
        raise BadRequest(f"Parameter 'contentLength' is larger than the maximum upload of {limit} bytes")
    return int(raw)


def part_size_of(raw: str | None, length: int | None) -> int | None:
    """The session's part size: ``partSize`` as given, else (a declared ``contentLength``) the
    smallest whole MiB of at least 5 MiB that needs no more than 10,000 parts; None when the
    session declares no length (its part URLs are then not bound to a size)."""
    if raw is None or raw == '':
        if length is None:
            return None
        mib = 2 ** 20
        smallest = -(-length // MAX_PART_NUMBER)            # ceil: no more than 10,000 parts
        return max(MIN_PART_SIZE, -(-smallest // mib) * mib)  # in whole MiB
    if length is None:
        raise BadRequest("Parameter 'partSize' needs 'contentLength' (the parts are cut from the declared total)")
    if not raw.isascii() or not raw.isdigit() or not MIN_PART_SIZE <= int(raw) <= MAX_PART_SIZE:
        raise BadRequest(f"Parameter 'partSize' must be an integer from {MIN_PART_SIZE} to {MAX_PART_SIZE} (bytes)")
    size = int(raw)
    if -(-length // size) > MAX_PART_NUMBER:
        raise BadRequest(f"Parameter 'partSize' cuts {length} bytes into more than {MAX_PART_NUMBER} parts")
    return size


def part_count(session: dict[str, Any]) -> int | None:
    """How many parts a size-bound session has (None: not bound)."""
    length, size = session.get('contentLength'), session.get('partSize')
    return None if length is None or size is None else -(-int(length) // int(size))


def part_length(session: dict[str, Any], number: int) -> int:
    """The exact length of part ``number`` of a size-bound session."""
    length, size = int(session['contentLength']), int(session['partSize'])
    return min(size, length - (number - 1) * size)


def _string(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value or len(value) > 2048:
        raise BadRequest(f"Field '{name}' is required (a string)")
    return value


def _part_number(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PART_NUMBER:
        raise BadRequest(f"{where} must be an integer from 1 to {MAX_PART_NUMBER}")
    return value


# ----------------------------------------------------------------------------- keys

def native_key(org: str, store_id: str, family_id: str) -> str:
    return f'documents/{org}/{store_id}/{family_id}/native'


def family_folder(org: str, family_id: str) -> str:
    """Where a family's document versions live (and anything else derived from it)."""
    return f'documents/{org}/families/{family_id}/'


def _filename(path: str) -> str:
    return path.rsplit('/', 1)[-1]


# ----------------------------------------------------------------------------- the store

def _writable_store(store_id: str, principal: Principal) -> Stored:
    store = crud.load_visible('document-stores', store_id, principal)
    access.require_write(principal, FAMILIES, store.org)
    return store


def _epoch(iso_text: str) -> float:
    return clock.parse_instant(iso_text).timestamp()


# ----------------------------------------------------------------------------- sessions

def request_upload(store_id: str, *, path: str | None, content_type: str | None, content_length: str | None,
                   principal: Principal, part_size: str | None = None) -> dict[str, Any]:
    """A new upload session. With ``contentLength`` its parts are cut in ``partSize`` bytes (the
    last one shorter) and each part URL is signed for its exact length (docs/api/lifecycle.md).
    A user holds at most ``MAX_OPEN_SESSIONS`` open sessions per store: one more is 409."""
    store = _writable_store(store_id, principal)
    path = normalise_path(path)
    mime = content_type_of(content_type)
    length = content_length_of(content_length)
    size = part_size_of(part_size, length)
    now = clock.now()
    expires = now + timedelta(seconds=get_config().upload_session_seconds)
    slot = _free_slot(store.id, principal.user_id, now=int(now.timestamp()))   # at the cap: 409 before S3
    family_id = str(uuid.uuid4())
    key = native_key(store.org, store.id, family_id)
    upload_id = blobs.start_multipart(key, mime)
    data = {'uploadId': upload_id, 'storageKey': key, 'storeId': store.id, 'projectId': store.data['projectId'],
            'organizationId': store.org, 'userId': principal.user_id, 'familyId': family_id, 'path': path,
            'contentType': mime, 'expiresAt': clock.iso(expires), 'createdOn': clock.iso(now), 'state': 'OPEN'}
    if length is not None:
        data.update(contentLength=length, partSize=size)
    until = int(expires.timestamp())
    try:
        _hold_a_slot(data, store, principal.user_id, slot, now=int(now.timestamp()), until=until)
    except Exception:
        _quietly(blobs.abort_multipart, key, upload_id)
        raise
    answer = {'uploadId': upload_id, 'storageKey': key, 'expiresAt': data['expiresAt']}
    if length is not None:
        answer.update(contentLength=length, partSize=size, partCount=part_count(data))
    return answer


SLOT_ATTEMPTS = 3   # slots re-read and tried when another session of the same user took ours meanwhile


def _hold_a_slot(data: dict[str, Any], store: Stored, user_id: str, slot: int, *, now: int, until: int) -> None:
    """Store the session holding ``slot`` (read free): a slot another session took between that
    read and our write (two requests of one user at once) sends us to read the slots again and
    try the next free one, ``SLOT_ATTEMPTS`` writes in all; at the cap, 409 as ever."""
    for attempt in range(SLOT_ATTEMPTS):
        if attempt:
            slot = _free_slot(store.id, user_id, now=now)
        try:
            records.commit([uploads.put_session(data, org=store.org, ttl=until),
                            uploads.take_slot(store.id, user_id, slot, data['uploadId'], now=now, until=until)])
            return
        except WriteConflict as exc:
            if exc.op is None or exc.op.tag.get('what') != 'slot':
                raise
            if attempt == SLOT_ATTEMPTS - 1:
                raise Conflict('Other upload sessions of yours took the free slots meanwhile; retry') from None


def _free_slot(store_id: str, user_id: str, *, now: int) -> int:
    held = uploads.held_slots(store_id, user_id, now=now)
    free = [n for n in range(MAX_OPEN_SESSIONS) if n not in held]
    if not free:
        first = clock.iso(clock.parse_instant('1970-01-01T00:00:00Z') + timedelta(seconds=min(held.values())))
        raise Conflict(f'You have {MAX_OPEN_SESSIONS} open upload sessions on this document store (the cap of '
                       f'MAX_OPEN_SESSIONS = {MAX_OPEN_SESSIONS}): complete or abort one first (the oldest '
                       f'expires at {first})')
    return free[0]


def _session(store: Stored, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    upload_id = _string(body, 'uploadId')
    storage_key = _string(body, 'storageKey')
    session = uploads.get_session(upload_id)
    if session is None or session.get('storeId') != store.id or session.get('userId') != principal.user_id:
        raise BadRequest(f'No upload session {upload_id[:200]} of yours for this document store')
    if session.get('storageKey') != storage_key:
        raise BadRequest("Field 'storageKey' is not the storage key of this upload session")
    return session


def _expired(session: dict[str, Any]) -> bool:
    return clock.now().timestamp() >= _epoch(session['expiresAt'])


def _open(session: dict[str, Any]) -> None:
    state = session.get('state')
    if state == 'COMPLETED':
        raise BadRequest('This upload session is already completed')
    if state == 'ABORTED':
        raise BadRequest('This upload session was aborted')
    if _expired(session):
        raise BadRequest(f"This upload session expired at {session['expiresAt']}")


def part_urls(store_id: str, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    store = _writable_store(store_id, principal)
    session = _session(store, body, principal)
    numbers = body.get('partNumbers')
    if not isinstance(numbers, list) or not numbers:
        raise BadRequest("Field 'partNumbers' must be a non-empty list of part numbers")
    if len(numbers) > MAX_PARTS_PER_URL_REQUEST:
        raise BadRequest(f"Field 'partNumbers' may list at most {MAX_PARTS_PER_URL_REQUEST} parts per request")
    numbers = [_part_number(n, "Every entry of 'partNumbers'") for n in numbers]
    if len(set(numbers)) != len(numbers):
        raise BadRequest("Field 'partNumbers' lists a part twice")
    _open(session)
    if session.get('state') == 'COMPLETING':
        raise Conflict('This upload session is being completed')
    count = part_count(session)
    if count is not None and max(numbers) > count:
        raise BadRequest(f"Field 'partNumbers': this session declared {session['contentLength']} bytes in parts of "
                         f"{session['partSize']} bytes, so its parts are 1 to {count}")
    left = _epoch(session['expiresAt']) - clock.now().timestamp()   # never outlive the session
    parts = []
    for n in numbers:   # a size-bound session: each URL signs its part's exact Content-Length
        size = part_length(session, n) if count is not None else None
        part = {'partNumber': n, 'url': blobs.part_url(session['storageKey'], session['uploadId'], n, int(left),
                                                       size=size)}
        if size is not None:
            part['size'] = size
        parts.append(part)
    return {'uploadId': session['uploadId'], 'storageKey': session['storageKey'],
            'expiresAt': session['expiresAt'], 'parts': parts}


def _parts(body: dict[str, Any]) -> list[tuple[int, str]]:
    parts = body.get('parts')
    if not isinstance(parts, list) or not parts:
        raise BadRequest("Field 'parts' must be a non-empty list of {partNumber, etag}")
    if len(parts) > MAX_PART_NUMBER:
        raise BadRequest(f"Field 'parts' may list at most {MAX_PART_NUMBER} parts")
    out: dict[int, str] = {}
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            raise BadRequest(f"parts[{i}] must be an object {{partNumber, etag}}")
        number = _part_number(part.get('partNumber'), f'parts[{i}].partNumber')
        etag = part.get('etag')
        if not isinstance(etag, str) or not etag.strip('" ') or len(etag) > 1024:
            raise BadRequest(f'parts[{i}].etag is missing (the ETag header S3 answered the part PUT with)')
        if number in out:
            raise BadRequest(f'parts[{i}]: part {number} is listed twice')
        out[number] = '"' + etag.strip('" ') + '"'
    return sorted(out.items())


def complete(store_id: str, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    store = _writable_store(store_id, principal)
    session = _session(store, body, principal)
    if session.get('state') == 'COMPLETED':
        return _finished_family(session, principal)
    parts = _parts(body)
    _open(session)
    token = str(uuid.uuid4())
    try:
        records.commit([uploads.claim(session['uploadId'], token, now=int(clock.now().timestamp()),
                                      lease=CLAIM_LEASE_SECONDS)])
    except WriteConflict:
        return _lost_claim(session['uploadId'], principal)
    key, upload_id = session['storageKey'], session['uploadId']
    try:
        _check_part_sizes(session, parts, token)
        blobs.complete_multipart(key, upload_id, parts)
    except blobs.BlobRejected as exc:
        if exc.code != 'NoSuchUpload' or blobs.head(key) is None:
            # the client's parts were wrong: the session stays usable (gone from S3: ended)
            _quietly(records.commit, [uploads.release(upload_id, token,
                                                      'ABORTED' if exc.code == 'NoSuchUpload' else 'OPEN')])
            raise BadRequest(f'The upload cannot be completed: {exc.reason}') from None
        # else: an earlier claimant completed S3 and stopped before storing the family: go on
    except Exception:
        _quietly(records.commit, [uploads.release(upload_id, token)])
        raise
    try:
        return _store_new_family(store, principal, key=key, path=session['path'], mime=session['contentType'],
                                 family_id=session['familyId'], declared=session.get('contentLength'),
                                 session_ops=lambda: [uploads.finish(upload_id, token, session['familyId'])],
                                 on_failure=lambda: _quietly(records.commit,
                                                             [uploads.release(upload_id, token, 'ABORTED')]),
                                 upload_id=upload_id)
    finally:   # completed or ended: no longer an open session (a retry after a 503 takes a slot again)
        _quietly(uploads.give_back_slot, session['storeId'], session['userId'], upload_id)


def _check_part_sizes(session: dict[str, Any], parts: list[tuple[int, str]], token: str) -> None:
    """A size-bound session: every uploaded part holds exactly its length (S3 refuses another
    length at the part PUT on AWS; this is the check where the signature is not enforced, e.g.
    moto). A part of another size aborts the upload: 400 naming it, nothing stored."""
    count = part_count(session)
    if count is None:
        return
    sizes = blobs.part_sizes(session['storageKey'], session['uploadId'])
    for number, _etag in parts:
        if number not in sizes:
            continue   # never uploaded: S3's InvalidPart answers it, and the session stays usable
        expected = part_length(session, number) if number <= count else 0
        if sizes[number] != expected:
            _quietly(records.commit, [uploads.release(session['uploadId'], token, 'ABORTED')])
            blobs.abort_multipart(session['storageKey'], session['uploadId'])
            _quietly(uploads.give_back_slot, session['storeId'], session['userId'], session['uploadId'])
            raise BadRequest(f'Part {number} holds {sizes[number]} bytes but must hold {expected}: this '
                             f"session's contentLength of {session['contentLength']} bytes is cut in parts of "
                             f"{session['partSize']} bytes ({count} parts). The upload was aborted: request a "
                             f'new session')


def _finished_family(session: dict[str, Any], principal: Principal) -> dict[str, Any]:
    found = table.get('document-families', session.get('familyId') or '')
    if found is None:
        raise BadRequest('This upload session is already completed (its document family was deleted since)')
    return crud.get(FAMILIES, found.id, principal)


def _lost_claim(upload_id: str, principal: Principal) -> dict[str, Any]:
    session = uploads.get_session(upload_id) or {}
    if session.get('state') == 'COMPLETED':
        return _finished_family(session, principal)
    if session.get('state') == 'COMPLETING':
        raise Conflict('This upload session is being completed by another request; retry shortly')
    _open(session)
    raise Conflict('This upload session changed meanwhile; retry')


def abort(store_id: str, body: dict[str, Any], principal: Principal) -> None:
    store = _writable_store(store_id, principal)
    session = _session(store, body, principal)
    state = session.get('state')
    if state == 'COMPLETED':
        raise BadRequest('This upload session is already completed')
    if state == 'COMPLETING':
        raise Conflict('This upload session is being completed')
    if state == 'OPEN':
        try:
            records.commit([uploads.abort(session['uploadId'])])
        except WriteConflict:
            raise Conflict('This upload session changed meanwhile; retry') from None
    blobs.abort_multipart(session['storageKey'], session['uploadId'])   # ABORTED again: idempotent
    _quietly(uploads.give_back_slot, session['storeId'], session['userId'], session['uploadId'])


# ----------------------------------------------------------------------------- small files

def upload_small(store_id: str, *, path: str | None, data: bytes | None, content_type: str | None,
                 principal: Principal) -> dict[str, Any]:
    return store_small(_writable_store(store_id, principal), path=path, data=data, content_type=content_type,
                       principal=principal)


def store_small(store: Stored, *, path: str | None, data: bytes | None, content_type: str | None,
                principal: Principal, form_metadata: bool = False) -> dict[str, Any]:
    """A small file into a store the caller may write: the body, or the ``file`` part of a
    multipart/form-data body (with ``form_metadata``, its other text fields become the family's
    ``metadata``: the store file API, features/documents/store_fs.py)."""
    limit = get_config().small_upload_max_bytes
    header = (content_type or '').strip()
    filename = None
    metadata: dict[str, str] = {}
    if header.lower().startswith('multipart/form-data'):
        parts = form_parts(header, data or b'', limit)
        data, filename, part_type = _file_part(parts)
        mime = content_type_of(part_type, 'file content type')
        if form_metadata:
            metadata = form_fields(parts)
    else:
        mime = content_type_of(header or None, 'Content-Type')
    if not data:
        raise BadRequest('The request body is empty: send the file as the body, or as the "file" part of '
                         'multipart/form-data')
    if len(data) > limit:
        raise PayloadTooLarge(f'A small upload holds at most {limit} bytes: use a multipart upload session')
    path = normalise_path(path if path not in (None, '') else filename)
    family_id = str(uuid.uuid4())
    key = native_key(store.org, store.id, family_id)
    blobs.put(key, data, mime)
    return _store_new_family(store, principal, key=key, path=path, mime=mime, family_id=family_id,
                             declared=None, session_ops=list, on_failure=lambda: None, upload_id=None,
                             metadata=metadata)


MAX_FORM_FIELDS = 100
MAX_FORM_FIELD_BYTES = 65_536


def form_parts(header: str, raw: bytes, limit: int) -> list[dict[str, Any]]:
    """The parts of a multipart/form-data body: ``{name, filename, type, data}`` each."""
    from python_multipart import MultipartParser  # noqa: PLC0415 - lazy: small uploads only
    from python_multipart.exceptions import MultipartParseError  # noqa: PLC0415
    match = re.search(r'boundary=("?)([^";]+)\1', header)
    if not match:
        raise BadRequest('multipart/form-data without a boundary')
    parts: list[dict[str, Any]] = []
    state: dict[str, Any] = {}

    def on_part_begin():
        state.update(headers={}, data=bytearray(), name=b'', value=b'')

    def on_header_field(buf, start, end):
        state['name'] += buf[start:end]

    def on_header_value(buf, start, end):
        state['value'] += buf[start:end]

    def on_header_end():
        state['headers'][state['name'].decode('latin-1').lower()] = state['value'].decode('utf-8', 'replace')
        state['name'], state['value'] = b'', b''

    def on_part_data(buf, start, end):
        state['data'] += buf[start:end]
        if len(state['data']) > limit:
            raise PayloadTooLarge(f'A small upload holds at most {limit} bytes: use a multipart upload session')

    def on_part_end():
        parts.append(dict(state))

    parser = MultipartParser(match.group(2), callbacks={
        'on_part_begin': on_part_begin, 'on_header_field': on_header_field, 'on_header_value': on_header_value,
        'on_header_end': on_header_end, 'on_part_data': on_part_data, 'on_part_end': on_part_end})
    try:
        parser.write(raw)
        parser.finalize()
    except MultipartParseError:
        raise BadRequest('Malformed multipart/form-data body') from None
    out = []
    for part in parts:
        disposition = part['headers'].get('content-disposition', '')
        name = re.search(r'(?:^|;)\s*name=(?:"([^"]*)"|([^;\s]*))', disposition)
        filename = re.search(r'filename="([^"]*)"', disposition)
        out.append({'name': (name.group(1) if name.group(1) is not None else name.group(2)) if name else None,
                    'filename': filename.group(1) if filename else None,
                    'type': part['headers'].get('content-type'), 'data': bytes(part['data'])})
    return out


def _file_part(parts: list[dict[str, Any]]) -> tuple[bytes, str | None, str | None]:
    """The ``file`` part -> (bytes, filename, content type)."""
    for part in parts:
        if part['name'] == 'file':
            return part['data'], part['filename'], part['type']
    raise BadRequest('multipart/form-data body without a "file" part')


def form_fields(parts: list[dict[str, Any]]) -> dict[str, str]:
    """The text fields of a form (parts without a filename), by name; other file parts are left
    out. At most MAX_FORM_FIELDS fields of MAX_FORM_FIELD_BYTES UTF-8 bytes each."""
    fields: dict[str, str] = {}
    for part in parts:
        if part['name'] in (None, '', 'file') or part['filename'] is not None:
            continue
        if len(part['data']) > MAX_FORM_FIELD_BYTES:
            raise BadRequest(f"Form field {part['name'][:100]!r} is longer than {MAX_FORM_FIELD_BYTES} bytes")
        try:
            fields[part['name'][:200]] = part['data'].decode('utf-8')
        except UnicodeDecodeError:
            raise BadRequest(f"Form field {part['name'][:100]!r} is not UTF-8 text") from None
        if len(fields) > MAX_FORM_FIELDS:
            raise BadRequest(f'A form holds at most {MAX_FORM_FIELDS} fields besides the file')
    return fields


# ----------------------------------------------------------------------------- the family

def initial_status(project_id: str) -> dict[str, Any] | None:
    """A new upload's documentStatus: the project's oldest UNRESOLVED document status, else its
    oldest one; none when the project has no document statuses."""
    statuses = sorted(table.query_project('document-statuses', project_id),
                      key=lambda s: (s.get('createdOn', ''), s['id']))
    for status in statuses:
        if status.get('statusType') == 'UNRESOLVED':
            return status
    return statuses[0] if statuses else None


def _store_new_family(store: Stored, principal: Principal, *, key: str, path: str, mime: str, family_id: str,
                      declared: int | None, session_ops, on_failure, upload_id: str | None,
                      metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    head = blobs.head(key)
    limit = get_config().upload_max_bytes
    problem = None
    if head is None:
        problem = 'the uploaded object is not in storage'
    elif head.size > limit:
        problem = f'the upload is larger than the maximum of {limit} bytes'
    elif declared is not None and head.size != declared:
        problem = f'the upload holds {head.size} bytes, not the contentLength of {declared} announced'
    if problem is not None:
        _quietly(blobs.delete, [key])
        on_failure()
        raise BadRequest(f'The upload cannot be completed: {problem}')
    project_id = store.data['projectId']
    values: dict[str, Any] = {'path': path, 'documentStoreId': store.id, 'size': head.size, 'contentType': mime,
                              'storageKey': key, 'labels': [], 'mixins': [], 'locked': False,
                              'metadata': dict(metadata or {})}
    status = initial_status(project_id)
    if status is not None:
        values['documentStatus'] = status
    family = records.new_record(FAMILIES, values, principal=principal, org=store.org, project_id=project_id,
                                id_=family_id)
    family['uuid'] = str(uuid.uuid4())
    now = family['createdOn']
    source = {'mime_type': mime, 'original_filename': _filename(path), 'original_path': path,
              'checksum': head.etag or '', 'connector': 'upload', 'created': now,
              'document_family_id': family_id, 'headers': {}}
    if upload_id is not None:
        source['upload_id'] = upload_id
    content = records.new_record(CONTENT_OBJECTS, {
        'documentFamilyId': family_id, 'name': _filename(path), 'contentType': NATIVE_CONTENT_TYPE, 'index': 0,
        'size': head.size, 'mixins': [], 'storeRef': store.id, 'source': source, 'metadata': {},
        'contentMetadata': {}, 'created': now, 'modified': now}, principal=principal, org=store.org,
        project_id=project_id)
    family['contentObjectId'] = content['id']
    for attempt in range(crud.CONFLICT_RETRIES):
        ops = records.create_ops(FAMILIES, [family], principal)
        ops += records.create_ops(CONTENT_OBJECTS, [content], principal)
        ops += session_ops()
        ops.append(repo.check_exists('document-stores', store.id, store.org, field='documentStoreId', value=store.id))
        try:
            records.commit(ops)
        except WriteConflict as exc:
            if exc.code == 'TransactionConflict' and attempt + 1 < crud.CONFLICT_RETRIES:
                writes.backoff(attempt)
                continue
            if exc.op is not None and exc.op.tag.get('what') == 'session' and upload_id is not None:
                return _lost_claim(upload_id, principal)   # another claimant took over: its object, keep it
            _discard(key, on_failure)
            if exc.op is not None and exc.op.tag.get('what') == 'reference':
                raise BadRequest('The document store was deleted meanwhile') from None
            if exc.op is not None and exc.op.tag.get('what') == 'entity':
                return _lost_claim(upload_id, principal) if upload_id else writes.busy()
            raise writes.busy() from None
        except Exception:
            landed = family_landed(family_id)
            if landed:   # the write landed and only its answer was lost: the upload is done
                log.warning('upload of family %s landed though its write reported a failure', family_id)
                return _created(family)
            if landed is False:
                _discard(key, on_failure)
            raise   # landed None (cannot tell): the object stays; no family without its object
        return _created(family)
    _discard(key, on_failure)
    raise writes.busy()


def _created(family: dict[str, Any]) -> dict[str, Any]:
    """A new family committed: its listeners told (the parse trigger sent at once, kernel/hooks.py
    ``after_create``; the table stream's created event stays the fallback)."""
    hooks.after_create(FAMILIES, [family])
    return family


def family_landed(family_id: str, *, key: tuple[str, str] | None = None) -> bool | None:
    """After a write failed in a way that does not say whether it landed (the table kept failing
    or timing out past its retries, the transaction's token notwithstanding): does the family
    exist now (``key``: with that field holding that value)? None when the table cannot say
    either. An object is deleted only when the answer is no: a family must never name an
    object that is gone (the invariant checker's ``document-objects``; chaos run of cc4faf9)."""
    try:
        stored = table.get(FAMILIES.path, family_id)
    except Exception:  # noqa: BLE001 - unknown: the caller keeps the object
        return None
    if stored is None:
        return False
    return key is None or stored.data.get(key[0]) == key[1]


def _discard(key: str, on_failure) -> None:
    """The family was not stored: its object goes (no object without a family)."""
    _quietly(blobs.delete, [key])
    on_failure()


def _quietly(fn, *args) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - clean-up after a failure must not hide that failure
        log.warning('clean-up step %s failed', getattr(fn, '__name__', fn), exc_info=True)


# ----------------------------------------------------------------------------- reading back

def content_url(family_id: str, principal: Principal) -> str:
    return content_url_of(crud.load_visible(FAMILIES, family_id, principal))


def content_url_of(family: Stored) -> str:
    """A presigned GET of a family's uploaded file (the caller has checked it may see it)."""
    key = family.data.get('storageKey')
    if not key:
        raise NotFound(f'Document family {family.id} has no uploaded content')
    return blobs.read_url(key, get_config().content_url_seconds, content_type=family.data.get('contentType'),
                          filename=_filename(family.data.get('path') or 'content'))


def store_stats(store_id: str, principal: Principal) -> dict[str, Any]:
    store = crud.load_visible('document-stores', store_id, principal)
    families = table.count_value('document-families', store.org, 'documentStoreId', store.id)
    return {'documentStoreId': store.id, 'documentFamilies': families,
            'bytes': table.count('document-stores', bytes_tenant(store.id))}


def bytes_tenant(store_id: str) -> str:
    """The store's byte counter (``CNT#document-stores#{storeId}#bytes``, sharded): moved by the
    uploaded families' creates and deletes (features/documents/families.py), in their transactions."""
    return f'{store_id}#bytes'


# ----------------------------------------------------------------------------- deleting a family

DEPENDENT_DELETE_ATTEMPTS = 5   # a dependent changed between its read and its delete is read again


def delete_dependents(family: Stored, principal: Principal, *, swept: bool = False) -> None:
    """The records that go with a family (the families declaring ``deleted_with`` on it: its content
    objects, linked deltas, executions (its parse stage's and its pipelines' runs), extracted data
    objects and exceptions), deleted before the family (no orphans); each record in its own
    transaction (a family may have more than one transaction holds). A run still going finds its
    execution gone and stops (the engine ends a message whose execution does not exist); a run
    created after these reads finds its family gone and deletes itself (features/work/pipelines.py
    ``vanished``)."""
    for dependent in dependents_of(family.family):
        if swept and not dependent.swept_after_delete:
            continue
        path, field_name = dependent.path, dependent.deleted_with
        ids = [i for _, i in table.walk_value(path, family.org, slot=dependent.slot_of(field_name),
                                              field_name=field_name, value=family.id,
                                              descending=False, limit=None)]
        for stored in table.batch_get((path, i) for i in ids).values():
            _delete_dependent(dependent, stored, principal)


def sweep_dependents(family: Stored, principal: Principal) -> None:
    """After the family's delete committed: the dependents background work writes (their
    declaration's ``swept_after_delete``: its runs) read and deleted once more. A run a worker
    created between ``delete_dependents``' reads and the family's delete (having read the family
    just before; it may even have ended meanwhile: chaos run of 1235cd8) is found here; one
    created after this sweep finds its family gone and deletes itself (features/work/pipelines.py
    ``_create_run``). The family is gone whatever happens here: a failure is logged, and such a
    run still goes when it next looks at its family. Cost: bench/README.md "A family's delete"."""
    try:
        delete_dependents(family, principal, swept=True)
    except Exception:  # noqa: BLE001 - the delete stands; its answer must not say otherwise
        log.warning('second sweep of deleted document family %s failed', family.id, exc_info=True)


def _delete_dependent(dependent, stored: Stored, principal: Principal) -> None:
    """Delete one dependent record; one changed meanwhile (a run writing its progress) is read
    again and deleted as it now is, never skipped (a skipped one would outlive its family)."""
    for _ in range(DEPENDENT_DELETE_ATTEMPTS):
        try:
            records.commit(records.delete_ops(dependent, stored, principal))
            return
        except WriteConflict as exc:
            if exc.code == 'TransactionConflict' or exc.op is None or exc.op.tag.get('what') != 'entity':
                raise writes.busy() from None
            fresh = table.get(dependent.path, stored.id)
            if fresh is None:
                return   # deleted meanwhile by someone else
            stored = fresh
    raise writes.busy()


def delete_files(family: Stored) -> None:
    """After the family's delete committed: its uploaded file and every document version."""
    keys = [family.data['storageKey']] if family.data.get('storageKey') else []
    try:
        blobs.delete(keys)
        blobs.delete_prefix(family_folder(family.org, family.id))
    except Exception:  # noqa: BLE001 - the family is gone; files nothing points at are logged
        log.warning('files of deleted document family %s could not be deleted now', family.id, exc_info=True)
