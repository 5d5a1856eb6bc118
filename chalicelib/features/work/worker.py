"""The activity queue's worker: one door for every message (front/handlers.py ``sqs_batch`` and
``make run``'s queue poller call ``handle_message`` per message; docs/api/work.md "The worker",
docs/api/processing.md, docs/operations/worker.md).

| message type          | handled by                                             |
|-----------------------|--------------------------------------------------------|
| ``activity.start``    | features/work/service.py ``run_start`` (materialises a plan) |
| ``execution.attempt`` | the engine, as an activity's execution (service.py ``ACTIVITY``) |
| ``pipeline.start``    | features/work/pipelines.py ``run_start`` (creates a run) |
| ``pipeline.stages``   | pipelines.py ``run_stages`` (the stages before the pipelines) |
| ``pipeline.existing`` | pipelines.py ``run_existing`` (one page of runOnExistingContent) |
| ``pipeline.step``     | the engine, as a document-processing run (pipelines.py ``PIPELINE``) |
| ``parse.range``       | parse_stage.py ``run_range`` (one page range of a big document, features/parsing/fanout.py) |

``handle_admitted`` is the door the queue handlers (front/handlers.py ``sqs_batch``, ``ocr_batch``)
use: it takes one of the message's organization's in-flight slots first (features/work/inflight.py,
the cap of docs/operations/worker.md "Fairness between organizations") and gives it back after.

The worker spends the Lambda's time, not more: ``deadline`` is the invocation's end (a
``time.monotonic()`` instant, front/handlers.py); a message it cannot cover, less the engine's
safety margin, is ``Deferred`` before anything of it is written (it goes back as a batch item
failure and is redelivered). A message no delivery can process is a ``PoisonMessage``.
"""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core import observability
from chalicelib.core.config import get_config
from chalicelib.features.work import engine, inflight, parse_stage, pipelines, service
from chalicelib.features.work import store as work_store
from chalicelib.features.work.engine import Deferred, PoisonMessage

__all__ = ['Deferred', 'PoisonMessage', 'handle_admitted', 'handle_message']

MAX_DELAY_SECONDS = 900   # SQS: a message's DelaySeconds at most
DEFERRALS = 'deferredOverCap'   # the body's count of times it was over the cap (removed before it is worked)


def _strings(message: dict[str, Any], *names: str) -> bool:
    return all(isinstance(message.get(n), str) and message[n] for n in names)


def _ints(message: dict[str, Any], *names: str) -> bool:
    return all(isinstance(message.get(n), int) and not isinstance(message.get(n), bool) for n in names)


def handle_message(body: str, *, deadline: float | None = None) -> str:
    """Process one queue message; what happened (for the log line). Raises to have the message
    delivered again (``PoisonMessage`` for one that never can be, ``Deferred`` for one the
    invocation has no time left for)."""
    if engine.seconds_left(deadline) < engine.START_SECONDS:
        raise Deferred(f'{max(0.0, engine.seconds_left(deadline)):.1f} s left of the invocation')
    try:
        message = json.loads(body)
    except (TypeError, ValueError):
        raise PoisonMessage('the message is not JSON') from None
    if not isinstance(message, dict):
        raise PoisonMessage('the message is not a JSON object')
    kind = message.get('type')
    continuation = message.get('continuation')   # absent: a message sent before slices were numbered
    if continuation is not None and not _ints(message, 'continuation'):
        raise PoisonMessage('a step message names a continuation that is not an integer')
    if kind == service.START and _strings(message, 'activityId'):
        return service.run_start(message['activityId'])
    if kind == service.ATTEMPT and _strings(message, 'executionId') and _ints(message, 'attempt'):
        return service.run_attempt(message['executionId'], message['attempt'], continuation=continuation,
                                   deadline=deadline)
    if kind == pipelines.STEP and _strings(message, 'executionId') and _ints(message, 'step', 'attempt'):
        return pipelines.run_step(message['executionId'], message['step'], message['attempt'],
                                  continuation=continuation, deadline=deadline)
    if kind == pipelines.START and _strings(message, 'assistantId', 'documentFamilyId', 'trigger'):
        return pipelines.run_start(message['assistantId'], message['documentFamilyId'], message['trigger'])
    if kind == pipelines.STAGES and _strings(message, 'documentFamilyId', 'trigger'):
        assistant = message.get('assistantId')
        return pipelines.run_stages(message['documentFamilyId'], message['trigger'],
                                    assistant if isinstance(assistant, str) and assistant else None)
    if kind == pipelines.EXISTING and _strings(message, 'assistantId', 'run', 'before'):
        cursor = message.get('cursor')
        return pipelines.run_existing(message['assistantId'], message['run'], message['before'],
                                      cursor if isinstance(cursor, dict) else None)
    if kind == parse_stage.RANGE and _strings(message, 'familyId', 'run') and \
            _ints(message, 'range', 'first', 'last', 'from') and isinstance(message.get('plan'), dict) and \
            isinstance(message.get('wake'), dict):
        return parse_stage.run_range(message, deadline=deadline)
    if kind in pipelines.KINDS or kind in (service.START, service.ATTEMPT, parse_stage.RANGE):
        raise PoisonMessage(f'malformed {kind} message')
    raise PoisonMessage(f'unknown message type {str(kind)[:40]!r}')


def handle_admitted(body: str, *, organization: str | None, holder: str, queue: str | None = None,
                    deadline: float | None = None) -> str:
    """``handle_message`` within ``organization``'s in-flight cap (``queue``: None for the
    activity queue, ``'ocr'`` for the OCR function's; their caps are ``org_inflight_cap`` and
    ``org_ocr_inflight_cap``). ``holder``: the message's id. A message over the cap is not worked:
    it is sent again in its group, delayed (``org_inflight_delay_seconds``, doubled each time it
    was, at most 900 s), and this delivery ends (deleted: its receive count, which the
    dead-letter queue counts, starts again with the new message). A message without an
    organization (no ``MessageGroupId``), the cap 0 or one not JSON go straight through."""
    cfg = get_config()
    cap = cfg.org_ocr_inflight_cap if queue == 'ocr' else cfg.org_inflight_cap
    if not organization or cap <= 0 or engine.seconds_left(deadline) < engine.START_SECONDS:
        return handle_message(body, deadline=deadline)
    try:
        message = json.loads(body)
    except (TypeError, ValueError):
        message = None
    if not isinstance(message, dict):
        return handle_message(body, deadline=deadline)
    counted = DEFERRALS in message
    deferrals = message.pop(DEFERRALS, 0)
    deferrals = deferrals if isinstance(deferrals, int) and not isinstance(deferrals, bool) else 0
    name = queue or 'activity'
    slot = inflight.take(name, organization, holder, cap=cap,
                         seconds=engine.seconds_left(deadline) + inflight.MARGIN_SECONDS)
    if slot is None:
        delay = min(MAX_DELAY_SECONDS, cfg.org_inflight_delay_seconds * 2 ** min(deferrals, 10))
        work_store.send_messages([({**message, DEFERRALS: deferrals + 1}, delay)], queue=queue,
                                 correlation_id=observability.correlation_id(), group=organization)
        observability.count('WorkerMessages', outcome='over-cap')
        return f'over the cap of {cap} in flight for its organization: sent again in {delay} s'
    try:
        return handle_message(json.dumps(message) if counted else body, deadline=deadline)
    finally:
        inflight.release(name, organization, slot, holder)
