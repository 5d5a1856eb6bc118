"""Routes for task and execution actions (operation ids fixed by the contract), and the
resource-scheme resolver."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.kernel.http.aliases import alias
from chalicelib.kernel.http.request import ANY_CONTENT, JSON_CONTENT, body, caller, one_based_pages, params
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
    req = listing.parse_request(BY_PATH['task-group-history'], params(), one_based=one_based_pages())
    return tasks_service.task_group_history(id, req, caller())


@bp.route('/api/resolve/schemes', methods=['GET'], name='listResourceSchemes', content_types=ANY_CONTENT)
def resource_schemes():
    scope = {'global': 'platform', 'org': 'organization', 'project': 'project'}
    return [{'scheme': f.path, 'endpointPattern': f'/api/{f.path}/{{{f.id_param}}}', 'scope': scope[f.scope],
             'description': f'{f.entity} resources'} for f in FAMILIES]
