"""Reprocess routes (features/work/reprocess.py; docs/api/processing.md "Reprocess"):

  POST /api/document-families/{id}/reprocess                                  {assistantId?} -> 202 the run
  PUT  /api/stores/{orgSlug}/{storeSlug}/families/{id}/reprocess?assistantId=            the SDK's reprocess
  PUT  /api/stores/{orgSlug}/{storeSlug}/families/{id}/objects/{coId}/reprocess?assistantId=
"""
from __future__ import annotations

from chalice import Blueprint, Response

from chalicelib.kernel.http.docmeta import describe, ref
from chalicelib.kernel.http.request import ANY_CONTENT, caller, optional_body, query_value

bp = Blueprint(__name__)

_FAMILY = '/api/stores/{orgSlug}/{storeSlug}/families/{id}'


def _accepted(value) -> Response:
    return Response(body=value, status_code=202)


@bp.route('/api/document-families/{id}/reprocess', methods=['POST'], name='reprocessDocumentFamily',
          content_types=ANY_CONTENT)
def reprocess_family(id):
    from chalicelib.features.work import reprocess  # noqa: PLC0415 - lazy: cold start
    return _accepted(reprocess.reprocess_family(id, optional_body(), caller()))


@bp.route(f'{_FAMILY}/reprocess', methods=['PUT'], name='reprocessStoreFamily', content_types=ANY_CONTENT)
def reprocess_store_family(orgSlug, storeSlug, id):
    from chalicelib.features.work import reprocess  # noqa: PLC0415 - lazy: cold start
    return _accepted(reprocess.reprocess_in_store(orgSlug, storeSlug, id, caller(),
                                                  assistant_id=query_value('assistantId')))


@bp.route(f'{_FAMILY}/objects/{{coId}}/reprocess', methods=['PUT'], name='reprocessContentObject',
          content_types=ANY_CONTENT)
def reprocess_content_object(orgSlug, storeSlug, id, coId):
    from chalicelib.features.work import reprocess  # noqa: PLC0415 - lazy: cold start
    return _accepted(reprocess.reprocess_in_store(orgSlug, storeSlug, id, caller(),
                                                  assistant_id=query_value('assistantId'), content_object_id=coId))


_VERSIONED = '/api/stores/{orgSlug}/{storeSlug}/{version}/families/{id}'   # the SDK's path: version ignored


@bp.route(f'{_VERSIONED}/reprocess', methods=['PUT'], name='reprocessStoreFamilyVersioned', content_types=ANY_CONTENT)
def reprocess_store_family_versioned(orgSlug, storeSlug, version, id):
    return reprocess_store_family(orgSlug, storeSlug, id)


@bp.route(f'{_VERSIONED}/objects/{{coId}}/reprocess', methods=['PUT'], name='reprocessContentObjectVersioned',
          content_types=ANY_CONTENT)
def reprocess_content_object_versioned(orgSlug, storeSlug, version, id, coId):
    return reprocess_content_object(orgSlug, storeSlug, id, coId)


_TEXT = ('A new run of the parse stage over the family (the original bytes read again: a new document '
         'version, the derived content object replaced), then the pipeline of the assistant named by '
         'assistantId (it must be of the family\'s project and subscribe to the family), or without one of '
         'every subscribed assistant. 202 with the run (an execution, metadata.stage "parse", trigger '
         '"reprocess:<id>"); follow it at /api/executions/{id}. Needs write permission on the family '
         '(docs/api/processing.md "Reprocess").')
_SLUGS = [{'name': 'orgSlug', 'in': 'path', 'required': True, 'schema': {'type': 'string'}},
          {'name': 'storeSlug', 'in': 'path', 'required': True, 'schema': {'type': 'string'}}]
_ASSISTANT = {'name': 'assistantId', 'in': 'query', 'required': False, 'schema': {'type': 'string', 'format': 'uuid'},
              'description': 'the assistant whose pipeline runs after the parse (default: every subscribed one)'}
_E = [400, 401, 403, 404, 409, 429, 503]
describe('reprocessDocumentFamily', summary='Parse a document family again', tags=['document-families'],
         description=_TEXT + ' Body: optional {"assistantId"}.',
         request={'type': 'object', 'properties': {'assistantId': {'type': 'string', 'format': 'uuid'}}},
         responses={202: ref('Execution')}, errors=_E)
describe('reprocessStoreFamily', summary='Parse a document family again (the SDK\'s path)', tags=['stores'],
         description=_TEXT, parameters=[*_SLUGS, _ASSISTANT], responses={202: ref('Execution')}, errors=_E)
describe('reprocessContentObject', summary='Parse a document family again, named by its content object',
         tags=['stores'], description=_TEXT + ' The content object must be one of the family\'s.',
         parameters=[*_SLUGS, _ASSISTANT], responses={202: ref('Execution')}, errors=_E)
_VERSION = {'name': 'version', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
            'description': 'any value (the SDK sends the store version, or "None"): ignored'}
describe('reprocessStoreFamilyVersioned', summary="Parse a document family again (the SDK's path, with a store "
         'version)', tags=['stores'], description=_TEXT, parameters=[*_SLUGS, _VERSION, _ASSISTANT],
         responses={202: ref('Execution')}, errors=_E)
describe('reprocessContentObjectVersioned', summary='Parse a document family again, named by its content object '
         '(with a store version)', tags=['stores'], description=_TEXT, parameters=[*_SLUGS, _VERSION, _ASSISTANT],
         responses={202: ref('Execution')}, errors=_E)
