"""Extraction's REST front door (docs/api/extraction.md): thin adapters over
features/extraction/service.py and reads.py.

  POST /api/document-families/{id}/extract                      run a definition now (as a step would)
  GET  /api/stores/{orgSlug}/{storeSlug}/dataObjects            page of objects (format=csv|json: export)
  GET  /api/stores/{orgSlug}/{storeSlug}/dataObjects/{id}       one object
  GET  /api/stores/{orgSlug}/{storeSlug}/dataObjects/{id}/attributes
  PUT  /api/stores/{orgSlug}/{storeSlug}/dataObjects/{id}/attributes/{attributeId}   a reviewer's change
  GET  /api/stores/{orgSlug}/{storeSlug}/dataObjects/{id}/children
  GET  /api/stores/{orgSlug}/{storeSlug}/attributes             attributes across the store (filter)
  GET  /api/stores/{orgSlug}/{storeSlug}/taxonomies
  (each of these also with the SDK's version segment: /api/stores/{orgSlug}/{storeSlug}/{version}/...)
  PUT  /api/data-objects/{id}/attributes/{attributeId}          a reviewer's change, by object id
  GET  /api/exceptions                                          exceptions (dataStoreId, state, ...)
  PUT  /api/exceptions/{id}                                     close one by hand {open: false, closingComment}
  GET  /api/data-definitions/{id}/layout-memories               what reviewers taught the definition (a page)
  DELETE /api/data-definitions/{id}/layout-memories/{memoryId}  forget one kind of document
"""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.kernel.http.docmeta import OPERATIONS, describe, ref
from chalicelib.kernel.http.request import ANY_CONTENT, JSON_CONTENT, body, caller, one_based_pages, params

bp = Blueprint(__name__)

_STORE = '/api/stores/{orgSlug}/{storeSlug}'


def _reads():
    from chalicelib.features.extraction import reads  # noqa: PLC0415 - lazy: cold start
    return reads


@bp.route('/api/document-families/{id}/extract', methods=['POST'], name='extractDocumentFamily',
          content_types=JSON_CONTENT)
def extract(id):  # noqa: A002 - the route's name for it
    from chalicelib.features.extraction import service  # noqa: PLC0415 - lazy: cold start
    return service.extract_now(id, body(), caller())


@bp.route(f'{_STORE}/dataObjects', methods=['GET'], name='listStoreDataObjects', content_types=ANY_CONTENT)
def list_objects(orgSlug, storeSlug):
    return _reads().list_objects(orgSlug, storeSlug, params(), caller(), one_based=one_based_pages())


@bp.route(f'{_STORE}/dataObjects/{{objectId}}', methods=['GET'], name='getStoreDataObject',
          content_types=ANY_CONTENT)
def get_object(orgSlug, storeSlug, objectId):
    return _reads().get_object(orgSlug, storeSlug, objectId, caller())


@bp.route(f'{_STORE}/dataObjects/{{objectId}}/attributes', methods=['GET'], name='listDataObjectAttributes',
          content_types=ANY_CONTENT)
def get_attributes(orgSlug, storeSlug, objectId):
    return _reads().attributes(orgSlug, storeSlug, objectId, caller())


@bp.route(f'{_STORE}/dataObjects/{{objectId}}/attributes/{{attributeId}}', methods=['PUT'],
          name='reviewStoreDataAttribute', content_types=JSON_CONTENT)
def put_attribute(orgSlug, storeSlug, objectId, attributeId):
    return _reads().put_attribute(orgSlug, storeSlug, objectId, attributeId, body(), caller())


@bp.route(f'{_STORE}/dataObjects/{{objectId}}/children', methods=['GET'], name='listDataObjectChildren',
          content_types=ANY_CONTENT)
def children(orgSlug, storeSlug, objectId):
    return _reads().list_objects(orgSlug, storeSlug, params(), caller(), parent_id=objectId,
                                 one_based=one_based_pages())


@bp.route(f'{_STORE}/attributes', methods=['GET'], name='listStoreDataAttributes', content_types=ANY_CONTENT)
def list_attributes(orgSlug, storeSlug):
    return _reads().list_attributes(orgSlug, storeSlug, params(), caller())


@bp.route(f'{_STORE}/taxonomies', methods=['GET'], name='listStoreTaxonomies', content_types=ANY_CONTENT)
def taxonomies(orgSlug, storeSlug):
    return _reads().taxonomies(orgSlug, storeSlug, caller())


# The SDK builds its store paths with the store's version after the slug (``.../{storeSlug}/None/
# dataObjects``, as for the store file API): the same views, the version accepted and ignored.
_V = f'{_STORE}/{{version}}'


@bp.route(f'{_V}/dataObjects', methods=['GET'], name='listStoreDataObjectsVersioned', content_types=ANY_CONTENT)
def list_objects_v(orgSlug, storeSlug, version):
    return list_objects(orgSlug, storeSlug)


@bp.route(f'{_V}/dataObjects/{{objectId}}', methods=['GET'], name='getStoreDataObjectVersioned',
          content_types=ANY_CONTENT)
def get_object_v(orgSlug, storeSlug, version, objectId):
    return get_object(orgSlug, storeSlug, objectId)


@bp.route(f'{_V}/dataObjects/{{objectId}}/attributes', methods=['GET'], name='listDataObjectAttributesVersioned',
          content_types=ANY_CONTENT)
def get_attributes_v(orgSlug, storeSlug, version, objectId):
    return get_attributes(orgSlug, storeSlug, objectId)


@bp.route(f'{_V}/dataObjects/{{objectId}}/attributes/{{attributeId}}', methods=['PUT'],
          name='reviewStoreDataAttributeVersioned', content_types=JSON_CONTENT)
def put_attribute_v(orgSlug, storeSlug, version, objectId, attributeId):
    return put_attribute(orgSlug, storeSlug, objectId, attributeId)


@bp.route(f'{_V}/dataObjects/{{objectId}}/children', methods=['GET'], name='listDataObjectChildrenVersioned',
          content_types=ANY_CONTENT)
def children_v(orgSlug, storeSlug, version, objectId):
    return children(orgSlug, storeSlug, objectId)


@bp.route(f'{_V}/taxonomies', methods=['GET'], name='listStoreTaxonomiesVersioned', content_types=ANY_CONTENT)
def taxonomies_v(orgSlug, storeSlug, version):
    return taxonomies(orgSlug, storeSlug)


@bp.route('/api/data-objects/{id}/attributes/{attributeId}', methods=['PUT'], name='reviewDataAttribute',
          content_types=JSON_CONTENT)
def put_attribute_by_id(id, attributeId):  # noqa: A002 - the route's name for it
    return _reads().put_attribute(None, None, id, attributeId, body(), caller())


def _memories():
    from chalicelib.features.extraction import memories  # noqa: PLC0415 - lazy: cold start
    return memories


@bp.route('/api/data-definitions/{id}/layout-memories', methods=['GET'], name='listDataDefinitionLayoutMemories',
          content_types=ANY_CONTENT)
def list_layout_memories(id):  # noqa: A002 - the route's name for it
    return _memories().list_memories(id, params(), caller(), one_based=one_based_pages())


@bp.route('/api/data-definitions/{id}/layout-memories/{memoryId}', methods=['DELETE'],
          name='deleteDataDefinitionLayoutMemory', content_types=ANY_CONTENT)
def delete_layout_memory(id, memoryId):  # noqa: A002 - the route's name for it
    from chalice import Response  # noqa: PLC0415 - lazy: cold start
    _memories().delete_memory(id, memoryId, caller())
    return Response(body='', status_code=204)


@bp.route('/api/exceptions', methods=['GET'], name='listExceptions', content_types=ANY_CONTENT)
def list_exceptions():
    return _reads().list_exceptions(params(), caller(), one_based=one_based_pages())


@bp.route('/api/exceptions/{id}', methods=['PUT'], name='closeException', content_types=JSON_CONTENT)
def put_exception(id):  # noqa: A002 - the route's name for it
    return _reads().put_exception(id, body(), caller())


# ----------------------------------------------------------------------------- OpenAPI

_SLUGS = [{'name': 'orgSlug', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
           'description': "the organization's slug"},
          {'name': 'storeSlug', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
           'description': "the data store's slug (or id)"}]
_OBJ = {'name': 'objectId', 'in': 'path', 'required': True, 'schema': {'type': 'string'}}
_ATTR = {'name': 'attributeId', 'in': 'path', 'required': True, 'schema': {'type': 'string'}}
_R = [400, 401, 403, 404, 409, 429, 503]   # 422 (a cap reached) is in docs/api/extraction.md
_REVIEW = {'type': 'object', 'properties': {
    'value': {'type': 'string', 'nullable': True}, 'confirmed': {'type': 'boolean'}, 'comment': {'type': 'string'},
    'nodeIds': {'type': 'array', 'minItems': 1, 'maxItems': 50, 'items': {'type': 'string'},
                'description': "word or line nodes of the family's parsed document: the value's words (its text "
                               'when no value is sent) and where it stands (docs/api/extraction.md "Review")'}}}
_T = ['extraction']
_FOLLOWED = {   # what followed a committed change (docs/api/extraction.md "Review")
    'reviewTask': {'type': 'object', 'description': "the run's review task: closed, else why not (open exceptions "
                                                    'left, or why closing failed; the next change tries again)',
                   'properties': {'id': {'type': 'string'}, 'closed': {'type': 'boolean'},
                                  'reason': {'type': 'string'}}},
    'documentStatus': {'type': 'object', 'description': "the family's resolvedDocumentStatus, set or why not",
                       'properties': {'slug': {'type': 'string'}, 'set': {'type': 'boolean'},
                                      'reason': {'type': 'string'}}}}
_REVIEWED = {'type': 'object', 'additionalProperties': True,
             'description': 'The attribute as changed, with dataObject {id, exceptionCount, dataExceptions} and '
                            'what followed the committed change (reviewTask, documentStatus): a change that '
                            'committed answers 200 even when its review task could not be closed.',
             'properties': {'dataObject': {'type': 'object'}, **_FOLLOWED}}
_FOLLOWED_NOTE = (" A change that committed is answered 200: what could not follow it is reported in reviewTask "
                  "{id, closed, reason} and documentStatus {slug, set, reason} (docs/api/extraction.md 'Review').")

describe('extractDocumentFamily', summary="Run a data definition over a family's parsed document", tags=_T,
         description='Body: the EXTRACT step\'s options (the ExtractOptions shape: dataDefinition, dataStore, '
                     'locale, the review options; an unknown option or locale is a 400) and step (the run\'s '
                     'name). Replaces what the same step wrote for the family before. Answers the run\'s summary '
                     '(its effective options, the locale included, are kept for the review).',
         request={'type': 'object', 'description': 'ExtractOptions (#/components/schemas/ExtractOptions) plus step',
                  'properties': {'step': {'type': 'string', 'maxLength': 200}}},
         responses={200: {'type': 'object'}}, errors=_R)
describe('listStoreDataObjects', summary="A page of a data store's data objects (or their export)", tags=_T,
         description='path: the group taxon path ("/" or absent: every object); documentFamilyId; filter, sort, '
                     'page, pageSize as every list. format=json or csv: the export (one row per object, a column '
                     'per taxon; csv needs path).', parameters=_SLUGS, list_of='DataObject', errors=_R)
describe('getStoreDataObject', summary='A data object with its attributes', tags=_T,
         parameters=[*_SLUGS, _OBJ], responses={200: ref('DataObject')}, errors=_R)
describe('listDataObjectAttributes', summary="A data object's attributes", tags=_T,
         parameters=[*_SLUGS, _OBJ], responses={200: {'type': 'array', 'items': {'type': 'object'}}}, errors=_R)
describe('reviewStoreDataAttribute', summary="A reviewer's change of an attribute", tags=_T,
         description='value: the corrected text (normalised again, with the locale of the run); nodeIds: the '
                     'words the value is (1-50 word or line ids of the parsed document; its text when no value is '
                     'sent; an unknown id is a 400 naming it); confirmed: the '
                     "value is right as read. The object's exceptions and those of the groups above it are decided "
                     'again, in one transaction with the object (a 409: nothing was written).' + _FOLLOWED_NOTE,
         parameters=[*_SLUGS, _OBJ, _ATTR], request=_REVIEW, responses={200: _REVIEWED}, errors=_R)
describe('reviewDataAttribute', summary="A reviewer's change of an attribute (by object id)", tags=_T,
         description='As reviewStoreDataAttribute.' + _FOLLOWED_NOTE,
         parameters=[{**_OBJ, 'name': 'id'}, _ATTR], request=_REVIEW, responses={200: _REVIEWED}, errors=_R)
describe('listDataObjectChildren', summary='The data objects under one', tags=_T,
         parameters=[*_SLUGS, _OBJ], list_of='DataObject', errors=_R)
describe('listStoreDataAttributes', summary="Attributes across a data store's objects", tags=_T,
         description="filter: the list language over an attribute (taxon, tag, value, typedValue, confidence, "
                     "confirmed, ...), e.g. taxon == 'invoice/total' and typedValue > 1000.",
         parameters=_SLUGS, responses={200: {'type': 'object'}}, errors=_R)
describe('listStoreTaxonomies', summary='The data definitions of a store, as taxonomies', tags=_T,
         parameters=_SLUGS, responses={200: {'type': 'array', 'items': {'type': 'object'}}}, errors=_R)
_VERSION = {'name': 'version', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
            'description': 'any value (the SDK sends the store version, or "None"): ignored'}
for _name, _extra in (('listStoreDataObjects', []), ('getStoreDataObject', [_OBJ]),
                      ('listDataObjectAttributes', [_OBJ]), ('reviewStoreDataAttribute', [_OBJ, _ATTR]),
                      ('listDataObjectChildren', [_OBJ]), ('listStoreTaxonomies', [])):
    _entry = dict(OPERATIONS[_name])
    _entry['parameters'] = [*_SLUGS, _VERSION, *_extra]
    _entry['summary'] = _entry['summary'] + ' (the SDK\'s path with the store version)'
    OPERATIONS[f'{_name}Versioned'] = _entry

describe('listExceptions', summary='Data exceptions', tags=_T,
         description='dataStoreId with state (OPEN default, CLOSED, ALL), documentFamilyId, taxon, dataObjectId, '
                     'exceptionType; filter, sort, page, pageSize as every list.',
         list_of='DataException', errors=_R)
describe('closeException', summary='Close a data exception by hand', tags=_T,
         description='Answers the exception, with reviewTask and documentStatus as a reviewer\'s change does '
                     '(closing the run\'s last open exception closes its review task).' + _FOLLOWED_NOTE,
         request={'type': 'object', 'properties': {'open': {'type': 'boolean'}, 'closingComment': {'type': 'string'}}},
         responses={200: ref('DataException')}, errors=_R)
describe('listDataDefinitionLayoutMemories', summary="A data definition's layout memories", tags=_T,
         description='What reviewers taught the definition by pointing at words (a correction with nodeIds): one '
                     'memory per kind of document (fingerprint: the supplier or the layout), its fields the '
                     'places of the corrected taxons. filter, sort, page, pageSize as every list; another '
                     "organization's definition is a 404 (docs/api/extraction.md 'Layout memory').",
         parameters=[{'name': 'id', 'in': 'path', 'required': True, 'schema': {'type': 'string'}}],
         list_of='LayoutMemory', errors=_R)
describe('deleteDataDefinitionLayoutMemory', summary='Forget a layout memory', tags=_T,
         description='The next documents of that kind are read by the rules again. Who may correct a value '
                     '(resource:write: a MEMBER) may remove a memory; a VIEWER gets a 403.',
         parameters=[{'name': 'id', 'in': 'path', 'required': True, 'schema': {'type': 'string'}},
                     {'name': 'memoryId', 'in': 'path', 'required': True, 'schema': {'type': 'string'}}],
         responses={204: None}, errors=_R)
