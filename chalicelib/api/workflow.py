"""Routes for task and execution actions (operation ids fixed by the contract)."""
from __future__ import annotations

from chalice import Blueprint

from .http import ANY_CONTENT, JSON_CONTENT, params, raw_body

bp = Blueprint(__name__)


@bp.route('/api/tasks/{id}/status', methods=['PUT'], name='setTaskStatus', content_types=JSON_CONTENT)
def set_task_status(id):
    from chalicelib.services.workflow import set_task_status
    return set_task_status(id, raw_body())


@bp.route('/api/executions/{executionId}/cancel', methods=['POST'], name='cancelExecution',
          content_types=ANY_CONTENT)
def cancel_execution(executionId):
    from chalicelib.services.workflow import cancel_execution
    return cancel_execution(executionId)


@bp.route('/api/task-groups/{id}/history', methods=['GET'], name='listHistoryForTaskGroup',
          content_types=ANY_CONTENT)
def task_group_history(id):
    from chalicelib.services.workflow import task_group_history
    return task_group_history(id, params())


@bp.route('/api/resolve/schemes', methods=['GET'], name='listResourceSchemes', content_types=ANY_CONTENT)
def resource_schemes():
    from chalicelib.domain.registry import FAMILIES
    scope = {'global': 'platform', 'org': 'organization', 'project': 'project'}
    return [{'scheme': f.path, 'endpointPattern': f'/api/{f.path}/{{{f.id_param}}}', 'scope': scope[f.scope],
             'description': f'{f.entity} resources'} for f in FAMILIES]
