"""Document routes beyond CRUD (docs/api/documents.md):

  POST /api/document-stores/{id}/multipart-upload-request?path=&contentType=&contentLength=
  POST /api/document-stores/{id}/multipart-upload-part-urls     {uploadId, storageKey, partNumbers}
  POST /api/document-stores/{id}/multipart-upload-complete      {uploadId, storageKey, parts} -> 201
  POST /api/document-stores/{id}/multipart-upload-abort         {uploadId, storageKey} -> 204
  POST /api/document-stores/{id}/upload?path=                   raw bytes or multipart/form-data -> 201
  GET  /api/document-stores/{id}/stats
  GET  /api/document-families/{id}/content                      307 to a presigned GET
  GET|PUT /api/document-families/{id}/document                  {version, nodes}
  POST /api/content-objects/{id}/validate                       {data?}
  POST /api/batch-update
(POST /api/linked-deltas is the registry's create route: features/documents/linked_deltas.py.)
"""
from __future__ import annotations

from chalice import Blueprint, Response

from chalicelib.core import limits
from chalicelib.core.errors import BadRequest
from chalicelib.kernel.http.docmeta import describe, ref, schema
from chalicelib.kernel.http.request import (
    ANY_CONTENT,
    JSON_CONTENT,
    body,
    caller,
    created,
    no_content,
    query_value,
    raw_body,
    request,
)

bp = Blueprint(__name__)

# Request bodies API Gateway must hand over as bytes (its binaryMediaTypes; app.py): everything a
# small upload may send. Other types arrive as text (send files as application/octet-stream).
BINARY_TYPES = ['application/octet-stream', 'multipart/form-data', 'application/pdf', 'application/zip',
                'image/png', 'image/jpeg', 'image/tiff', 'image/gif', 'image/webp',
                'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
                'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
                'application/msword', 'application/vnd.ms-excel']

_STORE = '/api/document-stores/{id}'


@bp.route(f'{_STORE}/multipart-upload-request', methods=['POST'], name='requestMultipartUpload',
          content_types=ANY_CONTENT)
def multipart_request(id):
    from chalicelib.features.documents import service as documents  # noqa: PLC0415 - lazy: cold start
    return documents.request_upload(id, path=query_value('path'), content_type=query_value('contentType'),
                                    content_length=query_value('contentLength'), part_size=query_value('partSize'),
                                    principal=caller())


@bp.route(f'{_STORE}/multipart-upload-part-urls', methods=['POST'], name='getMultipartUploadPartUrls',
          content_types=JSON_CONTENT)
def multipart_part_urls(id):
    from chalicelib.features.documents import service as documents  # noqa: PLC0415 - lazy: cold start
    return documents.part_urls(id, body(), caller())


@bp.route(f'{_STORE}/multipart-upload-complete', methods=['POST'], name='completeMultipartUpload',
          content_types=JSON_CONTENT)
def multipart_complete(id):
    from chalicelib.features.documents import service as documents  # noqa: PLC0415 - lazy: cold start
    return created(documents.complete(id, body(), caller()))


@bp.route(f'{_STORE}/multipart-upload-abort', methods=['POST'], name='abortMultipartUpload',
          content_types=JSON_CONTENT)
def multipart_abort(id):
    from chalicelib.features.documents import service as documents  # noqa: PLC0415 - lazy: cold start
    documents.abort(id, body(), caller())
    return no_content()


@bp.route(f'{_STORE}/upload', methods=['POST'], name='uploadDocument', content_types=ANY_CONTENT)
def upload(id):
    from chalicelib.features.documents import service as documents  # noqa: PLC0415 - lazy: cold start
    headers = request().headers or {}
    return created(documents.upload_small(id, path=query_value('path'), data=raw_body(),
                                          content_type=headers.get('content-type'), principal=caller()))


@bp.route(f'{_STORE}/stats', methods=['GET'], name='getDocumentStoreStats', content_types=ANY_CONTENT)
def store_stats(id):
    from chalicelib.features.documents import service as documents  # noqa: PLC0415 - lazy: cold start
    return documents.store_stats(id, caller())


@bp.route('/api/document-families/{id}/content', methods=['GET'], name='getDocumentFamilyContent',
          content_types=ANY_CONTENT)
def family_content(id):
    from chalicelib.features.documents import service as documents  # noqa: PLC0415 - lazy: cold start
    url = documents.content_url(id, caller())
    return Response(body='', status_code=307, headers={'Location': url, 'Cache-Control': 'no-store',
                                                        'Content-Type': 'application/json'})


@bp.route('/api/document-families/{id}/document', methods=['GET'], name='getDocumentContent',
          content_types=ANY_CONTENT)
def get_document(id):
    from chalicelib.features.documents import deltas  # noqa: PLC0415 - lazy: cold start
    page = query_value('page')
    if page is not None and (not page.isascii() or not page.isdigit() or not 1 <= int(page) <= limits.MAX_PAGE):
        raise BadRequest("Parameter 'page' must be a page number (1 or more)")
    return deltas.read_document(id, caller(), page=None if page is None else int(page))


@bp.route('/api/document-families/{id}/document', methods=['PUT'], name='putDocumentContent',
          content_types=JSON_CONTENT)
def put_document(id):
    from chalicelib.features.documents import deltas  # noqa: PLC0415 - lazy: cold start
    return deltas.replace_document(id, body(), caller())


@bp.route('/api/content-objects/{id}/validate', methods=['POST'], name='validateContentObject',
          content_types=JSON_CONTENT)
def validate(id):
    from chalicelib.features.documents import validation  # noqa: PLC0415 - lazy: cold start
    return validation.validate(id, body(), caller())


@bp.route('/api/batch-update', methods=['POST'], name='batchUpdate', content_types=JSON_CONTENT)
def batch_update():
    from chalicelib.features.documents import batch  # noqa: PLC0415 - lazy: cold start
    return batch.batch_update(body(), caller())


# ----------------------------------------------------------------------------- OpenAPI

_SESSION = schema('MultipartUploadSession', {
    'type': 'object', 'required': ['uploadId', 'storageKey', 'expiresAt'],
    'description': 'An S3 multipart upload bound to one document store and caller (docs/api/documents.md).',
    'properties': {'uploadId': {'type': 'string'}, 'storageKey': {'type': 'string', 'description': 'object key'},
                   'expiresAt': {'type': 'string', 'format': 'date-time'},
                   'contentLength': {'type': 'integer', 'description': 'the declared total bytes (only when '
                                     'contentLength was given)'},
                   'partSize': {'type': 'integer', 'description': 'bytes of every part but the last, which is '
                                'shorter; each part URL is signed for its exact length (only with contentLength)'},
                   'partCount': {'type': 'integer', 'description': 'how many parts: ceil(contentLength / partSize) '
                                 '(only with contentLength)'}}})
_SESSION_REF = schema('MultipartUploadSessionRef', {
    'type': 'object', 'required': ['uploadId', 'storageKey'],
    'properties': {'uploadId': {'type': 'string'}, 'storageKey': {'type': 'string'}}})
_PART_URLS_REQUEST = schema('MultipartUploadPartUrlsRequest', {'allOf': [_SESSION_REF, {
    'type': 'object', 'required': ['partNumbers'], 'properties': {'partNumbers': {
        'type': 'array', 'minItems': 1, 'maxItems': limits.MAX_PARTS_PER_URL_REQUEST,
        'items': {'type': 'integer', 'minimum': 1, 'maximum': limits.MAX_PART_NUMBER}}}}]})
_PART_URLS = schema('MultipartUploadPartUrls', {'allOf': [_SESSION, {
    'type': 'object', 'required': ['parts'], 'properties': {'parts': {'type': 'array', 'items': {
        'type': 'object', 'required': ['partNumber', 'url'],
        'properties': {'partNumber': {'type': 'integer'}, 'url': {'type': 'string', 'format': 'uri'},
                       'size': {'type': 'integer', 'description': 'the exact bytes this part must carry (a session '
                                'that declared contentLength)'}}}}}}]})
_COMPLETE = schema('MultipartUploadCompleteRequest', {'allOf': [_SESSION_REF, {
    'type': 'object', 'required': ['parts'], 'properties': {'parts': {
        'type': 'array', 'minItems': 1, 'maxItems': limits.MAX_PART_NUMBER, 'items': {
            'type': 'object', 'required': ['partNumber', 'etag'],
            'properties': {'partNumber': {'type': 'integer', 'minimum': 1, 'maximum': limits.MAX_PART_NUMBER},
                           'etag': {'type': 'string', 'minLength': 1}}}}}}]})
_NODE = schema('DocumentNode', {
    'type': 'object', 'required': ['id'],
    'properties': {'id': {'type': 'string', 'minLength': 1, 'maxLength': 200},
                   'parentId': {'type': 'string', 'nullable': True}, 'nodeType': {'type': 'string'},
                   'content': {'type': 'string', 'nullable': True}, 'index': {'type': 'integer'},
                   'features': {'type': 'object', 'additionalProperties': True}}})
_DOCUMENT = schema('DocumentContent', {
    'type': 'object', 'required': ['version', 'nodes'],
    'properties': {'version': {'type': 'integer', 'description': '0 before the first save'},
                   'nodes': {'type': 'array', 'items': _NODE},
                   # a parsed document, stored by page ranges (docs/api/documents.md "Large documents")
                   'pageCount': {'type': 'integer'}, 'nodeCount': {'type': 'integer'},
                   'firstPage': {'type': 'integer'}, 'lastPage': {'type': 'integer'},
                   'nextPage': {'type': 'integer', 'nullable': True}}})
_VALIDATION = schema('ContentObjectValidationResult', {
    'type': 'object', 'required': ['taxonPath', 'name', 'passed'],
    'properties': {'taxonPath': {'type': 'string'}, 'name': {'type': 'string'}, 'passed': {'type': 'boolean'},
                   'message': {'type': 'string'}, 'error': {'type': 'string'}}})
_OUTCOME = {'type': 'object', 'required': ['success'], 'properties': {
    'success': {'type': 'boolean'}, 'error': {'type': 'string'}, 'reason': {'type': 'string'}}}
_BATCH_REQUEST = schema('BatchUpdateRequest', {
    'type': 'object', 'required': ['projectId'],
    'properties': {
        'projectId': {'type': 'string', 'format': 'uuid'},
        'documentFamilyIds': {'type': 'array', 'items': {'type': 'string', 'format': 'uuid'}},
        'documentStatus': {'type': 'object', 'properties': {'id': {'type': 'string'}, 'slug': {'type': 'string'}}},
        'labelUpdates': {'type': 'object', 'properties': {
            'newLabels': {'type': 'array', 'items': {'type': 'string'}},
            'removedLabels': {'type': 'array', 'items': {'type': 'string'}}}},
        'notes': {'type': 'object', 'properties': {
            'newNotes': {'type': 'array', 'items': {}},
            'deletedNotes': {'type': 'array', 'items': {'type': 'string'}}}},
        'deletes': {'type': 'object', 'properties': {
            'documentFamilyIds': {'type': 'array', 'items': {'type': 'string', 'format': 'uuid'}}}},
        'task': {'type': 'object', 'required': ['id'], 'additionalProperties': True,
                 'properties': {'id': {'type': 'string'}, 'changeSequence': {'type': 'integer'},
                                'statusSlug': {'type': 'string'}, 'assigneeId': {'type': 'string', 'nullable': True}}},
        'taskGroup': {'type': 'object', 'required': ['id'], 'additionalProperties': True,
                      'properties': {'id': {'type': 'string'}}}}})
_BATCH_RESULT = schema('BatchUpdateResult', {
    'type': 'object', 'required': ['contentObjectUpdates', 'task', 'warnings'],
    'properties': {
        'contentObjectUpdates': {'type': 'array', 'items': {'allOf': [_OUTCOME, {
            'type': 'object', 'required': ['documentFamilyId'],
            'properties': {'documentFamilyId': {'type': 'string'}, 'deleted': {'type': 'boolean'},
                           'documentFamily': ref('DocumentFamily')}}]}},
        'task': {'allOf': [_OUTCOME, {'type': 'object', 'properties': {'task': ref('Task')}}], 'nullable': True},
        'taskGroup': {'allOf': [_OUTCOME, {'type': 'object', 'properties': {'taskGroup': ref('TaskGroup')}}],
                      'nullable': True},
        'warnings': {'type': 'array', 'items': {'type': 'string'}}}})

_UPLOAD_TEXT = ('Files go to S3 under a key the server makes (organization, store, a fresh id); path is the '
                "file's path in the store ('..' refused, no leading '/'). ")
_Q = [
    {'name': 'path', 'in': 'query', 'required': False,
     'schema': {'type': 'string', 'maxLength': limits.MAX_DOCUMENT_PATH},
     'description': 'target path inside the store (default: a generated name)'},
    {'name': 'contentType', 'in': 'query', 'required': False, 'schema': {'type': 'string'},
     'description': 'MIME type (default application/octet-stream)'},
    {'name': 'contentLength', 'in': 'query', 'required': False, 'schema': {'type': 'integer', 'minimum': 1},
     'description': 'total bytes (at most UPLOAD_MAX_BYTES, default 5 GiB); when given, complete checks it'},
    {'name': 'partSize', 'in': 'query', 'required': False,
     'schema': {'type': 'integer', 'minimum': limits.MIN_PART_SIZE, 'maximum': limits.MAX_PART_SIZE},
     'description': 'bytes per part (needs contentLength; default: the smallest whole MiB of at least 5 MiB '
                    'that needs no more than 10,000 parts)'}]
_W = [400, 401, 403, 404, 409, 413, 415, 429, 503]
describe('requestMultipartUpload', summary='Start a multipart upload session', tags=['document-stores'],
         description=_UPLOAD_TEXT + 'The session expires at expiresAt (UPLOAD_SESSION_SECONDS, default 24 h).',
         request=None, parameters=_Q, responses={200: _SESSION}, errors=_W)
describe('getMultipartUploadPartUrls', summary='Presigned part URLs of a multipart upload', tags=['document-stores'],
         description='Presigned S3 UploadPart URLs (PUT each part with plain HTTP, keep the ETag header), '
                     'expiring no later than the session; at most 1,000 part numbers (1-10,000) per request.',
         request=_PART_URLS_REQUEST, responses={200: _PART_URLS}, errors=_W)
describe('completeMultipartUpload', summary='Complete a multipart upload into a document family',
         tags=['document-stores'],
         description='Completes the S3 upload and stores the family, its first content object and the store '
                     'counters in one transaction (the object is deleted if that fails). Idempotent on uploadId: '
                     'a repeated complete answers the same family.',
         request=_COMPLETE, responses={201: ref('DocumentFamily')}, errors=_W)
describe('abortMultipartUpload', summary='Abort a multipart upload', tags=['document-stores'],
         request=_SESSION_REF, responses={204: None}, errors=_W)
describe('uploadDocument', summary='Upload a small file as a new document family', tags=['document-stores'],
         description=_UPLOAD_TEXT + 'The body is the file (any content type, up to SMALL_UPLOAD_MAX_BYTES, '
                     'default 5 MiB), or multipart/form-data with a "file" part.',
         request={'type': 'string', 'format': 'binary'}, parameters=_Q[:1],
         responses={201: ref('DocumentFamily')}, errors=_W)
describe('getDocumentStoreStats', summary='Counters of a document store', tags=['document-stores'],
         responses={200: {'type': 'object', 'properties': {
             'documentStoreId': {'type': 'string'}, 'documentFamilies': {'type': 'integer'},
             'bytes': {'type': 'integer'}}}}, errors=[400, 401, 403, 404, 429, 503])
describe('getDocumentFamilyContent', summary="Read a family's uploaded file", tags=['document-families'],
         description='307 to a short-lived presigned GET (CONTENT_URL_SECONDS, default 300 s): the exact bytes. '
                     '404 when the family has no uploaded file.',
         responses={307: None}, errors=[400, 401, 403, 404, 429, 503])
describe('getDocumentContent', summary="A family's document content", tags=['document-families'],
         description='{version, nodes}: version 0 with no nodes before the first save. Nodes come parents first '
                     '(siblings by index); nodes on a parent cycle follow, in stored order. A parsed document '
                     '(stored by page ranges) adds pageCount, nodeCount, firstPage, lastPage and nextPage: it is '
                     'answered whole when it holds at most 4 MiB, else from page (default 1) as many page ranges '
                     'as fit 4 MiB; nextPage (null at the end) is the page to ask for next '
                     '(docs/api/documents.md "Large documents").',
         parameters=[{'name': 'page', 'in': 'query', 'required': False,
                      'schema': {'type': 'integer', 'minimum': 1},
                      'description': 'a parsed document: the first page of the answer'}],
         responses={200: _DOCUMENT}, errors=[400, 401, 403, 404, 429, 503])
describe('putDocumentContent', summary="Replace a family's document content", tags=['document-families'],
         description='version must be the current version (409 otherwise, with the current one); saves a new '
                     'immutable version (version + 1).', request=_DOCUMENT, responses={200: _DOCUMENT}, errors=_W)
describe('validateContentObject', summary='Evaluate the validation rules of a content object',
         tags=['content-objects'],
         description='Each documentTaxonValidations entry: validation.ruleFormula (JSONata) over the group at '
                     "taxonPath of data (default metadata.extractedData); '../' steps reach enclosing groups. "
                     'Disabled rules are skipped; an evaluation error is that entry\'s error.',
         request={'type': 'object', 'properties': {'data': {}}},
         responses={200: {'type': 'array', 'items': _VALIDATION}}, errors=[400, 401, 403, 404, 413, 415, 429, 503])
describe('batchUpdate', summary='Save a batch of document and task writes', tags=['batch'],
         description='Each family\'s writes are one transaction; every write that matters reports its own '
                     'outcome; optional bookkeeping (notes) that fails is a warning.',
         request=_BATCH_REQUEST, responses={200: _BATCH_RESULT}, errors=[400, 401, 403, 404, 413, 415, 429, 503])
