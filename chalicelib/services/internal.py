"""Server-to-server callers: the internal activity-start route trusts a service token
(``INTERNAL_SERVICE_TOKEN``), compared in constant time, instead of user credentials.

The service caller acts for the platform (it may write in any organization) and skips the
caller-facing activity-start permission; what it may do is limited by the routes marked
'service' (chalicelib/api/internal.py), and each of those checks what the contract asks.
It is not rate limited (no ``rate_key``): it is our own back end.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from chalicelib.core.config import get_config
from chalicelib.core.errors import BadRequest, Unauthorized
from chalicelib.core.principal import Principal
from chalicelib.core.secrets import same
from chalicelib.store import table

from . import resources

SERVICE_USER = '00000000-0000-0000-0000-000000000000'
SERVICE = Principal(user_id=SERVICE_USER, email='service@internal', platform_admin=True,
                    credential='service', rate_key='')


def authenticate_service(headers: Mapping[str, str]) -> Principal:
    expected = get_config().internal_service_token
    auth = headers.get('authorization') or ''
    token = headers.get('x-service-token') or (auth[7:].strip() if auth.lower().startswith('bearer ') else None)
    if not expected or not same(token, expected):
        raise Unauthorized('A valid service token is required')
    return SERVICE


def _uuid_field(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"Field '{name}' is required")
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise BadRequest(f"Field '{name}' refers to a record that does not exist: {value[:64]}") from None


def start_activity(body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """POST /api/v2/internal/activities: create a PENDING activity of an activity plan.

    The organization comes from the project (a caller-supplied organizationId is ignored, as
    for every project-scoped create); the only check is that the plan is bound to the project.
    """
    project_id = _uuid_field(body, 'projectId')
    plan_id = _uuid_field(body, 'activityPlanId')
    if table.get('projects', project_id) is None:
        raise BadRequest(f"Field 'projectId' refers to a project that does not exist: {project_id}")
    plan = table.get('activity-plans', plan_id)
    if plan is None or plan.data.get('projectId') != project_id:
        raise BadRequest(f'Activity plan {plan_id} is not bound to project {project_id}')
    activity = {k: v for k, v in body.items() if k not in ('organizationId', 'status')}
    activity.update(projectId=project_id, activityPlanId=plan_id, status='PENDING')
    return resources.create('activities', activity, principal)
