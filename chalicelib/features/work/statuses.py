"""Execution statuses, defined once (docs/api/work.md "Steps and executions").

The values are the contract's ``ExecutionStatus`` enumeration (declared in this feature's
declarations.py, the OpenAPI component); this module names them and says which end an execution. Every module that
asks "has this execution ended?" (the engine, the status transitions, cancelExecution, the outbox
publisher, the table checker) imports ``TERMINAL`` from here. Light on purpose: no imports but
the enumeration, so a route's cold start pays nothing for it.
"""
from __future__ import annotations

from chalicelib.features.work.declarations import ENUMS

PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, TIMED_OUT = ENUMS['ExecutionStatus']
ALL = ENUMS['ExecutionStatus']
TERMINAL = frozenset({SUCCEEDED, FAILED, CANCELLED, TIMED_OUT})   # an ended execution keeps its status
FAILURES = frozenset({FAILED, TIMED_OUT})                          # what counts against onExhausted: FAIL
