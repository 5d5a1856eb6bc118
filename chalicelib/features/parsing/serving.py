"""The parsed document served to clients and steps (docs/api/documents.md "Parsed documents"):
what the parse stage (stage.py) stored, read back.

The family's content objects (``content_objects``: the native one, then the derived document),
its text (``text_of``), the parsed document a step sees (``step_view``, size-capped) and an
agent's tool reads (``text_for``), the KDDB the SDK reads (``kddb_url``, cached in S3 beside the
version it renders), a KDDB the SDK writes back (``put_kddb``: the family's next version) and the
SDK's family view (``sdk_family``).
"""
from __future__ import annotations

import os
import tempfile
from typing import Any

from chalicelib.core import budget
from chalicelib.core.errors import BadRequest, NotFound
from chalicelib.core.principal import Principal
from chalicelib.features.documents import blobs, deltas
from chalicelib.features.documents import service as documents
from chalicelib.features.parsing import kddb
from chalicelib.features.parsing.stage import CONTENT_OBJECTS, DOCUMENT_CONTENT_TYPE, FAMILIES
from chalicelib.kernel import crud
from chalicelib.kernel.store import table
from chalicelib.kernel.store.table import Stored

MAX_TEXT_BYTES = 4 * 2 ** 20       # one answer of GET .../text (Lambda answers at most 6 MB)
STEP_TEXT_BYTES = 100_000          # the parsed text a step's input carries
STEP_NODES = 2_000                 # the nodes a step's input carries
STEP_PAGES = 200                   # the pages a step's input lists
KDDB_CONTENT_TYPE = 'application/x-kddb'
CONTAINERS = frozenset({'document', 'page', 'sheet', 'table'})   # their text never speaks for their children


# ----------------------------------------------------------------------------- content objects


def content_objects(family: Stored) -> list[dict[str, Any]]:
    """The family's content objects: the native one first, then the derived ones, oldest first."""
    ids = [i for _, i in table.walk_value(CONTENT_OBJECTS.path, family.org,
                                          slot=CONTENT_OBJECTS.slot_of('documentFamilyId'),
                                          field_name='documentFamilyId', value=family.id, descending=False,
                                          limit=None)]
    found = table.batch_get((CONTENT_OBJECTS.path, i) for i in ids)
    return sorted((s.data for s in found.values()),
                  key=lambda d: (int(d.get('contentType') or 0), str(d.get('createdOn') or ''), d['id']))


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
