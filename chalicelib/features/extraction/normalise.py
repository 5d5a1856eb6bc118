"""Normalisers: the text a rule found -> the taxon's typed value (docs/api/extraction.md "Types").

Written here rather than taken from Babel: the platform needs a handful of locales' number and
date shapes, deterministic and offline, and Babel's locale data is ~30 MB in the Lambda zip for
the same few patterns. Each normaliser answers ``(typed value, extra)`` or raises
``NotNormalised`` with a message a reviewer understands.

Locales (``taxon.locale``, else the run's ``options.locale``, else the definition's ``metadata.locale``, else
``en-US``; their table is pure data in shapes.py, where the options' shape checks a locale): the
decimal and grouping separators, and the order of day and month in numeric dates.

``"auto"`` (a run's ``options.locale`` or a definition's ``metadata.locale``; docs/api/extraction.md
"A document's own conventions"): the run reads numbers and dates as the document itself writes
them. ``detect`` scans the document's text once for evidence (an amount whose last separator is
followed by 1-2 digits or whose separators are both present, a number grouped twice by the same
separator, a numeric date whose first or second part is over 12, a dotted numeric date, a month
name before or after the day) and settles the decimal separator and the date order only when all
the evidence agrees; where its dates leave the order open, date_order.py asks weaker evidence
(payment terms, a taught order, the issuer's country, the document's language). A value the
document does not settle (``1,234`` without decimals evidence,
``01/02/2026`` without date evidence) is ``Ambiguous`` (an ``AMBIGUOUS_VALUE`` exception), never
a guess; a value that settles itself (``1.234,56``, ``12,50``, ``14/03/2026``) is read as written.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from chalicelib.features.extraction.shapes import DEFAULT_LOCALE, LOCALES  # the locales' table: pure data

TYPES = ('string', 'number', 'decimal', 'currency', 'date', 'boolean', 'selection')
AUTO = 'auto'   # options.locale / metadata.locale: the document's own conventions (``detect``)
# A symbol (or a local abbreviation) -> its ISO code; an ISO code written beside the amount wins
# (``¥`` is JPY unless ``CNY`` is written; ``kr`` is SEK unless ``NOK``/``DKK``/``ISK`` is).
CURRENCY_SYMBOLS = {'$': 'USD', 'US$': 'USD', '€': 'EUR', '£': 'GBP', '¥': 'JPY', '￥': 'JPY', 'JP¥': 'JPY',
                    'CN¥': 'CNY', '元': 'CNY', 'RMB': 'CNY', '₹': 'INR', 'Rs.': 'INR', 'Rs': 'INR', '₨': 'INR',
                    'CHF': 'CHF', 'Fr.': 'CHF', 'SFr.': 'CHF', 'C$': 'CAD', 'CA$': 'CAD', 'A$': 'AUD',
                    'AU$': 'AUD', 'NZ$': 'NZD', 'HK$': 'HKD', 'S$': 'SGD', 'MX$': 'MXN', 'R$': 'BRL', '₩': 'KRW',
                    'zł': 'PLN', 'Kč': 'CZK', 'Ft': 'HUF', 'kr': 'SEK', 'kr.': 'DKK', '₺': 'TRY', '₽': 'RUB',
                    '₴': 'UAH', '₪': 'ILS', '₱': 'PHP', '฿': 'THB', '₫': 'VND', 'RM': 'MYR', 'Rp': 'IDR',
                    '₦': 'NGN', 'R': 'ZAR', 'E£': 'EGP', 'AED': 'AED', 'د.إ': 'AED', '﷼': 'SAR', 'лв': 'BGN',
                    'lei': 'RON'}
NO_MINOR_UNITS = frozenset({'JPY', 'KRW', 'VND', 'CLP', 'ISK', 'PYG', 'UGX', 'XOF', 'XAF'})   # ISO 4217: 0 decimals
# a symbol stands apart from letters (``R`` is not the R of ``EUR``, ``Rs`` not in ``Rsvp``)
_SYMBOL = re.compile('|'.join(rf'(?<![^\W\d_]){re.escape(s)}(?![^\W\d_])'
                              for s in sorted(CURRENCY_SYMBOLS, key=len, reverse=True)))
_CODE = re.compile(r'(?<![^\W\d_])([A-Z]{3})(?![^\W\d_])\.?')   # ``GBP.``: OCR's or the writer's dot after a code
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
    exception_type = 'INVALID_VALUE'


class Ambiguous(NotNormalised):
    """The text reads as two different values and the document's conventions do not say which."""
    exception_type = 'AMBIGUOUS_VALUE'


@dataclass(frozen=True)
class Conventions:
    """How one document writes numbers and dates (``detect``): its decimal separator ('.' or ',')
    and its numeric date order ('DMY' or 'MDY'), None where the document does not settle it; which
    evidence settled each (date_order.py: 'numbers' or 'taught'; 'dates', 'terms', 'taught',
    'country' or 'language'), not part of what a value reads as."""
    decimal: str | None = None
    order: str | None = None
    decimal_from: str | None = field(default=None, compare=False)
    order_from: str | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {'decimal': self.decimal, 'dateOrder': self.order}

    def evidence(self) -> dict[str, str]:
        """Which evidence settled what (docs/api/extraction.md "How the date order is settled")."""
        return {k: v for k, v in (('decimal', self.decimal_from), ('dateOrder', self.order_from)) if v}

    @classmethod
    def of(cls, value: Any) -> Conventions:
        value = value if isinstance(value, dict) else {}
        decimal, order = value.get('decimal'), value.get('dateOrder')
        return cls(decimal if decimal in ('.', ',') else None, order if order in ('DMY', 'MDY') else None)


Locale = str | Conventions | None


def locale_of(name: Locale) -> tuple[str, str, str]:
    if isinstance(name, Conventions):
        return (name.decimal or '.', ',' if name.decimal != ',' else '.', name.order or 'DMY')
    return LOCALES.get(name or DEFAULT_LOCALE, LOCALES[DEFAULT_LOCALE])


def _locale_name(locale: Locale) -> str:
    return "this document" if isinstance(locale, Conventions) else (locale or DEFAULT_LOCALE)


# ----------------------------------------------------------------------------- a document's conventions

_NUMBER = re.compile(r'(?<![\w.,/:-])(\d{1,2}(?:,\d{2})+,\d{3}\.\d+|\d{1,3}(?:[.,]\d{3})+(?:[.,]\d+)?|\d+[.,]\d+)'
                     r'(?![\w/:-]|[.,]\d)')
_NUMERIC_DATE = re.compile(r'(?<![\w./-])(\d{1,2})([./-])(\d{1,2})\2(\d{4}|\d{2})(?![\w/-]|\.\d)')
_NAMED_DATE = re.compile(r'(?<![\w])(?:(\d{1,2})\.?\s+([^\W\d_]{3,10})\.?,?\s+\d{4}'
                         r'|([^\W\d_]{3,10})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+\d{4})(?!\w)')
MAX_DETECT_CHARACTERS = 1_000_000   # the text ``detect`` scans (a longer document: its first million)


_LAKH = re.compile(r'\d{1,2}(?:,\d{2})+,\d{3}(?:\.\d+)?')   # 1,23,456.00: India's lakh and crore grouping


def _decimal_vote(token: str) -> str | None:
    """The decimal separator a number written in a document shows, or None (``1,234``: either)."""
    if _LAKH.fullmatch(token) and '.' in token:
        return '.'
    seps = [c for c in token if c in '.,']
    groups = re.split('[.,]', token)
    if len(set(seps)) == 2:
        last = seps[-1]
        inner = groups[1:-1]
        return last if seps.count(last) == 1 and all(len(g) == 3 for g in inner) else None
    if len(seps) >= 2:
        return ('.' if seps[0] == ',' else ',') if all(len(g) == 3 for g in groups[1:]) else None
    return seps[0] if len(groups[1]) != 3 else None


def detect(text: str) -> Conventions:
    """The document's decimal separator and date order, each only when all its evidence agrees."""
    text = text[:MAX_DETECT_CHARACTERS]
    decimals: set[str] = set()
    for m in _NUMBER.finditer(text):
        vote = _decimal_vote(m.group(1))
        if vote:
            decimals.add(vote)
    orders = date_votes(text)
    return Conventions(decimal=decimals.pop() if len(decimals) == 1 else None,
                       order=orders.pop() if len(orders) == 1 else None)


def numeric_dates(text: str) -> list[tuple[int, int, int, str]]:
    """The document's numeric dates in the order it prints them: (first part, second part, year, separator)."""
    out = []
    for m in _NUMERIC_DATE.finditer(text[:MAX_DETECT_CHARACTERS]):
        year = int(m.group(4))
        year = year if len(m.group(4)) == 4 else 2000 + year if year < 70 else 1900 + year
        out.append((int(m.group(1)), int(m.group(3)), year, m.group(2)))
    return out


def date_votes(text: str) -> set[str]:
    """The date orders the document's own dates show: 'DMY' for a first part over 12, a dotted
    date or a day before a month name; 'MDY' for a second part over 12 or a month name first."""
    text = text[:MAX_DETECT_CHARACTERS]
    orders: set[str] = set()
    for a, b, _, sep in numeric_dates(text):
        if a > 12 >= b >= 1 or (sep == '.' and a <= 31 and 1 <= b <= 12):
            orders.add('DMY')
        elif b > 12 >= a >= 1:
            orders.add('MDY')
    for m in _NAMED_DATE.finditer(text):
        if m.group(2) and m.group(2).lower() in MONTHS:
            orders.add('DMY')
        elif m.group(3) and m.group(3).lower() in MONTHS:
            orders.add('MDY')
    return orders


_SPACE_GROUPED = re.compile(r'\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?:[.,]\d+)?')


def _decimal_auto(s: str, conv: Conventions, text: str, what: str, whole: bool = False) -> Decimal:
    """A number read as the document writes them: settled by itself where it can be
    (``1.234,56``, ``12,50``), else by the document's decimal separator, else ``Ambiguous``."""
    article = 'an' if what[0] in 'aeiou' else 'a'
    if _SPACE_GROUPED.fullmatch(s):
        s = re.sub(r'[ \u00a0\u202f]', '', s)
    s = s.replace("'", '').replace('\u2019', '') if re.fullmatch(r"\d{1,3}(?:['\u2019]\d{3})+(?:\.\d+)?", s) else s
    if not re.fullmatch(r'\d+(?:[.,]\d+)*', s):
        raise NotNormalised(f"'{text}' is not {article} {what}")
    if _LAKH.fullmatch(s) and conv.decimal != ',':
        return Decimal(s.replace(',', ''))
    seps = [c for c in s if c in '.,']
    groups = re.split('[.,]', s)
    if not seps:
        return Decimal(s)
    if len(set(seps)) == 2:
        dec = seps[-1]
        if seps.count(dec) != 1 or len(groups[0]) > 3 or not all(len(g) == 3 for g in groups[1:-1]):
            raise NotNormalised(f"'{text}' is not {article} {what}: its separators are not grouping and decimals")
    elif len(seps) >= 2:
        if len(groups[0]) > 3 or not all(len(g) == 3 for g in groups[1:]):
            raise NotNormalised(f"'{text}' is not {article} {what}: its groups are not of three digits")
        dec = '.' if seps[0] == ',' else ','
    elif len(groups[1]) != 3 or len(groups[0]) > 3 or groups[0] == '0':
        dec = seps[0]   # 12,50 / 1234.567 / 0,125: only a decimal separator reads it
    elif conv.decimal:
        dec = conv.decimal
    elif whole:   # a currency without minor units (¥ 12,000): a three-digit group is grouping
        dec = ',' if seps[0] == '.' else '.'
    else:
        raise Ambiguous(f"'{text}' is ambiguous: {groups[0]}{seps[0]}{groups[1]} may be "
                        f"{groups[0]}{groups[1]} or {groups[0]}.{groups[1]} and the document's other numbers do not "
                        "say which separator is its decimal one: enter the value")
    if conv.decimal and dec != conv.decimal:
        raise NotNormalised(f"'{text}' is not {article} {what} as this document writes them "
                            f"(its decimal separator is '{conv.decimal}')")
    if dec in s:
        head, _, tail = s.rpartition(dec)
        return Decimal(re.sub('[.,]', '', head) + '.' + tail)
    return Decimal(re.sub('[.,]', '', s))


@lru_cache(maxsize=64)
def _shape(dec: str, groups: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A locale's number shape and its grouping separators, compiled once (a table's column
    normalises one value per row)."""
    g = '[' + re.escape(groups) + ']'
    return re.compile(rf'(\d{{1,3}}(?:{g}\d{{3}})+|\d+)(?:{re.escape(dec)}(\d+))?'), re.compile(g)


def _decimal(text: str, locale: Locale, what: str, whole: bool = False) -> Decimal:
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
    elif s.startswith('+') and s[1:].strip()[:1].isdigit():   # an explicit plus sign: "+13,820.44"
        s = s[1:].strip()
    if isinstance(locale, Conventions):
        value = _decimal_auto(s, locale, text, what, whole)
        return -value if negative else value
    if dec == '.' and ',' in groups and _LAKH.fullmatch(s):
        return -Decimal(s.replace(',', '')) if negative else Decimal(s.replace(',', ''))
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


def _number(text: str, locale: Locale) -> tuple[Any, dict[str, Any]]:
    value = _decimal(text, locale, 'whole number')
    if value != value.to_integral_value():
        raise NotNormalised(f"'{text}' is not a whole number")
    return int(value), {}


# a lone sign standing apart before an amount that is no currency sign this module knows: OCR's
# reading of one it could not read (``₹ 16,308.12`` read ``® 16,308.12``); the amount is read, the
# currency is not taken from it, and a value read by OCR so is asked (engine.py ``ocr_suspect``).
# A symbol (``®``, ``©``, ``°``, an unknown currency sign) or ``*``; never a maths sign
# (``> 1,000.00``, ``~ 16.00``, ``± 5.00`` say something about the amount) nor punctuation.
STRAY_SIGN = re.compile(r'^\s*(\S)\s+(?=\d)')


def stray_sign(text: str) -> str | None:
    """The unknown sign ``text`` opens with, standing apart before a figure, or None."""
    m = STRAY_SIGN.match(text)
    if m is None or m.group(1) in CURRENCY_SYMBOLS:
        return None
    sign = m.group(1)
    return sign if sign == '*' or unicodedata.category(sign) in ('So', 'Sc', 'Sk') else None


def _money(text: str, locale: Locale, taxon: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    s = text.strip()
    if stray_sign(s):
        s = s[STRAY_SIGN.match(s).end():]
    currency = None
    symbols = {CURRENCY_SYMBOLS[m.group(0)] for m in _SYMBOL.finditer(s)}
    if len(symbols) > 1:
        raise NotNormalised(f"'{text}' names two currencies ({', '.join(sorted(symbols))})")
    if symbols:
        currency = symbols.pop()
        s = _SYMBOL.sub(' ', s)   # every one of them: a table cell may hold "€ 1.640,94 €"
    code = _CODE.search(s)
    if code:
        currency = code.group(1)
        s = s[:code.start()] + ' ' + s[code.end():]
    s = s.strip()
    if s.startswith(('-', '\u2212')) and len(s) > 1 and s[1] == ' ':   # "- € 5.00" -> "- 5.00"
        s = '-' + s[1:].strip()
    value = _decimal(s.strip(), locale, 'amount', whole=(currency or taxon.get('currency')) in NO_MINOR_UNITS)
    extra: dict[str, Any] = {}
    if currency or taxon.get('currency'):
        extra['currency'] = currency or taxon.get('currency')
    places = taxon.get('decimalPlaces')
    if isinstance(places, int) and value.as_tuple().exponent < -places:
        raise NotNormalised(f"'{text}' has more than {places} decimal places")
    return float(value), extra


def _joined_months(s: str) -> str:
    """OCR's space inside a month name (``02-J ul-2026``) closed, only where the joined letters
    are a month name and neither piece is another month: ``Ju l`` -> ``Jul``; ``Mar 14`` stays."""
    def join(m: re.Match[str]) -> str:
        a, b = m.group(1), m.group(2)
        joined = (a + b).lower()
        if joined.rstrip('.') not in MONTHS:
            return m.group(0)
        if any(p.lower() in MONTHS and MONTHS[p.lower()] != MONTHS[joined.rstrip('.')] for p in (a, b)):
            return m.group(0)
        return a + b
    return re.sub(r'([^\W\d_]+) ([^\W\d_]+)', join, s)


def _date(text: str, locale: Locale, taxon: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    s = text.strip().rstrip('.,;')
    order = locale_of(locale)[2]
    auto = locale if isinstance(locale, Conventions) else None
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
            elif auto is not None and auto.order is None:
                # the document does not settle the order: a value settles itself or is ambiguous
                if a > 12 >= b or a == b:
                    parts = (c, b, a)
                elif b > 12 >= a:
                    parts = (c, a, b)
                elif '.' in s:
                    parts = (c, b, a)   # dotted numeric dates are day first (docs/api/extraction.md)
                else:
                    raise Ambiguous(f"'{text}' is ambiguous: it may be day {a} of month {b} or month {a} day {b}, "
                                    "and the document's other dates do not say which comes first: enter the date")
            elif order == 'MDY':
                parts = (c, a, b)
            else:
                parts = (c, b, a)
            if parts[0] < 100:
                parts = (2000 + parts[0] if parts[0] < 70 else 1900 + parts[0], parts[1], parts[2])
    if parts is None:
        words = re.findall(r'[^\W\d_]+\.?|\d+', _joined_months(s).lower())
        months = {MONTHS[w.rstrip('.')] for w in words if w.rstrip('.') in MONTHS}
        month = months.pop() if len(months) == 1 else None   # two month names: not one date
        numbers = [int(w) for w in words if w.isdigit()]
        if month and len(numbers) == 2:
            year = next((n for n in numbers if n > 31), numbers[1])
            day = numbers[0] if numbers[0] != year else numbers[1]
            parts = (year, month, day)
    if parts is None:
        shape = 'DD/MM/YYYY or MM/DD/YYYY' if auto is not None and auto.order is None else \
            'MM/DD/YYYY' if order == 'MDY' else 'DD/MM/YYYY' if order == 'DMY' else 'YYYY/MM/DD'
        raise NotNormalised(f"'{text}' is not a date ({_locale_name(locale)}: {shape}, "
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


def normalise(text: str | None, taxon: dict[str, Any], locale: Locale) -> tuple[Any, dict[str, Any]]:
    """(typed value, extra fields such as the currency) of ``text`` for ``taxon``'s type; ``locale``
    a locale's name or a document's ``Conventions`` (a taxon's own ``locale`` wins over both)."""
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
