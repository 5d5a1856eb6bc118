"""The records feature's families, declared: each one's fields, references, indexes, hook and
rules (kernel/registry.py ``Family``), installed into the kernel by chalicelib/features/__init__.py.

Families served by the generic rules alone (kernel/crud.py): no hook, no routes of their own.
"""
from __future__ import annotations

from chalicelib.kernel.registry import NAMED_FIELDS, TEXT_FIELDS, declare

# The enumerations its fields name (kernel/fields.py ``install_enums``).
ENUMS = {
    'ChatMessageRole': ('USER', 'ASSISTANT', 'SYSTEM', 'TOOL'),
    'WebLlmModelSize': ('SMALL', 'MEDIUM', 'LARGE'),
}

FAMILIES = (
    declare('labels', 'Label', 'org', f'{TEXT_FIELDS} color'),
    declare('assistants', 'Assistant', 'project',
        'name description slug active:bool=true chatEnabled:bool=false runOnExistingContent:bool=false '
        'showInTraining:bool=false assistantRole color subscription priorityHint:int options:object '
        'testOptions:object validationErrors:object', soft_delete=True,
        embeds=('project',),
        listed_under={'projects': ('assistants', 'projectId')}, written_under_project=True),
    declare('prompts', 'Prompt', 'org',
        'name slug type extensionPackRef yamlSource deprecated:bool=false publicAccess:bool=false '
        'template:bool=false metadata:object', soft_delete=True,
        indexed={'type': 1},
        org_slug_paths=True),
    declare('knowledge-sets', 'KnowledgeSet', 'project',
        f'{NAMED_FIELDS} setType status projectSlug currentSnapshotId? priority:int featureExpression:object '
        'features:array knowledgeItems:array',
        embeds=('organization', 'project'), heavy=('features', 'knowledgeItems', 'featureExpression')),
    declare('knowledge-items', 'KnowledgeItem', 'org',
        'title description slug searchText active:bool=true attachmentContentHash attachmentContentType '
        'attachmentFileName attachmentId attachmentUploadedBy attachmentSize:int? sequenceOrder:int '
        'attachmentUploadedAt:datetime? knowledgeSetId>knowledge-sets? knowledgeSetSlug '
        'knowledgeItemTypeId>knowledge-item-types? knowledgeItemType:object? properties:any',
        name_field='title',
        embeds=('knowledgeItemType',)),
    declare('knowledge-features', 'KnowledgeFeature', 'org',
        'slug active:bool=true extendedProperties:any properties:any featureType:object? '
        'featureTypeId>feature-types?', name_field='slug',
        embeds=('featureType',)),
    declare('feature-types', 'FeatureType', 'org',
        'name description slug color icon labelJsonPath active:bool=true useJSONata:bool=false '
        'extendedOptions:any options:any'),
    declare('knowledge-item-types', 'KnowledgeItemType', 'org',
        'name description slug options:any supportsAttachment:bool=false'),
    declare('knowledge-set-snapshots', 'KnowledgeSetSnapshot', 'org',
        f'{TEXT_FIELDS} knowledgeSetId>knowledge-sets? snapshot:any'),
    declare('knowledge-set-sources', 'KnowledgeSetSource', 'org',
        # contentObject and knowledgeSet: the referenced records, embedded on read (kernel/embeds.py)
        'contentObjectId>content-objects? createdAt:any executionId knowledgeSetId>knowledge-sets? '
        'metadata:any', name_field='executionId',
        embeds=('contentObject', 'knowledgeSet')),
    declare('agent-runtimes', 'AgentRuntime', 'org',
        'name description slug createdBy image roleArn status agentRuntimeArn? cloudRuntimeId? '
        'configMapName? configMapResourceVersion? endpointArn? endpointId? endpointName? failureReason? '
        'networkMode? protocolConfiguration? securityGroups? subnets? maxConcurrency:int? '
        'environmentVars:any metadata:any',
        operation_names={'sequence': 'getOrchestratorAgentRuntimeSequence'}),
    declare('agents', 'Agent', 'project',
        f'{NAMED_FIELDS} agentRuntimeId>agent-runtimes? instructions modelSize@WebLlmModelSize? options:object'),
    declare('products', 'Product', 'global',
        'name description imageUrl overviewMarkdown searchText productGroupId>product-groups? '
        'productGroup:object?',
        write_needs='platform:admin', embeds=('productGroup',), heavy=('overviewMarkdown',)),
    declare('product-groups', 'ProductGroup', 'global',
        'name description overviewMarkdown searchText active:bool=true order:int products:array',
        write_needs='platform:admin'),
    declare('product-project-templates', 'ProductProjectTemplate', 'global',
        'displayOrder:int productId>products? product:object? projectTemplateMetadata:object '
        'projectTemplateMetadataId?', name_field='projectTemplateMetadataId',
        write_needs='platform:admin', embeds=('product',)),
    declare('extension-packs', 'ExtensionPackMetadata', 'org',
        'name slug extensionPackRef version deprecated:bool=false publicAccess:bool=false '
        'template:bool=false metadata:object',
        org_slug_paths=True, versioned=True,
        sdk_segment='extensionPacks'),
    declare('intakes', 'Intake', 'project',
        f'{NAMED_FIELDS} documentStoreId>document-stores? active:bool=true options:object'),
    declare('data-forms', 'DataForm', 'project', f'{NAMED_FIELDS} template:object options:object',
        listed_under={'projects': ('dataForms', 'projectId')}),
    declare('channels', 'Channel', 'org', f'{NAMED_FIELDS} isPrivate:bool=false memberIds:strings metadata:object',
        heavy=('metadata', 'memberIds')),
    declare('messages', 'Message', 'org',
        'channelId!>channels content role=USER@ChatMessageRole userId>users? metadata:object',
        name_field='content',
        indexed={'channelId': 1},
        embeds=('channel', 'user')),
)
