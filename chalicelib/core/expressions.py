"""JSONata expressions: the SCRIPT steps of activity plans and the validation rules of content
objects are written in JSONata, evaluated here with ``jsonata-python`` (a maintained, pure
Python port of JSONata: no code execution, no I/O).

Every evaluation is bounded (the library's Timebox: a time budget and a recursion depth), so a
runaway expression written by a tenant (``$f := function($n){ $f($n+1) }``) fails instead of
holding a Lambda. Any failure, a syntax error, an ``$error("...")`` call or a bound exceeded,
is an ``ExpressionError`` whose message starts ``evaluation error: ``; callers decide what it
means (a failed step attempt, a validation entry's ``error``).

The library costs ~80 ms to import: it is loaded on the first evaluation, never at cold start.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_TIMEOUT_MS = 1000
DEFAULT_MAX_DEPTH = 200
MAX_EXPRESSION_LENGTH = 10_000


class ExpressionError(Exception):
    """The expression could not be evaluated; the message is safe to show its author."""

    def __init__(self, reason: str) -> None:
        super().__init__(f'evaluation error: {reason}')
        self.reason = reason


def evaluate(expression: str, data: Any, *, bindings: Mapping[str, Any] | None = None,
             timeout_ms: int = DEFAULT_TIMEOUT_MS, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """The value of ``expression`` over ``data``; ``bindings`` become ``$name`` variables.
    An expression that yields nothing answers None."""
    import jsonata  # noqa: PLC0415 - lazy: ~80 ms of import, paid by the first evaluation only
    if not isinstance(expression, str) or not expression.strip():
        raise ExpressionError('the expression is empty')
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError(f'the expression is longer than {MAX_EXPRESSION_LENGTH} characters')
    try:
        compiled = jsonata.Jsonata(expression)
        frame = compiled.create_frame()
        for name, value in (bindings or {}).items():
            frame.bind(name, value)
        frame.set_runtime_bounds(timeout_ms, max_depth)
        return compiled.evaluate(data, frame)
    except jsonata.JException as exc:
        raise ExpressionError(str(exc) or type(exc).__name__) from None
    except RecursionError:
        raise ExpressionError('the expression recurses too deeply') from None
    except (TypeError, ValueError, ArithmeticError, AttributeError, KeyError, IndexError) as exc:
        raise ExpressionError(f'{type(exc).__name__}: {exc}') from None
