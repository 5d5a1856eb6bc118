"""EventBridge schedule expressions: ``rate(...)`` and ``cron(...)``, parsed and evaluated
(features/work/schedules.py has the rules of scheduled jobs), and the ``ScheduleExpression`` shape
the work feature's declarations install (kernel/shapes.py). Pure functions; ``cronsim`` is
imported on first use, never at cold start."""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from chalicelib.kernel.shapes import Shape

_RATE = re.compile(r'^rate\(\s*(\d{1,6})\s+(minute|minutes|hour|hours|day|days)\s*\)$')
_CRON = re.compile(r'^cron\((.*)\)$')
_UNIT = {'minute': 60, 'hour': 3600, 'day': 86400}
_YEAR = re.compile(r'^(\*|\d{4}(-\d{4})?(/\d+)?)(,\d{4}(-\d{4})?)*$')
MAX_YEAR = 2199


def _dow(field: str) -> str:
    """EventBridge day-of-week (1-7, 1 = Sunday) -> cron's (0-6, 0 = Sunday)."""
    def number(match: re.Match) -> str:
        value = int(match.group(0))
        if not 1 <= value <= 7:
            raise ValueError(f'day-of-week {value} is not 1-7')
        return str(value - 1)
    head, hash_, tail = field.partition('#')   # "6#3": the third Friday; the part after # is no day
    head = re.sub(r'\d+', number, head)
    return head + hash_ + tail


def _years(field: str) -> set[int] | None:
    if field == '*':
        return None
    if not _YEAR.fullmatch(field):
        raise ValueError(f'year field {field!r} is not valid')
    years: set[int] = set()
    for part in field.split(','):
        span, _, step = part.partition('/')
        low, _, high = span.partition('-')
        years |= set(range(int(low), int(high or low) + 1, int(step or 1)))
    return years


def parse(expression: Any) -> tuple[str, Any]:
    """('rate', seconds) or ('cron', (five fields, years)); ValueError with the reason."""
    if not isinstance(expression, str):
        raise ValueError('must be a string')
    text = expression.strip()
    rate = _RATE.fullmatch(text)
    if rate:
        amount, unit = int(rate.group(1)), rate.group(2)
        if amount < 1:
            raise ValueError('a rate must be at least 1')
        if (amount == 1) != (not unit.endswith('s')):
            raise ValueError(f'write rate({amount} {unit.rstrip("s") + ("" if amount == 1 else "s")})')
        return 'rate', amount * _UNIT[unit.rstrip('s')]
    cron = _CRON.fullmatch(text)
    if not cron:
        raise ValueError("expected rate(N unit) or cron(minutes hours day-of-month month day-of-week year)")
    fields = cron.group(1).split()
    if len(fields) != 6:
        raise ValueError('cron(...) takes six fields: minutes hours day-of-month month day-of-week year')
    minute, hour, dom, month, dow, year = fields
    if (dom == '?') == (dow == '?'):
        raise ValueError('exactly one of day-of-month and day-of-week must be ?')
    dow = dow.upper()
    five = f'{minute} {hour} {"*" if dom == "?" else dom} {month} {"*" if dow == "?" else _dow(dow)}'
    years = _years(year)
    from cronsim import CronSim, CronSimError  # noqa: PLC0415 - lazy: only schedule writes and ticks
    try:
        CronSim(five, datetime(2026, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ValueError(str(exc)) from None
    return 'cron', (five, years)


def next_run(expression: str, after: datetime) -> datetime | None:
    """The first run strictly after ``after`` (None: the schedule never runs again)."""
    kind, spec = parse(expression)
    if kind == 'rate':
        return after + timedelta(seconds=spec)
    from cronsim import CronSim  # noqa: PLC0415 - lazy
    five, years = spec
    for moment in CronSim(five, after.replace(second=0, microsecond=0)):
        if moment <= after:
            continue
        if moment.year > MAX_YEAR or (years is not None and moment.year > max(years)):
            return None
        if years is None or moment.year in years:
            return moment
    return None



def check(value: Any) -> Any:
    """Shape check (kernel/shapes.py): the expression, or ValueError with the reason."""
    parse(value)
    return value


SHAPES = (
    Shape(
        name='ScheduleExpression',
        schema={'type': 'string', 'maxLength': 256,
                'description': 'EventBridge schedule: rate(N minute|minutes|hour|hours|day|days) or '
                               'cron(minutes hours day-of-month month day-of-week year), UTC, exactly one '
                               'of day-of-month / day-of-week ?, day-of-week 1-7 (1 = Sunday) or SUN-SAT.'},
        examples=('rate(5 minutes)', 'cron(0 8 ? * MON-FRI *)'),
        check=check,
    ),
)
