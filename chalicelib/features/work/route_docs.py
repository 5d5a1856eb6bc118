"""The OpenAPI texts of work's routes (features/work/routes.py, internal_routes.py), declared
with kernel/http/docmeta.py; features/work/routes.py imports this module at app start."""
from __future__ import annotations

from chalicelib.core import limits
from chalicelib.kernel.http.docmeta import derived, describe, ref, schema

# ----------------------------------------------------------------------------- internal routes

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
