"""Document processing: a project's assistants run their pipeline over its new document families
(issue 26; the client-facing rules are in docs/api/processing.md).

Flow (every step durable and idempotent, driven by the same queue worker as activity plans):

1. **Trigger.** A family create writes its domain event to the outbox in its own transaction
   (kernel/records.py). The table-stream publisher (features/events/outbox.py) hands each
   ``document-families.created`` event to ``on_event``: one Query of the project's assistants,
   and one ``pipeline.start`` message per ``active`` assistant with steps whose ``subscription``
   (the list filter language, kernel/query) matches the family. The family's create
   transaction never holds an assistant or the project. A stream batch delivered twice sends
   the starts twice: step 2 makes that harmless.
2. **Start** (``pipeline.start`` {assistantId, documentFamilyId, trigger}): the execution's id is
   a UUIDv5 of (assistant, family, trigger), and its create is conditional on the id being
   free, so a redelivered start creates no second execution (it only re-sends the first step
   message if the first delivery may not have sent it).
3. **Steps** (``pipeline.step`` {executionId, step, attempt}): the execution holds a snapshot
   of the pipeline (``pipeline.steps``), the current step (``step``, ``metadata.stepIndex``) and
   its attempts. Each attempt is claimed by a conditional write on the execution's sequence
   (a duplicate message does nothing), runs, and records its outcome the same way; retries,
   backoff and exhaustion follow each step's ``executionPolicy`` (kernel/shapes/steps.py),
   as for activity plans. A cancel (PUT status CANCELLED, cancelExecution) wins over a
   running attempt: the attempt's conditional write fails and nothing further runs.
4. **runOnExistingContent** (``pipeline.existing`` {assistantId, run, before, cursor}): when an
   assistant is created active with the flag, or turns from inactive to active with it, one
   page of the project's families (``EXISTING_PAGE``) per message, a start per matching
   family created before the trigger, then the next page's message carrying the cursor.
   The trigger name ``existing:<event id>`` makes each family's execution unique per run.

The family's ``processing`` field (registry) is a small summary of its latest run, written by
a side write that moves neither its changeSequence nor its updatedOn (repository
``set_side_field``): a client's optimistic lock is not broken by processing bookkeeping.
"""
from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from chalicelib.core import clock, observability
from chalicelib.core.errors import ApiError, BadRequest, ServiceUnavailable
from chalicelib.core.expressions import ExpressionError, evaluate
from chalicelib.core.principal import Principal
from chalicelib.features.identity.service_token import SERVICE, SERVICE_USER
from chalicelib.features.work import service as work
from chalicelib.features.work import store as work_store
from chalicelib.kernel import crud as resources
from chalicelib.kernel import filtering, records
from chalicelib.kernel.query.evaluate import evaluate as matches
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.shapes import steps as step_rules
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict

log = observability.get_logger('pipelines')

START = 'pipeline.start'
STEP = 'pipeline.step'
EXISTING = 'pipeline.existing'
KINDS = frozenset({START, STEP, EXISTING})
CREATED = 'created'
NAMESPACE = uuid.UUID('5b0c6f0e-3d1a-4f43-9a0e-26d0c0ffee26')   # execution ids: uuid5(NAMESPACE, trigger key)
EXISTING_PAGE = 100            # families read per runOnExistingContent message (one bounded unit of work)
MAX_STEP_OUTPUT_BYTES = 12_000  # per step kept on the execution: 25 steps stay far below DynamoDB's 400 KB item
APPLIED = ('documentStatus', 'labels', 'metadata')
MAX_LABELS = 100
TERMINAL = work.TERMINAL


# ----------------------------------------------------------------------------- the worker's door

Deferred = work.Deferred   # front/handlers.py: a message the invocation has no time left for


def handle_message(body: str, *, deadline: float | None = None) -> str:
    """Process one activity-queue message: the pipeline kinds here, every other kind in
    features/work/service.py ``handle_message`` (front/handlers.py calls this one). ``deadline``
    is the invocation's (a ``time.monotonic()`` instant): a message it cannot cover is
    ``Deferred`` before anything of it is written, as in service.py (docs/operations/worker.md)."""
    try:
        message = json.loads(body)
    except (TypeError, ValueError):
        message = None
    kind = message.get('type') if isinstance(message, dict) else None
    if kind not in KINDS:
        return work.handle_message(body, deadline=deadline)
    if work.seconds_left(deadline) < work.START_SECONDS:
        raise Deferred(f'{max(0.0, work.seconds_left(deadline)):.1f} s left of the invocation')
    if kind == START and _strings(message, 'assistantId', 'documentFamilyId', 'trigger'):
        return run_start(message['assistantId'], message['documentFamilyId'], message['trigger'])
    if kind == STEP and _strings(message, 'executionId') and _ints(message, 'step', 'attempt'):
        return run_step(message['executionId'], message['step'], message['attempt'], deadline=deadline)
    if kind == EXISTING and _strings(message, 'assistantId', 'run', 'before'):
        cursor = message.get('cursor')
        return run_existing(message['assistantId'], message['run'], message['before'],
                            cursor if isinstance(cursor, dict) else None)
    raise work.PoisonMessage(f'malformed {kind} message')


def _strings(message: dict[str, Any], *names: str) -> bool:
    return all(isinstance(message.get(n), str) and message[n] for n in names)


def _ints(message: dict[str, Any], *names: str) -> bool:
    return all(isinstance(message.get(n), int) and not isinstance(message.get(n), bool) for n in names)


def _send(messages: list[tuple[dict[str, Any], int]]) -> None:
    """Send; a refused send raises, so the message being processed (or the stream batch) is
    delivered again and sends them again (every receiver is idempotent)."""
    if not messages:
        return
    try:
        work_store.send_messages(messages, correlation_id=observability.correlation_id())
    except work_store.SendFailed as exc:
        raise ServiceUnavailable(f'pipeline messages not sent: {exc}') from None


def _step_message(execution_id: str, index: int, attempt: int, delay: int = 0) -> tuple[dict[str, Any], int]:
    return {'type': STEP, 'executionId': execution_id, 'step': index, 'attempt': attempt}, delay


def execution_id(assistant_id: str, family_id: str, trigger: str) -> str:
    """The one execution of (assistant, family, trigger)."""
    return str(uuid.uuid5(NAMESPACE, f'{assistant_id}:{family_id}:{trigger}'))


# ----------------------------------------------------------------------------- triggers

def on_event(event: dict[str, Any]) -> None:
    """A published domain event (features/events/outbox.py): the triggers of processing."""
    kind = event.get('eventType')
    if kind == 'document-families.created':
        _families_created(event)
    elif kind in ('assistants.created', 'assistants.updated'):
        _assistant_changed(event)


def steps_of(assistant: dict[str, Any]) -> list[dict[str, Any]]:
    pipeline = (assistant.get('options') or {}).get('pipeline')
    steps = pipeline.get('steps') if isinstance(pipeline, dict) else None
    return steps if isinstance(steps, list) else []


def subscribes(assistant: dict[str, Any], family: dict[str, Any]) -> bool:
    """Would ``assistant`` process ``family``? Active, not deleted, with steps, in the family's
    project, and its subscription (empty: every family) matches. A subscription that does not
    parse matches nothing (logged; docs/api/processing.md)."""
    if assistant.get('active') is False or assistant.get('deleted') or not steps_of(assistant):
        return False
    if assistant.get('projectId') != family.get('projectId'):
        return False
    text = assistant.get('subscription')
    if not isinstance(text, str) or not text.strip():
        return True
    try:
        plan = filtering.plan_for(family_of('document-families'), [text])
    except BadRequest as exc:
        log.warning('assistant %s: subscription does not parse (%s)', assistant.get('id'), exc.message)
        return False
    return matches(plan.node, family)


def _families_created(event: dict[str, Any]) -> None:
    ids = event.get('resourceIds') or [event.get('resourceId')]
    project_id = event.get('projectId')
    if not project_id:
        return
    assistants = [a for a in table.query_project('assistants', project_id) if a.get('active') is not False
                  and steps_of(a)]
    if not assistants:
        return
    found = table.batch_get(('document-families', str(i)) for i in ids if i)
    messages = []
    for fid in ids:
        stored = found.get(str(fid))
        if stored is None:
            continue
        for assistant in assistants:
            if subscribes(assistant, stored.data):
                messages.append(({'type': START, 'assistantId': assistant['id'], 'documentFamilyId': stored.id,
                                  'trigger': CREATED}, 0))
    _send(messages)
    observability.count('PipelineTriggers', len(messages))


def _assistant_changed(event: dict[str, Any]) -> None:
    changed = event.get('changedFields') or []
    if event['eventType'] == 'assistants.updated' and 'active' not in changed:
        return
    stored = table.get('assistants', str(event.get('resourceId')))
    if stored is None or stored.data.get('active') is False or not stored.data.get('runOnExistingContent'):
        return
    _send([({'type': EXISTING, 'assistantId': stored.id, 'run': event['id'],
             'before': event.get('occurredOn') or clock.now_iso(), 'cursor': None}, 0)])


def run_existing(assistant_id: str, run: str, before: str, cursor: dict[str, Any] | None) -> str:
    """One page of a runOnExistingContent run: starts for the matching families created before
    the trigger, then the next page's message."""
    stored = table.get('assistants', assistant_id)
    if stored is None or stored.data.get('active') is False:
        return 'stopped: the assistant is gone or inactive'
    assistant = stored.data
    items, following = table.query_project_page('document-families', assistant['projectId'], start=cursor,
                                                limit=EXISTING_PAGE)
    trigger = f'existing:{run}'
    messages = [({'type': START, 'assistantId': assistant_id, 'documentFamilyId': f['id'], 'trigger': trigger}, 0)
                for f in items if str(f.get('createdOn') or '') < before and subscribes(assistant, f)]
    if following is not None:
        messages.append(({'type': EXISTING, 'assistantId': assistant_id, 'run': run, 'before': before,
                          'cursor': following}, 0))
    _send(messages)
    return f'existing content: {len(items)} families read, {len(messages) - (following is not None)} started' + \
        ('' if following is None else '; next page queued')


# ----------------------------------------------------------------------------- start

def run_start(assistant_id: str, family_id: str, trigger: str) -> str:
    try:
        assistant_id, family_id = str(uuid.UUID(assistant_id)), str(uuid.UUID(family_id))
    except ValueError:
        raise work.PoisonMessage('a pipeline start names an id that is not a UUID') from None
    eid = execution_id(assistant_id, family_id, trigger[:200])
    existing = table.get('executions', eid)
    if existing is not None:
        return _resend_first(existing)
    assistant = table.get('assistants', assistant_id)
    family = table.get('document-families', family_id)
    if assistant is None or family is None:
        return 'gone'
    observability.annotate(organization_id=family.org)
    if not subscribes(assistant.data, family.data):
        return 'skipped: the assistant is inactive or no longer subscribes to the family'
    steps = steps_of(assistant.data)
    values = {'name': str(assistant.data.get('name') or 'assistant')[:200], 'status': 'PENDING',
              'assistantId': assistant_id, 'documentFamilyId': family_id, 'attempts': 0, 'output': {},
              'pipeline': {'steps': steps, 'trigger': trigger[:200]}, 'step': steps[0] if steps else {},
              'metadata': {'stepIndex': 0, 'trigger': trigger[:200]},
              'statusMessages': [work._message('INFO', f'pipeline of {len(steps)} steps queued for '
                                                        f"{str(family.data.get('path') or family_id)[:300]}")]}
    problem = _invalid_steps(steps)
    if problem is not None:
        now = clock.now_iso()
        values.update(status='FAILED', endDate=now)
        work._append(values, 'ERROR', f'the pipeline cannot run: {problem}')
    fam = family_of('executions')
    data = records.new_record(fam, values, principal=SERVICE, org=family.org,
                              project_id=family.data.get('projectId'), id_=eid)
    try:
        records.commit(records.create_ops(fam, [data], SERVICE))
    except WriteConflict as exc:
        if exc.code == 'TransactionConflict':
            raise
        return 'duplicate (created by another delivery)'
    _summarise(data)
    if problem is not None:
        return f'failed: {problem}'
    _send([_step_message(eid, 0, 1)])
    observability.count('PipelinesStarted')
    return f'started: {len(steps)} steps'


def _invalid_steps(steps: list[Any]) -> str | None:
    if not steps:
        return 'options.pipeline.steps is empty'
    try:
        for step in steps:
            step_rules.check_step(step)
            if step.get('stepType') not in step_rules.EXECUTION_STEP_TYPES:
                return f"step '{step.get('name')}': a pipeline runs SCRIPT, BRIDGE_CALL and AGENT steps"
        step_rules.check_steps(steps)
    except ValueError as exc:
        return str(exc)
    return None


def _resend_first(existing) -> str:
    data = existing.data
    if data.get('status') == 'PENDING' and not data.get('attempts') and \
            not (data.get('metadata') or {}).get('stepIndex'):
        _send([_step_message(existing.id, 0, 1)])
        return 'duplicate start; first step sent again'
    return 'duplicate start'


# ----------------------------------------------------------------------------- steps

def run_step(execution_id_: str, index: int, attempt: int, *, deadline: float | None = None) -> str:
    fam = family_of('executions')
    stored = table.get(fam.path, execution_id_)
    if stored is None:
        return 'gone'
    observability.annotate(organization_id=stored.org)
    data = stored.data
    status, made = data.get('status', 'PENDING'), int(data.get('attempts') or 0)
    current = int((data.get('metadata') or {}).get('stepIndex') or 0)
    steps = (data.get('pipeline') or {}).get('steps') or []
    if status in TERMINAL:
        return f'already {status}'
    if index < current:
        if status == 'PENDING' and made == 0:   # the step before was recorded, its message maybe not sent
            _send([_step_message(stored.id, current, 1)])
            return 'next step sent again'
        return 'duplicate (an earlier step)'
    if index > current or index >= len(steps):
        return 'duplicate'
    step = steps[index]
    policy = step_rules.policy_of(step)
    if attempt == made and status == 'PENDING' and data.get('nextAttemptAt'):
        delay = max(0, int((clock.parse_instant(data['nextAttemptAt']) - clock.now()).total_seconds()))
        _send([_step_message(stored.id, index, attempt + 1, min(delay, step_rules.MAX_DELAY_SECONDS))])
        return 'retry message sent again'
    if attempt == made and status == 'RUNNING' and not (data.get('metadata') or {}).get('waitingFor'):
        idle = (clock.now() - clock.parse_instant(data['updatedOn'])).total_seconds()
        if idle < policy['timeoutSeconds'] + work.INTERRUPTED_AFTER_SECONDS:
            return 'duplicate (attempt in progress)'
        interrupted = work._Outcome(False, reason='the attempt was interrupted')
        return _after_failure(stored, index, attempt, policy, interrupted)
    if attempt != made + 1 or status not in ('PENDING', 'RUNNING'):
        return 'duplicate'

    box = work.attempt_seconds(step, policy)
    if work.seconds_left(deadline) < box:   # not claimed: redelivered whole to an invocation with time
        raise Deferred(f"{max(0.0, work.seconds_left(deadline)):.1f} s left, step '{step.get('name')}' "
                       f'needs up to {box:.0f} s')

    def claim(new: dict[str, Any]) -> None:
        new.update(status='RUNNING', attempts=attempt, step=step)
        new.setdefault('startDate', new['updatedOn'])
        new.pop('nextAttemptAt', None)
        work._append(new, 'INFO', f"step '{step.get('name')}' ({step.get('stepType')}): attempt {attempt} of "
                                  f"{policy['maxAttempts']} started")

    claimed = _write(stored, claim, retry_conflicts=False)
    if claimed is None:
        return 'claimed by another delivery'
    if index == 0 and attempt == 1:
        _summarise(claimed.data)
    outcome = _run(claimed.data, step, policy, min(box, work.seconds_left(deadline)))
    if outcome.waiting is not None:
        return _end(claimed, 'RUNNING', 'INFO', outcome.waiting, waiting=True)
    if outcome.ok:
        return _advance(claimed, index, outcome.output, outcome.reason or f"step '{step.get('name')}' succeeded")
    return _after_failure(claimed, index, attempt, policy, outcome)


def _write(stored, mutate, *, retry_conflicts: bool = True):
    """Apply ``mutate`` to a copy of the execution and write it, conditional on its sequence:
    the stored record, or None when another writer got there first (a cancel, a duplicate)."""
    fam = family_of('executions')
    for _ in range(3):
        new = dict(stored.data)
        new['updatedOn'] = clock.now_iso()
        new['changeSequence'] = stored.seq + 1
        mutate(new)
        try:
            records.commit(records.update_ops(fam, new, stored, principal=SERVICE))
            return table.Stored(fam.path, new, stored.seq + 1, stored.org, indexed=True)   # as just written
        except WriteConflict as exc:
            if exc.code == 'TransactionConflict':
                continue
            if not retry_conflicts:
                return None
            stored = table.get(fam.path, stored.id)
            if stored is None or stored.data.get('status') in TERMINAL:
                return None
    raise ServiceUnavailable('the execution is busy')


def _advance(stored, index: int, output: Any, text: str) -> str:
    """Record the step's output and queue the next step, or end the execution SUCCEEDED."""
    steps = (stored.data.get('pipeline') or {}).get('steps') or []
    step = steps[index]
    following = index + 1

    def mutate(new: dict[str, Any]) -> None:
        if output is not None:
            new['output'] = {**(new.get('output') or {}), str(step.get('name')): _bounded(output)}
        new['metadata'] = {**(new.get('metadata') or {}), 'stepIndex': following}
        work._append(new, 'INFO', text)
        if following < len(steps):
            new.update(status='PENDING', attempts=0, step=steps[following])
            new.pop('nextAttemptAt', None)
        else:
            new.update(status='SUCCEEDED', endDate=new['updatedOn'])
            work._append(new, 'INFO', f'pipeline of {len(steps)} steps succeeded')

    written = _write(stored, mutate)
    if written is None:
        return 'changed meanwhile'
    if following < len(steps):
        _send([_step_message(stored.id, following, 1)])
        return f'{text}; next step queued'
    _summarise(written.data)
    observability.count('PipelinesEnded', status='SUCCEEDED')
    return text


def _after_failure(stored, index: int, attempt: int, policy: dict[str, Any], outcome) -> str:
    observability.count('ExecutionAttemptsFailed')
    name = ((stored.data.get('pipeline') or {}).get('steps') or [{}])[index].get('name')
    if attempt < policy['maxAttempts']:
        delay = step_rules.backoff_seconds(policy, attempt)
        at = clock.iso(clock.now() + timedelta(seconds=delay))
        text = f"step '{name}': attempt {attempt} failed: {outcome.reason}; attempt {attempt + 1} in {delay} s"
        written = _end(stored, 'PENDING', 'WARNING', text, next_attempt_at=at)
        if written.startswith('changed'):
            return written
        _send([_step_message(stored.id, index, attempt + 1, delay)])
        return text
    exhausted = f"step '{name}': attempt {attempt} failed: {outcome.reason}; " \
                f"{attempt} of {policy['maxAttempts']} attempts made"
    if policy['onExhausted'] in ('SKIP', 'CONTINUE'):
        work_text = f'{exhausted}; the pipeline goes on ({policy["onExhausted"]})'
        return _advance(stored, index, None, work_text)
    return _end(stored, 'TIMED_OUT' if outcome.timed_out else 'FAILED', 'ERROR',
                f'{exhausted}; the pipeline fails and changes nothing more on the document')


def _end(stored, status: str, kind: str, text: str, *, waiting: bool = False,
         next_attempt_at: str | None = None) -> str:
    def mutate(new: dict[str, Any]) -> None:
        new['status'] = status
        work._append(new, kind, text)
        if next_attempt_at is not None:
            new['nextAttemptAt'] = next_attempt_at
        if waiting:
            new['metadata'] = {**(new.get('metadata') or {}), 'waitingFor': 'agent'}
        if status in TERMINAL:
            new['endDate'] = new['updatedOn']

    written = _write(stored, mutate)
    if written is None:
        return 'changed meanwhile'
    if status in TERMINAL or waiting:
        _summarise(written.data)
    if status in TERMINAL:
        observability.count('PipelinesEnded', status=status)
    return text


def _bounded(output: Any) -> Any:
    text = json.dumps(output, default=str)
    if len(text.encode()) <= MAX_STEP_OUTPUT_BYTES:
        return output
    return {'truncated': True, 'text': text.encode()[:MAX_STEP_OUTPUT_BYTES].decode(errors='ignore')}


# ----------------------------------------------------------------------------- running one step

def assistant_principal(assistant: dict[str, Any]) -> Principal:
    """Who a pipeline's bridge calls run as: bound to the assistant's project, like an agent
    (features/bridges/proxy.py: only agentCallable bridges of that project)."""
    return Principal(user_id=SERVICE_USER, email=f"assistant:{assistant.get('slug') or assistant.get('id')}",
                     credential='agent', rate_key='', project_id=assistant.get('projectId'),
                     agent_id=assistant.get('id'))


def _input(execution: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str]:
    """(the JSONata input of a step, the assistant, or a reason none can be built)."""
    family = table.get('document-families', str(execution.get('documentFamilyId')))
    if family is None:
        return None, None, 'the document family no longer exists'
    assistant = table.get('assistants', str(execution.get('assistantId')))
    if assistant is None:
        return None, None, 'the assistant no longer exists'
    content = None
    if family.data.get('contentObjectId'):
        found = table.get('content-objects', str(family.data['contentObjectId']))
        content = found.data if found is not None else None
    url = None
    if family.data.get('storageKey'):
        from chalicelib.features.documents import service as documents  # noqa: PLC0415 - lazy: S3 presigning
        url = documents.content_url_of(family)
    a = assistant.data
    summary = {k: a.get(k) for k in ('id', 'name', 'slug', 'projectId', 'assistantRole') if a.get(k) is not None}
    return ({'family': family.data, 'contentObject': content, 'assistant': summary,
             'outputs': execution.get('output') or {}, 'contentUrl': url}, a, '')


def _run(execution: dict[str, Any], step: dict[str, Any], policy: dict[str, Any], seconds: float):
    data, assistant, reason = _input(execution)
    if data is None:
        return work._Outcome(False, reason=reason)
    kind = step.get('stepType')
    options = step.get('options') or {}
    timeout_ms = int(seconds * 1000)   # the attempt's box, never past the invocation (run_step)
    try:
        if step.get('conditional') and not evaluate(step['conditional'], data, timeout_ms=timeout_ms):
            return work._Outcome(True, reason=f"step '{step.get('name')}' skipped: its conditional is false")
        if kind == 'SCRIPT':
            result = evaluate(options.get('expression', ''), data, timeout_ms=timeout_ms)
            return _script_result(execution, data['family'], result)
        if kind == 'BRIDGE_CALL':
            return _bridge_call(execution, assistant, options, policy, data, timeout_ms)
        if kind == 'AGENT':
            agent = work._find('agents', execution['projectId'], step.get('ref') or '')
            if agent is None:
                return work._Outcome(False, reason=f"no agent '{step.get('ref')}' in the project")
            return work._Outcome(True, waiting=f"waiting for the agent runtime of agent "
                                               f"'{agent.data.get('slug') or agent.id}'")
        return work._Outcome(False, reason=f'unknown stepType {kind!r}')
    except ExpressionError as exc:
        return work._Outcome(False, reason=str(exc), timed_out=exc.timed_out)


def _script_result(execution: dict[str, Any], family: dict[str, Any], result: Any):
    """Apply documentStatus / labels / metadata of a SCRIPT's object result to the family, in
    one update through the same service as a REST PUT (its hook resolves the status in the
    family's project, its domain event is ``document-families.updated``); the rest is the output."""
    if not isinstance(result, dict) or not any(k in result for k in APPLIED):
        return work._Outcome(True, output=result)
    body: dict[str, Any] = {}
    status = result.get('documentStatus')
    if status is not None:
        if isinstance(status, str) and status:
            body['documentStatus'] = {'slug': status}
        elif isinstance(status, dict) and (status.get('slug') or status.get('id')):
            body['documentStatus'] = {k: status[k] for k in ('id', 'slug') if status.get(k)}
        else:
            return work._Outcome(False, reason='documentStatus must be a status slug (or {id} / {slug})')
    labels = result.get('labels')
    if labels is not None:
        if isinstance(labels, str):
            labels = [labels]
        if not isinstance(labels, list) or not all(isinstance(x, str) and 0 < len(x) <= 200 for x in labels):
            return work._Outcome(False, reason='labels must be a list of label names')
        merged = list(dict.fromkeys([*(family.get('labels') or []), *labels]))
        if len(merged) > MAX_LABELS:
            return work._Outcome(False, reason=f'a document holds at most {MAX_LABELS} labels')
        body['labels'] = merged
    metadata = result.get('metadata')
    if metadata is not None:
        if not isinstance(metadata, dict):
            return work._Outcome(False, reason='metadata must be an object')
        body['metadata'] = {**(family.get('metadata') or {}), **metadata}
    if family.get('projectId') != execution.get('projectId'):
        return work._Outcome(False, reason="the document is not in the assistant's project")
    try:
        with records.action('document-families', 'updated'):
            resources.update('document-families', family['id'], body, principal=SERVICE)
    except ApiError as exc:
        return work._Outcome(False, reason=f'the document could not be updated: {exc.message}')
    rest = {k: v for k, v in result.items() if k not in APPLIED}
    return work._Outcome(True, output=rest or None,
                         reason=f"applied {', '.join(k for k in APPLIED if k in body)} to the document")


def _expression_value(value: Any, data: dict[str, Any], timeout_ms: int) -> Any:
    """``=expr`` is JSONata over the step's input; any other value is sent as written."""
    if isinstance(value, str) and value.startswith('='):
        return evaluate(value[1:], data, timeout_ms=timeout_ms)
    return value


def _bridge_call(execution: dict[str, Any], assistant: dict[str, Any], options: dict[str, Any],
                 policy: dict[str, Any], data: dict[str, Any], timeout_ms: int):
    from chalicelib.features.bridges import proxy as bridges  # noqa: PLC0415 - lazy: the egress client is only for BRIDGE_CALL steps
    bridge = work._find('service-bridges', execution['projectId'], str(options.get('bridge') or ''))
    if bridge is None:
        return work._Outcome(False, reason=f"no service bridge '{options.get('bridge')}' in the project")
    query: dict[str, list[str]] = {}
    for key, raw in (options.get('query') or {}).items():
        value = _expression_value(raw, data, timeout_ms)
        if value is None:
            continue
        query[key] = [str(x) for x in value] if isinstance(value, list) else [str(value)]
    body = _expression_value(options.get('body'), data, timeout_ms)
    try:
        result = bridges.call_endpoint(bridge.data, options.get('endpointName'), query=query, body=body,
                                       principal=assistant_principal(assistant),
                                       timeout=float(policy['timeoutSeconds']))
    except ApiError as exc:
        return work._Outcome(False, reason=exc.message, timed_out=exc.status == 504)
    if not result.ok:
        return work._Outcome(False, reason=f'the upstream answered {result.status}')
    value = result.value()
    return work._Outcome(True, output={'status': result.status, 'body': value, 'truncated': result.truncated})


# ----------------------------------------------------------------------------- the family's summary

def _summarise(execution: dict[str, Any]) -> None:
    """The family's ``processing`` field: its latest run, as docs/api/processing.md shows it."""
    family_id = execution.get('documentFamilyId')
    if not family_id:
        return
    meta = execution.get('metadata') or {}
    summary = {'assistantId': execution.get('assistantId'), 'assistantName': execution.get('name'),
               'executionId': execution.get('id'), 'status': execution.get('status'),
               'step': (execution.get('step') or {}).get('name'), 'trigger': meta.get('trigger'),
               'updatedOn': execution.get('updatedOn')}
    repo.set_side_field('document-families', str(family_id), 'processing',
                        {k: v for k, v in summary.items() if v is not None})


def execution_changed(execution: dict[str, Any]) -> None:
    """An execution's status changed outside the worker (a cancel): the family's summary follows."""
    if execution.get('documentFamilyId') and execution.get('status') in TERMINAL:
        _summarise(execution)
