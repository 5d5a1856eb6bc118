"""Server-to-server routes, authenticated by the internal service token (policy 'service'),
never by user credentials:

  POST /api/v2/internal/activities   start an activity: {projectId, activityPlanId, name?, ...}
                                      -> 202 with the PENDING activity, its start queued
"""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.core.errors import BadRequest
from chalicelib.features.work.routes import accepted
from chalicelib.kernel.http import policy
from chalicelib.kernel.http.request import JSON_CONTENT, body, caller

bp = Blueprint(__name__)


@bp.route(policy.service('/api/v2/internal/activities'), methods=['POST'], name='startActivityInternal',
          content_types=JSON_CONTENT)
def start_activity():
    """``{projectId, activityPlanId, name?, description?, inputs?, requestId?}`` -> the PENDING
    activity, its start queued. The organization comes from the project (a caller-supplied
    organizationId is ignored, as for every project-scoped create); the only check is that the
    plan is bound to the project."""
    from chalicelib.features.work import service as work_service  # noqa: PLC0415 - lazy: cold start
    payload = body()
    if not isinstance(payload, dict):
        raise BadRequest('The body must be a JSON object')
    return accepted(work_service.start(None, payload, caller()))
