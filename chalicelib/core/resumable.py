"""What a step runner returns when its work is not finished and goes on in a new message.

A step of the execution engine (features/work/engine.py, docs/operations/worker.md "Resumable
steps") may have more work than one attempt's time box holds: a 500-page scan parsed page range
by page range. Its runner then returns ``Continue(progress)`` instead of an output: the engine
stores ``progress`` on the execution (``metadata.progress``, visible to clients), queues the
same attempt again in a new message without counting it, and hands ``progress`` back to the
runner on the next message (``execution['metadata']['progress']``). A step continues at most
``MAX_CONTINUATIONS`` times (engine.py), then fails.

It lives in core, not in features/work, so that the features whose services run steps
(parsing, extraction) can return it without importing the work feature (work imports them:
the other direction would be an import cycle).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Continue:
    """Not finished: run this step again in a new message, carrying ``progress``.

    ``progress`` is JSON-able and small (at most 4,000 bytes as JSON: it is kept on the
    execution item); ``message`` is recorded in the execution's ``statusMessages``;
    ``delay_seconds`` (0-900) holds the next message back (SQS DelaySeconds)."""
    progress: Any
    message: str = ''
    delay_seconds: int = 0
