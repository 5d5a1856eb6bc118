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

The run's id is the execution's id, so its part objects are the same whichever message or attempt
writes them.
"""
from __future__ import annotations

import time
from typing import Any

from chalicelib.core.resumable import Continue
from chalicelib.features.work import engine, step_shapes

STEP_TYPE = step_shapes.STAGE_STEP_TYPES[0]   # 'PARSE' (how an execution shows it: step_shapes.py)
STEP: dict[str, Any] = {'name': 'parse', 'stepType': STEP_TYPE,
                        'executionPolicy': {'maxAttempts': 3, 'backoffStrategy': 'EXPONENTIAL',
                                            'backoffBaseSeconds': 5, 'onExhausted': 'FAIL'}}


def run(attempt: engine.StepRun) -> Any:
    from chalicelib.features.parsing import stage as parsing  # noqa: PLC0415 - lazy: the readers load in the worker only
    execution = attempt.execution
    state = (execution.get('metadata') or {}).get('progress') or parsing.new_state(str(execution['id']))
    done = parsing.run_slice(str(execution.get('documentFamilyId')), state, principal=attempt.principal,
                             deadline=time.monotonic() + attempt.seconds)
    if done.kind == 'continue':
        return Continue(done.state, message=done.message,
                        queue='ocr' if done.ocr or parsing.in_ocr_function() else None)
    if done.kind == 'gone':
        raise engine.Vanished(done.message)
    if done.kind == 'failed':
        raise engine.AttemptFailed(done.message, final=True)
    return engine.Done(done.output, note=done.message)


RUNNER = engine.Runner(run)
