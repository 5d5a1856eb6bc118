"""A family's pages as pictures and its words with their boxes, for a reviewer's page
(docs/api/documents.md "Page images and words"; issue 49):

  ``page_image``  GET /api/document-families/{id}/pages/{page}/image?dpi=150
  ``page_words``  GET /api/document-families/{id}/pages/{page}/words

A page image is drawn from the family's ORIGINAL (render.py: PDFs by pypdfium2, image files by
Pillow, both in every deployment: requirements.txt), so it exists before the parse finishes and
whatever the parse did. The asked dpi is rounded up to the next of ``limits.PAGE_IMAGE_DPI_STEPS``
(``drawn_dpi``), so a page has at most that many cached images whatever dpi clients ask. It is
drawn once per (family, original, page, dpi step) and kept in S3 under the family's folder,
``pages/{sha256(storageKey)[:16]}/p{page:06d}-{dpi}.png`` (a new original is a new storage key,
hence new images), with what the answer says (page count, size, dpi used) as the object's
metadata: a second GET is one HEAD and a presign, no download and no render. The family's delete
sweeps its folder, images included. The image is handed out as a presigned GET of
``PAGE_IMAGE_URL_SECONDS`` (the URL is signed by the function's role; no API token is in it).

Words come from the family's parsed document (the parse stage's nodes: serving.py reads the same
ones): the page range part holding the page, at most ``MAX_PAGE_WORDS`` words an answer (a page
holds far fewer; past it ``truncated`` says so; no paging).

pdfium is not thread-safe (readers/__init__.py): one render at a time per process (``_RENDER``),
which the local server's threads share.
"""
from __future__ import annotations

import hashlib
import threading
from typing import Any

from chalicelib.core import limits
from chalicelib.core.errors import ApiError, Conflict, NotFound
from chalicelib.core.principal import Principal
from chalicelib.features.documents import blobs, deltas
from chalicelib.features.documents import service as documents
from chalicelib.features.parsing import render
from chalicelib.features.parsing.stage import FAMILIES
from chalicelib.kernel import crud
from chalicelib.kernel.store.table import Stored

PNG = 'image/png'
_RENDER = threading.Lock()


def _image_key(family: Stored, page: int, dpi: int) -> str:
    source = hashlib.sha256(str(family.data['storageKey']).encode()).hexdigest()[:16]
    return f'{documents.family_folder(family.org, family.id)}pages/{source}/p{page:06d}-{dpi}.png'


def drawn_dpi(asked: int) -> int:
    """The dpi step a page image is drawn and cached at: the first of ``PAGE_IMAGE_DPI_STEPS`` at
    or above ``asked`` (never less sharp than asked), the last step past them all."""
    steps = limits.PAGE_IMAGE_DPI_STEPS
    return next((step for step in steps if step >= asked), steps[-1])


def page_image(family_id: str, page: int, dpi: int, principal: Principal) -> dict[str, Any]:
    """``{url, expiresIn, page, pageCount, dpi, width, height, contentType}`` (module docstring)."""
    family = crud.load_visible(FAMILIES, family_id, principal)
    dpi = drawn_dpi(dpi)
    if not family.data.get('storageKey'):
        raise NotFound(f'Document family {family.id} has no uploaded content')
    key = _image_key(family, page, dpi)
    found = blobs.head(key)
    meta = found.metadata if found is not None else {}
    if not all(meta.get(k) for k in ('page-count', 'width', 'height', 'dpi')):
        data = blobs.read(family.data['storageKey'])
        try:
            with _RENDER:
                image = render.render_page(data, media_type=family.data.get('contentType'),
                                           filename=str(family.data.get('path') or ''), page=page, dpi=dpi)
        except render.NotPaged as error:
            raise Conflict(f'This document has no pages to render: {error}; read its text or its parsed '
                           'document instead') from None
        except render.NoPage as error:
            raise NotFound(str(error), pageCount=error.count) from None
        except render.Unreadable as error:
            raise ApiError(f'The page cannot be drawn from the uploaded file: {error}', status=422) from None
        finally:
            del data
        meta = {'page-count': str(image.page_count), 'width': str(image.width), 'height': str(image.height),
                'dpi': str(image.dpi)}
        blobs.put(key, image.png, PNG, metadata=meta)
    return {'url': blobs.read_url(key, limits.PAGE_IMAGE_URL_SECONDS, content_type=PNG),
            'expiresIn': limits.PAGE_IMAGE_URL_SECONDS, 'page': page, 'pageCount': int(meta['page-count']),
            'dpi': int(meta['dpi']), 'width': int(meta['width']), 'height': int(meta['height']),
            'contentType': PNG}


def page_words(family_id: str, page: int, principal: Principal) -> dict[str, Any]:
    """``{page, pageCount, width, height, words: [{id, text, bbox, confidence?, lineId}], truncated}``
    from the family's parsed document (module docstring)."""
    family = crud.load_visible(FAMILIES, family_id, principal)
    if not family.data.get('documentVersion'):
        raise Conflict(f'Document family {family.id} has no parsed document yet: its words are read once the '
                       'parse stage has stored it (docs/api/processing.md "The parse stage")')
    stored = deltas.manifest(family)
    if stored is not None:
        count = int(stored.get('pageCount') or 0)
        part = next((p for p in stored['parts'] if int(p['first']) <= page <= int(p['last'])), None)
        nodes = deltas.read_part(part['key']) if part is not None else []
    else:
        nodes = deltas.load_nodes(family)
        count = sum(1 for n in nodes if n.get('nodeType') == 'page')
    ordered = deltas.ordered([n for n in nodes if _page_of(n) == page])
    page_node = next((n for n in ordered if n.get('nodeType') == 'page'), None)
    if page_node is None:
        raise NotFound(f'Page {page} does not exist in the parsed document: it has {count} '
                       f'page{"s" if count != 1 else ""}', pageCount=count)
    kinds = {n['id']: n.get('nodeType') for n in ordered}
    words: list[dict[str, Any]] = []
    truncated = False
    for node in ordered:
        if node.get('nodeType') != 'word':
            continue
        if len(words) >= limits.MAX_PAGE_WORDS:
            truncated = True
            break
        features = node.get('features') or {}
        word = {'id': node['id'], 'text': node.get('content') or '', 'bbox': features.get('bbox'),
                'lineId': node.get('parentId') if kinds.get(node.get('parentId')) == 'line' else None}
        if features.get('confidence') is not None:
            word['confidence'] = features['confidence']
        words.append(word)
    features = page_node.get('features') or {}
    return {'page': page, 'pageCount': count, 'width': features.get('width'), 'height': features.get('height'),
            'words': words, 'truncated': truncated}


def _page_of(node: dict[str, Any]) -> int | None:
    features = node.get('features')
    value = features.get('page') if isinstance(features, dict) else None
    return value if isinstance(value, int) else None
