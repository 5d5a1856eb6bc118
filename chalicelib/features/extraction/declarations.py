"""The extraction feature's families, declared (kernel/registry.py ``Family``), installed into the
kernel by chalicelib/features/__init__.py: data stores, data definitions (their taxons checked by
shapes.py and the ``data_definitions`` hook), extraction's output, data objects
(attributes live on their object) and data exceptions, and what reviewers taught a definition,
its layout memories (written by the server only: features/extraction/memories.py;
docs/api/extraction.md).
"""
from __future__ import annotations

from chalicelib.features.extraction import shapes
from chalicelib.kernel.registry import NAMED_FIELDS, declare

SHAPES = shapes.SHAPES   # a data definition's taxon, a data object's attribute (kernel/shapes.py)

FAMILIES = (
    declare('data-stores', 'DataStore', 'project', f'{NAMED_FIELDS} storeType metadata:object',
        indexed={'slug': 1},   # /api/stores/{orgSlug}/{storeSlug}/dataObjects (routes.py)
        listed_under={'projects': ('dataStores', 'projectId')}),
    declare('data-definitions', 'DataDefinition', 'org',
        f'{NAMED_FIELDS} taxonomyType enabled:bool=true taxons:array(Taxon) metadata:object',
        hook='data_definitions', org_slug_paths=True),
    declare('data-objects', 'DataObject', 'project',
        'dataStoreId!>data-stores documentFamilyId>document-families? dataDefinitionId>data-definitions? '
        'taxonomyRef path! parentId? rowNum:int sourceOrdering sourceKey attributes:array(DataAttribute) '
        'dataExceptions:array exceptionCount:int lineage:object', name_field='path', hook='data_objects',
        # the pair (store, definition): which definitions a store's objects name, counted per pair
        # (reads.py ``taxonomies``: one counter per definition, whatever the store's size)
        indexed={'dataStoreId': 1, 'documentFamilyId': 2, 'dataStoreId+dataDefinitionId': 3},
        deleted_with='documentFamilyId',
        server=('sourceKey', 'dataExceptions', 'exceptionCount')),
    declare('data-exceptions', 'DataException', 'project',
        'dataStoreId>data-stores? documentFamilyId>document-families? dataObjectId attributeId taxon message '
        'exceptionType severity open:bool=true state=OPEN closingComment exceptionDetails key sourceKey '
        'storeState closedBy closedOn:datetime?', name_field='message', hook='data_exceptions',
        indexed={'storeState': 1, 'documentFamilyId': 2}, deleted_with='documentFamilyId',
        server=('state', 'storeState', 'key', 'sourceKey', 'closedBy', 'closedOn')),
    # one per (definition, fingerprint), its id derived from the pair: a run reads its document's
    # memories with one BatchGetItem; listed per definition through the value index
    declare('layout-memories', 'LayoutMemory', 'org',
        'dataDefinitionId!>data-definitions fingerprint kind hint fields:object fieldCount:int',
        name_field='hint', read_only=True, indexed={'dataDefinitionId': 1}),
)
