"""The documents feature's families, declared: each one's fields, references, indexes, hook and
rules (kernel/registry.py ``Family``), installed into the kernel by chalicelib/features/__init__.py.

Documents: stores, families, content objects, document statuses, linked deltas.
"""
from __future__ import annotations

from chalicelib.kernel.registry import NAMED_FIELDS, declare

# The enumerations its fields name (kernel/fields.py ``install_enums``).
ENUMS = {'LinkedDeltaState': ('PENDING', 'APPLIED', 'APPLIED_PARTIAL', 'FAILED')}

LINKED_DELTA_NOTES = {
    'create': (
        'With documentFamilyId: {documentFamilyId, baseVersion?, name?, operations} applies the operations '
        '({op: add, node} | {op: update, id, set} | {op: delete, id} | {op: move, id, parentId}) to the '
        "family's current document version: state APPLIED, APPLIED_PARTIAL (errorMessage lists what was "
        'dropped and why) or FAILED (nothing applied); appliedVersion is the version it produced. Without '
        'documentFamilyId or operations the body is stored as a bare delta record and no document changes.'),
}
DOCUMENT_FAMILY_NOTES = {
    'update': (
        "documentStatus is written as {id} or {slug} of a document status of the family's project (400 "
        'otherwise) and read back as the whole DocumentStatus.'),
    'delete': ('Also deletes its content objects, linked deltas, executions (its parse and pipeline runs), the data '
               'objects and exceptions extracted from it, its file and document versions.'),
}

FAMILIES = (
    declare('document-stores', 'DocumentStore', 'project',
        f'{NAMED_FIELDS} storeType storePurpose publicAccess:bool=false metadata:object',
        indexed={'slug': 1},
        listed_under={'projects': ('documentStores', 'projectId')}),
    declare('document-families', 'DocumentFamily', 'project',
        'path documentStoreId>document-stores? documentStatus:object? labels:strings mixins:strings '
        'locked:bool=false size:int metadata:object '
        'contentType storageKey contentObjectId documentVersion:int documentKey '
        # the latest run of an assistant's pipeline over it (features/work/pipelines.py, docs/api/processing.md)
        # the latest extraction's summary (features/extraction/, docs/api/extraction.md)
        'processing:object? extraction:object?', name_field='path',
        indexed={'documentStoreId': 1, 'documentStatus.id': 2, 'path': 3}, hook='document_families',
        server=('contentType', 'storageKey', 'contentObjectId', 'documentVersion', 'documentKey', 'processing',
                'extraction'),
        notes=DOCUMENT_FAMILY_NOTES,
        sdk_segment='documentFamilies'),
    declare('content-objects', 'ContentObject', 'project',
        'name contentMetadata:object metadata:object contentType:int index:int size:int '
        'created:datetime? modified:datetime? docTransitionType documentFamilyId>document-families? '
        'documentVersion sourceContentObjectId storeRef summary mixins:strings source:object '
        'documentTaxonValidations:array',
        indexed={'documentFamilyId': 1}, deleted_with='documentFamilyId',
        heavy=('contentMetadata', 'metadata', 'documentTaxonValidations', 'source', 'summary')),
    declare('document-statuses', 'DocumentStatus', 'project', 'status slug color icon statusType',
        name_field='status'),
    declare('linked-deltas', 'LinkedDelta', 'project',
        'name state=PENDING@LinkedDeltaState errorMessage? documentFamilyId>document-families? '
        'operations:array baseVersion:int? appliedVersion:int',
        indexed={'documentFamilyId': 1, 'state': 2}, hook='linked_deltas', server=('appliedVersion',),
        deleted_with='documentFamilyId',
        notes=LINKED_DELTA_NOTES),
)
