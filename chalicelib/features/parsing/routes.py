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
