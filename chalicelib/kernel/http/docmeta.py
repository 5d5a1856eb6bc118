"""OpenAPI metadata that cannot be derived from the route table or the resource registry.

The OpenAPI generator (chalicelib/kernel/http/openapi.py) walks ``app.routes``: registry routes
(/api/{family}...) are described from the registry alone; any other route is described from
the entry declared here under its Chalice view name, and a route with no entry still gets a
sane, generic one (summary from its view name, path parameters, JSON in and out, the usual
errors). Declare an entry next to the route it describes::

    from .docmeta import describe, ref

    @bp.route('/api/tasks/{id}/status', methods=['PUT'], name='setTaskStatus', ...)
    def set_status(id): ...
    describe('setTaskStatus', summary='Change the status of a task',
             request=ref('TaskStatusChange'), responses={200: ref('Task')})

Entry keys (all optional):
  summary, description, tags   as in OpenAPI
  request      schema of the JSON body; None: the operation takes no body
  responses    {status: schema or None (no body)}; 'content' may replace the schema with a full
               OpenAPI content map ({media type: {schema: ...}})
  errors       error statuses the operation answers (400, 401, 403, 404, 409, 415, 429, 503)
  parameters   extra OpenAPI parameter objects (query, header)
  list_of      a list endpoint of that schema: the list query parameters, 200 = a page of it

Pure data: imported at app start, so it imports nothing.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core import limits

OPERATIONS: dict[str, dict[str, Any]] = {}   # view name -> entry
SCHEMAS: dict[str, Any] = {}   # extra named component schemas (a dict, or a callable: see derived)

_UNSET: Any = object()


def ref(name: str) -> dict[str, str]:
    return {'$ref': f'#/components/schemas/{name}'}


def describe(view_name: str, *, summary: str | None = None, description: str | None = None,
             tags: list[str] | None = None, request: Any = _UNSET,
             responses: dict[int, Any] | None = None, errors: list[int] | None = None,
             parameters: list[dict[str, Any]] | None = None, list_of: str | None = None) -> None:
    entry: dict[str, Any] = {}
    for key, value in (('summary', summary), ('description', description), ('tags', tags),
                       ('responses', responses), ('errors', errors), ('parameters', parameters),
                       ('list_of', list_of)):
        if value is not None:
            entry[key] = value
    if request is not _UNSET:
        entry['request'] = request
    OPERATIONS[view_name] = entry


def derived(name: str, base: str, *, required: list[str], properties: dict[str, Any]) -> dict[str, str]:
    """Declare ``name`` as a copy of the generated schema ``base`` with ``properties`` replaced and
    ``required`` added: one whole schema, never ``allOf: [base, {...}]``, because generators refuse
    to merge a property that is ``nullable`` in one part and not in the other (docs/api/clients.md)."""
    def build(schemas: dict[str, Any]) -> dict[str, Any]:
        out = dict(schemas[base])
        out['properties'] = {**out.get('properties', {}), **properties}
        out['required'] = sorted({*out.get('required', ()), *required})
        return out
    SCHEMAS[name] = build
    return ref(name)


def schema(name: str, definition: dict[str, Any]) -> dict[str, str]:
    """Declare a named component schema; returns a $ref to it."""
    SCHEMAS[name] = definition
    return ref(name)


# ----------------------------------------------------------------------------- account routes
# (chalicelib/features/identity/routes.py)

_API_KEY = schema('ApiKey', {
    'type': 'object',
    'required': ['id', 'name', 'prefix', 'createdOn', 'expiresAt', 'userId'],
    'properties': {
        'id': {'type': 'string', 'format': 'uuid'},
        'name': {'type': 'string'},
        'prefix': {'type': 'string', 'description': 'the first characters of the key, to recognise it'},
        'createdOn': {'type': 'string', 'format': 'date-time'},
        'expiresAt': {'type': 'string', 'format': 'date-time', 'nullable': True},
        'userId': {'type': 'string', 'format': 'uuid'},
    },
})
_NEW_API_KEY = schema('CreatedApiKey', {
    'allOf': [_API_KEY, {
        'type': 'object', 'required': ['key'],
        'properties': {'key': {'type': 'string', 'description': 'the raw key, shown this once'}},
    }],
})
_API_KEY_REQUEST = schema('ApiKeyCreateRequest', {
    'type': 'object', 'required': ['name'],
    'properties': {
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 200, 'pattern': '\\S'},
        'expiresAt': {'type': 'string', 'format': 'date-time', 'nullable': True,
                      'description': 'must be in the future; null or omitted: the key does not expire'},
    },
})
_ACCOUNT = schema('Account', {
    'allOf': [ref('User'), {
        'type': 'object', 'required': ['memberships', 'invitations', 'platformAdmin'],
        'properties': {
            'memberships': {'type': 'array', 'items': {
                'type': 'object', 'required': ['organizationId', 'role'],
                'properties': {'organizationId': {'type': 'string', 'format': 'uuid'},
                               'role': ref('MembershipRole')}}},
            'invitations': {'type': 'array', 'description': (
                'memberships offered to the user and not answered yet: accept with PUT /api/memberships/{id} '
                '{"status": "ACTIVE"}, decline with DELETE'), 'items': {
                'type': 'object', 'required': ['id', 'organizationId', 'role'],
                'properties': {'id': {'type': 'string', 'format': 'uuid', 'description': 'the membership id'},
                               'organizationId': {'type': 'string', 'format': 'uuid'},
                               'organizationName': {'type': 'string', 'nullable': True},
                               'role': ref('MembershipRole'),
                               'invitedByUserId': {'type': 'string', 'nullable': True},
                               'createdOn': {'type': 'string', 'format': 'date-time', 'nullable': True}}}},
            'platformAdmin': {'type': 'boolean'},
        },
    }],
})

describe('getAccountMe', summary='The signed-in user, with their memberships', tags=['account'],
         responses={200: _ACCOUNT}, errors=[401, 404, 429, 503])
describe('listMyApiKeys', summary="List the signed-in user's API keys", tags=['account'],
         responses={200: {'type': 'array', 'items': _API_KEY}}, errors=[401, 429, 503])
describe('createMyApiKey', summary='Create an API key for the signed-in user', tags=['account'],
         description=f'A user holds at most {limits.MAX_API_KEYS_PER_USER} live API keys: one more is 409 '
                     '(revoke one first). The key is shown once, in this answer.',
         request=_API_KEY_REQUEST, responses={201: _NEW_API_KEY}, errors=[400, 401, 409, 413, 415, 429, 503])
describe('revokeMyApiKey', summary="Revoke one of the signed-in user's API keys", tags=['account'],
         responses={204: None}, errors=[401, 404, 429, 503])

# ----------------------------------------------------------------------------- workflow routes
# (chalicelib/features/tasks/routes.py)

_STATUS_CHANGE = schema('TaskStatusChange', {
    'type': 'object',
    'description': "The new status: statusSlug (or its aliases status / slug) names one of the "
                   "organization's task statuses.",
    'properties': {
        'statusSlug': {'type': 'string', 'minLength': 1},
        'status': {'type': 'string', 'minLength': 1, 'description': 'alias of statusSlug'},
        'slug': {'type': 'string', 'minLength': 1, 'description': 'alias of statusSlug'},
        'changeSequence': {'type': 'integer', 'format': 'int32', 'nullable': True,
                           'description': 'optimistic locking: when not null, must equal the stored value'},
    },
})

describe('setTaskStatus', summary='Change the status of a task', tags=['tasks'],
         request=_STATUS_CHANGE, responses={200: ref('Task')},
         errors=[400, 401, 403, 404, 409, 413, 415, 429, 503])
describe('cancelExecution', summary='Cancel an execution', tags=['executions'],
         description='Sets a running or pending execution to CANCELLED; 409 when it has already ended.',
         request=None, responses={200: ref('Execution')}, errors=[400, 401, 403, 404, 409, 429, 503])
describe('listHistoryForTaskGroup', summary='History of one task group', tags=['task-groups'],
         description='Newest first unless sort says otherwise.', list_of='TaskGroupHistory',
         errors=[400, 401, 403, 404, 429, 503])

_SCHEME = schema('ResourceScheme', {
    'type': 'object', 'required': ['scheme', 'endpointPattern', 'scope', 'description'],
    'properties': {
        'scheme': {'type': 'string', 'description': 'the resource family, e.g. projects'},
        'endpointPattern': {'type': 'string', 'description': 'e.g. /api/projects/{id}'},
        'scope': {'type': 'string', 'enum': ['platform', 'organization', 'project']},
        'description': {'type': 'string'},
    },
})
describe('listResourceSchemes', summary='The resource schemes the resolver knows', tags=['resolve'],
         responses={200: {'type': 'array', 'items': _SCHEME}}, errors=[401, 429, 503])

# ----------------------------------------------------------------------------- internal routes
# (chalicelib/features/work/internal_routes.py)

describe('startActivityInternal', summary='Start an activity (server-to-server)', tags=['internal'],
         description='Authenticated by the internal service token (x-service-token, or '
                     '"Authorization: Bearer <token>"). The organization is derived from the project; '
                     'the activity plan must be bound to the project.',
         request=derived('InternalActivityStartRequest', 'ActivityCreateRequest',
                         required=['projectId', 'activityPlanId'],
                         properties={'activityPlanId': {'type': 'string', 'format': 'uuid'}}),
         responses={202: ref('Activity')}, errors=[400, 401, 409, 413, 415, 429, 503])

# Work orchestration (chalicelib/features/work/routes.py, features/work/service.py; docs/api/work.md)
_START = schema('ActivityStartRequest', {
    'type': 'object', 'required': ['projectId'],
    'properties': {
        'projectId': {'type': 'string', 'format': 'uuid'},
        'name': {'type': 'string'}, 'description': {'type': 'string'},
        'inputs': {'type': 'object', 'additionalProperties': True,
                   'description': 'available to SCRIPT expressions and conditionals as $inputs'},
        'requestId': {'type': 'string', 'minLength': 1, 'maxLength': limits.MAX_REQUEST_ID,
                      'description': 'idempotency key: the same requestId in the same project answers '
                                     'the activity it first started'}}})
describe('startActivityPlan', summary='Start an activity of a plan', tags=['activity-plans'],
         description='Writes a PENDING activity and queues its start (SQS); the worker moves it to RUNNING '
                     'and materialises the plan steps (TASK steps as tasks, the others as executions). '
                     'Needs write permission in the organization (MEMBER and up). 503 when the queue did '
                     'not take the start (nothing is left behind).',
         request=_START, responses={202: ref('Activity')}, errors=[400, 401, 403, 404, 409, 413, 415, 429, 503])
describe('takeNextTask', summary='Take the next task', tags=['tasks'],
         description="Assigns to the caller the oldest OPEN, unassigned task of the project outside any task "
                     "group that they may work on: with the organization's features.teamMatchingMode "
                     "'strict' only tasks of the caller's teams, otherwise those first, then tasks with no "
                     'team. 204 when there is none. Concurrent callers never get the same task.',
         request=schema('TakeNextRequest', {
             'type': 'object', 'required': ['projectId'],
             'properties': {'projectId': {'type': 'string', 'format': 'uuid'},
                            'teamId': {'type': 'string', 'format': 'uuid'}}}),
         responses={200: ref('Task'), 204: None}, errors=[400, 401, 403, 404, 413, 415, 429, 503])

# ----------------------------------------------------------------------------- service bridges
# (chalicelib/features/bridges/routes.py)

_PROXY_TEXT = (
    "Calls the endpoint's declared method on the bridge's baseUrl + path, whatever this request's "
    'method, with this request\'s query string and (for POST, PUT, PATCH and DELETE endpoints) its JSON '
    'body; the caller\'s headers are not forwarded, the bridge\'s and the endpoint\'s defaultHeaders '
    '(secrets interpolated) are. The upstream status and body pass through: JSON as JSON, anything '
    'else as text; X-Bridge-Upstream-Status repeats the upstream status, and a body over the cap '
    '(5 MiB) is cut, sent as text and marked X-Bridge-Truncated: true. When a field listed in the '
    "endpoint's requestSchema.required is in neither the body nor the query string, the answer is "
    '200 [] and the upstream is not contacted (an empty string, 0 or false count as present). '
    'Calling a GET endpoint needs resource:read in the organization, other methods resource:write. '
    'Every call goes through the egress fence: 400 "service bridge egress denied: <reason>" for '
    'internal targets (each redirect hop re-checked), 502 for an unreachable upstream, 504 past the '
    '30 s deadline.')
_PROXY_RESPONSES = {200: {'content': {
    'application/json': {'schema': {'description': "the upstream's JSON, or [] when required fields are missing"}},
    'text/plain': {'schema': {'type': 'string', 'description': "the upstream's text, or a cut body"}},
}}}
_PROXY_ERRORS = [400, 401, 403, 404, 413, 429, 502, 503, 504]

_PROXY_BODY = {'description': 'any JSON value, optional; passed to POST, PUT, PATCH and DELETE endpoints'}
for _method in ('GET', 'POST', 'PUT', 'PATCH', 'DELETE'):   # features/bridges/routes.py proxy_view_name
    _body = {'request': _PROXY_BODY} if _method in ('POST', 'PUT', 'PATCH') else {'request': None}
    describe(f'proxyServiceBridgeEndpoint{_method.capitalize()}', summary='Call an endpoint of a service bridge',
             tags=['service-bridges'],
             description=_PROXY_TEXT + " An unknown endpointName is 400, listing the bridge's endpoint names.",
             responses=_PROXY_RESPONSES, errors=_PROXY_ERRORS, **_body)
    describe(f'proxyServiceBridge{_method.capitalize()}',
             summary='Call the only endpoint of a single-endpoint service bridge', tags=['service-bridges'],
             description=_PROXY_TEXT + ' A bridge with other than one endpoint is 400, listing its endpoint names.',
             responses=_PROXY_RESPONSES, errors=_PROXY_ERRORS, **_body)

_TOOL_BRIDGE = schema('AgentToolBridge', {
    'type': 'object', 'required': ['id', 'endpoints'],
    'properties': {
        'id': {'type': 'string', 'format': 'uuid'}, 'name': {'type': 'string'}, 'slug': {'type': 'string'},
        'description': {'type': 'string'},
        'endpoints': {'type': 'array', 'items': {
            'type': 'object', 'required': ['name', 'method'],
            'properties': {'name': {'type': 'string'}, 'method': ref('ServiceBridgeMethod'),
                           'description': {'type': 'string'},
                           'requestSchema': ref('ServiceBridgeRequestSchema')}}},
    },
})
_TIE_TEXT = ('The call is tied to one project: an agent\'s own project, or the project of a PENDING or '
             'RUNNING execution the caller can see (executionId). A call that cannot be tied is 403; an '
             'execution or project of another organization is 404.')
describe('listServiceBridgeAgentTools', summary='list_service_bridges: the bridges an agent may call',
         tags=['service-bridges'],
         description='The agentCallable bridges of the project. ' + _TIE_TEXT + ' Listing also accepts '
                     'projectId alone (a project the caller can see).',
         parameters=[
             {'name': 'projectId', 'in': 'query', 'required': False, 'schema': {'type': 'string', 'format': 'uuid'}},
             {'name': 'executionId', 'in': 'query', 'required': False,
              'schema': {'type': 'string', 'format': 'uuid'}}],
         responses={200: schema('AgentToolBridgeList', {
             'type': 'object', 'required': ['projectId', 'bridges'],
             'properties': {'projectId': {'type': 'string', 'format': 'uuid'},
                            'executionId': {'type': 'string', 'format': 'uuid'},
                            'bridges': {'type': 'array', 'items': _TOOL_BRIDGE}}})},
         errors=[400, 401, 403, 404, 429])
describe('callServiceBridgeAgentTool', summary='call_service_bridge: call an endpoint of an agent-callable bridge',
         tags=['service-bridges'],
         description='Allowed only when the bridge is agentCallable and belongs to the tied project. '
                     + _TIE_TEXT + ' The call itself is the proxy\'s (same permission, egress, secrets); the '
                     'upstream answer comes back as {status, ok, body, truncated}.',
         request=schema('AgentToolCall', {
             'type': 'object', 'required': ['bridge', 'endpoint_name'],
             'properties': {
                 'bridge': {'type': 'string', 'minLength': 1, 'description': 'id, slug or name of the bridge'},
                 'endpoint_name': {'type': 'string', 'minLength': 1},
                 'query': {'type': 'object', 'description': 'query parameters: scalars or lists of scalars',
                           'additionalProperties': {}},
                 'body': {'description': 'JSON body for POST, PUT, PATCH and DELETE endpoints'},
                 'executionId': {'type': 'string', 'format': 'uuid',
                                 'description': 'the running execution this call is made for'},
             }}),
         responses={200: schema('AgentToolResult', {
             'type': 'object', 'required': ['status', 'ok', 'body', 'truncated'],
             'properties': {'status': {'type': 'integer', 'description': 'the upstream status'},
                            'ok': {'type': 'boolean', 'description': 'status is 2xx'},
                            'body': {'description': "the upstream's JSON, or its text, or [] when required "
                                                    'fields are missing', 'nullable': True},
                            'truncated': {'type': 'boolean'}}})},
         errors=[400, 401, 403, 404, 413, 415, 429, 502, 503, 504])

# ----------------------------------------------------------------------------- UI events
# (chalicelib/features/events/routes.py)

describe('recordUiEventBatch', summary='Record a batch of UI events', tags=['events'],
         description=(
             'At most 100 events, every kind starting with ui. (else 400, nothing stored). Stored as events '
             '(eventType = kind, payload, occurredOn, userEmail, clientIpHash: an HMAC of the client address, '
             'never the address) of the caller\'s organization (organizationId, required only for callers of '
             'several organizations), readable by its MANAGE users. Address-like keys and values, keystrokes, '
             'pointer coordinates and scroll positions are dropped from payloads. ui.presence.*, ui.task.* and '
             'ui.task_group.* events are kept only when the organization\'s features.presenceTrackingEnabled is '
             'true (read through a 60 s cache); dropped counts them.'),
         request=schema('UiEventBatch', {
             'type': 'object', 'required': ['events'],
             'properties': {
                 'organizationId': {'type': 'string', 'format': 'uuid'},
                 'events': {'type': 'array', 'maxItems': limits.MAX_UI_EVENTS, 'items': {
                     'type': 'object', 'required': ['kind'],
                     'properties': {
                         'kind': {'type': 'string', 'pattern': '^ui\\.[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$',
                                  'maxLength': limits.MAX_UI_EVENT_KIND},
                         'occurredAt': {'type': 'string', 'format': 'date-time',
                                        'description': 'default: the time of receipt'},
                         'payload': {'type': 'object', 'additionalProperties': True},
                     }}},
             }}),
         responses={200: schema('UiEventBatchResult', {
             'type': 'object', 'required': ['accepted', 'dropped'],
             'properties': {'accepted': {'type': 'integer'}, 'dropped': {'type': 'integer'}}})},
         errors=[400, 401, 413, 415, 429])
