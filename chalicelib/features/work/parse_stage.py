"""The parse stage on the execution engine (issue 39; docs/api/processing.md "The parse stage").

``STEP`` is the stage pipelines.py runs before the assistants' pipelines of every new family (its
``STAGES_BEFORE_PIPELINES``); ``RUNNER`` runs its ``PARSE`` steps: one call of the parsing
stage per queue message (features/parsing/stage.py ``run_slice``), which answers

* more pages to read -> ``Continue(progress)``: the engine keeps the progress (pages done of
  pages) on the execution and queues the same attempt again; to the OCR function's queue when
  the next page needs Tesseract and this process has none (or when running in the OCR function:
  a scanned document stays there);
* done -> the step's output (``{parsed, parser, pageCount, nodeCount, ...}``, or ``{parsed:
  false, reason: "no parser for <type>"}``);
* failed (the file's fault: encrypted, corrupt, ...) -> ``AttemptFailed(final=True)``: the same
  bytes fail again, so no retry. Storage and table failures raise and are retried as any
  attempt's.

A PDF over one range of its reader is read in parallel page ranges (features/parsing/fanout.py):
the first message queues the ranges (``parse.range`` messages, ``run_range``) and the step
continues as a look every few seconds; the last range wakes it with ``wake`` (the step's own
message), and the look that finds every range read assembles the document.

The run's id is the execution's id, so its part objects are the same whichever message or attempt
writes them.
"""
from __future__ import annotations

import time
from typing import Any

from chalicelib.core.resumable import Continue
from chalicelib.features.work import engine, step_shapes

RANGE = 'parse.range'   # one page range's message (features/parsing/fanout.py RANGE; worker.py)
STEP_TYPE = step_shapes.STAGE_STEP_TYPES[0]   # 'PARSE' (how an execution shows it: step_shapes.py)
STEP: dict[str, Any] = {'name': 'parse', 'stepType': STEP_TYPE,
                        'executionPolicy': {'maxAttempts': 3, 'backoffStrategy': 'EXPONENTIAL',
                                            'backoffBaseSeconds': 5, 'onExhausted': 'FAIL'}}


def run(attempt: engine.StepRun) -> Any:
    from chalicelib.features.parsing import stage as parsing  # noqa: PLC0415 - lazy: the readers load in the worker only
    execution = attempt.execution
    state = (execution.get('metadata') or {}).get('progress') or parsing.new_state(str(execution['id']))
    # the message that runs this attempt again: a fanned-out run's last range sends it (fanout.py);
    # no slice number: it wakes whichever slice the stage is at (a look at the ranges is idempotent)
    wake = attempt.kind.message(str(execution['id']), attempt.kind.index(execution),
                                int(execution.get('attempts') or 1), None)
    done = parsing.run_slice(str(execution.get('documentFamilyId')), state, principal=attempt.principal,
                             deadline=time.monotonic() + attempt.seconds, wake=wake)
    if done.kind == 'continue':
        _send(done.send)
        fanned = bool(done.state.get('fanout'))
        return Continue(done.state, message=done.message, delay_seconds=done.delay,
                        queue=None if fanned else 'ocr' if done.ocr or parsing.in_ocr_function() else None)
    if done.kind == 'gone':
        raise engine.Vanished(done.message)
    if done.kind == 'failed':
        raise engine.AttemptFailed(done.message, final=True)
    return engine.Done(done.output, note=done.message)


def _send(messages: list[tuple[dict[str, Any], str | None, int]]) -> None:
    """Queue the parse stage's range messages, each on its queue (None: the activity queue)."""
    for queue in {q for _, q, _ in messages}:
        engine.send([(body, delay) for body, q, delay in messages if q == queue], queue=queue)


def run_range(body: dict[str, Any], *, deadline: float | None) -> str:
    """One ``parse.range`` message (features/parsing/fanout.py): its pages read and stored; a
    storage or table failure retries the range alone (its own ``try``), never the document."""
    from chalicelib.features.parsing import fanout, site  # noqa: PLC0415 - lazy: the readers load in the worker only
    # the OCR function takes one message an invocation and has 300 s (infra/ocr_function.py): a
    # scan's range gets most of it; the zip worker's messages share a 29 s invocation
    cap = fanout.settings()[0].ocr_range_seconds if site.in_ocr_function() else engine.MAX_ATTEMPT_SECONDS
    seconds = min(float(cap), engine.seconds_left(deadline))
    ends = time.monotonic() + seconds
    try:
        return fanout.read_range(body, deadline=ends, send=_send)
    except Exception as exc:  # noqa: BLE001 - any failure of a range is a failed try of that range (fanout.retry)
        cause = getattr(exc, 'cause', None)   # the readers' time-budget on a busy machine
        reason = f'{cause}: {exc}' if isinstance(cause, str) else engine.failure_of(exc).reason
        return fanout.retry(body, reason[:400], _send)


RUNNER = engine.Runner(run)
