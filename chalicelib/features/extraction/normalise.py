"""Normalisers: the text a rule found -> the taxon's typed value (docs/api/extraction.md "Types").

Written here rather than taken from Babel: the platform needs a handful of locales' number and
date shapes, deterministic and offline, and Babel's locale data is ~30 MB in the Lambda zip for
the same few patterns. Each normaliser answers ``(typed value, extra)`` or raises
``NotNormalised`` with a message a reviewer understands.

Locales (``taxon.locale``, else the run's ``options.locale``, else the definition's ``metadata.locale``, else
``en-US``; their table is pure data in shapes.py, where the options' shape checks a locale): the
decimal and grouping separators, and the order of day and month in numeric dates.
"""
from __future__ import annotations

import re
from datetime import date
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from chalicelib.features.extraction.shapes import DEFAULT_LOCALE, LOCALES  # the locales' table: pure data

TYPES = ('string', 'number', 'decimal', 'currency', 'date', 'boolean', 'selection')
CURRENCY_SYMBOLS = {'$': 'USD', 'US$': 'USD', '€': 'EUR', '£': 'GBP', '¥': 'JPY', '₹': 'INR', 'CHF': 'CHF',
                    'Fr.': 'CHF', 'C$': 'CAD', 'A$': 'AUD', 'kr': 'SEK'}
_SYMBOLS_LONGEST_FIRST = tuple(sorted(CURRENCY_SYMBOLS, key=len, reverse=True))
_CODE = re.compile(r'\b([A-Z]{3})\b')
MONTHS = {name: i + 1 for i, names in enumerate([
    ('january', 'jan', 'januar', 'janvier', 'enero', 'gennaio', 'janeiro', 'januari'),
    ('february', 'feb', 'februar', 'février', 'fevrier', 'febrero', 'febbraio', 'fevereiro', 'februari'),
    ('march', 'mar', 'märz', 'maerz', 'mars', 'marzo', 'março', 'maart'),
    ('april', 'apr', 'avril', 'abril', 'aprile'),
    ('may', 'mai', 'mayo', 'maggio', 'maio', 'mei'),
    ('june', 'jun', 'juni', 'juin', 'junio', 'giugno', 'junho'),
    ('july', 'jul', 'juli', 'juillet', 'julio', 'luglio', 'julho'),
    ('august', 'aug', 'août', 'aout', 'agosto', 'augustus'),
    ('september', 'sep', 'sept', 'septembre', 'septiembre', 'settembre', 'setembro'),
    ('october', 'oct', 'oktober', 'octobre', 'octubre', 'ottobre', 'outubro', 'okt'),
    ('november', 'nov', 'novembre', 'noviembre', 'novembro'),
    ('december', 'dec', 'dezember', 'décembre', 'decembre', 'diciembre', 'dicembre', 'dezembro', 'dez'),
]) for name in names}
TRUE = frozenset({'true', 'yes', 'y', 'x', '1', 'checked', 'on', '☑', '☒', '✓', '✔', 'ja', 'oui', 'si', 'sí'})
FALSE = frozenset({'false', 'no', 'n', '0', 'unchecked', 'off', '☐', 'nein', 'non'})


class NotNormalised(ValueError):
    """The text is not a value of the taxon's type; the message says why, for a reviewer."""


def locale_of(name: str | None) -> tuple[str, str, str]:
    return LOCALES.get(name or DEFAULT_LOCALE, LOCALES[DEFAULT_LOCALE])


@lru_cache(maxsize=64)
def _shape(dec: str, groups: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A locale's number shape and its grouping separators, compiled once (a table's column
    normalises one value per row)."""
    g = '[' + re.escape(groups) + ']'
    return re.compile(rf'(\d{{1,3}}(?:{g}\d{{3}})+|\d+)(?:{re.escape(dec)}(\d+))?'), re.compile(g)


def _decimal(text: str, locale: str | None, what: str) -> Decimal:
    """A number written the locale's way: digits grouped in threes by one of its grouping
    separators (or not grouped), then its decimal separator and the decimals. Anything else
    (``4.50`` in de-DE, ``12,50`` in en-US) is refused rather than guessed."""
    dec, groups, _ = locale_of(locale)
    s = text.strip()
    negative = False
    if s.startswith('(') and s.endswith(')'):
        negative, s = True, s[1:-1].strip()
    if s.endswith('-'):
        negative, s = True, s[:-1].strip()
    if s.startswith(('-', '\u2212')):
        negative, s = True, s[1:].strip()
    shape, grouping = _shape(dec, groups)
    m = shape.fullmatch(s)
    article = 'an' if what[0] in 'aeiou' else 'a'
    if m is None:
        raise NotNormalised(f"'{text}' is not {article} {what} as {locale or DEFAULT_LOCALE} writes one "
                            f"(decimal separator '{dec}')")
    digits = grouping.sub('', m.group(1)) + ('.' + m.group(2) if m.group(2) else '')
    try:
        value = Decimal(digits)
    except InvalidOperation:
        raise NotNormalised(f"'{text}' is not {article} {what}") from None
    return -value if negative else value


def _number(text: str, locale: str | None) -> tuple[Any, dict[str, Any]]:
    value = _decimal(text, locale, 'whole number')
    if value != value.to_integral_value():
        raise NotNormalised(f"'{text}' is not a whole number")
    return int(value), {}


def _money(text: str, locale: str | None, taxon: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    s = text.strip()
    currency = None
    for symbol in _SYMBOLS_LONGEST_FIRST:
        if symbol in s:
            currency = CURRENCY_SYMBOLS[symbol]
            s = s.replace(symbol, ' ')
            break
    code = _CODE.search(s)
    if code:
        currency = code.group(1)
        s = _CODE.sub(' ', s)
    value = _decimal(s.strip(), locale, 'amount')
    extra: dict[str, Any] = {}
    if currency or taxon.get('currency'):
        extra['currency'] = currency or taxon.get('currency')
    places = taxon.get('decimalPlaces')
    if isinstance(places, int) and value.as_tuple().exponent < -places:
        raise NotNormalised(f"'{text}' has more than {places} decimal places")
    return float(value), extra


def _date(text: str, locale: str | None, taxon: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    s = text.strip().rstrip('.,;')
    order = locale_of(locale)[2]
    m = re.fullmatch(r'(\d{4})-(\d{1,2})-(\d{1,2})', s)
    parts: tuple[int, int, int] | None = None
    if m:
        parts = (int(m[1]), int(m[2]), int(m[3]))
    if parts is None:
        m = re.fullmatch(r'(\d{1,4})[./-](\d{1,2})[./-](\d{1,4})', s)
        if m:
            a, b, c = int(m[1]), int(m[2]), int(m[3])
            if len(m[1]) == 4:
                parts = (a, b, c)
            elif order == 'MDY':
                parts = (c, a, b)
            else:
                parts = (c, b, a)
            if parts[0] < 100:
                parts = (2000 + parts[0] if parts[0] < 70 else 1900 + parts[0], parts[1], parts[2])
    if parts is None:
        words = re.findall(r'[^\W\d_]+\.?|\d+', s.lower())
        month = next((MONTHS[w.rstrip('.')] for w in words if w.rstrip('.') in MONTHS), None)
        numbers = [int(w) for w in words if w.isdigit()]
        if month and len(numbers) == 2:
            year = next((n for n in numbers if n > 31), numbers[1])
            day = numbers[0] if numbers[0] != year else numbers[1]
            parts = (year, month, day)
    if parts is None:
        raise NotNormalised(f"'{text}' is not a date ({locale or DEFAULT_LOCALE}: "
                            f"{'MM/DD/YYYY' if order == 'MDY' else 'DD/MM/YYYY' if order == 'DMY' else 'YYYY/MM/DD'}, "
                            f"YYYY-MM-DD or a month name)")
    try:
        return date(*parts).isoformat(), {}
    except ValueError:
        raise NotNormalised(f"'{text}' is not a calendar date") from None


def _boolean(text: str) -> tuple[Any, dict[str, Any]]:
    s = text.strip().lower()
    if s in TRUE:
        return True, {}
    if s in FALSE:
        return False, {}
    raise NotNormalised(f"'{text}' is not yes or no")


def _selection(text: str, taxon: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    s = text.strip().casefold()
    for option in taxon.get('options') or []:
        value, label = (option, option) if isinstance(option, str) else (option.get('value'), option.get('label'))
        if s in {str(value).casefold(), str(label or value).casefold()}:
            return value, {}
    names = ', '.join(str(o if isinstance(o, str) else o.get('value')) for o in taxon.get('options') or [])
    raise NotNormalised(f"'{text}' is not one of the options ({names})")


def normalise(text: str | None, taxon: dict[str, Any], locale: str | None) -> tuple[Any, dict[str, Any]]:
    """(typed value, extra fields such as the currency) of ``text`` for ``taxon``'s type."""
    if text is None:
        return None, {}
    kind = taxon.get('type') or 'string'
    locale = taxon.get('locale') or locale
    if not text.strip():
        raise NotNormalised('the value is empty')
    if kind == 'string':
        return ' '.join(text.split()), {}
    if kind == 'number':
        return _number(text, locale)
    if kind in ('decimal', 'currency'):
        return _money(text, locale, taxon)
    if kind == 'date':
        return _date(text, locale, taxon)
    if kind == 'boolean':
        return _boolean(text)
    if kind == 'selection':
        return _selection(text, taxon)
    raise NotNormalised(f'unknown type {kind!r}')


def typed_fields(kind: str, value: Any) -> dict[str, Any]:
    """The SDK's DataAttribute value fields for a typed value (kodexa DataAttribute)."""
    if value is None:
        return {}
    if kind == 'number':
        return {'numberValue': value}
    if kind in ('decimal', 'currency'):
        return {'decimalValue': value, 'floatValue': value}
    if kind == 'date':
        return {'dateValue': f'{value}T00:00:00Z'}
    if kind == 'boolean':
        return {'booleanValue': value}
    return {'stringValue': str(value)}
