"""The resource registry: every family the contract names, declared once, as data.

Generic code (kernel/crud.py for the rules, kernel/http/routes.py for the routes, the
OpenAPI generator, the filter schema) reads these declarations. A family with special rules
names a hook (chalicelib/features/hooks.py) instead of copying the CRUD code.

Scopes:
  global   platform-wide (organizations, users, the product catalogue)
  org      owned by one organization (``organizationId``)
  project  owned by one project (``projectId``; its organization is the project's)
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from chalicelib.kernel.fields import Field, parse_fields

COMMON_FIELDS = parse_fields('id uuid createdOn:datetime updatedOn:datetime changeSequence:int')
SOFT_DELETE_FIELDS = parse_fields('deleted:bool deleteUserId? deleteUserEmail? deletedDate:datetime?')
# Fields a client never writes: server-generated, ownership, soft-delete state.
SERVER_FIELDS = frozenset({'id', 'uuid', 'createdOn', 'updatedOn', 'changeSequence', 'createdByUserId',
                           'deleted', 'deleteUserId', 'deleteUserEmail', 'deletedDate',
                           'builtIn',        # roles/permissions derived from kernel/access.py
                           'userEmail',      # who did it (history entries, events): stamped by the server
                           'clientIpHash'})  # events: HMAC of the client address (features/events/ui_events.py)
OWNERSHIP_FIELDS = frozenset({'organizationId', 'projectId'})
SEARCH_FIELDS = ('name', 'description', 'searchText')
INDEX_SLOTS = 5   # equality-indexed fields per family (each slot is a pair of GSIs: kernel/store/model.py)


@dataclass(frozen=True, eq=False)
class Family:
    path: str
    entity: str
    scope: str
    spec: str
    unique: tuple[str, ...] = ()
    soft_delete: bool = False
    name_field: str = 'name'
    hook: str | None = None
    collections: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (family, fk)
    id_param: str = 'id'             # path parameter name (the contract calls one executionId)
    read_only: bool = False          # written by the server only (history): list and get routes
    summary_omit: tuple[str, ...] = ()  # heavy fields left out of lists with view=summary
    # A reference to a user is checked for membership of the record's organization; this field
    # instead names the user joining it (memberships: its hook decides who may be named).
    joins: str | None = None
    # fields whose equality filters are served from an index, each with its NAMED slot (1..INDEX_SLOTS:
    # the x{slot} attribute and GSI pair its key is stored under; a dotted name is a path into an
    # object field): `field == 'v'` costs the same in any tenant size. Slots are named, never taken
    # from the order of the declaration: reordering it must not move stored keys to other indexes.
    indexed: Mapping[str, int] = field(default_factory=dict)
    # declared fields only the server writes (shown in responses, ignored in request bodies)
    server: tuple[str, ...] = ()
    # An append-mostly family (events): a record never changed has no updatedOn index key, its
    # createdOn key serves updatedOn order (the two are equal); a changed one carries both, its
    # createdOn key marked (kernel/store/table.py CHANGED). One or more index entries fewer per
    # record written (docs/scale.md "Events records").
    sparse_updated: bool = False
    # The name field's equality filters are served from the by_name index, not an x{slot} one
    # (events: ``eventType``): its name key leads with the name, a hash of its exact text and
    # the createdOn key (kernel/store/table.py ``name_sort_key``), so the records holding one
    # name are one run of by_name, in createdOn order. The field stays in ``indexed`` (its
    # values are counted, its slot names where records written before kept their key); the
    # record's x{slot} key is not written. One index entry fewer per record (docs/scale.md
    # "Events records": an events record costs 3 WCU, not 4).
    name_keyed: bool = False
    # Slug references: a field whose value names a record of another family by its unique
    # ``slug``, not its id (tasks' ``statusSlug`` -> a task status of the task's organization).
    # Field -> target family. Checked on every write like an id reference (kernel/references.py
    # ``slug_checks``, called by kernel/crud.py ``reference_ops``): a slug that names no record of
    # the target family in the record's scope is a 400 (contract rule 7).
    slug_refs: Mapping[str, str] = field(default_factory=dict)

    def slot_of(self, name: str) -> int:
        """The equality-index slot of an indexed field (its x{slot} attribute and GSI pair)."""
        return self.indexed[name]

    @cached_property
    def own_fields(self) -> tuple[Field, ...]:
        return parse_fields(self.spec)

    @cached_property
    def ownership_fields(self) -> tuple[Field, ...]:
        if self.scope == 'org':
            return parse_fields('organizationId>organizations')
        if self.scope == 'project':
            return parse_fields('organizationId>organizations projectId!>projects')
        return ()

    @cached_property
    def fields(self) -> dict[str, Field]:
        """Every field a response may carry, by name."""
        out = {f.name: f for f in COMMON_FIELDS}
        out.update({f.name: f for f in self.ownership_fields})
        out['createdByUserId'] = Field('createdByUserId', nullable=True)
        out.update({f.name: f for f in self.own_fields})
        if self.soft_delete:
            out.update({f.name: f for f in SOFT_DELETE_FIELDS})
        return out

    @cached_property
    def writable(self) -> dict[str, Field]:
        """Fields a client may set in a create or update body."""
        return {f.name: f for f in self.own_fields if f.name not in SERVER_FIELDS and f.name not in self.server}

    @cached_property
    def references(self) -> dict[str, tuple[str, str]]:
        """Reference name -> (id field, family): ``project.name`` reads projectId's record."""
        out = {}
        for f in list(self.ownership_fields) + list(self.own_fields):
            if f.ref and f.name.endswith('Id'):
                out[f.name[:-2]] = (f.name, f.ref)
        return out

    @cached_property
    def searchable(self) -> tuple[str, ...]:
        return tuple(n for n in (*SEARCH_FIELDS, 'title') if n in self.fields)


def _f(path, entity, scope, spec, **kw) -> Family:
    if 'unique' not in kw and ' slug' in f' {spec}':
        kw['unique'] = ('slug',)
    return Family(path, entity, scope, spec, **kw)


_TEXT = 'name description searchText'
_NAMED = f'{_TEXT} slug'

FAMILIES: tuple[Family, ...] = (
    _f('organizations', 'Organization', 'global',
       'name! description searchText slug archived:bool? authGroupLink:object '
       'defaultToPrivateTemplates:bool=false enterpriseOrganization:bool? features:object '
       'hasImage:bool=false memory:object organizationStatus=ACTIVE@OrganizationStatus '
       'properties:object publicAccess:bool=false paymentCustomerId supportAccess:bool=false '
       'supportAccessExpiresAt:datetime?', hook='organizations'),
    _f('users', 'User', 'global',
       'email! firstName lastName searchText active:bool=true isExternallyManaged:bool=false '
       'showDeveloperTools:bool=false bio businessGroup groupsJson rolesJson image title userType '
       'preferences:object security:object userStorage:object', unique=('email',), name_field='email',
       hook='users'),
    _f('memberships', 'Membership', 'org',
       'userId>users role!@MembershipRole email status=ACTIVE@MembershipStatus',
       unique=('userId',), name_field='role', hook='access', joins='userId',
       indexed={'userId': 1}),
    _f('teams', 'Team', 'org', f'{_NAMED} color memberIds:strings'),
    _f('roles', 'Role', 'org', f'{_NAMED} permissions:strings builtIn:bool=false', hook='access'),
    _f('permissions', 'Permission', 'org', f'{_NAMED} category builtIn:bool=false', hook='access'),
    _f('labels', 'Label', 'org', f'{_TEXT} color'),
    _f('projects', 'Project', 'org',
       'name! description searchText slug color notes projectTemplateRef templateArticleId '
       'dataFlow:object documentStatuses:array memory:object options:object ownerId>users? '
       'statusId>project-statuses? statusType=ACTIVE'),
    _f('project-statuses', 'ProjectStatus', 'org', 'status color icon production:bool=false',
       name_field='status'),
    _f('document-statuses', 'DocumentStatus', 'project', 'status slug color icon statusType',
       name_field='status'),
    _f('task-statuses', 'TaskStatus', 'org',
       'label slug color icon description statusType=OPEN@TaskStatusType sortOrder:int',
       name_field='label'),
    _f('tasks', 'Task', 'project',
       'title description searchText statusSlug taskGroupId>task-groups? assigneeId>users? '
       'teamId>teams? createdByActivityId? dueDate:datetime? priority:int? metadata:object '
       'data:object plan:object', name_field='title', summary_omit=('plan',), hook='tasks',
       slug_refs={'statusSlug': 'task-statuses'},
       indexed={'statusSlug': 1, 'assigneeId': 2, 'teamId': 3, 'taskGroupId': 4, 'createdByActivityId': 5}),
    _f('task-groups', 'TaskGroup', 'project',
       f'{_TEXT} statusSlug assigneeId>users? teamId>teams? metadata:object plan:object',
       collections={'memberTask': ('tasks', 'taskGroupId')}, hook='task_groups',
       indexed={'statusSlug': 1, 'assigneeId': 2}),
    _f('task-group-history', 'TaskGroupHistory', 'project',
       'taskGroupId>task-groups action@AuditAction userId userEmail changes:object',
       name_field='action', read_only=True),
    _f('assistants', 'Assistant', 'project',
       'name description slug active:bool=true chatEnabled:bool=false runOnExistingContent:bool=false '
       'showInTraining:bool=false assistantRole color subscription priorityHint:int options:object '
       'testOptions:object validationErrors:object', soft_delete=True),
    _f('prompts', 'Prompt', 'org',
       'name slug type extensionPackRef yamlSource deprecated:bool=false publicAccess:bool=false '
       'template:bool=false metadata:object', soft_delete=True,
       indexed={'type': 1}),
    _f('document-stores', 'DocumentStore', 'project',
       f'{_NAMED} storeType storePurpose publicAccess:bool=false metadata:object',
       indexed={'slug': 1}),   # /api/stores/{orgSlug}/{storeSlug} (features/documents/store_fs.py)
    _f('document-families', 'DocumentFamily', 'project',
       'path documentStoreId>document-stores? documentStatus:object? labels:strings mixins:strings '
       'locked:bool=false size:int metadata:object '
       'contentType storageKey contentObjectId documentVersion:int documentKey '
       # the latest run of an assistant's pipeline over it (features/work/pipelines.py, docs/api/processing.md)
       'processing:object?', name_field='path',
       indexed={'documentStoreId': 1, 'documentStatus.id': 2, 'path': 3}, hook='document_families',
       server=('contentType', 'storageKey', 'contentObjectId', 'documentVersion', 'documentKey', 'processing')),
    _f('content-objects', 'ContentObject', 'project',
       'name contentMetadata:object metadata:object contentType:int index:int size:int '
       'created:datetime? modified:datetime? docTransitionType documentFamilyId>document-families? '
       'documentVersion sourceContentObjectId storeRef summary mixins:strings source:object '
       'documentTaxonValidations:array',
       indexed={'documentFamilyId': 1}),
    _f('knowledge-sets', 'KnowledgeSet', 'project',
       f'{_NAMED} setType status projectSlug currentSnapshotId? priority:int featureExpression:object '
       'features:array knowledgeItems:array'),
    _f('knowledge-items', 'KnowledgeItem', 'org',
       'title description slug searchText active:bool=true attachmentContentHash attachmentContentType '
       'attachmentFileName attachmentId attachmentUploadedBy attachmentSize:int? sequenceOrder:int '
       'attachmentUploadedAt:datetime? knowledgeSetId>knowledge-sets? knowledgeSetSlug '
       'knowledgeItemTypeId>knowledge-item-types? knowledgeItemType:object? properties:any',
       name_field='title'),
    _f('knowledge-features', 'KnowledgeFeature', 'org',
       'slug active:bool=true extendedProperties:any properties:any featureType:object? '
       'featureTypeId>feature-types?', name_field='slug'),
    _f('feature-types', 'FeatureType', 'org',
       'name description slug color icon labelJsonPath active:bool=true useJSONata:bool=false '
       'extendedOptions:any options:any'),
    _f('knowledge-item-types', 'KnowledgeItemType', 'org',
       'name description slug options:any supportsAttachment:bool=false'),
    _f('knowledge-set-snapshots', 'KnowledgeSetSnapshot', 'org',
       f'{_TEXT} knowledgeSetId>knowledge-sets? snapshot:any'),
    _f('knowledge-set-sources', 'KnowledgeSetSource', 'org',
       # contentObject and knowledgeSet: the referenced records, embedded on read (kernel/embeds.py)
       'contentObjectId>content-objects? createdAt:any executionId knowledgeSetId>knowledge-sets? '
       'metadata:any', name_field='executionId'),
    _f('executions', 'Execution', 'project',
       'name description status=PENDING@ExecutionStatus statusMessages:array activityId>activities? '
       'assistantId>assistants? startDate:datetime? endDate:datetime? metadata:object '
       # the SDK's names (kodexa.model Execution): the contract names no execution fields
       'processingTime:int? exceptionDetails:object? statusDetails:object? pipeline:object? '
       'parameters:object? context:object? '
       # work orchestration (features/work/service.py): the step run, its attempts and result
       # step: validated as a plan's step is (kernel/shapes/steps.py; docs/api/lifecycle.md)
       'step:object(PipelineStep) attempts:int? nextAttemptAt:datetime? output:any inputs:object '
       # an assistant's pipeline over a document family (features/work/pipelines.py)
       'documentFamilyId>document-families?',
       id_param='executionId', hook='executions',
       indexed={'activityId': 1, 'status': 2, 'documentFamilyId': 3}),
    _f('activities', 'Activity', 'project',
       f'{_TEXT} status=PENDING@ActivityStatus activityPlanId>activity-plans? startedOn:datetime? '
       'completedOn:datetime? metadata:object inputs:object requestId', unique=('requestId',),
       hook='activities', indexed={'activityPlanId': 1, 'status': 2}),
    _f('activity-plans', 'ActivityPlan', 'project',
       f'{_NAMED} steps:array(PipelineStep) schemas:object metadata:object prompts:array documentFamilyGroups:array',
       summary_omit=('steps', 'schemas', 'metadata', 'prompts', 'documentFamilyGroups')),
    _f('agent-runtimes', 'AgentRuntime', 'org',
       'name description slug createdBy image roleArn status agentRuntimeArn? cloudRuntimeId? '
       'configMapName? configMapResourceVersion? endpointArn? endpointId? endpointName? failureReason? '
       'networkMode? protocolConfiguration? securityGroups? subnets? maxConcurrency:int? '
       'environmentVars:any metadata:any'),
    _f('agents', 'Agent', 'project',
       f'{_NAMED} agentRuntimeId>agent-runtimes? instructions modelSize@WebLlmModelSize? options:object'),
    _f('service-bridges', 'ServiceBridge', 'project',
       f'{_NAMED} baseUrl:string(ServiceBridgeBaseUrl)! endpoints:array(ServiceBridgeEndpoint) '
       'defaultHeaders:object(ServiceBridgeHeaders) agentCallable:bool=false', hook='service_bridges'),
    _f('products', 'Product', 'global',
       'name description imageUrl overviewMarkdown searchText productGroupId>product-groups? '
       'productGroup:object?'),
    _f('product-groups', 'ProductGroup', 'global',
       'name description overviewMarkdown searchText active:bool=true order:int products:array'),
    _f('product-project-templates', 'ProductProjectTemplate', 'global',
       'displayOrder:int productId>products? product:object? projectTemplateMetadata:object '
       'projectTemplateMetadataId?', name_field='projectTemplateMetadataId'),
    _f('extension-packs', 'ExtensionPackMetadata', 'org',
       'name slug extensionPackRef version deprecated:bool=false publicAccess:bool=false '
       'template:bool=false metadata:object'),
    _f('scheduled-jobs', 'ScheduledJob', 'org',
       f'{_TEXT} scheduleExpression:string(ScheduleExpression) active:bool=true '
       'targetType@ScheduleTargetType? targetId>activity-plans? lastRunOn:datetime? '
       'nextRunOn:datetime? options:object', hook='scheduled_jobs'),
    _f('intakes', 'Intake', 'project',
       f'{_NAMED} documentStoreId>document-stores? active:bool=true options:object'),
    _f('data-stores', 'DataStore', 'project', f'{_NAMED} storeType metadata:object'),
    _f('data-forms', 'DataForm', 'project', f'{_NAMED} template:object options:object'),
    _f('data-definitions', 'DataDefinition', 'org',
       f'{_NAMED} taxonomyType enabled:bool=true taxons:array metadata:object'),
    _f('channels', 'Channel', 'org', f'{_NAMED} isPrivate:bool=false memberIds:strings metadata:object'),
    _f('messages', 'Message', 'org',
       'channelId!>channels content role=USER@ChatMessageRole userId>users? metadata:object',
       name_field='content',
       indexed={'channelId': 1}),
    _f('events', 'Event', 'org',
       'name description eventType! source payload:object occurredOn:datetime? userEmail clientIpHash',
       name_field='eventType', hook='events',
       indexed={'eventType': 1}, sparse_updated=True, name_keyed=True),
    _f('linked-deltas', 'LinkedDelta', 'project',
       'name state=PENDING@LinkedDeltaState errorMessage? documentFamilyId>document-families? '
       'operations:array baseVersion:int? appliedVersion:int',
       indexed={'documentFamilyId': 1, 'state': 2}, hook='linked_deltas', server=('appliedVersion',)),
)

BY_PATH: dict[str, Family] = {f.path: f for f in FAMILIES}

def check_declaration(fam: Family) -> None:
    """Refuse a declaration the storage cannot serve (run on every family at import, not at a
    request): equality-index slots named, distinct and within INDEX_SLOTS; indexable fields."""
    if not isinstance(fam.indexed, Mapping):
        raise ValueError(f"{fam.path}: indexed must name each field's slot ({{field: slot}})")
    slots = list(fam.indexed.values())
    if len(set(slots)) != len(slots) or not all(isinstance(n, int) and 1 <= n <= INDEX_SLOTS for n in slots):
        raise ValueError(f'{fam.path}: index slots must be distinct numbers 1..{INDEX_SLOTS}: {dict(fam.indexed)}')
    if fam.name_keyed and (fam.name_field not in fam.indexed or fam.fields[fam.name_field].type != 'string'):
        raise ValueError(f'{fam.path}: name_keyed needs its name field {fam.name_field!r} indexed, a string')
    for name, target in fam.slug_refs.items():
        spec = fam.writable.get(name)
        held = BY_PATH.get(target)
        if spec is None or spec.type != 'string' or spec.ref or held is None or 'slug' not in held.unique:
            raise ValueError(f'{fam.path}: slug reference {name!r} must be a writable string naming '
                             f'a family whose slug is unique ({target!r})')
    for name in fam.indexed:
        head = fam.fields.get(name.split('.')[0])
        if head is None or (head.type not in ('string', 'object') or ('.' in name) != (head.type == 'object')):
            raise ValueError(f'{fam.path}: cannot index {name!r}')


for _fam in FAMILIES:
    check_declaration(_fam)


def family(path: str) -> Family:
    return BY_PATH[path]
