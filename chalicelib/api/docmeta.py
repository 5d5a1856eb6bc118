"""OpenAPI metadata that cannot be derived from the route table or the resource registry.

The OpenAPI generator (chalicelib/services/openapi.py) walks ``app.routes``: registry routes
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

OPERATIONS: dict[str, dict[str, Any]] = {}   # view name -> entry
SCHEMAS: dict[str, dict[str, Any]] = {}      # extra named component schemas

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


def schema(name: str, definition: dict[str, Any]) -> dict[str, str]:
    """Declare a named component schema; returns a $ref to it."""
    SCHEMAS[name] = definition
    return ref(name)


# ----------------------------------------------------------------------------- account routes
# (chalicelib/api/account.py)

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
         request=_API_KEY_REQUEST, responses={201: _NEW_API_KEY}, errors=[400, 401, 413, 415, 429, 503])
describe('revokeMyApiKey', summary="Revoke one of the signed-in user's API keys", tags=['account'],
         responses={204: None}, errors=[401, 404, 429, 503])

# ----------------------------------------------------------------------------- workflow routes
# (chalicelib/api/workflow.py)

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
# (chalicelib/api/internal.py)

describe('startActivityInternal', summary='Start an activity (server-to-server)', tags=['internal'],
         description='Authenticated by the internal service token (x-service-token, or '
                     '"Authorization: Bearer <token>"). The organization is derived from the project; '
                     'the activity plan must be bound to the project.',
         request={'allOf': [ref('ActivityCreateRequest'), {
             'type': 'object', 'required': ['projectId', 'activityPlanId'],
             'properties': {'activityPlanId': {'type': 'string', 'format': 'uuid'}}}]},
         responses={201: ref('Activity')}, errors=[400, 401, 409, 413, 415, 429, 503])
