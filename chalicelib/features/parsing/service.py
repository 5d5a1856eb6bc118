"""The parse stage and the parsed document served to clients and steps (docs/api/documents.md
"Parsed documents", docs/api/processing.md "The parse stage").

**The stage** (``run_slice``), one queue message at a time, driven by the execution engine
(features/work: the ``PARSE`` runner; this module never touches the execution record): it reads
the family's native content from S3 (the original, never changed), asks the readers
(features/parsing/readers) for the pages from ``state['nextPage']`` on within the message's time
budget, and writes what they gave as ONE part object (deltas.part_key: a deterministic key per
run and first page, so a redelivered message rewrites the same object). The state it hands back
(page ranges done, pages of pages) rides on the execution. When the readers say there is no next
page, ``_finish`` stores the family's next document version as a manifest naming the parts
(deltas.save_parts: one conditional write of the family) together with a derived content object
(lineage DERIVED, ``sourceContentObjectId`` -> the native one; its id a UUIDv5 of the run, so a
finish delivered twice creates it once). A parse that fails (the file's fault: encrypted,
corrupt, truncated, empty, mislabelled, over a cap) deletes its parts: the family keeps its
previous document, nothing of the run is referenced.

Memory: one page range's nodes at a time (the readers hold one page); the file's bytes are read
once per message. Storage: big content in S3 only (parts, manifest, the KDDB rendering); the
table holds the family's pointer, the content object and the execution's small state.

**Serving**: the family's text (``text_of``), the KDDB the SDK reads (``kddb_url``, cached in S3
beside the version it renders), a KDDB the SDK writes back (``put_kddb``), the SDK's family view
(``sdk_family``) and the parsed document a step sees (``step_view``, size-capped).
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import budget, clock
from chalicelib.core.errors import BadRequest, NotFound
from chalicelib.core.observability import get_logger
from chalicelib.core.principal import Principal
from chalicelib.features.documents import blobs, deltas
from chalicelib.features.documents import service as documents
from chalicelib.features.parsing import kddb
from chalicelib.kernel import crud, records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict
from chalicelib.kernel.store.table import Stored

log = get_logger('parsing')

FAMILIES = family_of('document-families')
CONTENT_OBJECTS = family_of('content-objects')
NAMESPACE = uuid.UUID('0c4b1d0e-5a52-4e53-8f0c-7061727365d1')   # derived content object ids: uuid5(run)
DOCUMENT_CONTENT_TYPE = 1          # ContentObject.contentType: 0 the uploaded file, 1 the document
PARSER_NAME = 'parse'              # the derived content object's metadata.step
FINISH_ATTEMPTS = 5                # the family changed under the finishing write: re-read and write again
SLICE_RESERVE_SECONDS = 3.0        # kept after the readers for writing the part and answering
MAX_TEXT_BYTES = 4 * 2 ** 20       # one answer of GET .../text (Lambda answers at most 6 MB)
STEP_TEXT_BYTES = 100_000          # the parsed text a step's input carries
STEP_NODES = 2_000                 # the nodes a step's input carries
STEP_PAGES = 200                   # the pages a step's input lists
KDDB_CONTENT_TYPE = 'application/x-kddb'
CONTAINERS = frozenset({'document', 'page', 'sheet', 'table'})   # their text never speaks for their children


# ----------------------------------------------------------------------------- the stage

@dataclass
class Slice:
    """What one message of the stage did. ``kind``: ``continue`` (more pages: the engine sends
    the next message, to the OCR queue when ``ocr``), ``done`` (the version is stored, or there
    is nothing to parse: ``output`` says which), ``failed`` (the file's fault; ``message`` names
    the cause; nothing was kept), ``gone`` (the family was deleted: the run goes with it)."""
    kind: str
    message: str
    state: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] | None = None
    ocr: bool = False


def new_state(run: str) -> dict[str, Any]:
    """The state of a parse run before its first message (``run``: unique per run, e.g. the
    execution's id). It rides on the execution (``metadata.progress``, at most a few hundred
    bytes: pages done of pages); the list of parts is in S3 (``_index``)."""
    return {'run': run, 'nextPage': 1, 'pagesDone': 0, 'pageCount': None}


_in_ocr_function: ContextVar[bool] = ContextVar('in_ocr_function', default=False)


@contextlib.contextmanager
def ocr_function():
    """Marks the work done inside as the OCR function's (front/handlers.py ``ocr_batch``): there
    pages without a text layer are read with Tesseract."""
    token = _in_ocr_function.set(True)
    try:
        yield
    finally:
        _in_ocr_function.reset(token)


def in_ocr_function() -> bool:
    return _in_ocr_function.get()


def _ocr_queue() -> str:
    from chalicelib.core.config import get_config  # noqa: PLC0415 - small
    return get_config().ocr_queue_name


def ocr_here() -> bool:
    """Whether this process reads scans itself: in the OCR function, yes; in the zip worker, only
    when Tesseract is there and no OCR function's queue is configured (``OCR_QUEUE_NAME`` empty
    turns the hand-over off). Otherwise the readers raise NeedsOcr and the engine continues the
    run on the OCR queue (docs/api/processing.md "The parse stage")."""
    from chalicelib.core.config import get_config  # noqa: PLC0415 - small
    if _in_ocr_function.get():
        return True
    return not get_config().ocr_queue_name and _readers().ocr_available()


def _readers():
    from chalicelib.features.parsing import readers  # noqa: PLC0415 - lazy: pypdfium2, lxml... only in the worker
    return readers


def run_slice(family_id: str, state: dict[str, Any], *, principal: Principal, deadline: float | None,
              ocr: bool | None = None) -> Slice:
    """One message of the parse stage (module docstring). ``deadline``: a ``time.monotonic()``
    instant the readers must stop by (the engine's attempt box); ``principal`` writes the version
    (the platform's service principal). Transient failures (S3, the table) raise: the engine
    retries the message."""
    readers = _readers()
    family = table.get(FAMILIES.path, family_id)
    if family is None:
        return Slice('gone', 'the document family no longer exists', state)
    state = {**new_state(str(state.get('run') or uuid.uuid4())), **state}
    if not family.data.get('storageKey'):
        return Slice('done', 'nothing to parse: the family has no uploaded content', state,
                     output={'parsed': False, 'reason': 'no content'})
    run, first = str(state['run']), int(state['nextPage'])
    data = blobs.read(family.data['storageKey'])
    media_type = str(family.data.get('contentType') or documents.DEFAULT_MIME)
    ends = (deadline if deadline is not None else time.monotonic() + 20.0) - SLICE_RESERVE_SECONDS
    try:
        result = readers.read(data, media_type=media_type, filename=str(family.data.get('path') or ''),
                              first_page=first, deadline=ends,
                              ocr=ocr_here() if ocr is None else ocr,
                              text_chars_before=int(state.get('textChars') or 0))
    except readers.NoParser as exc:
        return Slice('done', f'{exc}: the document is kept as uploaded and the pipelines run on its metadata'[:500],
                     state, output={'parsed': False, 'reason': str(exc)[:300]})
    except readers.NeedsOcr as exc:
        page = int(getattr(exc, 'page', first) or first)
        if _in_ocr_function.get() or not _ocr_queue():
            _discard(family, state)   # nowhere to hand it over to
            return Slice('failed', f'ocr-unavailable: page {page} has no text layer and no OCR runs here '
                                   '(OCR_QUEUE_NAME is empty and Tesseract is missing)', state)
        state = {**state, 'nextPage': page}
        return Slice('continue', f'page {page} needs OCR: continued where Tesseract runs', state, ocr=True)
    except readers.ParseFailure as exc:
        _discard(family, state)
        cause = getattr(exc, 'cause', None) or 'unreadable'
        return Slice('failed', f'{cause}: {exc}'[:900], state)
    finally:
        del data
    nodes = list(result.nodes)
    root, page_nodes = _split_root(nodes)
    last = max((int(result.next_page) - 1) if result.next_page else int(result.page_count or first), first)
    index = _index(family, run)
    if root is not None and index.get('root') is None:
        index['root'] = root
    if page_nodes or not index['parts']:
        size = deltas.put_part(deltas.part_key(family, run, first), page_nodes)
        # a message delivered again re-reads from the same first page: what it wrote before goes
        index['parts'] = [p for p in index['parts'] if int(p[0]) < first] + [[first, last, len(page_nodes), size]]
    if result.warnings:
        index['warnings'] = [*index.get('warnings', []), *(str(w)[:300] for w in result.warnings)][:20]
    total_nodes = sum(int(p[2]) for p in index['parts'])
    total_bytes = sum(int(p[3]) for p in index['parts'])
    if total_nodes > deltas.MAX_PARSED_NODES or total_bytes > deltas.MAX_PARSED_BYTES:
        _discard(family, state)
        return Slice('failed', f'caps: the parsed document would hold more than {deltas.MAX_PARSED_NODES} nodes '
                               f'or {deltas.MAX_PARSED_BYTES} bytes (pages 1-{last} hold {total_nodes} nodes)', state)
    state.update(pageCount=result.page_count, pagesDone=last, parser=result.parser, mediaType=result.media_type,
                 textChars=int(state.get('textChars') or 0) + int(getattr(result, 'text_chars', 0) or 0))
    if result.next_page:
        _save_index(family, run, index)
        state['nextPage'] = int(result.next_page)
        return Slice('continue', f'pages {first}-{last} of {result.page_count} read', state)
    return _finish(family, state, index, principal)


def _index_key(family: Stored, run: str) -> str:
    return f'{documents.family_folder(family.org, family.id)}parsed/{run}/index.json'


def _index(family: Stored, run: str) -> dict[str, Any]:
    """The run's parts so far ``{root, parts: [[first, last, nodes, bytes]], warnings}`` (S3: it
    grows with the page count, the execution item must not)."""
    if blobs.head(_index_key(family, run)) is None:
        return {'root': None, 'parts': []}
    return json.loads(blobs.read(_index_key(family, run)))


def _save_index(family: Stored, run: str, index: dict[str, Any]) -> None:
    blobs.put(_index_key(family, run), json.dumps(index, separators=(',', ':')).encode(), 'application/json')


def _split_root(nodes: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The reader's root node (``document``, no parent), and the rest."""
    root = next((n for n in nodes if n.get('parentId') is None and n.get('nodeType') == 'document'), None)
    return root, [n for n in nodes if n is not root]


def derived_id(run: str) -> str:
    return str(uuid.uuid5(NAMESPACE, run))


def _finish(family: Stored, state: dict[str, Any], index: dict[str, Any], principal: Principal) -> Slice:
    run = str(state['run'])
    co_id = derived_id(run)
    parts = [{'key': deltas.part_key(family, run, int(p[0])), 'first': int(p[0]), 'last': int(p[1]),
              'nodes': int(p[2]), 'bytes': int(p[3])} for p in index['parts']]
    root = dict(index.get('root') or {'id': 'doc', 'parentId': None, 'nodeType': 'document', 'content': None,
                                      'index': 0, 'features': {}})
    state = {**state, 'warnings': index.get('warnings') or []}
    root['features'] = {**(root.get('features') or {}), 'mediaType': state.get('mediaType'),
                        'pageCount': state.get('pageCount'), 'parser': state.get('parser')}
    nodes = 1 + sum(p['nodes'] for p in parts)
    size = sum(p['bytes'] for p in parts)
    for attempt in range(FINISH_ATTEMPTS):
        if table.get(CONTENT_OBJECTS.path, co_id) is not None:   # a redelivered finish: already stored
            return _done(state, co_id, family, nodes, size, again=True)
        # a family's first version has no parse result to replace: no index read (16 Queries)
        previous = _derived_objects(family) if family.data.get('documentVersion') else []

        def ops(version: int, family: Stored = family, previous: list[Stored] = previous) -> list:
            values = {'documentFamilyId': family.id, 'name': f"{str(family.data.get('path') or 'document')[-180:]}"
                                                               '.kddb',
                      'contentType': DOCUMENT_CONTENT_TYPE, 'index': 1, 'size': size, 'mixins': [],
                      'docTransitionType': 'DERIVED', 'sourceContentObjectId': family.data.get('contentObjectId'),
                      'documentVersion': str(version), 'storeRef': family.data.get('documentStoreId'),
                      'metadata': {'step': PARSER_NAME, 'parser': state.get('parser'),
                                   'mediaType': state.get('mediaType'), 'pageCount': state.get('pageCount'),
                                   'nodeCount': nodes, 'run': run},
                      'contentMetadata': {}, 'source': {}, 'created': clock.now_iso(), 'modified': clock.now_iso()}
            record = records.new_record(CONTENT_OBJECTS, values, principal=principal, org=family.org,
                                        project_id=family.data.get('projectId'), id_=co_id)
            out = records.create_ops(CONTENT_OBJECTS, [record], principal)
            for old in previous:   # the parse's earlier result is replaced, not stacked
                out += records.delete_ops(CONTENT_OBJECTS, old, principal)
            return out
        try:
            version = deltas.save_parts(family, root, parts, principal, ops)
            return _done(state, co_id, family, nodes, size, version=version)
        except (deltas.Stale, WriteConflict):
            fresh = table.get(FAMILIES.path, family.id)
            if fresh is None:
                _discard(family, state)
                return Slice('gone', 'the document family was deleted while it was parsed', state)
            family = fresh
            time.sleep(min(0.05 * 2 ** attempt, 1.0))
        except BadRequest as exc:   # over the parsed-document caps
            _discard(family, state)
            return Slice('failed', f'caps: {exc.message}', state)
    raise deltas.Stale()   # the engine retries the message (a transient conflict)


def _done(state: dict[str, Any], co_id: str, family: Stored, nodes: int, size: int, *, version: int | None = None,
          again: bool = False) -> Slice:
    output = {'parsed': True, 'parser': state.get('parser'), 'mediaType': state.get('mediaType'),
              'pageCount': state.get('pageCount'), 'nodeCount': nodes, 'bytes': size,
              'contentObjectId': co_id}
    if version is not None:
        output['documentVersion'] = version
    if state.get('warnings'):
        output['warnings'] = state['warnings']
    text = (f"parsed by {state.get('parser')}: {state.get('pageCount')} pages, {nodes} nodes"
            + (f', document version {version}' if version is not None else ' (stored by an earlier delivery)'))
    log.info('document parsed', extra={'family': family.id, 'nodes': nodes, 'bytes': size, 'again': again})
    return Slice('done', text, state, output=output)


def _derived_objects(family: Stored) -> list[Stored]:
    """The family's content objects an earlier parse wrote (lineage DERIVED, metadata.step parse)."""
    ids = [i for _, i in table.walk_value(CONTENT_OBJECTS.path, family.org,
                                          slot=CONTENT_OBJECTS.slot_of('documentFamilyId'),
                                          field_name='documentFamilyId', value=family.id, descending=False,
                                          limit=None)]
    found = table.batch_get((CONTENT_OBJECTS.path, i) for i in ids)
    return [s for s in found.values() if s.data.get('docTransitionType') == 'DERIVED'
            and (s.data.get('metadata') or {}).get('step') == PARSER_NAME]


def content_objects(family: Stored) -> list[dict[str, Any]]:
    """The family's content objects: the native one first, then the derived ones, oldest first."""
    ids = [i for _, i in table.walk_value(CONTENT_OBJECTS.path, family.org,
                                          slot=CONTENT_OBJECTS.slot_of('documentFamilyId'),
                                          field_name='documentFamilyId', value=family.id, descending=False,
                                          limit=None)]
    found = table.batch_get((CONTENT_OBJECTS.path, i) for i in ids)
    return sorted((s.data for s in found.values()),
                  key=lambda d: (int(d.get('contentType') or 0), str(d.get('createdOn') or ''), d['id']))


def _discard(family: Stored, state: dict[str, Any]) -> None:
    """A failed run's parts and index: nothing references them; deleted (the family's delete
    sweeps any that a failure here leaves)."""
    try:
        blobs.delete_prefix(f"{documents.family_folder(family.org, family.id)}parsed/{state.get('run')}/")
    except Exception:  # noqa: BLE001 - unreferenced parts are harmless; the family's folder sweep removes them
        log.warning('parts of a failed parse of family %s were not deleted now', family.id, exc_info=True)


# ----------------------------------------------------------------------------- text

def _text_lines(nodes: list[dict[str, Any]]) -> list[str]:
    """Reading order text of some nodes: the topmost node holding content speaks for what is below
    it (a line for its words, a paragraph for its lines), except containers (a sheet's name is a
    line, then its rows); a row without content joins its cells with tabs; a page starts with a
    form feed (as pdftotext)."""
    ordered = deltas.ordered(nodes)
    children: dict[str, list[dict[str, Any]]] = {}
    for node in ordered:
        children.setdefault(str(node.get('parentId')), []).append(node)
    covered: set[str] = set()
    lines: list[str] = []
    for i, node in enumerate(ordered):
        if i % 4096 == 0:
            budget.check(f'gathering the text of {len(ordered)} nodes')
        if node.get('parentId') in covered:
            covered.add(node['id'])
            continue
        kind = node.get('nodeType')
        if kind == 'page' and lines:
            lines.append('\f')
        content = node.get('content')
        if kind == 'row' and content is None:
            cells = children.get(node['id'], [])
            lines.append('\t'.join(str(c.get('content') or '') for c in cells))
            covered.add(node['id'])
        elif isinstance(content, str) and content and kind != 'document':
            lines.append(content)
            if kind not in CONTAINERS:   # a sheet's name or a table's caption is a line of its own
                covered.add(node['id'])
    return lines


def _join(lines: list[str]) -> str:
    return '\n'.join(lines).replace('\n\f\n', '\f')


def text_of(family_id: str, principal: Principal, *, page: int | None = None) -> dict[str, Any]:
    """``GET /api/document-families/{id}/text``: ``{text, version, pageCount, firstPage, lastPage,
    nextPage}``; the route answers the text as text/plain and the rest as headers
    (docs/api/documents.md "Text")."""
    family = crud.load_visible(FAMILIES, family_id, principal)
    return _text(family, page=page, limit=MAX_TEXT_BYTES)


def _text(family: Stored, *, page: int | None, limit: int) -> dict[str, Any]:
    version = int(family.data.get('documentVersion') or 0)
    stored = deltas.manifest(family)
    if stored is None:
        if page not in (None, 1):
            raise BadRequest("Parameter 'page' applies to a document stored by pages (a parsed one)")
        text = _join(_text_lines(deltas.load_nodes(family)))
        return {'text': _cut(text, limit), 'version': version, 'pageCount': None, 'firstPage': None,
                'lastPage': None, 'nextPage': None, 'truncated': len(text.encode()) > limit}
    first = page or 1
    pieces: list[str] = []
    size, chosen_first, chosen_last, following = 0, None, None, None
    for part in stored['parts']:
        if int(part['last']) < first:
            continue
        if chosen_first is not None and size >= limit:
            following = int(part['first'])
            break
        piece = _join(_text_lines(deltas.read_part(part['key'])))
        pieces.append(piece)
        size += len(piece.encode()) + 1
        chosen_first = chosen_first or int(part['first'])
        chosen_last = int(part['last'])
    text = '\f'.join(p for p in pieces if p)
    return {'text': _cut(text, limit), 'version': version, 'pageCount': stored.get('pageCount'),
            'firstPage': chosen_first, 'lastPage': chosen_last, 'nextPage': following,
            'truncated': len(text.encode()) > limit}


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode(errors='ignore')


# ----------------------------------------------------------------------------- what a step sees

def step_view(family: Stored) -> dict[str, Any] | None:
    """The parsed document in a step's input (SCRIPT, BRIDGE_CALL, AGENT; docs/api/processing.md
    "The parsed document in a step's input"): ``{version, text, pageCount, pages: [{page, width,
    height}], nodes, truncated}``, at most STEP_TEXT_BYTES of text, STEP_NODES nodes and
    STEP_PAGES pages; None when the family has no document."""
    if not family.data.get('documentVersion'):
        return None
    stored = deltas.manifest(family)
    text = _text(family, page=None, limit=STEP_TEXT_BYTES)
    nodes: list[dict[str, Any]] = []
    if stored is None:
        nodes = deltas.ordered(deltas.load_nodes(family))
    else:
        nodes = [stored['root']]
        for part in stored['parts']:
            if len(nodes) >= STEP_NODES:
                break
            nodes += deltas.ordered(deltas.read_part(part['key']))
    pages = [{k: n['features'].get(k) for k in ('page', 'width', 'height')}
             for n in nodes if n.get('nodeType') == 'page' and isinstance(n.get('features'), dict)][:STEP_PAGES]
    count = stored.get('nodeCount') if stored else len(nodes)
    return {'version': text['version'], 'text': text['text'],
            'pageCount': stored.get('pageCount') if stored else None, 'pages': pages,
            'nodes': nodes[:STEP_NODES], 'nodeCount': count,
            'truncated': bool(text['truncated'] or (count or 0) > STEP_NODES)}


def text_for(family_id: str, principal: Principal, *, page: int | None = None,
             limit: int = STEP_TEXT_BYTES) -> dict[str, Any]:
    """The family's text for an agent's tool (features/mcp/tools.py), with the caller's rights."""
    family = crud.load_visible(FAMILIES, family_id, principal)
    return {'documentFamilyId': family.id, **_text(family, page=page, limit=limit)}


# ----------------------------------------------------------------------------- the SDK's routes

def family_in_store(org_slug: str, store_slug: str, family_id: str, principal: Principal) -> tuple[str, Stored]:
    from chalicelib.features.documents import store_fs  # noqa: PLC0415 - lazy: the SDK's routes only
    org, store = store_fs.resolve_store(org_slug, store_slug, principal)
    family = crud.load_visible(FAMILIES, family_id, principal)
    if family.data.get('documentStoreId') != store.id:
        raise NotFound(f'Document family {family_id[:64]} does not exist')
    return f"{org}/{store.data.get('slug')}", family


def _sdk_object(data: dict[str, Any], store_ref: str) -> dict[str, Any]:
    return {**data, 'contentType': 'DOCUMENT' if int(data.get('contentType') or 0) == DOCUMENT_CONTENT_TYPE
            else 'NATIVE', 'storeRef': store_ref}


def sdk_family(org_slug: str, store_slug: str, family_id: str, principal: Principal) -> dict[str, Any]:
    """``GET /api/stores/{org}/{store}/families/{id}`` (the SDK's ``get_family``): the family with
    ``storeRef`` and its ``contentObjects`` (NATIVE first, then DOCUMENT)."""
    from chalicelib.kernel import embedding  # noqa: PLC0415 - lazy: the SDK's routes only
    store_ref, family = family_in_store(org_slug, store_slug, family_id, principal)
    data = embedding.embed_one(FAMILIES, family.data, principal)
    return {**data, 'storeRef': store_ref,
            'contentObjects': [_sdk_object(c, store_ref) for c in content_objects(family)]}


def object_of(family: Stored, co_id: str) -> dict[str, Any]:
    for data in content_objects(family):
        if data['id'] == co_id:
            return data
    raise NotFound(f'Content object {co_id[:64]} does not exist in this document family')


def object_content_url(org_slug: str, store_slug: str, family_id: str, co_id: str, principal: Principal) -> str:
    """``GET .../families/{id}/objects/{coId}/content``: a presigned GET of the original bytes
    (the native object) or of the family's current document as KDDB (a derived one)."""
    _, family = family_in_store(org_slug, store_slug, family_id, principal)
    obj = object_of(family, co_id)
    if int(obj.get('contentType') or 0) != DOCUMENT_CONTENT_TYPE:
        return documents.content_url_of(family)
    return kddb_url(family)


def kddb_url(family: Stored) -> str:
    """The family's current document rendered as KDDB, cached in S3 beside the version it renders
    (``{documentKey}.kddb``: versions never change, so neither does their rendering)."""
    from chalicelib.core.config import get_config  # noqa: PLC0415 - small
    source = family.data.get('documentKey')
    key = f'{source}.kddb' if source else f'{documents.family_folder(family.org, family.id)}document/empty.kddb'
    if blobs.head(key) is None:
        fd, path = tempfile.mkstemp(suffix='.kddb')
        os.close(fd)
        os.unlink(path)
        try:
            kddb.write(path, _all_nodes(family), metadata={'documentFamilyId': family.id},
                       source={'original_filename': str(family.data.get('path') or '').rsplit('/', 1)[-1],
                               'original_path': family.data.get('path'), 'mime_type': family.data.get('contentType'),
                               'document_family_id': family.id})
            with open(path, 'rb') as handle:
                blobs.put(key, handle.read(), KDDB_CONTENT_TYPE)
        finally:
            if os.path.exists(path):
                os.unlink(path)
    name = str(family.data.get('path') or 'document').rsplit('/', 1)[-1] + '.kddb'
    return blobs.read_url(key, get_config().content_url_seconds, content_type=KDDB_CONTENT_TYPE, filename=name)


def _all_nodes(family: Stored):
    """Every node of the family's document, parents first, one part at a time."""
    stored = deltas.manifest(family)
    if stored is None:
        yield from deltas.ordered(deltas.load_nodes(family))
        return
    yield stored['root']
    for part in stored['parts']:
        budget.check(f"rendering pages {part['first']}-{part['last']} as KDDB")
        yield from deltas.ordered(deltas.read_part(part['key']))


def put_kddb(org_slug: str, store_slug: str, family_id: str, co_id: str, *, data: bytes | None,
             content_type: str | None, principal: Principal) -> dict[str, Any]:
    """``POST .../families/{id}/objects/{coId}/content`` with a KDDB (multipart part ``document``
    or ``file``, or the body): the family's next document version (the SDK's
    ``update_document``). Answers the SDK's family view."""
    _, family = family_in_store(org_slug, store_slug, family_id, principal)
    crud.require_write(FAMILIES, principal, family, op='update')
    object_of(family, co_id)
    raw = data or b''
    header = (content_type or '').strip()
    if header.lower().startswith('multipart/form-data'):
        parts = documents.form_parts(header, raw, kddb.MAX_KDDB_BYTES)
        found = [p for p in parts if p['name'] in ('document', 'file') and p['filename'] is not None]
        if not found:
            raise BadRequest('multipart/form-data body without a "document" file part (the KDDB)')
        raw = found[0]['data']
    document = kddb.read(raw)
    deltas.replace_document(family.id, {'version': int(family.data.get('documentVersion') or 0),
                                        'nodes': document['nodes']}, principal)
    return sdk_family(org_slug, store_slug, family_id, principal)
