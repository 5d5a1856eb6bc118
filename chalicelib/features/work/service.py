"""Work orchestration: activity starts through SQS, materialising a plan into its tasks and
executions, cancellation's end of an activity, and taking the next task.

Front doors (thin adapters: features/work/routes.py, internal_routes.py, front/handlers.py):
``POST /api/v2/internal/activities`` and
``POST /api/activity-plans/{id}/start`` call ``start``; the queue worker
(features/work/worker.py ``handle_message``) calls ``run_start`` and ``run_attempt``;
``POST /api/tasks/take-next`` calls ``take_next``. docs/api/work.md has the wire shapes.

Messages on the activity queue (JSON bodies; the correlation id rides as the message
attribute ``correlationId``):

  {"type": "activity.start", "activityId": ...}                     a PENDING activity to run
  {"type": "execution.attempt", "executionId": ..., "attempt": n}   attempt n of an execution

Every message is idempotent through the records themselves (conditional writes on their
changeSequence, no separate idempotency table):

* a start claims the activity PENDING -> RUNNING in the same transaction that creates its
  tasks and executions and sets its work counter: a redelivered start finds it RUNNING and
  only re-sends the first attempt of executions that never started (the sends of the first
  delivery may have failed);
* an attempt is run by the one execution engine (features/work/engine.py): its claim, budget,
  failure path and redelivery rule are the engine's; ``ACTIVITY`` below says what is particular
  to an activity's execution (one step, the start's inputs, the activity's end).
"""
from __future__ import annotations

import json
import uuid
from typing import Any

from chalicelib.core import clock, limits, observability
from chalicelib.core.errors import BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable
from chalicelib.core.expressions import ExpressionError, evaluate
from chalicelib.core.principal import Principal
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.features.work import engine
from chalicelib.features.work import store as work_store
from chalicelib.features.work.statuses import CANCELLED, FAILED, PENDING
from chalicelib.kernel import access, crud, records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict

log = observability.get_logger('work')

ACTIVITY_TERMINAL = frozenset({'COMPLETED', 'FAILED', 'CANCELLED'})
MAX_REQUEST_ID = limits.MAX_REQUEST_ID
START = 'activity.start'
ATTEMPT = 'execution.attempt'


def _uuid(body: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise BadRequest(f"Field '{name}' is required")
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise BadRequest(f"Field '{name}' refers to a record that does not exist: {value[:64]}") from None


# ----------------------------------------------------------------------------- starts

def start(plan_id: str | None, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """Write a PENDING activity of a plan bound to the project and queue its start; the
    activity (answered 202). ``requestId`` makes it idempotent: the same requestId in the same
    project answers the activity it first made. If the message cannot be sent, the activity is
    removed again and the answer is 503 (no PENDING activity is left without its message)."""
    if not isinstance(body, dict):
        raise BadRequest('The body must be a JSON object')
    plan = None
    if plan_id is not None:   # the plan named by the path: 404 unless the caller can see it
        plan = crud.load_visible('activity-plans', plan_id, principal)
        plan_id = plan.id
    project_id = _uuid(body, 'projectId')
    plan_id = plan_id if plan_id is not None else _uuid(body, 'activityPlanId')
    inputs = body.get('inputs', {})
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, dict):
        raise BadRequest("Field 'inputs' must be an object")
    request_id = body.get('requestId')
    if request_id is not None and (not isinstance(request_id, str) or not 1 <= len(request_id) <= MAX_REQUEST_ID):
        raise BadRequest(f"Field 'requestId' must be a string of 1-{MAX_REQUEST_ID} characters")
    project = table.get('projects', project_id)
    if project is None or not access.can_see_org(principal, project.org):
        raise BadRequest(f"Field 'projectId' refers to a project that does not exist: {project_id}")
    if plan is None:
        plan = table.get('activity-plans', plan_id)
    if plan is None or plan.data.get('projectId') != project_id:
        raise BadRequest(f'Activity plan {plan_id} is not bound to project {project_id}')
    if request_id is not None:
        existing = _by_request(project_id, request_id, principal)
        if existing is not None:
            return existing
    activity = {k: v for k, v in body.items() if k in ('name', 'description', 'metadata')}
    activity.setdefault('name', plan.data.get('name') or 'activity')
    activity.update(projectId=project_id, activityPlanId=plan_id, status='PENDING', inputs=inputs)
    if request_id is not None:
        activity['requestId'] = request_id
    try:
        data = crud.create('activities', activity, principal)
    except Conflict:
        if request_id is None:
            raise
        existing = _by_request(project_id, request_id, principal)   # a concurrent start won
        if existing is None:
            raise
        return existing
    try:
        work_store.send_messages([({'type': START, 'activityId': data['id']}, 0)],
                                 correlation_id=observability.correlation_id(),
                                 group=data.get('organizationId') or observability.current().get('organization_id'))
    except work_store.SendFailed as exc:
        log.warning('activity %s: start message not sent (%s); removing the activity', data['id'], exc)
        _withdraw(data['id'])
        raise ServiceUnavailable('The work queue did not take the start; nothing was started, retry shortly',
                                 retry_after=2) from None
    observability.count('ActivityStarts')
    return data


def _by_request(project_id: str, request_id: str, principal: Principal) -> dict[str, Any] | None:
    owner = table.unique_owner('activities', scope=project_id, field_name='requestId', value=request_id)
    if owner is None:
        return None
    stored = table.get('activities', owner)
    if stored is None or not crud.visible(family_of('activities'), principal, stored):
        return None
    return stored.data


def _withdraw(activity_id: str) -> None:
    stored = table.get('activities', activity_id)
    if stored is not None and stored.data.get('status') == 'PENDING':
        records.commit(records.delete_ops(family_of('activities'), stored, SERVICE))


def start_scheduled(job: dict[str, Any], run_on: str) -> dict[str, Any]:
    """A scheduled job's run (features/work/schedules.py): its target plan started as the service."""
    plan = table.get('activity-plans', str(job.get('targetId')))
    if plan is None:
        raise BadRequest(f"scheduled job {job['id']}: its activity plan {job.get('targetId')} does not exist")
    options = job.get('options') or {}
    return start(plan.id, {'projectId': plan.data['projectId'], 'inputs': options.get('inputs') or {},
                           'name': job.get('name') or plan.data.get('name'),
                           'requestId': f'schedule:{job["id"]}:{run_on}'}, SERVICE)


# ----------------------------------------------------------------------------- materialising a plan

def run_start(activity_id: str) -> str:
    fam = family_of('activities')
    stored = table.get(fam.path, activity_id)
    if stored is None:
        return 'gone'
    observability.annotate(organization_id=stored.org)
    status = stored.data.get('status')
    if status == 'RUNNING':
        return _resend_first_attempts(activity_id)
    if status != 'PENDING':
        return f'already {status}'
    plan = table.get('activity-plans', str(stored.data.get('activityPlanId')))
    if plan is None:
        return _fail_activity(stored, 'its activity plan no longer exists')
    inputs = stored.data.get('inputs') or {}
    tasks, executions = [], []
    for step in plan.data.get('steps') or []:
        try:
            if step.get('conditional') and not evaluate(step['conditional'], inputs, bindings={'inputs': inputs}):
                continue
        except ExpressionError as exc:
            return _fail_activity(stored, f"step '{step.get('name')}': conditional: {exc}")
        if step.get('stepType') == 'TASK':
            tasks.append(_task_of(step, stored))
        else:
            executions.append(_execution_of(step, stored, inputs))
    new = dict(stored.data)
    now = clock.now_iso()
    new.update(status='RUNNING' if executions else 'COMPLETED', startedOn=now, updatedOn=now,
               changeSequence=stored.seq + 1)
    if not executions:
        new['completedOn'] = now
    ops = records.update_ops(fam, new, stored, principal=SERVICE)
    if tasks:
        ops += records.create_ops(family_of('tasks'), tasks, SERVICE)
        for task in tasks:
            try:   # references are checked by reads (kernel/crud.py, issue 27)
                ops += crud.reference_ops(family_of('tasks'), task, stored.org)
            except BadRequest as exc:
                return _fail_activity(stored, f"a TASK step's options: {exc}")
    if executions:
        ops += records.create_ops(family_of('executions'), executions, SERVICE)
        ops.append(work_store.work_move(activity_id, 'remaining', len(executions)))
    try:
        records.commit(ops)
    except WriteConflict as exc:
        if exc.code == 'TransactionConflict':
            raise
        tag = exc.op.tag if exc.op is not None else {}
        if tag.get('what') == 'reference':
            return _fail_activity(stored, f"a TASK step's options.{tag.get('field')} refers to a record "
                                          f"that does not exist: {tag.get('value')}")
        return 'claimed by another delivery'
    _send_attempts([(e['id'], 1, 0) for e in executions])
    observability.count('ActivitiesStarted')
    return f'started: {len(tasks)} tasks, {len(executions)} executions'


def _task_of(step: dict[str, Any], activity) -> dict[str, Any]:
    options = step.get('options') or {}
    values = {'title': options.get('title') or step['name'], 'createdByActivityId': activity.id}
    for key in ('statusSlug', 'assigneeId', 'teamId', 'description'):
        if options.get(key) is not None:
            values[key] = options[key]
    return records.new_record(family_of('tasks'), values, principal=SERVICE, org=activity.org,
                              project_id=activity.data['projectId'])


def _execution_of(step: dict[str, Any], activity, inputs: dict[str, Any]) -> dict[str, Any]:
    values = {'name': step['name'], 'status': PENDING, 'activityId': activity.id, 'step': step,
              'attempts': 0, 'inputs': inputs,
              'statusMessages': [engine.message('INFO', f"{step['stepType']} step queued")]}
    return records.new_record(family_of('executions'), values, principal=SERVICE, org=activity.org,
                              project_id=activity.data['projectId'])


def _fail_activity(stored, reason: str) -> str:
    new = dict(stored.data)
    now = clock.now_iso()
    new.update(status='FAILED', updatedOn=now, completedOn=now, changeSequence=stored.seq + 1,
               metadata={**(stored.data.get('metadata') or {}), 'failureReason': reason})
    try:
        records.commit(records.update_ops(family_of('activities'), new, stored, principal=SERVICE))
    except WriteConflict as exc:
        if exc.code == 'TransactionConflict':
            raise
    return f'failed: {reason}'


def _send_attempts(attempts: list[tuple[str, int, int]]) -> None:
    """(execution id, attempt, delay seconds) messages; a failed send raises, so the message
    being processed is delivered again and its recovery sends them."""
    engine.send([(ACTIVITY.message(eid, 0, n, 0), delay) for eid, n, delay in attempts])


def _execution_ids(activity_id: str) -> list[str]:
    stored = table.get('activities', activity_id)
    if stored is None:
        return []
    ids = table.walk_value('executions', stored.org, slot=family_of('executions').slot_of('activityId'),
                           field_name='activityId', value=activity_id, descending=False,
                           limit=None)
    return [i for _, i in ids]


def _resend_first_attempts(activity_id: str) -> str:
    pending = []
    for eid in _execution_ids(activity_id):
        execution = table.get('executions', eid)
        if execution is not None and engine.step_unclaimed(execution.data):
            pending.append((eid, 1, 0))
    _send_attempts(pending)
    return f'already RUNNING; {len(pending)} first attempts sent again'


# ----------------------------------------------------------------------------- attempts

class ActivityKind(engine.Kind):
    """An activity's execution: one step (``step``), run by the engine (features/work/engine.py)
    with the start's ``inputs`` as the JSONata root (``$inputs`` too), as the service principal;
    its end moves the activity's work count and may finish the activity."""
    name = 'activity'

    def steps(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        return [data.get('step') or {}]

    def message(self, execution_id: str, index: int, attempt: int, continuation: int | None = None) -> dict[str, Any]:
        body = {'type': ATTEMPT, 'executionId': execution_id, 'attempt': attempt}
        if continuation is not None:
            body['continuation'] = continuation
        return body

    def context(self, data: dict[str, Any]) -> engine.Context:
        inputs = data.get('inputs') or {}
        return engine.Context(inputs, SERVICE, bindings={'inputs': inputs})

    def exhausted(self, policy: dict[str, Any]) -> tuple[str | None, str, str]:
        if policy['onExhausted'] == 'SKIP':
            return CANCELLED, 'WARNING', 'step skipped'
        if policy['onExhausted'] == 'CONTINUE':
            return FAILED, 'ERROR', 'the activity goes on'
        return FAILED, 'ERROR', 'the activity fails'

    def after_write(self, data: dict[str, Any], event: str) -> None:
        if event == 'ended' and data.get('activityId'):
            finish_activity(data['activityId'])

    def bridge_output(self, result) -> Any:
        try:
            return json.loads(result.text) if result.json_body else result.text
        except ValueError:
            return result.text


ACTIVITY = ActivityKind()


def run_attempt(execution_id: str, attempt: int, *, continuation: int | None = None,
                deadline: float | None = None) -> str:
    """An ``execution.attempt`` message: the engine's loop over the activity's execution."""
    return engine.run(ACTIVITY, execution_id, 0, attempt, continuation=continuation, deadline=deadline)


def finish_activity(activity_id: str) -> str | None:
    """COMPLETED (or FAILED when an execution exhausted with onExhausted FAIL) once none of its
    executions is left; the new status, or None. Any number of callers may race: one writes."""
    counts = work_store.work_counts(activity_id)
    if counts['remaining'] > 0:
        return None
    fam = family_of('activities')
    for _ in range(3):
        stored = table.get(fam.path, activity_id)
        if stored is None or stored.data.get('status') != 'RUNNING':
            return None
        new = dict(stored.data)
        now = clock.now_iso()
        new.update(status='FAILED' if counts['failed'] else 'COMPLETED', completedOn=now, updatedOn=now,
                   changeSequence=stored.seq + 1)
        try:
            records.commit(records.update_ops(fam, new, stored, principal=SERVICE))
            return new['status']
        except WriteConflict:
            continue
    return None


# ----------------------------------------------------------------------------- take next

def take_next(body: dict[str, Any], principal: Principal) -> dict[str, Any] | None:
    """Assign to the caller the oldest OPEN, unassigned, ungrouped task of the project they may
    work on (docs/api/work.md); None when there is none. The claim is conditional on the task's sequence:
    concurrent callers never get the same task."""
    if not isinstance(body, dict):
        raise BadRequest('The body must be a JSON object')
    project_id = _uuid(body, 'projectId')
    team_id = _uuid(body, 'teamId', required=False)
    project = table.get('projects', project_id)
    if project is None or not access.can_see_org(principal, project.org):
        raise NotFound(f'No Project with id {project_id}')
    org = project.org
    access.require_active(principal, org)
    access.require_write(principal, family_of('tasks'), org)
    mine = {t['id'] for t in table.query_tenant('teams', org) if principal.user_id in (t.get('memberIds') or [])}
    if team_id is not None:
        if team_id not in mine:
            raise Forbidden(f'You are not a member of team {team_id}')
        mine = {team_id}
    organization = table.get('organizations', org)
    strict = ((organization.data.get('features') or {}) if organization else {}).get('teamMatchingMode') == 'strict'
    open_slugs = {s.get('slug') for s in table.query_tenant('task-statuses', org) if s.get('statusType') == 'OPEN'}
    candidates = [t for t in table.query_project('tasks', project_id)
                  if not t.get('assigneeId') and not t.get('taskGroupId')
                  and (not t.get('statusSlug') or t.get('statusSlug') in open_slugs)
                  and (t.get('teamId') in mine or (not strict and not t.get('teamId')))]
    candidates.sort(key=lambda t: (t.get('teamId') not in mine, t.get('createdOn', ''), t['id']))
    for task in candidates:
        stored = table.get('tasks', task['id'])
        if stored is None or stored.data.get('assigneeId'):
            continue
        try:
            return crud.update('tasks', task['id'], {'assigneeId': principal.user_id, 'changeSequence': stored.seq},
                               principal=principal, action='taken')
        except Conflict:
            continue   # someone else took it (or changed it) first: the next one
    return None
