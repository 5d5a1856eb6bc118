"""Routes of work orchestration (features/work/service.py): the caller-facing activity start and
taking the next task.

  POST /api/activity-plans/{id}/start  {projectId, name?, description?, inputs?, requestId?}
                                       -> 202 with the PENDING activity (its start queued)
  POST /api/tasks/take-next            {projectId, teamId?} -> 200 the task now assigned to
                                       the caller, 204 when there is none
"""
from __future__ import annotations

from chalice import Blueprint, Response

from chalicelib.features.work import route_docs  # noqa: F401 - the OpenAPI texts of these routes
from chalicelib.kernel.http.request import JSON_CONTENT, body, caller, no_content

bp = Blueprint(__name__)


def accepted(value) -> Response:
    return Response(body=value, status_code=202)


@bp.route('/api/activity-plans/{id}/start', methods=['POST'], name='startActivityPlan', content_types=JSON_CONTENT)
def start_activity_plan(id):
    from chalicelib.features.work import service as work_service  # noqa: PLC0415 - lazy: cold start
    return accepted(work_service.start(id, body(), caller()))


@bp.route('/api/tasks/take-next', methods=['POST'], name='takeNextTask', content_types=JSON_CONTENT)
def take_next_task():
    from chalicelib.features.work import service as work_service  # noqa: PLC0415 - lazy: cold start
    task = work_service.take_next(body(), caller())
    return no_content() if task is None else task
