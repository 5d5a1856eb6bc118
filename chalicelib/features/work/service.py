"""Work orchestration: activity starts through SQS, the worker that materialises a plan and
runs its executions under their ExecutionPolicy, cancellation, and taking the next task.

Front doors (thin adapters: features/work/routes.py, internal_routes.py, front/handlers.py):
``POST /api/v2/internal/activities`` and
``POST /api/activity-plans/{id}/start`` call ``start``; the ``@app.on_sqs_message`` worker (and
``make run``'s queue poller) calls ``handle_message`` per message; ``POST /api/tasks/take-next``
calls ``take_next``. docs/api/work.md has the wire shapes.

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
* attempt n runs only when the execution has made n-1 attempts; the claim (RUNNING, attempts
  n) is conditional, so a duplicate does nothing. A redelivered attempt whose retry was
  recorded but whose retry message may not have been sent sends it again; an attempt found
  RUNNING on redelivery was interrupted (its worker died) and counts as failed.

The worker spends the Lambda's time, not more (docs/operations/worker.md): ``handle_message``
takes the invocation's ``deadline`` (front/handlers.py, from the Lambda context). A message whose
work cannot finish before it, less ``SAFETY_MARGIN_SECONDS``, is not started (``Deferred``: it goes
back as a batch item failure and is redelivered); an attempt starts only when what is left covers
its whole time box (``attempt_seconds``), and that time box never exceeds what is left.
"""
from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta
from typing import Any

from chalicelib.core import clock, limits, observability
from chalicelib.core.errors import ApiError, BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable
from chalicelib.core.expressions import ExpressionError, evaluate
from chalicelib.core.principal import Principal
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.features.work import store as work_store
from chalicelib.kernel import access, records
from chalicelib.kernel import crud as resources
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.shapes import steps as step_rules
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict

log = observability.get_logger('work')

TERMINAL = frozenset({'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'})
ACTIVITY_TERMINAL = frozenset({'COMPLETED', 'FAILED', 'CANCELLED'})
MAX_STATUS_MESSAGES = 50
MAX_REQUEST_ID = limits.MAX_REQUEST_ID
INTERRUPTED_AFTER_SECONDS = 60
START = 'activity.start'
ATTEMPT = 'execution.attempt'


class PoisonMessage(Exception):
    """A message no delivery can process (not JSON, unknown type): it fails until the queue's
    maxReceiveCount moves it to the dead-letter queue."""


# The worker's budget (docs/operations/worker.md).
SAFETY_MARGIN_SECONDS = 3.0    # kept for writing an attempt's outcome and answering the batch
START_SECONDS = 2.0            # what any message needs at least (an activity start: a few writes)
SCRIPT_MAX_SECONDS = 10        # a SCRIPT attempt's time box never exceeds this
MAX_ATTEMPT_SECONDS = 20       # nor does any attempt's (a 29 s Lambda: one long attempt and change)


class Deferred(Exception):
    """Not started: the invocation's remaining time cannot cover it. The message goes back as a
    batch item failure (front/handlers.py) and is redelivered; nothing of it was written."""


def seconds_left(deadline: float | None) -> float:
    """What the invocation still has for work, its safety margin kept (inf without a deadline)."""
    if deadline is None:
        return float('inf')
    return deadline - time.monotonic() - SAFETY_MARGIN_SECONDS


def attempt_seconds(step: dict[str, Any], policy: dict[str, Any]) -> float:
    """The time box of one attempt of ``step``: its policy's timeout, within the worker's caps."""
    kind = step.get('stepType')
    if kind == 'AGENT':
        return START_SECONDS   # it only looks the agent up and records that it waits
    cap = SCRIPT_MAX_SECONDS if kind == 'SCRIPT' else MAX_ATTEMPT_SECONDS
    return float(min(policy['timeoutSeconds'], cap))


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


def _message(kind: str, body: str) -> dict[str, Any]:
    return {'type': kind, 'at': clock.now_iso(), 'message': body}


def _append(data: dict[str, Any], kind: str, text: str) -> None:
    data['statusMessages'] = [*(data.get('statusMessages') or []), _message(kind, text)][-MAX_STATUS_MESSAGES:]


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
        plan = resources.load_visible('activity-plans', plan_id, principal)
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
        data = resources.create('activities', activity, principal)
    except Conflict:
        if request_id is None:
            raise
        existing = _by_request(project_id, request_id, principal)   # a concurrent start won
        if existing is None:
            raise
        return existing
    try:
        work_store.send_messages([({'type': START, 'activityId': data['id']}, 0)],
                                 correlation_id=observability.correlation_id())
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
    if stored is None or not resources.visible(family_of('activities'), principal, stored):
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


# ----------------------------------------------------------------------------- the worker

def handle_message(body: str, *, deadline: float | None = None) -> str:
    """Process one queue message; what happened (for the log line). Raises to have the
    message delivered again (PoisonMessage for one that never can be; Deferred for one the
    invocation has no time left for: ``deadline`` is a ``time.monotonic()`` instant)."""
    if seconds_left(deadline) < START_SECONDS:
        raise Deferred(f'{max(0.0, seconds_left(deadline)):.1f} s left of the invocation')
    try:
        message = json.loads(body)
    except (TypeError, ValueError):
        raise PoisonMessage('the message is not JSON') from None
    if not isinstance(message, dict):
        raise PoisonMessage('the message is not a JSON object')
    kind = message.get('type')
    if kind == START and isinstance(message.get('activityId'), str):
        return run_start(message['activityId'])
    if kind == ATTEMPT and isinstance(message.get('executionId'), str) and isinstance(message.get('attempt'), int):
        return run_attempt(message['executionId'], message['attempt'], deadline=deadline)
    raise PoisonMessage(f'unknown message type {str(kind)[:40]!r}')


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
                ops += resources.reference_ops(family_of('tasks'), task, stored.org)
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
    values = {'name': step['name'], 'status': 'PENDING', 'activityId': activity.id, 'step': step,
              'attempts': 0, 'inputs': inputs,
              'statusMessages': [_message('INFO', f"{step['stepType']} step queued")]}
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
    if not attempts:
        return
    try:
        work_store.send_messages([({'type': ATTEMPT, 'executionId': eid, 'attempt': n}, delay)
                                  for eid, n, delay in attempts], correlation_id=observability.correlation_id())
    except work_store.SendFailed as exc:
        raise ServiceUnavailable(f'attempt messages not sent: {exc}') from None


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
        if execution is not None and execution.data.get('status') == 'PENDING' and not execution.data.get('attempts'):
            pending.append((eid, 1, 0))
    _send_attempts(pending)
    return f'already RUNNING; {len(pending)} first attempts sent again'


# ----------------------------------------------------------------------------- attempts

class _Outcome:
    def __init__(self, ok: bool, *, output: Any = None, reason: str = '', timed_out: bool = False,
                 waiting: str | None = None) -> None:
        self.ok, self.output, self.reason, self.timed_out, self.waiting = ok, output, reason, timed_out, waiting


def run_attempt(execution_id: str, attempt: int, *, deadline: float | None = None) -> str:
    fam = family_of('executions')
    stored = table.get(fam.path, execution_id)
    if stored is None:
        return 'gone'
    observability.annotate(organization_id=stored.org)
    data = stored.data
    status, made = data.get('status', 'PENDING'), int(data.get('attempts') or 0)
    if status in TERMINAL:
        return f'already {status}'
    policy = step_rules.policy_of(data.get('step') or {})
    if attempt == made and status == 'PENDING' and data.get('nextAttemptAt'):
        delay = max(0, int((clock.parse_instant(data['nextAttemptAt']) - clock.now()).total_seconds()))
        _send_attempts([(execution_id, attempt + 1, min(delay, step_rules.MAX_DELAY_SECONDS))])
        return 'retry message sent again'
    if attempt == made and status == 'RUNNING' and not (data.get('metadata') or {}).get('waitingFor'):
        # the same message again: a duplicate while the attempt runs, or the attempt's worker died
        # or failed after the claim (an outcome write refused under throttling; its message came
        # back after the visibility timeout, which may be shorter than the attempt's time).
        # Consuming it would leave a dead attempt RUNNING for good: a check-back message (the
        # same attempt) comes when the attempt's time is up and finds it ended, or interrupted.
        idle = (clock.now() - clock.parse_instant(data['updatedOn'])).total_seconds()
        left = policy['timeoutSeconds'] + INTERRUPTED_AFTER_SECONDS - idle
        if left > 0:
            wait = min(int(left) + 1, step_rules.MAX_DELAY_SECONDS)
            _send_attempts([(execution_id, attempt, wait)])
            return f'attempt in progress: checked again in {wait} s'
        return _after_failure(stored, attempt, policy, _Outcome(False, reason='the attempt was interrupted'))
    if attempt != made + 1 or status not in ('PENDING', 'RUNNING'):
        return 'duplicate'
    box = attempt_seconds(data.get('step') or {}, policy)
    left = seconds_left(deadline)
    if left < box:   # before the claim: a deferred attempt is not an attempt made
        raise Deferred(f'attempt {attempt} needs {box:g} s, {max(0.0, left):.1f} s left of the invocation')
    new = dict(data)
    now = clock.now_iso()
    new.update(status='RUNNING', attempts=attempt, updatedOn=now, changeSequence=stored.seq + 1)
    new.setdefault('startDate', now)
    new.pop('nextAttemptAt', None)
    _append(new, 'INFO', f'attempt {attempt} of {policy["maxAttempts"]} started')
    try:
        records.commit(records.update_ops(fam, new, stored, principal=SERVICE))
    except WriteConflict as exc:
        if exc.code == 'TransactionConflict':
            raise
        return 'claimed by another delivery'
    claimed = table.get(fam.path, execution_id)
    outcome = _run_step(claimed.data, policy, min(box, seconds_left(deadline)))
    if outcome.waiting is not None:
        return _finish(claimed, 'RUNNING', 'INFO', outcome.waiting, waiting=True)
    if outcome.ok:
        return _finish(claimed, 'SUCCEEDED', 'INFO', f'attempt {attempt} succeeded', output=outcome.output)
    return _after_failure(claimed, attempt, policy, outcome)


def _after_failure(stored, attempt: int, policy: dict[str, Any], outcome: _Outcome) -> str:
    observability.count('ExecutionAttemptsFailed')
    if attempt < policy['maxAttempts']:
        delay = step_rules.backoff_seconds(policy, attempt)
        at = clock.iso(clock.now() + timedelta(seconds=delay))
        text = f'attempt {attempt} failed: {outcome.reason}; attempt {attempt + 1} in {delay} s'
        result = _finish(stored, 'PENDING', 'WARNING', text, next_attempt_at=at)
        if result.startswith('changed'):
            return result
        _send_attempts([(stored.id, attempt + 1, delay)])
        return text
    exhausted = f'attempt {attempt} failed: {outcome.reason}; {attempt} of {policy["maxAttempts"]} attempts made'
    if policy['onExhausted'] == 'SKIP':
        return _finish(stored, 'CANCELLED', 'WARNING', f'{exhausted}; step skipped')
    status = 'TIMED_OUT' if outcome.timed_out else 'FAILED'
    suffix = '; the activity goes on' if policy['onExhausted'] == 'CONTINUE' else '; the activity fails'
    return _finish(stored, status, 'ERROR', exhausted + suffix)


def _finish(stored, status: str, kind: str, text: str, *, output: Any = None, waiting: bool = False,
            next_attempt_at: str | None = None) -> str:
    """Write the execution's new state over ``stored`` (conditional); then finish the activity
    when it was its last execution. A cancel that got there first wins: 'changed ...'."""
    fam = family_of('executions')
    for _ in range(3):
        new = dict(stored.data)
        now = clock.now_iso()
        new.update(status=status, updatedOn=now, changeSequence=stored.seq + 1)
        _append(new, kind, text)
        if output is not None:
            new['output'] = output
        if next_attempt_at is not None:
            new['nextAttemptAt'] = next_attempt_at
        if waiting:
            new['metadata'] = {**(new.get('metadata') or {}), 'waitingFor': 'agent'}
        if status in TERMINAL:
            new['endDate'] = now
        try:
            records.commit(records.update_ops(fam, new, stored, principal=SERVICE))
            break
        except WriteConflict as exc:
            if exc.code == 'TransactionConflict':
                continue
            stored = table.get(fam.path, stored.id)
            if stored is None or stored.data.get('status') in TERMINAL:
                return f'changed meanwhile ({stored.data.get("status") if stored else "deleted"})'
    else:
        raise ServiceUnavailable('the execution is busy')
    if status in TERMINAL and new.get('activityId'):
        finish_activity(new['activityId'])
    return text


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


def _run_step(execution: dict[str, Any], policy: dict[str, Any], seconds: float) -> _Outcome:
    """Run one attempt within ``seconds`` (its time box, never more than the invocation has left)."""
    step = execution.get('step') or {}
    kind = step.get('stepType')
    options = step.get('options') or {}
    inputs = execution.get('inputs') or {}
    try:
        if kind == 'SCRIPT':
            output = evaluate(options.get('expression', ''), inputs, bindings={'inputs': inputs},
                              timeout_ms=max(1, int(seconds * 1000)))
            return _Outcome(True, output=output)
        if kind == 'BRIDGE_CALL':
            return _bridge_call(execution, options, seconds)
        if kind == 'AGENT':
            agent = _find('agents', execution['projectId'], step.get('ref') or '')
            if agent is None:
                return _Outcome(False, reason=f"no agent '{step.get('ref')}' in the project")
            name = agent.data.get('slug') or agent.id
            return _Outcome(True, waiting=f"waiting for the agent runtime of agent '{name}'")
        return _Outcome(False, reason=f'unknown stepType {kind!r}')
    except ExpressionError as exc:
        return _Outcome(False, reason=str(exc), timed_out=exc.timed_out)


def _find(family: str, project_id: str, ref: str):
    try:
        stored = table.get(family, str(uuid.UUID(ref)))
    except ValueError:
        owner = table.unique_owner(family, scope=project_id, field_name='slug', value=ref)
        stored = table.get(family, owner) if owner else None
    if stored is None or stored.data.get('projectId') != project_id:
        return None
    return stored


def _bridge_call(execution: dict[str, Any], options: dict[str, Any], seconds: float) -> _Outcome:
    from chalicelib.features.bridges import proxy as bridges  # noqa: PLC0415 - lazy: the egress client is only for BRIDGE_CALL steps
    bridge = _find('service-bridges', execution['projectId'], str(options.get('bridge') or ''))
    if bridge is None:
        return _Outcome(False, reason=f"no service bridge '{options.get('bridge')}' in the project")
    query = {k: [str(x) for x in v] if isinstance(v, list) else [str(v)]
             for k, v in (options.get('query') or {}).items()}
    try:
        result = bridges.call_endpoint(bridge.data, options.get('endpointName'), query=query,
                                       body=options.get('body'), principal=SERVICE,
                                       timeout=max(0.001, seconds))
    except ApiError as exc:   # EgressDenied keeps its message: "service bridge egress denied: ..."
        return _Outcome(False, reason=exc.message, timed_out=exc.status == 504)
    if not 200 <= result.status < 300:
        return _Outcome(False, reason=f'the upstream answered {result.status}')
    try:
        output = json.loads(result.text) if result.json_body else result.text
    except ValueError:
        output = result.text
    return _Outcome(True, output=output)


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
            with records.action('tasks', 'taken'):
                return resources.update('tasks', task['id'], {'assigneeId': principal.user_id,
                                                              'changeSequence': stored.seq}, principal=principal)
        except Conflict:
            continue   # someone else took it (or changed it) first: the next one
    return None
