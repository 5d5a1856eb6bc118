"""Document processing: a project's assistants run their pipeline over its new document families
(issue 26; the client-facing rules are in docs/api/processing.md).

Flow (every step durable and idempotent, driven by the same queue worker and the same execution
engine as activity plans, features/work/worker.py and engine.py):

1. **Trigger.** A family create writes its domain event to the outbox in its own transaction
   (kernel/records.py). The table-stream publisher (features/events/outbox.py) hands each
   ``document-families.created`` event to ``on_event``: one Query of the project's assistants,
   and one ``pipeline.start`` message per ``active`` assistant with steps whose ``subscription``
   (the list filter language, kernel/query) matches the family. The family's create
   transaction never holds an assistant or the project. A stream batch delivered twice sends
   the starts twice: step 2 makes that harmless. With ``STAGES_BEFORE_PIPELINES`` (the parse
   stage), a ``pipeline.stages`` message per new family runs those first, as one execution
   (its id a UUIDv5 of the family), and its success sends the starts (``_stages_done``).
2. **Start** (``pipeline.start`` {assistantId, documentFamilyId, trigger}): the execution's id is
   a UUIDv5 of (assistant, family, trigger), and its create is conditional on the id being
   free, so a redelivered start creates no second execution (it only re-sends the first step
   message if the first delivery may not have sent it).
3. **Steps** (``pipeline.step`` {executionId, step, attempt}): the execution holds a snapshot
   of the pipeline (``pipeline.steps``), the current step (``step``, ``metadata.stepIndex``) and
   its attempts. The engine (features/work/engine.py) claims, runs and records each attempt,
   with the same retries, failure path and redelivery rule as activity plans; ``PIPELINE``
   below is what a run adds: its messages, its steps' input (``_input``) and principal (the
   assistant), a SCRIPT's changes to the family, the family's summary. A cancel (PUT status
   CANCELLED, cancelExecution) wins over a running attempt: the attempt's conditional write
   fails and nothing further runs.
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
from typing import Any

from chalicelib.core import clock, observability
from chalicelib.core.errors import ApiError, BadRequest, ServiceUnavailable
from chalicelib.core.expressions import evaluate
from chalicelib.core.principal import Principal
from chalicelib.features.identity.service_token import SERVICE, SERVICE_USER
from chalicelib.features.work import engine, parse_stage, step_shapes
from chalicelib.features.work.statuses import FAILED, PENDING, SUCCEEDED, TERMINAL
from chalicelib.kernel import crud, filtering, records
from chalicelib.kernel.query.evaluate import evaluate as matches
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict

log = observability.get_logger('pipelines')

START = 'pipeline.start'
STAGES = 'pipeline.stages'
STEP = 'pipeline.step'
EXISTING = 'pipeline.existing'
KINDS = frozenset({START, STAGES, STEP, EXISTING})
CREATED = 'created'
NAMESPACE = uuid.UUID('5b0c6f0e-3d1a-4f43-9a0e-26d0c0ffee26')   # execution ids: uuid5(NAMESPACE, trigger key)
EXISTING_PAGE = 100            # families read per runOnExistingContent message (one bounded unit of work)
MAX_STEP_OUTPUT_BYTES = 12_000  # per step kept on the execution: 25 steps stay far below DynamoDB's 400 KB item
APPLIED = ('documentStatus', 'labels', 'metadata')
MAX_LABELS = 100

# The stages before the pipelines (docs/api/processing.md "Stages before the pipelines"): steps
# run once for every new document family, as the service, BEFORE any assistant's pipeline; the
# pipelines start when they have all succeeded and see their outputs as ``stages``. Each entry
# is a step ``{name, stepType, options?, executionPolicy?}`` whose stepType has a runner in
# engine.RUNNERS (the parse stage: ``{'name': 'parse', 'stepType': 'PARSE'}``). Empty: new
# families go straight to the pipelines, as before.
STAGES_BEFORE_PIPELINES: list[dict[str, Any]] = [parse_stage.STEP]   # the parse stage (issue 39)
STAGES_NAME = 'stages before the pipelines'
engine.RUNNERS.setdefault(parse_stage.STEP_TYPE, parse_stage.RUNNER)
REPROCESS = 'reprocess:'        # the trigger of a run started again on demand (features/work/reprocess.py)


def _send(messages: list[tuple[dict[str, Any], int]]) -> None:
    engine.send(messages)


def _step_message(execution_id: str, index: int, attempt: int, delay: int = 0,
                  continuation: int | None = 0) -> tuple[dict[str, Any], int]:
    body = {'type': STEP, 'executionId': execution_id, 'step': index, 'attempt': attempt}
    if continuation is not None:
        body['continuation'] = continuation
    return body, delay


def execution_id(assistant_id: str, family_id: str, trigger: str) -> str:
    """The one execution of (assistant, family, trigger)."""
    return str(uuid.uuid5(NAMESPACE, f'{assistant_id}:{family_id}:{trigger}'))


def stages_id(family_id: str, trigger: str = CREATED) -> str:
    """The one run of the stages before the pipelines of a family (per trigger: a reprocess is
    another run)."""
    if trigger.startswith(REPROCESS):
        return str(uuid.uuid5(NAMESPACE, f'stages:{family_id}:{trigger}'))
    return str(uuid.uuid5(NAMESPACE, f'stages:{family_id}'))


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
    ids = [str(i) for i in (event.get('resourceIds') or [event.get('resourceId')]) if i]
    project_id = event.get('projectId')
    if not project_id:
        return
    if STAGES_BEFORE_PIPELINES:   # the stages first, for every new family; they start the pipelines
        _send([({'type': STAGES, 'documentFamilyId': fid, 'trigger': CREATED}, 0) for fid in ids])
        observability.count('StageTriggers', len(ids))
        return
    _start_pipelines(project_id, ids)


def trigger_first(events: list[dict[str, Any]]) -> set[str]:
    """The parse triggers of a stream batch, sent before anything else of the batch is done
    (features/events/outbox.py ``publish``): one ``pipeline.stages`` message per new family, the
    batch's messages of one organization sent together (10 a request) in that organization's
    message group. A family uploaded behind another organization's burst so waits for the
    batch's reading, not for the publishing and recording of the burst's events ahead of it
    (docs/operations/worker.md "Fairness between organizations"). The ids of the events
    triggered here (``on_event`` leaves them alone); a refused send raises, and the batch is
    delivered again (a stages message sent twice is one run: ``run_stages``)."""
    if not STAGES_BEFORE_PIPELINES:
        return set()
    by_org: dict[str, list[tuple[dict[str, Any], int]]] = {}
    correlation: dict[str, str | None] = {}
    done: set[str] = set()
    for event in events:
        if event.get('eventType') != 'document-families.created' or not event.get('projectId'):
            continue
        ids = [str(i) for i in (event.get('resourceIds') or [event.get('resourceId')]) if i]
        org = str(event.get('organizationId') or '')
        correlation.setdefault(org, event.get('correlationId'))
        by_org.setdefault(org, []).extend(
            ({'type': STAGES, 'documentFamilyId': fid, 'trigger': CREATED}, 0) for fid in ids)
        done.add(event['id'])
    for org, messages in by_org.items():
        with observability.work(correlation_id=correlation[org], organization_id=org or None):
            _send(messages)
        observability.count('StageTriggers', len(messages))
    return done


def trigger_created(families: list[dict[str, Any]]) -> None:
    """The parse triggers of families just uploaded, sent by the upload itself (features/documents
    service.py, through kernel/hooks.py ``after_create``) in each one's organization's group:
    the family's parse does not wait for the table stream to read its created event behind
    another organization's burst (docs/operations/worker.md "Fairness between organizations").
    The stream still sends its trigger (``trigger_first``): the fallback when this send failed
    (the upload stands; the hook logs it), and a second trigger of the same family is nothing
    more than a duplicate start (``run_stages``: the run's id is the family's)."""
    if not STAGES_BEFORE_PIPELINES:
        return
    by_org: dict[str, list[tuple[dict[str, Any], int]]] = {}
    for family in families:
        if family.get('id') and family.get('projectId'):
            by_org.setdefault(str(family.get('organizationId') or ''), []).append(
                ({'type': STAGES, 'documentFamilyId': str(family['id']), 'trigger': CREATED}, 0))
    for org, messages in by_org.items():
        with observability.work(organization_id=org or None):
            _send(messages)
        observability.count('StageTriggers', len(messages), path='upload')


def _start_pipelines(project_id: str, ids: list[str], *, trigger: str = CREATED,
                     assistant_id: str | None = None) -> None:
    """One ``pipeline.start`` per (family, active subscribed assistant) of the project (only
    ``assistant_id``'s when given: a reprocess naming one)."""
    assistants = [a for a in table.query_project('assistants', project_id) if a.get('active') is not False
                  and steps_of(a) and (assistant_id is None or a.get('id') == assistant_id)]
    if not assistants:
        return
    found = table.batch_get(('document-families', i) for i in ids)
    messages = []
    for fid in ids:
        stored = found.get(fid)
        if stored is None:
            continue
        for assistant in assistants:
            if subscribes(assistant, stored.data):
                messages.append(({'type': START, 'assistantId': assistant['id'], 'documentFamilyId': stored.id,
                                  'trigger': trigger}, 0))
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
        raise engine.PoisonMessage('a pipeline start names an id that is not a UUID') from None
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
    return _create_run(eid, family, steps, trigger[:200], _invalid_steps(steps),
                       name=str(assistant.data.get('name') or 'assistant')[:200], assistantId=assistant_id)


def run_stages(family_id: str, trigger: str, assistant_id: str | None = None) -> str:
    """A ``pipeline.stages`` message: the run of the stages before the pipelines of a new family
    (its id derived from the family: one run, however often the message comes)."""
    try:
        family_id = str(uuid.UUID(family_id))
    except ValueError:
        raise engine.PoisonMessage('a pipeline stages message names an id that is not a UUID') from None
    eid = stages_id(family_id, trigger[:200])
    existing = table.get('executions', eid)
    if existing is not None:   # a second trigger (the upload's and the stream's): no second run
        observability.annotate(organization_id=existing.org)
        return _resend_first(existing)
    family = table.get('document-families', family_id)
    if family is None:
        return 'gone'
    observability.annotate(organization_id=family.org)
    steps = [dict(step) for step in STAGES_BEFORE_PIPELINES]
    if not steps:   # no stage any more (the message was sent before a deploy): the pipelines now
        _start_pipelines(str(family.data.get('projectId')), [family_id])
        return 'no stages: pipelines started'
    then = {'then': {'assistantId': assistant_id}} if assistant_id else {}
    return _create_run(eid, family, steps, trigger[:200], _invalid_steps(steps), name=STAGES_NAME, stages=True,
                       meta_extra=then)


def _create_run(eid: str, family, steps: list[dict[str, Any]], trigger: str, problem: str | None, *,
                name: str, stages: bool = False, meta_extra: dict[str, Any] | None = None, **fields: Any) -> str:
    """Create the execution ``eid`` running ``steps`` over ``family`` (conditional on its id being
    free) and queue its first step; FAILED at once when ``problem`` says it cannot run."""
    meta: dict[str, Any] = {'stepIndex': 0, 'trigger': trigger}
    if stages:
        meta['stages'] = True
        meta['stage'] = 'parse' if any(s.get('stepType') == parse_stage.STEP_TYPE for s in steps) else 'stages'
    meta.update(meta_extra or {})
    values = {'name': name, 'status': PENDING, **fields, 'documentFamilyId': family.id, 'attempts': 0,
              'output': {}, 'pipeline': {'steps': steps, 'trigger': trigger}, 'metadata': meta,
              'statusMessages': [engine.message('INFO', f'pipeline of {len(steps)} steps queued for '
                                                        f"{str(family.data.get('path') or family.id)[:300]}")]}
    if steps:
        values['step'] = steps[0]
    if problem is not None:
        values.update(status=FAILED, endDate=clock.now_iso())
        engine.append(values, 'ERROR', f'the pipeline cannot run: {problem}')
    fam = family_of('executions')
    data = records.new_record(fam, values, principal=SERVICE, org=family.org,
                              project_id=family.data.get('projectId'), id_=eid)
    try:
        records.commit(records.create_ops(fam, [data], SERVICE))
    except WriteConflict as exc:
        if exc.code == 'TransactionConflict':
            raise
        return 'duplicate (created by another delivery)'
    if not _summarise(data):   # the family was deleted since it was read: the run goes with it
        created = table.get(fam.path, eid)
        return PIPELINE.vanished(created, FAMILY_GONE) if created is not None else 'gone'
    if problem is not None:
        return f'failed: {problem}'
    _send([_step_message(eid, 0, 1)])
    observability.count('PipelinesStarted')
    return f'started: {len(steps)} steps'


def _stages_done(data: dict[str, Any]) -> None:
    """The stages of a family succeeded: its assistants' pipelines start now, with the stages'
    trigger (a reprocess naming an assistant: that one only)."""
    if data.get('projectId') and data.get('documentFamilyId'):
        meta = data.get('metadata') or {}
        trigger = str(meta.get('trigger') or CREATED)
        _start_pipelines(data['projectId'], [data['documentFamilyId']], trigger=trigger,
                         assistant_id=(meta.get('then') or {}).get('assistantId'))


def stage_outputs(family_id: str, trigger: str = CREATED) -> dict[str, Any] | None:
    """The outputs of the family's stages by step name (None without stages): those of the run
    with ``trigger`` (a reprocess), else of the family's first run."""
    if not STAGES_BEFORE_PIPELINES:
        return None
    stored = table.get('executions', stages_id(family_id, trigger))
    return (stored.data.get('output') or {}) if stored is not None else None


def _invalid_steps(steps: list[Any]) -> str | None:
    """Why a pipeline's steps cannot run, or None. A step of a kind the plans know
    (features/work/step_shapes.py) is checked as a plan's step is; a step of a kind only the engine
    knows (a runner in engine.RUNNERS, e.g. a feature's) by its common fields; TASK (no runner:
    it makes a task, not an execution) and unknown kinds are refused."""
    if not steps:
        return 'options.pipeline.steps is empty'
    try:
        for step in steps:
            kind = step.get('stepType') if isinstance(step, dict) else None
            if kind in step_shapes.STEP_TYPES or kind not in engine.RUNNERS:
                step_shapes.check_step(step)
            else:
                _check_runner_step(step)
            if kind not in engine.RUNNERS:
                return f"step '{step.get('name')}': a pipeline runs {', '.join(sorted(engine.RUNNERS))} steps"
        step_shapes.check_steps(steps)
    except ValueError as exc:
        return str(exc)
    return None


def _check_runner_step(step: dict[str, Any]) -> None:
    """The fields every step has: a name, options (an object), an ExecutionPolicy."""
    name = step.get('name')
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValueError('step name is required (a non-empty string of at most 200 characters)')
    unknown = sorted(set(step) - step_shapes.STEP_KEYS)
    if unknown:
        raise ValueError(f"step '{name}': {unknown[0]} is not a step field")
    if step.get('options') is not None and not isinstance(step['options'], dict):
        raise ValueError(f"step '{name}': options must be an object")
    step_shapes.check_policy(step.get('executionPolicy'), f"step '{name}'")


def _resend_first(existing) -> str:
    data = existing.data
    if engine.step_unclaimed(data) and not (data.get('metadata') or {}).get('stepIndex'):
        _send([_step_message(existing.id, 0, 1)])
        return 'duplicate start; first step sent again'
    return 'duplicate start'


# ----------------------------------------------------------------------------- steps: the engine's kind

class PipelineKind(engine.Kind):
    """A document-processing run (an assistant's pipeline, or the stages before the pipelines):
    the steps of ``pipeline.steps``, the current one at ``metadata.stepIndex``, each step's output
    kept under its name, the family's ``processing`` summary written around the engine's writes."""
    name = 'pipeline'
    evaluates_conditionals = True   # over the step's input, when the step runs

    def steps(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        return (data.get('pipeline') or {}).get('steps') or []

    def index(self, data: dict[str, Any]) -> int:
        return int((data.get('metadata') or {}).get('stepIndex') or 0)

    def set_index(self, new: dict[str, Any], index: int) -> None:
        new['metadata'] = {**(new.get('metadata') or {}), 'stepIndex': index}

    def message(self, execution_id: str, index: int, attempt: int, continuation: int | None = None) -> dict[str, Any]:
        return _step_message(execution_id, index, attempt, continuation=continuation)[0]

    def context(self, data: dict[str, Any]) -> engine.Context:
        value, assistant, reason = _input(data)
        if value is None and reason == FAMILY_GONE:
            raise engine.Vanished(reason)
        if value is None:
            raise engine.AttemptFailed(reason, final=True)
        return engine.Context(value, assistant_principal(assistant) if assistant is not None else SERVICE)

    def label(self, step: dict[str, Any]) -> str:
        return f"step '{step.get('name')}': "

    def keep_output(self, new: dict[str, Any], step: dict[str, Any], output: Any) -> None:
        new['output'] = {**(new.get('output') or {}), str(step.get('name')): _bounded(output)}

    def exhausted(self, policy: dict[str, Any]) -> tuple[str | None, str, str]:
        if policy['onExhausted'] in ('SKIP', 'CONTINUE'):
            return None, 'WARNING', f'the pipeline goes on ({policy["onExhausted"]})'
        return FAILED, 'ERROR', 'the pipeline fails and changes nothing more on the document'

    def succeeded_note(self, steps: list[dict[str, Any]]) -> str | None:
        return f'pipeline of {len(steps)} steps succeeded'

    def after_write(self, data: dict[str, Any], event: str) -> None:
        if event == 'claimed':
            meta = data.get('metadata') or {}
            if not meta.get('stepIndex') and data.get('attempts') == 1 and not meta.get('continuations'):
                _summarise(data)   # the run's first step started
            return
        if not _summarise(data) and event == 'ended':
            stored = table.get(family_of('executions').path, str(data.get('id')))
            if stored is not None:   # the family went while the run ran: the run goes with it
                self.vanished(stored, FAMILY_GONE)
            return
        if event == 'ended':
            observability.count('PipelinesEnded', status=data.get('status'))
            if (data.get('metadata') or {}).get('stages') and data.get('status') == SUCCEEDED:
                _stages_done(data)

    def option_value(self, run: engine.StepRun, value: Any) -> Any:
        """``=expr`` is JSONata over the step's input; any other value is sent as written."""
        if isinstance(value, str) and value.startswith('='):
            return evaluate(value[1:], run.input, timeout_ms=run.timeout_ms)
        return value

    def script_result(self, run: engine.StepRun, value: Any) -> Any:
        return _script_result(run.execution, run.input['family'], value)

    def bridge_output(self, result) -> Any:
        return {'status': result.status, 'body': result.value(), 'truncated': result.truncated}


    def vanished(self, stored, reason: str) -> str:
        """The family is gone (deleted while the run was created or ran: its delete removes the
        executions it finds, docs/api/processing.md): the run goes with it, never left pointing
        at a family that does not exist."""
        fam = family_of('executions')
        for _ in range(3):
            try:
                records.commit(records.delete_ops(fam, stored, SERVICE))
                return f'deleted: {reason}'
            except WriteConflict:
                stored = table.get(fam.path, stored.id)
                if stored is None:
                    return f'gone: {reason}'
        raise ServiceUnavailable('the execution is busy')


PIPELINE = PipelineKind()


def run_step(execution_id_: str, index: int, attempt: int, *, continuation: int | None = None,
             deadline: float | None = None) -> str:
    """A ``pipeline.step`` message: the engine's loop over the run."""
    return engine.run(PIPELINE, execution_id_, index, attempt, continuation=continuation, deadline=deadline)


def _bounded(output: Any) -> Any:
    text = json.dumps(output, default=str)
    if len(text.encode()) <= MAX_STEP_OUTPUT_BYTES:
        return output
    return {'truncated': True, 'text': text.encode()[:MAX_STEP_OUTPUT_BYTES].decode(errors='ignore')}


# ----------------------------------------------------------------------------- running one step

# ----------------------------------------------------------------------------- running one step

def assistant_principal(assistant: dict[str, Any]) -> Principal:
    """Who a pipeline's bridge calls run as: bound to the assistant's project, like an agent
    (features/bridges/proxy.py: only agentCallable bridges of that project)."""
    return Principal(user_id=SERVICE_USER, email=f"assistant:{assistant.get('slug') or assistant.get('id')}",
                     credential='agent', rate_key='', project_id=assistant.get('projectId'),
                     agent_id=assistant.get('id'))


FAMILY_GONE = 'the document family no longer exists'


def _input(execution: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str]:
    """(the JSONata input of a step, the assistant (None for the stages), or a reason none can be
    built)."""
    family = table.get('document-families', str(execution.get('documentFamilyId')))
    if family is None:
        return None, None, FAMILY_GONE
    a = None
    if not (execution.get('metadata') or {}).get('stages'):
        assistant = table.get('assistants', str(execution.get('assistantId')))
        if assistant is None:
            return None, None, 'the assistant no longer exists'
        a = assistant.data
    content = None
    if family.data.get('contentObjectId'):
        found = table.get('content-objects', str(family.data['contentObjectId']))
        content = found.data if found is not None else None
    url = None
    if family.data.get('storageKey'):
        from chalicelib.features.documents import service as documents  # noqa: PLC0415 - lazy: S3 presigning
        url = documents.content_url_of(family)
    summary = {k: a.get(k) for k in ('id', 'name', 'slug', 'projectId', 'assistantRole') if a.get(k) is not None} \
        if a is not None else None
    value = {'family': family.data, 'contentObject': content, 'assistant': summary,
             'outputs': execution.get('output') or {}, 'contentUrl': url}
    if a is not None:
        stages = stage_outputs(family.id, str((execution.get('metadata') or {}).get('trigger') or CREATED))
        if stages is not None:
            value['stages'] = stages
        from chalicelib.features.parsing import serving as parsing  # noqa: PLC0415 - lazy: the parsed document, for steps
        value['document'] = parsing.step_view(family)
    return value, a, ''


def label_ids(refs: list[str], org: str | None) -> list[str]:
    """The ids of the labels ``refs`` name (a label's id, or its name in the organization), in
    order. A family holds label ids (docs/api/processing.md); a name that names no label, or
    several, fails the attempt at once (``final``: the same name fails again) rather than create
    a label: a typo in a script would otherwise add labels to the whole organization, as the
    service. Cost: one BatchGetItem for ids, one read of the organization's labels for names."""
    ids: dict[str, str] = {}
    for ref in refs:
        try:
            ids[ref] = str(uuid.UUID(ref))
        except ValueError:
            continue
    found = table.batch_get(('labels', i) for i in set(ids.values())) if ids else {}
    by_name: dict[str, list[str]] | None = None
    out = []
    for ref in refs:
        if ref in ids and ids[ref] in found and found[ids[ref]].org == org:
            out.append(ids[ref])
            continue
        if by_name is None:
            by_name = {}
            for label in table.query_tenant('labels', org or ''):
                by_name.setdefault(str(label.get('name')), []).append(label['id'])
        named = by_name.get(ref) or []
        if len(named) != 1:
            problem = f"no label named '{ref[:100]}' in the organization (a script adds existing labels: " \
                      f"create it first)" if not named else \
                f"{len(named)} labels are named '{ref[:100]}': name it by id"
            raise engine.AttemptFailed(f'labels: {problem}', final=True)
        out.append(named[0])
    return out


def _script_result(execution: dict[str, Any], family: dict[str, Any], result: Any):
    """Apply documentStatus / labels / metadata of a SCRIPT's object result to the family, in
    one update through the same service as a REST PUT (its hook resolves the status in the
    family's project, its domain event is ``document-families.updated``); the rest is the output."""
    if not isinstance(result, dict) or not any(k in result for k in APPLIED):
        return result
    body: dict[str, Any] = {}
    status = result.get('documentStatus')
    if status is not None:
        if isinstance(status, str) and status:
            body['documentStatus'] = {'slug': status}
        elif isinstance(status, dict) and (status.get('slug') or status.get('id')):
            body['documentStatus'] = {k: status[k] for k in ('id', 'slug') if status.get(k)}
        else:
            raise engine.AttemptFailed('documentStatus must be a status slug (or {id} / {slug})', final=True)
    labels = result.get('labels')
    if labels is not None:
        if isinstance(labels, str):
            labels = [labels]
        if not isinstance(labels, list) or not all(isinstance(x, str) and 0 < len(x) <= 200 for x in labels):
            raise engine.AttemptFailed('labels must be a label name or id, or a list of them', final=True)
        merged = list(dict.fromkeys([*(family.get('labels') or []),
                                     *label_ids(labels, family.get('organizationId'))]))
        if len(merged) > MAX_LABELS:
            raise engine.AttemptFailed(f'a document holds at most {MAX_LABELS} labels', final=True)
        body['labels'] = merged
    metadata = result.get('metadata')
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise engine.AttemptFailed('metadata must be an object', final=True)
        body['metadata'] = {**(family.get('metadata') or {}), **metadata}
    if family.get('projectId') != execution.get('projectId'):
        raise engine.AttemptFailed("the document is not in the assistant's project", final=True)
    try:
        crud.update('document-families', family['id'], body, principal=SERVICE)
    except ApiError as exc:   # a 4xx fails now (the same change is refused again), a 5xx is retried
        failure = engine.failure_of(exc)
        raise engine.AttemptFailed(f'the document could not be updated: {failure.reason}',
                                   final=failure.final) from None
    rest = {k: v for k, v in result.items() if k not in APPLIED}
    return engine.Done(rest or None, f"applied {', '.join(k for k in APPLIED if k in body)} to the document")


# ----------------------------------------------------------------------------- the family's summary

def _summarise(execution: dict[str, Any]) -> bool:
    """The family's ``processing`` field: its latest run, as docs/api/processing.md shows it.
    False when the family is gone (the write is conditional on it): a run created or ended
    after its family's delete read the family's executions deletes itself (``_create_run``,
    ``PipelineKind.after_write``; docs/api/processing.md "The parse stage")."""
    family_id = execution.get('documentFamilyId')
    if not family_id:
        return True
    meta = execution.get('metadata') or {}
    summary = {'assistantId': execution.get('assistantId'), 'assistantName': execution.get('name'),
               'executionId': execution.get('id'), 'status': execution.get('status'),
               'step': (execution.get('step') or {}).get('name'), 'trigger': meta.get('trigger'),
               'updatedOn': execution.get('updatedOn')}
    return repo.set_side_field('document-families', str(family_id), 'processing',
                               {k: v for k, v in summary.items() if v is not None})


def execution_changed(execution: dict[str, Any]) -> None:
    """An execution's status changed outside the worker (a cancel): the family's summary follows."""
    if execution.get('documentFamilyId') and execution.get('status') in TERMINAL:
        _summarise(execution)
