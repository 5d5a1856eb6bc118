"""Time: one canonical instant format so stored date-times compare as instants.

Every date-time the API stores is normalised to UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``; with a
fixed width, string order is time order, so DynamoDB comparisons on the stored strings are
comparisons of instants.
"""
from __future__ import annotations

import datetime as _dt

UTC = _dt.UTC


def now() -> _dt.datetime:
    return _dt.datetime.now(UTC)


def iso(value: _dt.datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    v = value.astimezone(UTC)
    return (f'{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}'
            f'.{v.microsecond:06d}Z')


def now_iso() -> str:
    return iso(now())


def parse_instant(text: str) -> _dt.datetime:
    """Parse an ISO 8601 date-time (``Z`` or offset; naive means UTC). Raises ValueError."""
    if not isinstance(text, str) or not text:
        raise ValueError('not a date-time')
    value = text.strip()
    if value.endswith(('Z', 'z')):
        value = value[:-1] + '+00:00'
    parsed = _dt.datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def normalize_instant(text: str) -> str:
    """ISO 8601 text -> canonical stored form. Raises ValueError when it is not a date-time
    (or falls outside years 1-9999 once moved to UTC)."""
    try:
        return iso(parse_instant(text))
    except OverflowError:
        raise ValueError('date-time out of range') from None
