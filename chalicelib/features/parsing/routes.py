"""The parsed document's routes (docs/api/documents.md "Parsed documents"):

  GET  /api/document-families/{id}/text                                    the family's text (text/plain)
  GET  /api/stores/{orgSlug}/{storeSlug}/families/{id}                     the SDK's family view
  GET  /api/stores/{orgSlug}/{storeSlug}/families/{id}/objects/{coId}/content
                                                                           307: original bytes / KDDB
  POST /api/stores/{orgSlug}/{storeSlug}/families/{id}/objects/{coId}/content   a KDDB: a new version

(``GET /api/document-families/{id}/document`` is the documents feature's route; reprocessing is
the execution engine's: features/work/parse_stage.py.)
"""
from __future__ import annotations

from chalice import Blueprint, Response

from chalicelib.core import limits
from chalicelib.core.errors import BadRequest
from chalicelib.kernel.http.docmeta import describe, ref
from chalicelib.kernel.http.request import ANY_CONTENT, caller, query_value, raw_body, request

bp = Blueprint(__name__)

_FAMILY = '/api/stores/{orgSlug}/{storeSlug}/families/{id}'

def _page() -> int | None:
    page = query_value('page')
    if page is not None and (not page.isascii() or not page.isdigit() or not 1 <= int(page) <= limits.MAX_PAGE):
        raise BadRequest("Parameter 'page' must be a page number (1 or more)")
    return None if page is None else int(page)


@bp.route('/api/document-families/{id}/text', methods=['GET'], name='getDocumentFamilyText',
          content_types=ANY_CONTENT)
def family_text(id):
    from chalicelib.features.parsing import serving  # noqa: PLC0415 - lazy: cold start
    answer = serving.text_of(id, caller(), page=_page())
    headers = {'Content-Type': 'text/plain; charset=utf-8', 'X-Document-Version': str(answer['version']),
               'X-Text-Truncated': 'true' if answer['truncated'] else 'false'}
    for name, header in (('pageCount', 'X-Page-Count'), ('firstPage', 'X-First-Page'),
                         ('lastPage', 'X-Last-Page'), ('nextPage', 'X-Next-Page')):
        if answer.get(name) is not None:
            headers[header] = str(answer[name])
    return Response(body=answer['text'], status_code=200, headers=headers)


@bp.route(_FAMILY, methods=['GET'], name='getStoreFamily', content_types=ANY_CONTENT)
def store_family(orgSlug, storeSlug, id):
    from chalicelib.features.parsing import serving  # noqa: PLC0415 - lazy: cold start
    return serving.sdk_family(orgSlug, storeSlug, id, caller())


@bp.route(f'{_FAMILY}/objects/{{coId}}/content', methods=['GET'], name='getContentObjectContent',
          content_types=ANY_CONTENT)
def object_content(orgSlug, storeSlug, id, coId):
    from chalicelib.features.parsing import serving  # noqa: PLC0415 - lazy: cold start
    url = serving.object_content_url(orgSlug, storeSlug, id, coId, caller())
    return Response(body='', status_code=307, headers={'Location': url, 'Cache-Control': 'no-store',
                                                        'Content-Type': 'application/json'})


@bp.route(f'{_FAMILY}/objects/{{coId}}/content', methods=['POST'], name='putContentObjectContent',
          content_types=ANY_CONTENT)
def put_object_content(orgSlug, storeSlug, id, coId):
    from chalicelib.features.parsing import serving  # noqa: PLC0415 - lazy: cold start
    headers = request().headers or {}
    return serving.put_kddb(orgSlug, storeSlug, id, coId, data=raw_body(), content_type=headers.get('content-type'),
                            principal=caller())


# The SDK builds its store paths from the store's ref ``org/slug:version`` with ':' read as '/'
# (``.../{storeSlug}/None/families/...`` for a store without a version): the version segment
# is accepted and ignored, as on the store file API (features/documents/store_fs_routes.py).
_VERSIONED = '/api/stores/{orgSlug}/{storeSlug}/{version}/families/{id}'


@bp.route(_VERSIONED, methods=['GET'], name='getStoreFamilyVersioned', content_types=ANY_CONTENT)
def store_family_versioned(orgSlug, storeSlug, version, id):
    return store_family(orgSlug, storeSlug, id)


@bp.route(f'{_VERSIONED}/objects/{{coId}}/content', methods=['GET'], name='getContentObjectContentVersioned',
          content_types=ANY_CONTENT)
def object_content_versioned(orgSlug, storeSlug, version, id, coId):
    return object_content(orgSlug, storeSlug, id, coId)


@bp.route(f'{_VERSIONED}/objects/{{coId}}/content', methods=['POST'], name='putContentObjectContentVersioned',
          content_types=ANY_CONTENT)
def put_object_content_versioned(orgSlug, storeSlug, version, id, coId):
    return put_object_content(orgSlug, storeSlug, id, coId)


# ----------------------------------------------------------------------------- OpenAPI

_SLUGS = [{'name': 'orgSlug', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
           'description': "the organization's slug"},
          {'name': 'storeSlug', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
           'description': "the document store's slug"}]
_PAGE = {'name': 'page', 'in': 'query', 'required': False, 'schema': {'type': 'integer', 'minimum': 1},
         'description': 'a parsed document: the first page of the answer (default 1)'}
_R = [400, 401, 403, 404, 409, 429, 503]

describe('getDocumentFamilyText', summary="A document family's text", tags=['document-families'],
         description='The text of the family\'s current document as text/plain (UTF-8): the topmost node holding '
                     'text speaks for what is below it (a line for its words, a paragraph for its lines), a table '
                     'row without text is its cells joined by tabs, lines end with \\n and a page starts with a '
                     'form feed (\\f), as pdftotext writes. At most 4 MiB per answer: X-Page-Count, X-First-Page, '
                     'X-Last-Page and X-Next-Page (absent at the end) page through a parsed document; '
                     'X-Text-Truncated: true when one page range alone is larger; X-Document-Version names the '
                     'version read. Empty before the document is parsed (docs/api/documents.md "Text").',
         parameters=[_PAGE],
         responses={200: {'content': {'text/plain': {'schema': {'type': 'string'}}}}}, errors=_R)
describe('getStoreFamily', summary='A document family, as the SDK reads it', tags=['stores'],
         description='The DocumentFamily plus storeRef ("orgSlug/storeSlug") and contentObjects: the NATIVE '
                     'object (the upload) first, then the DOCUMENT objects the parse stage derived '
                     '(docs/api/documents.md "Parsed documents"). 404 when the family is not in that store.',
         parameters=_SLUGS, responses={200: ref('DocumentFamily')}, errors=_R)
describe('getContentObjectContent', summary="A content object's content", tags=['stores'],
         description='307 to a short-lived presigned GET: the original bytes for the NATIVE object; for a '
                     'DOCUMENT object, the family\'s current document as a KDDB file (the SQLite document the '
                     'SDK opens with Document.from_kddb; docs/api/documents.md "KDDB").',
         parameters=_SLUGS, responses={307: None}, errors=_R)
describe('putContentObjectContent', summary="Store a family's document from a KDDB file", tags=['stores'],
         description='multipart/form-data with the KDDB as the "document" (or "file") part, as the SDK\'s '
                     'update_document sends it, or the KDDB as the body: the family\'s next document version. '
                     'At most 5 MiB and 100,000 nodes; a file that is not a readable KDDB is 400 naming why.',
         request={'type': 'string', 'format': 'binary'}, parameters=_SLUGS,
         responses={200: ref('DocumentFamily')}, errors=[400, 401, 403, 404, 409, 413, 429, 503])
_VERSION = {'name': 'version', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
            'description': 'any value (the SDK sends the store version, or "None"): ignored'}
describe('getStoreFamilyVersioned', summary='A document family, as the SDK reads it (with a store version)',
         tags=['stores'], description='As getStoreFamily; the version segment is ignored.',
         parameters=[*_SLUGS, _VERSION], responses={200: ref('DocumentFamily')}, errors=_R)
describe('getContentObjectContentVersioned', summary="A content object's content (with a store version)",
         tags=['stores'], description='As getContentObjectContent; the version segment is ignored.',
         parameters=[*_SLUGS, _VERSION], responses={307: None}, errors=_R)
describe('putContentObjectContentVersioned', summary="Store a family's document from a KDDB file (with a store "
         'version)', tags=['stores'], description='As putContentObjectContent; the version segment is ignored.',
         request={'type': 'string', 'format': 'binary'}, parameters=[*_SLUGS, _VERSION],
         responses={200: ref('DocumentFamily')}, errors=[400, 401, 403, 404, 409, 413, 429, 503])


# ----------------------------------------------------------------------------- page images and words

def _page_number(page: str) -> int:
    if not page.isascii() or not page.isdigit() or not 1 <= int(page) <= limits.MAX_PAGE:
        raise BadRequest(f"Path parameter 'page' must be a page number from 1 to {limits.MAX_PAGE:,}")
    return int(page)


def _dpi() -> int:
    value = query_value('dpi')
    if value is None:
        return limits.PAGE_IMAGE_DEFAULT_DPI
    if not value.isascii() or not value.isdigit() or not (
            limits.PAGE_IMAGE_MIN_DPI <= int(value) <= limits.PAGE_IMAGE_MAX_DPI):
        raise BadRequest(f"Parameter 'dpi' must be a whole number from {limits.PAGE_IMAGE_MIN_DPI} to "
                         f'{limits.PAGE_IMAGE_MAX_DPI} (default {limits.PAGE_IMAGE_DEFAULT_DPI})')
    return int(value)


@bp.route('/api/document-families/{id}/pages/{page}/image', methods=['GET'], name='getDocumentFamilyPageImage')
def page_image(id, page):
    from chalicelib.features.parsing import pages  # noqa: PLC0415 - lazy: cold start
    number, dpi = _page_number(page), _dpi()
    return Response(body=pages.page_image(id, number, dpi, caller()), status_code=200,
                    headers={'Cache-Control': 'no-store'})


@bp.route('/api/document-families/{id}/pages/{page}/words', methods=['GET'], name='getDocumentFamilyPageWords')
def page_words(id, page):
    from chalicelib.features.parsing import pages  # noqa: PLC0415 - lazy: cold start
    return pages.page_words(id, _page_number(page), caller())


_PAGE_PATH = {'name': 'page', 'in': 'path', 'required': True,
              'schema': {'type': 'integer', 'minimum': 1, 'maximum': limits.MAX_PAGE},
              'description': 'the page, from 1'}
_DPI = {'name': 'dpi', 'in': 'query', 'required': False,
        'schema': {'type': 'integer', 'minimum': limits.PAGE_IMAGE_MIN_DPI, 'maximum': limits.PAGE_IMAGE_MAX_DPI,
                   'default': limits.PAGE_IMAGE_DEFAULT_DPI},
        'description': 'dots per inch asked, rounded up to the next of '
                       f'{", ".join(map(str, limits.PAGE_IMAGE_DPI_STEPS))} (the answer\'s dpi is the one used: '
                       'that step, or lower when the page would pass '
                       f'{limits.PAGE_IMAGE_MAX_PIXELS:,} pixels or {limits.PAGE_IMAGE_MAX_SIDE:,} pixels a side, '
                       "or an image file's own resolution)"}
_PAGE_IMAGE = {'type': 'object', 'required': ['url', 'expiresIn', 'page', 'pageCount', 'dpi', 'width', 'height',
                                              'contentType'],
               'properties': {
                   'url': {'type': 'string', 'format': 'uri',
                           'description': 'a presigned GET of the PNG (no API token in it)'},
                   'expiresIn': {'type': 'integer', 'description': 'seconds the URL stays valid'},
                   'page': {'type': 'integer'}, 'pageCount': {'type': 'integer'},
                   'dpi': {'type': 'integer', 'description': 'the dpi used: pixel = point * dpi / 72'},
                   'width': {'type': 'integer', 'description': 'pixels'},
                   'height': {'type': 'integer', 'description': 'pixels'},
                   'contentType': {'type': 'string', 'enum': ['image/png']}}}
_WORD = {'type': 'object', 'required': ['id', 'text', 'bbox', 'lineId'], 'properties': {
    'id': {'type': 'string', 'description': "the word node's id (e.g. p1.l3.w2)"},
    'text': {'type': 'string'},
    'bbox': {'type': 'array', 'nullable': True, 'items': {'type': 'number'}, 'minItems': 4, 'maxItems': 4,
             'description': '[x0, y0, x1, y1] in points from the top-left of the page'},
    'confidence': {'type': 'number', 'description': "OCR's confidence, 0-1 (OCR-read words only)"},
    'lineId': {'type': 'string', 'nullable': True, 'description': "the word's line node"}}}
_PAGE_WORDS = {'type': 'object', 'required': ['page', 'pageCount', 'width', 'height', 'words', 'truncated'],
               'properties': {
                   'page': {'type': 'integer'}, 'pageCount': {'type': 'integer'},
                   'width': {'type': 'number', 'nullable': True, 'description': 'points'},
                   'height': {'type': 'number', 'nullable': True, 'description': 'points'},
                   'words': {'type': 'array', 'items': _WORD, 'maxItems': limits.MAX_PAGE_WORDS},
                   'truncated': {'type': 'boolean',
                                 'description': f'true when the page holds more than {limits.MAX_PAGE_WORDS:,} words'}}}
describe('getDocumentFamilyPageImage', summary="A document family's page as an image", tags=['document-families'],
         description='A presigned GET (valid expiresIn = 300 s) of page `page` drawn as a PNG from the uploaded '
                     'file: a PDF page by pdfium, a PNG/JPEG/TIFF page (a TIFF frame) scaled from the image, '
                     'before or after the parse. The asked dpi is rounded up to the next of '
                     f'{", ".join(map(str, limits.PAGE_IMAGE_DPI_STEPS))}; drawn once per page and step and kept '
                     'in storage; later calls '
                     'sign the stored image. 409 for a document without pages (Word, Excel, HTML, text, CSV); '
                     '404 for a page past the last (the error carries pageCount); 400 for a dpi outside '
                     f'{limits.PAGE_IMAGE_MIN_DPI}-{limits.PAGE_IMAGE_MAX_DPI}; 422 when the file cannot be drawn '
                     '(docs/api/documents.md "Page images and words").',
         parameters=[_PAGE_PATH, _DPI], responses={200: _PAGE_IMAGE},
         errors=[400, 401, 403, 404, 409, 422, 429, 503])
describe('getDocumentFamilyPageWords', summary="The words of a document family's page, with their boxes",
         tags=['document-families'],
         description='The words of page `page` of the family\'s parsed document in reading order, each with its '
                     'node id, text, box in points from the top-left (as the nodes\' features.bbox) and line; '
                     'width and height are the page\'s in points (pixel = point * dpi / 72 on its page image). '
                     '409 before the document is parsed; 404 for a page it does not have '
                     '(docs/api/documents.md "Page images and words").',
         parameters=[_PAGE_PATH], responses={200: _PAGE_WORDS}, errors=[400, 401, 403, 404, 409, 429, 503])
