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
  errors       error statuses the operation answers (400, 401, 403, 404, 409, 415, 429)
  parameters   extra OpenAPI parameter objects (query, header)

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
             parameters: list[dict[str, Any]] | None = None) -> None:
    entry: dict[str, Any] = {}
    for key, value in (('summary', summary), ('description', description), ('tags', tags),
                       ('responses', responses), ('errors', errors), ('parameters', parameters)):
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
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 200},
        'expiresAt': {'type': 'string', 'format': 'date-time', 'nullable': True},
    },
})
_ACCOUNT = schema('Account', {
    'allOf': [ref('User'), {
        'type': 'object', 'required': ['memberships', 'platformAdmin'],
        'properties': {
            'memberships': {'type': 'array', 'items': {
                'type': 'object', 'required': ['organizationId', 'role'],
                'properties': {'organizationId': {'type': 'string', 'format': 'uuid'},
                               'role': ref('MembershipRole')}}},
            'platformAdmin': {'type': 'boolean'},
        },
    }],
})

describe('getAccountMe', summary='The signed-in user, with their memberships', tags=['account'],
         responses={200: _ACCOUNT}, errors=[401, 404, 429])
describe('listMyApiKeys', summary="List the signed-in user's API keys", tags=['account'],
         responses={200: {'type': 'array', 'items': _API_KEY}}, errors=[401, 429])
describe('createMyApiKey', summary='Create an API key for the signed-in user', tags=['account'],
         request=_API_KEY_REQUEST, responses={201: _NEW_API_KEY}, errors=[400, 401, 415, 429])
describe('revokeMyApiKey', summary="Revoke one of the signed-in user's API keys", tags=['account'],
         responses={204: None}, errors=[401, 404, 429])

# ----------------------------------------------------------------------------- contract routes
# Operation ids the contract fixes; their routes are added elsewhere. An entry for a route that
# does not exist yet is simply unused.

describe('setTaskStatus', summary='Change the status of a task', tags=['tasks'],
         responses={200: ref('Task')})
describe('listHistoryForTaskGroup', summary='History of one task group', tags=['task-groups'])
describe('listTaskGroupHistory', summary='History of task groups', tags=['task-groups'])
describe('cancelExecution', summary='Cancel an execution', tags=['executions'])
