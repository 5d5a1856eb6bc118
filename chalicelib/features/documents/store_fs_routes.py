"""The store file API of the platform's SDK (``DocumentStoreEndpoint``) and CLI (``kodexa upload
<org>/<store> <file>``), docs/api/sdk-compatibility.md; features/documents/store_fs.py:

  GET    /api/stores/{orgSlug}/{storeSlug}                          the store, as the SDK reads stores
  POST   /api/stores/{orgSlug}/{storeSlug}[/{version}]/fs?path=     file (multipart "file" part) -> 201
  GET    /api/stores/{orgSlug}/{storeSlug}[/{version}]/fs?path=     307 to the bytes (meta=true: the family)
  DELETE /api/stores/{orgSlug}/{storeSlug}[/{version}]/fs?path=     204

The SDK builds ``/api/stores/{orgSlug}/{slug}/{version}/fs`` (``.../None/fs`` for a store without a
version): the version segment is accepted and ignored, whatever it holds.
"""
from __future__ import annotations

from chalice import Blueprint, Response

from chalicelib.core import limits
from chalicelib.core.errors import NotFound
from chalicelib.kernel.http.docmeta import describe, ref, schema
from chalicelib.kernel.http.request import (
    ANY_CONTENT,
    caller,
    created,
    no_content,
    query_value,
    raw_body,
    request,
)

bp = Blueprint(__name__)

_STORE = '/api/stores/{orgSlug}/{storeSlug}'
_META_TRUE = ('true', '1', 'yes')


@bp.route(_STORE, methods=['GET'], name='getStoreBySlug', content_types=ANY_CONTENT)
def get_store(orgSlug, storeSlug):
    from chalicelib.features.documents import store_fs  # noqa: PLC0415 - lazy: cold start
    try:
        return store_fs.get_store(orgSlug, storeSlug, caller())
    except NotFound:   # no document store holds the slug: a data store may (docs/api/extraction.md)
        from chalicelib.features.extraction import reads  # noqa: PLC0415 - lazy: cold start
        return reads.store_view(orgSlug, storeSlug, caller())


def _post(org_slug: str, store_slug: str) -> Response:
    from chalicelib.features.documents import store_fs  # noqa: PLC0415 - lazy: cold start
    headers = request().headers or {}
    return created(store_fs.upload(org_slug, store_slug, path=query_value('path'), data=raw_body(),
                                   content_type=headers.get('content-type'), principal=caller()))


def _get(org_slug: str, store_slug: str):
    from chalicelib.features.documents import store_fs  # noqa: PLC0415 - lazy: cold start
    if (query_value('meta') or '').lower() in _META_TRUE:
        return store_fs.family_at(org_slug, store_slug, query_value('path'), caller())
    url = store_fs.content_url_at(org_slug, store_slug, query_value('path'), caller())
    return Response(body='', status_code=307, headers={'Location': url, 'Cache-Control': 'no-store',
                                                        'Content-Type': 'application/json'})


def _delete(org_slug: str, store_slug: str) -> Response:
    from chalicelib.features.documents import store_fs  # noqa: PLC0415 - lazy: cold start
    store_fs.delete_at(org_slug, store_slug, query_value('path'), caller())
    return no_content()


@bp.route(f'{_STORE}/fs', methods=['POST'], name='uploadStoreFile', content_types=ANY_CONTENT)
def post_file(orgSlug, storeSlug):
    return _post(orgSlug, storeSlug)


@bp.route(f'{_STORE}/fs', methods=['GET'], name='getStoreFile', content_types=ANY_CONTENT)
def get_file(orgSlug, storeSlug):
    return _get(orgSlug, storeSlug)


@bp.route(f'{_STORE}/fs', methods=['DELETE'], name='deleteStoreFile', content_types=ANY_CONTENT)
def delete_file(orgSlug, storeSlug):
    return _delete(orgSlug, storeSlug)


@bp.route(f'{_STORE}/{{version}}/fs', methods=['POST'], name='uploadStoreFileVersioned',
          content_types=ANY_CONTENT)
def post_file_versioned(orgSlug, storeSlug, version):  # the version is ignored
    return _post(orgSlug, storeSlug)


@bp.route(f'{_STORE}/{{version}}/fs', methods=['GET'], name='getStoreFileVersioned', content_types=ANY_CONTENT)
def get_file_versioned(orgSlug, storeSlug, version):
    return _get(orgSlug, storeSlug)


@bp.route(f'{_STORE}/{{version}}/fs', methods=['DELETE'], name='deleteStoreFileVersioned',
          content_types=ANY_CONTENT)
def delete_file_versioned(orgSlug, storeSlug, version):
    return _delete(orgSlug, storeSlug)


# ----------------------------------------------------------------------------- OpenAPI

_STORE_VIEW = schema('StoreBySlug', {'allOf': [{'anyOf': [ref('DocumentStore'), ref('DataStore')]}, {
    'type': 'object', 'required': ['type', 'storeType', 'slug', 'orgSlug'],
    'properties': {'type': {'type': 'string', 'enum': ['store']},
                   'storeType': {'type': 'string', 'enum': ['DOCUMENT', 'TABLE'],
                                 'description': 'DOCUMENT: a document store; TABLE: a data store'},
                   'slug': {'type': 'string'},
                   'orgSlug': {'type': 'string', 'description': "the organization's slug"}}}]})
_PATH = {'name': 'path', 'in': 'query', 'schema': {'type': 'string', 'maxLength': limits.MAX_DOCUMENT_PATH},
         'description': "the file's path in the store ('\\' read as '/', empty and '.' segments dropped, "
                        "no leading '/', '..' refused)"}
_SLUGS = [{'name': 'orgSlug', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
           'description': "the organization's slug"},
          {'name': 'storeSlug', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
           'description': "the document store's slug (unique per project; see the description)"},
          {'name': 'version', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
           'description': 'any value (the SDK sends the store version, or "None"): ignored'}]
_VERSION_TEXT = ('The version segment (the SDK sends the store\'s version, or "None") is accepted and ignored. ')
_RESOLVE_TEXT = ('{orgSlug}/{storeSlug}: the document store with that slug in the organization (store slugs are '
                 'unique per project: when several of its projects hold one, 409). ')
_W = [400, 401, 403, 404, 409, 413, 415, 429, 503]
_R = [400, 401, 403, 404, 409, 429, 503]

describe('getStoreBySlug', summary='A document or data store by organization slug and store slug',
         tags=['stores'],
         description=_RESOLVE_TEXT + 'The DocumentStore record plus type "store", storeType "DOCUMENT", slug '
                     'and orgSlug (what the SDK reads a store by). When no document store of the organization '
                     'holds the slug, its data store with that slug: the DataStore record with storeType "TABLE" '
                     '(the SDK then answers a DataStoreEndpoint). 404 when neither does.',
         parameters=_SLUGS[:2], responses={200: _STORE_VIEW}, errors=_R)
for _suffix, _text in (('', ''), ('Versioned', _VERSION_TEXT)):
    describe(f'uploadStoreFile{_suffix}', summary='Upload a file into a document store', tags=['stores'],
             description=_RESOLVE_TEXT + _text + 'multipart/form-data with the file as the "file" part (or the '
                         'file as the body), at most SMALL_UPLOAD_MAX_BYTES (default 5 MiB); the other text '
                         'fields of the form become the family\'s metadata (strings). path defaults to the '
                         'file part\'s filename. A path may hold several families (uploads never overwrite).',
             request={'type': 'string', 'format': 'binary'},
             parameters=[*_SLUGS, {**_PATH, 'required': False}], responses={201: ref('DocumentFamily')}, errors=_W)
    describe(f'getStoreFile{_suffix}', summary="Read a file of a document store", tags=['stores'],
             description=_RESOLVE_TEXT + _text + 'The newest family at path: 307 to a short-lived presigned '
                         'GET of its bytes (CONTENT_URL_SECONDS, default 300 s); with meta=true, 200 and the '
                         'DocumentFamily. 404 when nothing is at path.',
             parameters=[*_SLUGS, {**_PATH, 'required': True},
                         {'name': 'meta', 'in': 'query', 'required': False, 'schema': {'type': 'boolean'},
                          'description': 'true: answer the DocumentFamily instead of its bytes'}],
             responses={200: ref('DocumentFamily'), 307: None}, errors=_R)
    describe(f'deleteStoreFile{_suffix}', summary='Delete a file of a document store', tags=['stores'],
             description=_RESOLVE_TEXT + _text + 'Deletes every family of the store at path (each with its '
                         'content objects, deltas and files). 404 when nothing is at path.',
             parameters=[*_SLUGS, {**_PATH, 'required': True}], responses={204: None}, errors=_R)
