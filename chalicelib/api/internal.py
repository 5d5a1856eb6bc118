"""Server-to-server routes, authenticated by the internal service token (policy 'service'),
never by user credentials:

  POST /api/v2/internal/activities   start an activity: {projectId, activityPlanId, name?, ...}
                                      -> 202 with the PENDING activity, its start queued
"""
from __future__ import annotations

from chalice import Blueprint

from . import policy
from .http import JSON_CONTENT, body, caller
from .work import accepted

bp = Blueprint(__name__)


@bp.route(policy.service('/api/v2/internal/activities'), methods=['POST'], name='startActivityInternal',
          content_types=JSON_CONTENT)
def start_activity():
    from chalicelib.services import internal  # noqa: PLC0415 - lazy: cold start
    return accepted(internal.start_activity(body(), caller()))
