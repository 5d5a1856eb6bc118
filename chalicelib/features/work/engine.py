"""The one execution engine: the attempt loop, the failure path and the redelivery rule of every
execution (docs/operations/worker.md, docs/api/work.md "The worker", docs/api/processing.md).

An execution is a list of steps run one after the other, each under its ExecutionPolicy
(features/work/step_shapes.py). Two kinds of execution use this engine, each describing itself with a
``Kind`` (below):

* an activity's execution (features/work/service.py ``ACTIVITY``): ONE step, its message
  ``{"type": "execution.attempt", "executionId", "attempt": n, "continuation": k}``;
* a document-processing run (features/work/pipelines.py ``PIPELINE``): an assistant's pipeline
  (or the stages before the pipelines), its message
  ``{"type": "pipeline.step", "executionId", "step": i, "attempt": n, "continuation": k}``.

``continuation`` numbers the slice of a step that continues across messages (``Continue``): a
copy of an earlier slice's message is a duplicate (docs/operations/worker.md "Resumable steps").

``run(kind, execution_id, index, attempt, deadline=...)`` is the whole loop of one message:

1. **Redelivery** (the one rule, docs/api/work.md): an ended execution, an earlier step, an
   earlier slice or an attempt already made is a duplicate and changes nothing (an earlier step's message re-sends
   the current step's first message when that may have been lost; a retry's message is sent
   again when the retry was recorded). A message whose attempt is found ``RUNNING`` (and not
   waiting for an agent) is never consumed silently: within the attempt's ``timeoutSeconds`` +
   ``INTERRUPTED_AFTER_SECONDS`` a check-back message for the same attempt is queued for when
   that time is up; after it, the attempt counts as failed ("the attempt was interrupted").
2. **Budget**: the attempt's time box (``attempt_seconds``) must fit in what the invocation has
   left less ``SAFETY_MARGIN_SECONDS``, else ``Deferred`` before anything is written.
3. **Claim**: a conditional write on the execution's changeSequence (RUNNING, ``attempts`` n).
4. **Run** the step's runner (``RUNNERS``) within ``min(box, time left)``.
5. **Record** the outcome (conditional again: a cancel that got there first wins):
   an output advances to the next step or ends the execution ``SUCCEEDED``; a failure goes down
   the one failure path (retry after backoff, or exhaustion under ``onExhausted``); ``Continue``
   re-queues the same attempt without counting it; an AGENT step waits.

**Adding a step kind** is one entry in ``RUNNERS`` plus its runner, a function of one
``StepRun`` (its ``execution``, ``step``, ``options``, ``policy``, ``seconds``, ``principal``,
``input``). A feature's runner is a lazy call into its own service, e.g.::

    def _parse(run: StepRun) -> Any:
        from chalicelib.features.parsing import stage  # noqa: PLC0415 - lazy: ...
        return stage.run_slice(...)

    RUNNERS['PARSE'] = Runner(_parse)

(and the edge ``chalicelib.features.work.** -> chalicelib.features.parsing.**`` in .importlinter).
What a runner says:

* **done**: return the step's output (JSON-able; ``None`` for none);
* **retry**: raise an ``ApiError`` (chalicelib/core/errors.py) with a status of 5xx, 429 or 408
  (``ServiceUnavailable``, ``TooManyRequests``, ...), or ``AttemptFailed(reason)``: a failed
  attempt, retried after its backoff while the policy's ``maxAttempts`` allow (504 and 408 count
  as timeouts: an exhausted step that fails its execution ends it ``FAILED`` with ``endReason``
  ``TIMED_OUT``). An AWS dependency that does not answer and
  any unexpected exception are retried the same way (the latter logged with its traceback);
* **fail now**: raise an ``ApiError`` with any other 4xx status (``BadRequest``, ``NotFound``,
  ``Forbidden``, ``Conflict``, ``PayloadTooLarge``, a 422 limit, ...), or
  ``AttemptFailed(reason, final=True)``: the same input would fail again, so no further attempt
  is made and ``onExhausted`` applies at once;
* **continue**: return ``chalicelib.core.resumable.Continue(progress)``: the progress is kept on
  the execution (``metadata.progress``, ``metadata.continuations``), the same attempt is queued
  again in a new message without being counted, and the runner finds its progress in
  ``run.execution['metadata']['progress']``; at most ``MAX_CONTINUATIONS`` per step.

The engine knows no family beyond executions; what differs between the kinds (their messages,
where their steps are, their runners' input and principal, what an ended execution does next)
is each ``Kind``'s.
"""
from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from chalicelib.core import clock, observability
from chalicelib.core.errors import ApiError, ServiceUnavailable, aws_unavailable
from chalicelib.core.expressions import ExpressionError, evaluate
from chalicelib.core.principal import Principal
from chalicelib.core.resumable import Continue
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.features.work import step_shapes
from chalicelib.features.work import store as work_store
from chalicelib.features.work.statuses import FAILED, PENDING, RUNNING, SUCCEEDED, TERMINAL, TIMED_OUT
from chalicelib.kernel import records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict

log = observability.get_logger('engine')

__all__ = ['Continue', 'Deferred', 'PoisonMessage', 'AttemptFailed', 'Vanished', 'Kind', 'Runner', 'RUNNERS', 'StepRun',
           'run']

# The worker's budget (docs/operations/worker.md).
SAFETY_MARGIN_SECONDS = 3.0    # kept for writing an attempt's outcome and answering the batch
START_SECONDS = 2.0            # what any message needs at least (an activity start: a few writes)
SCRIPT_MAX_SECONDS = 10        # a SCRIPT attempt's time box never exceeds this
MAX_ATTEMPT_SECONDS = 20       # nor does any attempt's (a 29 s Lambda: one long attempt and change)
INTERRUPTED_AFTER_SECONDS = 60  # an attempt RUNNING longer than its timeout + this was interrupted
MAX_CONTINUATIONS = 500        # a step continued more often than this fails (a runner that never ends)
MAX_PROGRESS_BYTES = 4_000     # a Continue's progress, as JSON, kept on the execution item
MAX_STATUS_MESSAGES = 50


class PoisonMessage(Exception):
    """A message no delivery can process (not JSON, unknown type): it fails until the queue's
    maxReceiveCount moves it to the dead-letter queue."""


class Deferred(Exception):
    """Not started: the invocation's remaining time cannot cover it. The message goes back as a
    batch item failure (front/handlers.py) and is redelivered; nothing of it was written."""


class AttemptFailed(Exception):
    """A failed attempt, said by a runner (or by the engine for any exception, ``failure_of``):
    ``final`` means no further attempt (the same input fails again), ``timed_out`` that the
    attempt ran out of its time (an exhausted step fails its execution with endReason TIMED_OUT)."""

    def __init__(self, reason: str, *, timed_out: bool = False, final: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.timed_out, self.final = reason, timed_out, final


class Vanished(Exception):
    """What the execution works on is gone (a pipeline's document family was deleted, maybe after
    the family's delete removed the executions it found): no attempt can help, and the kind
    decides what becomes of the execution (``Kind.vanished``: a pipeline's is deleted with it)."""


@dataclass(frozen=True)
class Done:
    """A finished step: its output and, optionally, the line recorded for it."""
    output: Any = None
    note: str = ''


@dataclass(frozen=True)
class Waiting:
    """The step waits for someone else (an AGENT step: the agent runtime ends the execution)."""
    note: str


RETRY_STATUSES = frozenset({408, 429})
TIMEOUT_STATUSES = frozenset({408, 504})


def failure_of(exc: BaseException) -> AttemptFailed:
    """What an exception raised by a runner means (the mapping in the module docstring)."""
    if isinstance(exc, AttemptFailed):
        return exc
    if isinstance(exc, ApiError):
        retry = exc.status >= 500 or exc.status in RETRY_STATUSES
        return AttemptFailed(exc.message, timed_out=exc.status in TIMEOUT_STATUSES, final=not retry)
    if isinstance(exc, ExpressionError):
        return AttemptFailed(str(exc), timed_out=exc.timed_out)
    if aws_unavailable(exc):
        return AttemptFailed(f'a service the worker depends on did not answer ({type(exc).__name__})')
    log.exception('a step runner raised %s', type(exc).__name__)
    return AttemptFailed(f'internal error ({type(exc).__name__})')


def seconds_left(deadline: float | None) -> float:
    """What the invocation still has for work, its safety margin kept (inf without a deadline)."""
    if deadline is None:
        return float('inf')
    return deadline - time.monotonic() - SAFETY_MARGIN_SECONDS


def message(kind: str, body: str) -> dict[str, Any]:
    return {'type': kind, 'at': clock.now_iso(), 'message': body}


def append(data: dict[str, Any], kind: str, text: str) -> None:
    """One more ``statusMessages`` line (the last ``MAX_STATUS_MESSAGES`` kept)."""
    data['statusMessages'] = [*(data.get('statusMessages') or []), message(kind, text)][-MAX_STATUS_MESSAGES:]


def send(messages: list[tuple[dict[str, Any], int]], *, queue: str | None = None) -> None:
    """Send (body, delay seconds) messages (``queue``: see ``Continue.queue``); a refused send
    raises, so the message being processed is delivered again and its recovery sends them again
    (every receiver is idempotent). They go in the message group of the organization of the work
    at hand (annotated by whoever found it: a message's execution, family, event), so a burst of
    one organization does not starve another (docs/operations/worker.md "Fairness between
    organizations")."""
    if not messages:
        return
    try:
        work_store.send_messages(messages, correlation_id=observability.correlation_id(), queue=queue,
                                 group=observability.current().get('organization_id'))
    except work_store.SendFailed as exc:
        raise ServiceUnavailable(f'work messages not sent: {exc}') from None


def step_unclaimed(data: dict[str, Any]) -> bool:
    """The current step's first attempt has never been claimed: the one state in which a
    duplicate trigger (a start, or the previous step's message, sent again) may send the step's
    message again (the recovery of a crash between a write and its send). A step that continues
    across messages is PENDING with no attempt counted too, but its next message is on its way
    (``_continue``: written, then sent): a copy sent then would run a slice twice (or hand a page
    to the OCR queue twice), so ``metadata.continuations`` says it was claimed."""
    return data.get('status') == PENDING and not data.get('attempts') and \
        not (data.get('metadata') or {}).get('continuations')


def find(family: str, project_id: str, ref: str):
    """A record of ``family`` in the project named by id or slug, or None."""
    stored = table.get_by_ref(family, scope=project_id, ref=ref)
    return stored if stored is not None and stored.data.get('projectId') == project_id else None


# ----------------------------------------------------------------------------- kinds and runners

@dataclass
class Context:
    """What a kind hands its runners: the JSONata root (and bindings) and who they act as."""
    input: Any
    principal: Principal
    bindings: dict[str, Any] | None = None


class Kind(ABC):
    """One kind of execution: its messages, where its steps are, its runners' context and what
    happens around its writes. Subclasses: service.py ``ActivityKind``, pipelines.py ``PipelineKind``."""
    name = 'execution'
    evaluates_conditionals = False   # a step's ``conditional`` evaluated when the step runs

    @abstractmethod
    def steps(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        """Implemented by each kind."""

    def index(self, data: dict[str, Any]) -> int:
        return 0

    def set_index(self, new: dict[str, Any], index: int) -> None:
        """Record ``index`` as the current step (a one-step kind keeps nothing)."""
        return None   # a hook a kind may fill; nothing by default

    @abstractmethod
    def message(self, execution_id: str, index: int, attempt: int, continuation: int | None = None) -> dict[str, Any]:
        """Implemented by each kind: the body runs attempt ``attempt`` of step ``index``; with
        ``continuation``, only that slice of it (``run``: an earlier slice's copy is a duplicate)."""

    @abstractmethod
    def context(self, data: dict[str, Any]) -> Context:
        """The runners' input and principal; ``AttemptFailed`` when none can be built."""

    def label(self, step: dict[str, Any]) -> str:
        """The prefix of this kind's status lines about ``step``."""
        return ''

    def keep_output(self, new: dict[str, Any], step: dict[str, Any], output: Any) -> None:
        new['output'] = output

    @abstractmethod
    def exhausted(self, policy: dict[str, Any]) -> tuple[str | None, str, str]:
        """(the status the execution ends with, or None to go on with the next step; the line's
        type; the line's ending) when a step exhausts its attempts under ``policy``."""

    def succeeded_note(self, steps: list[dict[str, Any]]) -> str | None:
        return None

    def after_write(self, data: dict[str, Any], event: str) -> None:
        """After a write of the engine: ``claimed`` (an attempt started), ``waiting``, ``ended``."""
        return None   # a hook a kind may fill; nothing by default

    def option_value(self, run: StepRun, value: Any) -> Any:
        """An option's value as a runner sends it (a pipeline evaluates ``=expr``)."""
        return value

    def script_result(self, run: StepRun, value: Any) -> Any:
        """What a SCRIPT's value does (a pipeline applies documentStatus / labels / metadata)."""
        return value

    def bridge_output(self, result) -> Any:
        """The output of a BRIDGE_CALL's 2xx answer."""
        return result.value()

    def vanished(self, stored, reason: str) -> str:
        """What becomes of an execution whose subject is gone (``Vanished``): by default it ends
        FAILED with the reason."""
        return _end(self, stored, FAILED, 'ERROR', reason)


@dataclass
class StepRun:
    """One attempt of one step, as its runner sees it."""
    kind: Kind
    execution: dict[str, Any]
    step: dict[str, Any]
    policy: dict[str, Any]
    seconds: float          # the attempt's time box, never more than the invocation has left
    context: Context

    @property
    def options(self) -> dict[str, Any]:
        return self.step.get('options') or {}

    @property
    def input(self) -> Any:
        return self.context.input

    @property
    def principal(self) -> Principal:
        return self.context.principal

    @property
    def timeout_ms(self) -> int:
        return max(1, int(self.seconds * 1000))

    def value(self, raw: Any) -> Any:
        return self.kind.option_value(self, raw)


@dataclass(frozen=True)
class Runner:
    """How a step kind runs: ``run(StepRun)`` and its time box, ``min(timeoutSeconds,
    max_seconds)``, or ``fixed_seconds`` whatever the policy says."""
    run: Callable[[StepRun], Any]
    max_seconds: float = MAX_ATTEMPT_SECONDS
    fixed_seconds: float | None = None


def _script(run: StepRun) -> Any:
    value = evaluate(run.options.get('expression', ''), run.input, bindings=run.context.bindings,
                     timeout_ms=run.timeout_ms)
    return run.kind.script_result(run, value)


def _bridge_call(run: StepRun) -> Any:
    from chalicelib.features.bridges import proxy as bridges  # noqa: PLC0415 - lazy: the egress client is only for BRIDGE_CALL steps
    bridge = find('service-bridges', run.execution['projectId'], str(run.options.get('bridge') or ''))
    if bridge is None:
        raise AttemptFailed(f"no service bridge '{run.options.get('bridge')}' in the project")
    query: dict[str, list[str]] = {}
    for key, raw in (run.options.get('query') or {}).items():
        value = run.value(raw)
        if value is not None:
            query[key] = [str(x) for x in value] if isinstance(value, list) else [str(value)]
    body = run.value(run.options.get('body'))
    try:   # EgressDenied keeps its message: "service bridge egress denied: ..."
        result = bridges.call_endpoint(bridge.data, run.options.get('endpointName'), query=query, body=body,
                                       principal=run.principal, timeout=max(0.001, run.seconds))
    except ApiError as exc:
        raise failure_of(exc) from None
    if not result.ok:
        raise AttemptFailed(f'the upstream answered {result.status}')
    return run.kind.bridge_output(result)


def _agent(run: StepRun) -> Waiting:
    agent = find('agents', run.execution['projectId'], run.step.get('ref') or '')
    if agent is None:
        raise AttemptFailed(f"no agent '{run.step.get('ref')}' in the project")
    return Waiting(f"waiting for the agent runtime of agent '{agent.data.get('slug') or agent.id}'")


# The seam: step kind -> runner. A new kind is one entry here plus its runner (module docstring).
def _extract(run: StepRun) -> Any:
    from chalicelib.features.extraction import service as extraction  # noqa: PLC0415 - lazy: only EXTRACT steps load it
    try:
        return extraction.run_extract_step(run.execution, run.options, run.seconds, run.principal)
    except extraction.FamilyGone as exc:
        raise Vanished(exc.message) from None


RUNNERS: dict[str, Runner] = {
    'SCRIPT': Runner(_script, max_seconds=SCRIPT_MAX_SECONDS),
    'BRIDGE_CALL': Runner(_bridge_call),
    'AGENT': Runner(_agent, fixed_seconds=START_SECONDS),   # it only looks the agent up and records that it waits
    'EXTRACT': Runner(_extract),   # docs/api/extraction.md "The EXTRACT step"
}


def attempt_seconds(step: dict[str, Any], policy: dict[str, Any]) -> float:
    """The time box of one attempt of ``step``: its policy's timeout, within its runner's cap."""
    runner = RUNNERS.get(step.get('stepType'))
    if runner is None:
        return START_SECONDS   # it only records that the step cannot run
    if runner.fixed_seconds is not None:
        return runner.fixed_seconds
    return float(min(policy['timeoutSeconds'], runner.max_seconds))


# ----------------------------------------------------------------------------- the attempt loop

def continuations_of(data: dict[str, Any]) -> int:
    """How many times the current step continued in a new message (0 before its first)."""
    return int((data.get('metadata') or {}).get('continuations') or 0)


def run(kind: Kind, execution_id: str, index: int, attempt: int, *, continuation: int | None = None,
        deadline: float | None = None) -> str:
    """Process one step message of ``kind``: attempt ``attempt`` of step ``index`` (``continuation``:
    the slice the message was sent for, None for a message that runs whichever slice is next);
    what happened (for the log line). ``Deferred`` when the invocation has no time for it."""
    stored = table.get('executions', execution_id)
    if stored is None:
        return 'gone'
    observability.annotate(organization_id=stored.org)
    data = stored.data
    status, made = data.get('status', PENDING), int(data.get('attempts') or 0)
    steps, current = kind.steps(data), kind.index(data)
    if status in TERMINAL:
        return f'already {status}'
    if index < current:
        if step_unclaimed(data):   # the step before was recorded, its message maybe not sent
            send([(kind.message(stored.id, current, 1, 0), 0)])
            return 'next step sent again'
        return 'duplicate (an earlier step)'
    if index > current or index >= len(steps):
        return 'duplicate'
    if continuation is not None and continuation < continuations_of(data):
        # a copy of a slice's message that ran already (SQS's at-least-once, a trigger sent twice):
        # the slice after it has its own message; claiming this one would run a slice twice
        return f'duplicate (slice {continuation}; the step is at slice {continuations_of(data)})'
    step = steps[index]
    policy = step_shapes.policy_of(step)
    if attempt == made and status == PENDING and data.get('nextAttemptAt'):
        delay = max(0, int((clock.parse_instant(data['nextAttemptAt']) - clock.now()).total_seconds()))
        send([(kind.message(stored.id, index, attempt + 1, continuations_of(data)),
               min(delay, step_shapes.MAX_DELAY_SECONDS))])
        return 'retry message sent again'
    if attempt == made and status == RUNNING and not (data.get('metadata') or {}).get('waitingFor'):
        # The same message again: a duplicate while the attempt runs, or the attempt's worker died
        # or failed after the claim (an outcome write refused under throttling; its message came
        # back after the visibility timeout, which may be shorter than the attempt's time).
        # Consuming it would leave a dead attempt RUNNING for good: a check-back message (the
        # same attempt) comes when the attempt's time is up and finds it ended, or interrupted.
        idle = (clock.now() - clock.parse_instant(data['updatedOn'])).total_seconds()
        left = policy['timeoutSeconds'] + INTERRUPTED_AFTER_SECONDS - idle
        if left > 0:
            wait = min(int(left) + 1, step_shapes.MAX_DELAY_SECONDS)
            send([(kind.message(stored.id, index, attempt, continuation), wait)])
            return f'attempt in progress: checked again in {wait} s'
        return _after_failure(kind, stored, index, attempt, policy, AttemptFailed('the attempt was interrupted'))
    if attempt != made + 1 or status not in (PENDING, RUNNING):
        return 'duplicate'

    box = attempt_seconds(step, policy)
    left = seconds_left(deadline)
    if left < box:   # before the claim: a deferred attempt is not an attempt made
        raise Deferred(f"step '{step.get('name')}' attempt {attempt} needs {box:g} s, "
                       f'{max(0.0, left):.1f} s left of the invocation')
    continuations = continuations_of(data)

    def claim(new: dict[str, Any]) -> None:
        new.update(status=RUNNING, attempts=attempt, step=step)
        new.setdefault('startDate', new['updatedOn'])
        new.pop('nextAttemptAt', None)
        again = f' (continuation {continuations})' if continuations else ''
        append(new, 'INFO', f"{kind.label(step)}attempt {attempt} of {policy['maxAttempts']} started{again}")

    claimed = write(stored, claim, retry_conflicts=False)
    if claimed is None:
        return 'claimed by another delivery'
    kind.after_write(claimed.data, 'claimed')
    outcome = _attempt(kind, claimed.data, step, policy, min(box, seconds_left(deadline)))
    if isinstance(outcome, Waiting):
        return _end(kind, claimed, RUNNING, 'INFO', outcome.note, waiting=True)
    if isinstance(outcome, Continue):
        return _continue(kind, claimed, index, attempt, policy, outcome)
    if isinstance(outcome, AttemptFailed):
        return _after_failure(kind, claimed, index, attempt, policy, outcome)
    if isinstance(outcome, Vanished):
        return kind.vanished(claimed, str(outcome))
    return _advance(kind, claimed, index, outcome.output, 'INFO',
                    outcome.note or f'{kind.label(step)}attempt {attempt} succeeded')


def _attempt(kind: Kind, data: dict[str, Any], step: dict[str, Any], policy: dict[str, Any],
             seconds: float) -> Done | Waiting | Continue | AttemptFailed | Vanished:
    """Run one attempt within ``seconds``; every exception but ``Vanished`` becomes an ``AttemptFailed``."""
    try:
        context = kind.context(data)
        attempt = StepRun(kind, data, step, policy, seconds, context)
        if kind.evaluates_conditionals and step.get('conditional') and \
                not evaluate(step['conditional'], context.input, bindings=context.bindings,
                             timeout_ms=attempt.timeout_ms):
            return Done(None, f"step '{step.get('name')}' skipped: its conditional is false")
        runner = RUNNERS.get(step.get('stepType'))
        if runner is None:
            raise AttemptFailed(f"unknown stepType {step.get('stepType')!r}", final=True)
        result = runner.run(attempt)
    except Vanished as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - every failure of a step is a failed attempt (failure_of)
        return failure_of(exc)
    if isinstance(result, (Done, Waiting, Continue)):
        return result
    return Done(result)


def write(stored, mutate: Callable[[dict[str, Any]], None], *, retry_conflicts: bool = True):
    """Apply ``mutate`` to a copy of the execution and write it, conditional on its sequence:
    the stored record as written, or None when another writer got there first (a cancel, a
    duplicate; with ``retry_conflicts`` it is re-read and ``mutate`` applied again unless it ended)."""
    fam = family_of('executions')
    for _ in range(3):
        new = dict(stored.data)
        new['updatedOn'] = clock.now_iso()
        new['changeSequence'] = stored.seq + 1
        mutate(new)
        try:
            records.commit(records.update_ops(fam, new, stored, principal=SERVICE))
            # as just written: indexed values counted, in the same guard layout (kernel/parents.py)
            return table.Stored(fam.path, new, stored.seq + 1, stored.org, indexed=True, guarded=stored.guarded)
        except WriteConflict as exc:
            if exc.code == 'TransactionConflict':
                continue
            if not retry_conflicts:
                return None
            stored = table.get(fam.path, stored.id)
            if stored is None or stored.data.get('status') in TERMINAL:
                return None
    raise ServiceUnavailable('the execution is busy')


def _end(kind: Kind, stored, status: str, line: str, text: str, *, waiting: bool = False,
         next_attempt_at: str | None = None, end_reason: str | None = None) -> str:
    """Write the execution's new status (and line, and why it failed); an ended or waiting one
    tells its kind."""
    def mutate(new: dict[str, Any]) -> None:
        new['status'] = status
        if end_reason is not None:
            new['endReason'] = end_reason
        append(new, line, text)
        if next_attempt_at is not None:
            new['nextAttemptAt'] = next_attempt_at
        if waiting:
            new['metadata'] = {**(new.get('metadata') or {}), 'waitingFor': 'agent'}
        if status in TERMINAL:
            new['endDate'] = new['updatedOn']

    written = write(stored, mutate)
    if written is None:
        return 'changed meanwhile'
    if status in TERMINAL:
        kind.after_write(written.data, 'ended')
    elif waiting:
        kind.after_write(written.data, 'waiting')
    return text


def _advance(kind: Kind, stored, index: int, output: Any, line: str, text: str) -> str:
    """Record the step's output and queue the next step, or end the execution SUCCEEDED."""
    steps = kind.steps(stored.data)
    step = steps[index]
    following = index + 1

    def mutate(new: dict[str, Any]) -> None:
        if output is not None:
            kind.keep_output(new, step, output)
        kind.set_index(new, following)
        meta = {k: v for k, v in (new.get('metadata') or {}).items() if k not in ('progress', 'continuations')}
        if meta or 'metadata' in new:
            new['metadata'] = meta
        append(new, line, text)
        new.pop('nextAttemptAt', None)
        if following < len(steps):
            new.update(status=PENDING, attempts=0, step=steps[following])
        else:
            new.update(status=SUCCEEDED, endDate=new['updatedOn'])
            note = kind.succeeded_note(steps)
            if note:
                append(new, 'INFO', note)

    written = write(stored, mutate)
    if written is None:
        return 'changed meanwhile'
    if following < len(steps):
        send([(kind.message(stored.id, following, 1, 0), 0)])
        return f'{text}; next step queued'
    kind.after_write(written.data, 'ended')
    return text


def _after_failure(kind: Kind, stored, index: int, attempt: int, policy: dict[str, Any],
                   failure: AttemptFailed) -> str:
    """The one failure path: a retry after its backoff, or the step's exhaustion."""
    observability.count('ExecutionAttemptsFailed')
    label = kind.label(kind.steps(stored.data)[index])
    if attempt < policy['maxAttempts'] and not failure.final:
        delay = step_shapes.backoff_seconds(policy, attempt)
        at = clock.iso(clock.now() + timedelta(seconds=delay))
        text = f'{label}attempt {attempt} failed: {failure.reason}; attempt {attempt + 1} in {delay} s'
        written = _end(kind, stored, PENDING, 'WARNING', text, next_attempt_at=at)
        if written.startswith('changed'):
            return written
        send([(kind.message(stored.id, index, attempt + 1, continuations_of(stored.data)), delay)])
        return text
    made = f'{attempt} of {policy["maxAttempts"]} attempts made'
    if attempt < policy['maxAttempts']:
        made += ', no retry (the same input fails again)'
    exhausted = f'{label}attempt {attempt} failed: {failure.reason}; {made}'
    status, line, ending = kind.exhausted(policy)
    if status is None:
        return _advance(kind, stored, index, None, line, f'{exhausted}; {ending}')
    reason = TIMED_OUT if status == FAILED and failure.timed_out else None
    return _end(kind, stored, status, line, f'{exhausted}; {ending}', end_reason=reason)


def _continue(kind: Kind, stored, index: int, attempt: int, policy: dict[str, Any], more: Continue) -> str:
    """The step is not finished: keep its progress and queue the same attempt again, uncounted."""
    count = continuations_of(stored.data) + 1
    if count > MAX_CONTINUATIONS:
        return _after_failure(kind, stored, index, attempt, policy, AttemptFailed(
            f'not finished after {MAX_CONTINUATIONS} continuations', final=True))
    try:
        size = len(json.dumps(more.progress).encode())
    except (TypeError, ValueError):
        size = -1
    if not 0 <= size <= MAX_PROGRESS_BYTES:
        return _after_failure(kind, stored, index, attempt, policy, AttemptFailed(
            f'the step reported a progress that is not JSON of at most {MAX_PROGRESS_BYTES} bytes', final=True))
    delay = max(0, min(int(more.delay_seconds or 0), step_shapes.MAX_DELAY_SECONDS))
    step = kind.steps(stored.data)[index]
    text = f'{kind.label(step)}attempt {attempt}: {more.message or "not finished"}; continues in a new message'

    def mutate(new: dict[str, Any]) -> None:
        new.update(status=PENDING, attempts=attempt - 1)   # the attempt is not counted
        new['metadata'] = {**(new.get('metadata') or {}), 'progress': more.progress, 'continuations': count}
        append(new, 'INFO', text)

    written = write(stored, mutate)
    if written is None:
        return 'changed meanwhile'
    send([(kind.message(stored.id, index, attempt, count), delay)], queue=more.queue)
    return text
