"""Which part of a document's numeric dates is the day: the evidence a careful reader accepts,
strongest first (docs/api/extraction.md "How the date order is settled"). This module holds the
rule; normalise.py reads the values with what it settles (``Conventions``), engine.py asks it once
per run with locale ``"auto"``.

A ``08/05/2026`` reads as 8 May or 5 August. The tiers, each asked only when every stronger one
had no evidence at all:

1. ``dates``: the document's own dates (normalise.py ``date_votes``: a part over 12, a dotted
   date, a month name);
2. ``terms``: stated payment terms (``Net 30``, ``30 days``, ``a 30 días``, ``30 Tagen``) and two
   dates printed in that order of which the later one is the earlier plus those days under
   exactly one reading (``04/07/2026`` then ``03/08/2026`` with ``30 días``: day first; a pair
   that adds up under both readings, or under neither, is no evidence);
3. ``taught``: the order a reviewer taught for this kind of document (layout_memory.py
   "Conventions");
4. ``country``: the issuer's country where the document names it beyond doubt: a tax id of a
   day-first country (an EU VAT number, a UK VAT number or "Registered in England", a Swiss
   UID, a Spanish NIF/CIF, an Indian GSTIN, an Australian ABN) -> day first; a US postal address
   (``City, ST 12345``) on a document whose amounts are in US dollars -> month first;
5. ``language``: the document's words are an invoice's in a language whose dates are only ever
   day first (Spanish, French, German, Italian, Dutch, Portuguese) and not English's (English
   settles nothing: the US and the UK write it).

A tier whose evidence disagrees (a US address in dollars and an EU VAT number: the customer's
country may be printed too) settles nothing and **no weaker tier is asked**: weak evidence never
breaks a tie of stronger evidence, nor overrides it. Nothing settled: a value such as
``08/05/2026`` stays an ``AMBIGUOUS_VALUE`` exception.

Written here rather than with a language-identification library (langdetect, lingua): the
question is not "which language" but "are these an invoice's words in a day-first language", a
vocabulary of ~100 words; a statistical model would add megabytes and a guess to a rule that
must say why it decided.
"""
from __future__ import annotations

import re
from datetime import date, timedelta

from chalicelib.features.extraction.normalise import MAX_DETECT_CHARACTERS, Conventions, date_votes, numeric_dates

DMY, MDY = 'DMY', 'MDY'
TIERS = ('dates', 'terms', 'taught', 'country', 'language')   # strongest first (module docstring)
MAX_TERM_DAYS = 366
MAX_PAIRED_DATES = 40   # the first dates of a document paired with each other for the terms tier

# ----------------------------------------------------------------------------- terms

_TERMS = re.compile(r'(?<![\w.,])(?:net(?:to|o)?\s*(\d{1,3})(?!\w)'
                    r'|(\d{1,3})\s*(?:days?|d[ií]as|jours?|tage?n?|giorni|dagen|dni)(?!\w))', re.IGNORECASE)


def _term_days(text: str) -> set[int]:
    days = {int(m.group(1) or m.group(2)) for m in _TERMS.finditer(text)}
    return {d for d in days if 1 <= d <= MAX_TERM_DAYS}


def _terms(text: str) -> set[str]:
    """The reading under which a later-printed date is an earlier-printed one plus the stated days;
    none when both readings (or neither) make such a pair: that is no evidence, not a contradiction."""
    days = _term_days(text)
    if not days:
        return set()
    found = [(a, b, y) for a, b, y, sep in numeric_dates(text) if sep != '.' and a <= 12 and b <= 12]
    found = found[:MAX_PAIRED_DATES]
    readings: set[str] = set()
    for order in (DMY, MDY):
        dates = []
        for a, b, year in found:
            day, month = (a, b) if order == DMY else (b, a)
            try:
                dates.append(date(year, month, day))
            except ValueError:
                continue
        if any(later - earlier == timedelta(days=n) for i, earlier in enumerate(dates)
               for later in dates[i + 1:] for n in days):
            readings.add(order)
    return readings if len(readings) == 1 else set()


# ----------------------------------------------------------------------------- country

US_STATES = ('AL AK AZ AR CA CO CT DE DC FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM NY '
             'NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY').split()
_US_ADDRESS = re.compile(r'[^\W\d_],\s*(?:' + '|'.join(US_STATES) + r')\s+\d{5}(?:-\d{4})?(?![\w-])')
_DOLLARS = re.compile(r'US\$|(?<![^\W\d_])\$|(?<![^\W\d_])USD(?![^\W\d_])')
# a tax id of a day-first country, written as its issuer prints it (the prefix, an optional space,
# the number's own shape): EU VAT (VIES formats), UK VAT, Swiss UID, Spanish NIF/CIF, GSTIN, ABN
_DAY_FIRST_IDS = re.compile(
    r'(?<![\w])(?:'
    r'ATU ?\d{8}|BE ?[01]\d{9}|BG ?\d{9,10}|CY ?\d{8}[A-Z]|CZ ?\d{8,10}|DE ?\d{9}|DK ?\d{8}|EE ?\d{9}'
    r'|EL ?\d{9}|ES ?[A-Z0-9]\d{7}[A-Z0-9]|FI ?\d{8}|FR ?[A-HJ-NP-Z0-9]{2}\d{9}|HR ?\d{11}|HU ?\d{8}'
    r'|IE ?\d{7}[A-W][A-I]?|IT ?\d{11}|LT ?(?:\d{9}|\d{12})|LU ?\d{8}|LV ?\d{11}|MT ?\d{8}|NL ?\d{9}B\d{2}'
    r'|PL ?\d{10}|PT ?\d{9}|RO ?\d{2,10}|SE ?\d{10}01|SI ?\d{8}|SK ?\d{10}'
    r'|GB ?(?:\d{9}|\d{12}|\d{3} \d{4} \d{2})|CHE[- ]?\d{3}\.\d{3}\.\d{3}'
    r'|(?:CIF|NIF|N\.I\.F\.|C\.I\.F\.):? ?[A-HJ-NP-SUVW]?\d{7,8}[A-Z0-9]'
    r'|\d{2}[A-Z]{5}\d{4}[A-Z][1-9A-Z]Z[0-9A-Z]'
    r'|ABN:? ?\d{2} ?\d{3} ?\d{3} ?\d{3}'
    r'|Registered in (?:England|Scotland|Wales|Northern Ireland)'
    r')(?![\w])')


def _country(text: str) -> set[str]:
    orders = set()
    if _US_ADDRESS.search(text) and _DOLLARS.search(text):
        orders.add(MDY)
    if _DAY_FIRST_IDS.search(text):
        orders.add(DMY)
    return orders


# ----------------------------------------------------------------------------- language

# An invoice's words in the day-first languages (es, pt, fr, de, it, nl), none of them an English word
DAY_FIRST_WORDS = frozenset('''
factura fecha vencimiento importe cantidad precio concepto emisión emision moneda pago cliente unitario
imponible iva proveedor descripción descripcion
fatura vencimento quantidade preço preco valor emissão emissao pagamento descrição
facture échéance echeance montant quantité quantite prix désignation designation tva règlement reglement
paiement ttc devise
rechnung rechnungsnummer rechnungsdatum datum fällig fälligkeitsdatum faelligkeitsdatum menge betrag summe
gesamtbetrag zwischensumme mwst ust zahlbar einzelpreis bezeichnung kunde lieferdatum netto brutto steuer
fattura scadenza importo quantità quantita prezzo totale descrizione
factuur factuurdatum factuurnummer vervaldatum bedrag aantal prijs totaal btw klant omschrijving betaling
'''.split())
ENGLISH_WORDS = frozenset('''
invoice date due amount quantity qty price rate bill subtotal tax description payment terms balance
'''.split())
MIN_LANGUAGE_WORDS = 3   # distinct day-first words a document must print (and over twice its English ones)
_WORD = re.compile(r'[^\W\d_]+')


def _language(text: str) -> set[str]:
    words = {w.lower() for w in _WORD.findall(text)}
    day_first, english = len(words & DAY_FIRST_WORDS), len(words & ENGLISH_WORDS)
    return {DMY} if day_first >= MIN_LANGUAGE_WORDS and day_first > 2 * english else set()


# ----------------------------------------------------------------------------- settling

def settle(text: str, own: Conventions, taught: Conventions | None = None) -> Conventions:
    """``own`` (normalise.detect of ``text``) with its date order settled by the first tier that
    has evidence (module docstring), its decimal separator by ``taught`` where ``own`` has none;
    ``order_from`` / ``decimal_from`` say which evidence settled each."""
    text = text[:MAX_DETECT_CHARACTERS]
    decimal, decimal_from = own.decimal, ('numbers' if own.decimal else None)
    if decimal is None and taught is not None and taught.decimal:
        decimal, decimal_from = taught.decimal, 'taught'
    order = order_from = None
    for tier in TIERS:
        if tier == 'dates':   # detect counted them already: read again only when they did not settle it
            votes = {own.order} if own.order else date_votes(text)
        elif tier == 'taught':
            votes = {taught.order} if taught is not None and taught.order else set()
        else:
            votes = {'terms': _terms, 'country': _country, 'language': _language}[tier](text)
        if len(votes) == 1:
            order, order_from = next(iter(votes)), tier
        if votes:   # settled, or the tier disagrees with itself: no weaker tier is asked
            break
    return Conventions(decimal, order, decimal_from=decimal_from, order_from=order_from)
