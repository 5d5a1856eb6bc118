"""Execution statuses, defined once (docs/api/work.md "Steps and executions").

The values are the contract's ``ExecutionStatus`` enumeration (declared in this feature's
declarations.py, the OpenAPI component; the platform SDK's values, no TIMED_OUT: a timed-out
execution is FAILED with ``endReason`` TIMED_OUT); this module names them and says which end an
execution. Every module that
asks "has this execution ended?" (the engine, the status transitions, cancelExecution, the outbox
publisher, the table checker) imports ``TERMINAL`` from here. Light on purpose: no imports but
the enumeration, so a route's cold start pays nothing for it.
"""
from __future__ import annotations

from chalicelib.features.work.declarations import ENUM_RETIRED, ENUMS

PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED = ENUMS['ExecutionStatus']
ALL = ENUMS['ExecutionStatus']
# a value no longer written but still on records stored before (TIMED_OUT, read as FAILED): it ended
STORED_ONLY = frozenset(ENUM_RETIRED['ExecutionStatus'])
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED}) | STORED_ONLY   # an ended execution keeps its status
FAILURES = frozenset({FAILED}) | STORED_ONLY                         # what counts against onExhausted: FAIL
# why a FAILED execution failed, when the engine knows: its last attempt ran out of its time
# (formerly the status TIMED_OUT: declarations.py ENUM_RETIRED)
(TIMED_OUT,) = ENUMS['ExecutionEndReason']
