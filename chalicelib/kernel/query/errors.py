"""The single error type of the filter language."""
from __future__ import annotations


class FilterError(ValueError):
    """A filter string that cannot be accepted (syntax, unknown field, type mismatch, limits).

    ``position`` is the 0-based character offset the problem was found at (when there is one);
    ``field`` is the dotted field name involved (for unknown fields and type mismatches).
    The message always repeats whichever of the two is known, so ``str(error)`` is enough for
    an API error response.
    """

    def __init__(self, message: str, position: int | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.position = position
        self.field = field

    def __str__(self) -> str:
        return self.message
