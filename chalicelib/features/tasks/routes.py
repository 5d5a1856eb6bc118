"""Routes for task and execution actions (operation ids fixed by the contract), and the
resource-scheme resolver."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.kernel.http.aliases import alias
from chalicelib.kernel.http.docmeta import describe, ref, schema
from chalicelib.kernel.http.request import (
    ANY_CONTENT,
    JSON_CONTENT,
    body,
    caller,
    check_params,
    one_based_pages,
    page_response,
    params,
)
from chalicelib.kernel.registry import BY_PATH, FAMILIES

bp = Blueprint(__name__)


@bp.route('/api/tasks/{id}/status', methods=['PUT'], name='setTaskStatus', content_types=JSON_CONTENT)
def set_task_status(id):
    from chalicelib.features.tasks import service as tasks_service  # noqa: PLC0415 - lazy: cold start
    return tasks_service.set_task_status(id, body(), caller())


@bp.route('/api/executions/{executionId}/cancel', methods=['POST'], name='cancelExecution',
          content_types=ANY_CONTENT)
def cancel_execution(executionId):
    from chalicelib.features.tasks import service as tasks_service  # noqa: PLC0415 - lazy: cold start
    return tasks_service.cancel_execution(executionId, caller())


# the platform SDK's ExecutionEndpoint.cancel sends PUT (docs/api/clients.md): the same view
bp.route(alias('/api/executions/{executionId}/cancel', 'PUT', '/api/executions/{executionId}/cancel'),
         methods=['PUT'], name='cancelExecutionSdkAlias', content_types=ANY_CONTENT)(cancel_execution)


@bp.route('/api/task-groups/{id}/history', methods=['GET'], name='listHistoryForTaskGroup',
          content_types=ANY_CONTENT)
def task_group_history(id):
    from chalicelib.features.tasks import service as tasks_service  # noqa: PLC0415 - lazy: cold start
    from chalicelib.kernel import listing  # noqa: PLC0415 - lazy: cold start
    ignored = check_params(listing.PARAMETERS, 'on GET /api/task-groups/{id}/history')
    req = listing.parse_request(BY_PATH['task-group-history'], params(), one_based=one_based_pages())
    return page_response(tasks_service.task_group_history(id, req, caller()), ignored)


@bp.route('/api/resolve/schemes', methods=['GET'], name='listResourceSchemes', content_types=ANY_CONTENT)
def resource_schemes():
    scope = {'global': 'platform', 'org': 'organization', 'project': 'project'}
    return [{'scheme': f.path, 'endpointPattern': f'/api/{f.path}/{{{f.id_param}}}', 'scope': scope[f.scope],
             'description': f'{f.entity} resources'} for f in FAMILIES]


# ----------------------------------------------------------------------------- workflow routes

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
