"""Extraction: a data definition's taxons run over a parsed document -> a tree of data objects
with typed, traced attributes, and the exceptions a reviewer must look at. Pure: no I/O
(features/extraction/service.py stores what this answers).

One data object per group instance (a ``one`` group: one; a ``many`` group: one per table row
or JSONata item), nested as the groups are; one attribute per leaf taxon of the group (a
placeholder with no value when no rule found one, so a reviewer can fill it in). A value taxon
of a ``one`` group is read first where a reviewer taught it for this kind of document (the layout
memory, features/extraction/layout_memory.py), then by its rules.

``assess`` decides the open exceptions of a tree from its attributes alone (a required value
missing, a value that does not normalise, a confidence under the threshold, a failed validation
formula), so the same function serves the first run and every reviewer change: an exception is
identified by its key (object, kind, taxon, validation) and stays open exactly while its
condition holds (docs/api/extraction.md "Exceptions").
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import budget
from chalicelib.core.errors import ApiError
from chalicelib.core.expressions import ExpressionError, evaluate
from chalicelib.features.documents.validation import run_formula
from chalicelib.features.extraction import date_order, labels, rules
from chalicelib.features.extraction.document import Document, Found
from chalicelib.features.extraction.normalise import (
    AUTO,
    Conventions,
    Locale,
    NotNormalised,
    detect,
    normalise,
    stray_sign,
    typed_fields,
)
from chalicelib.features.extraction.rules import ExtractionLimit, Scope
from chalicelib.features.extraction.tables import too_many

MAX_OBJECTS = 2_500          # data objects one extraction of one family may write
REQUIRED_MISSING, INVALID_VALUE, AMBIGUOUS_VALUE, LOW_CONFIDENCE, VALIDATION_FAILED = (
    'REQUIRED_MISSING', 'INVALID_VALUE', 'AMBIGUOUS_VALUE', 'LOW_CONFIDENCE', 'VALIDATION_FAILED')
EXCEPTION_TYPES = (REQUIRED_MISSING, INVALID_VALUE, AMBIGUOUS_VALUE, LOW_CONFIDENCE, VALIDATION_FAILED)


@dataclass
class Obj:
    key: str                       # local key, unique in one extraction ('0', '0.lineItems.3')
    path: str                      # the group taxon's path
    taxon: dict[str, Any]
    parent: str | None
    row: int
    attributes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Result:
    objects: list[Obj]
    seconds: float
    conventions: Conventions | None = None   # what a run with locale "auto" read the document's values with
    memory: dict[str, Any] | None = None   # the layout memory's report: memoryIds, applied, fellBack


# A character OCR typically puts where the page has another (docs/api/extraction.md "OCR's confusions"):
# ``|`` or ``¦`` in a value (``l``, ``I``, ``1`` or a table's ruling: ``(20 l)`` read ``(20 |)``), a
# letter O, o, I or l between two digits (``2O26``, ``1l5``). A value whose OCR'd words hold one is
# read at no more than OCR_SUSPECT_CONFIDENCE and is a LOW_CONFIDENCE exception whatever its
# taxon's threshold: a value the engine may have misread is asked, never stored as sure.
_OCR_CONFUSION = re.compile(r'[|¦]|(?<=\d)[OoIl](?=\d)')
OCR_SUSPECT_CONFIDENCE = 0.5


def ocr_suspect(found: Found, kind: str = 'string') -> str | None:
    """Why a value read by OCR may be misread (a typical confusion in its text; for an amount
    (``kind`` decimal or currency) also an unknown sign before it), or None."""
    if not any(w.confidence is not None for w in found.words):
        return None   # a text layer's or an office file's characters are the document's own
    sign = stray_sign(found.text) if kind in ('decimal', 'currency') else None
    if sign is not None:
        return f"'{sign}' before the amount, a currency sign OCR could not read"
    m = _OCR_CONFUSION.search(found.text)
    if m is None:
        return None
    if m.group(0) in '|¦':
        return f"'{m.group(0)}' in it, a character OCR reads for l, I, 1 or a table's ruling"
    return f"'{m.group(0)}' between digits, a letter OCR reads for 0 or 1"


def _label(taxon: dict[str, Any]) -> str:
    return str(taxon.get('label') or taxon.get('name'))


def attribute(taxon: dict[str, Any], path: str, found: Found | None, locale: Locale) -> dict[str, Any]:
    """An attribute from what a rule found (or a placeholder)."""
    kind = taxon.get('type', 'string')
    attr: dict[str, Any] = {'tag': taxon['name'], 'taxon': path, 'path': path, 'label': _label(taxon),
                            'type': kind, 'value': None, 'typedValue': None, 'confidence': None}
    if found is None:
        return attr
    attr['value'] = found.text
    attr['confidence'] = found.confidence
    attr['dataFeatures'] = found.provenance()
    suspect = ocr_suspect(found, kind)
    if suspect is not None:
        attr['confidence'] = min(found.confidence, OCR_SUSPECT_CONFIDENCE)
        attr['dataFeatures']['ocrSuspect'] = suspect
    return renormalise(attr, taxon, locale)


def renormalise(attr: dict[str, Any], taxon: dict[str, Any], locale: Locale) -> dict[str, Any]:
    """The typed value of the attribute's raw value (again); a failure is kept as its reason (and
    its kind: ``normaliseErrorType`` AMBIGUOUS_VALUE when the document's conventions do not settle it)."""
    for key in ('typedValue', 'normaliseError', 'normaliseErrorType', 'stringValue', 'numberValue', 'decimalValue',
                'floatValue', 'dateValue', 'booleanValue', 'currency'):
        attr.pop(key, None)
    attr['typedValue'] = None
    if attr.get('value') is None:
        return attr
    try:
        typed, extra = normalise(str(attr['value']), taxon, locale)
    except NotNormalised as exc:
        attr['normaliseError'] = str(exc)
        if exc.exception_type != INVALID_VALUE:
            attr['normaliseErrorType'] = exc.exception_type
        return attr
    attr['typedValue'] = typed
    attr.update(extra)
    attr.update(typed_fields(taxon.get('type', 'string'), typed))
    return attr


# ----------------------------------------------------------------------------- extraction

def _reads(text: str, taxon: dict[str, Any], locale: Locale) -> bool:
    try:
        normalise(text, taxon, locale)
    except NotNormalised:
        return False
    return True


class _Run:
    def __init__(self, doc: Document, locale: Locale, taxons: list[dict[str, Any]], recall=None) -> None:
        self.doc = doc
        self.recalled = recall(doc) if recall is not None else None   # the layout memory's places
        self.whole = Scope.of_document(doc)
        # "auto": the document's own conventions, detected once (normalise.detect); the date order its
        # dates leave open settled by weaker evidence, a reviewer's taught conventions among it
        # (date_order.py; docs/api/extraction.md "How the date order is settled", "Layout memory")
        self.locale: Locale = locale
        if locale == AUTO:
            taught = Conventions.of(self.recalled.conventions) \
                if self.recalled is not None and self.recalled.conventions else None
            self.locale = date_order.settle(doc.text, detect(doc.text), taught)
            if taught is not None:
                self.recalled.conventions_used = 'taught' in self.locale.evidence().values()
        self.objects: list[Obj] = []
        self.known = labels.Known.of(taxons)
        self._input: dict[str, Any] | None = None

    def jsonata_input(self) -> dict[str, Any]:
        if self._input is None:
            self._input = rules.document_input(self.doc)
        return self._input

    def add(self, obj: Obj) -> Obj:
        if len(self.objects) >= MAX_OBJECTS:
            raise ExtractionLimit(f'the extraction would write more than {MAX_OBJECTS:,} data objects for one document '
                                  f'(limit maxObjectsPerFamily)', limit='maxObjectsPerFamily', maximum=MAX_OBJECTS)
        self.objects.append(obj)
        return obj

    def leaf(self, taxon: dict[str, Any], path: str, scope: Scope, row: dict[str, Found] | None) -> dict[str, Any]:
        found = (row or {}).get(taxon['name'])   # a table row's column, a JSONata item's field
        if found is not None and found.text.strip():
            return attribute(taxon, path, found, self.locale)
        if row is None and self.recalled is not None:   # what a reviewer taught for this layout wins
            found = self.recalled.read(path)                # (docs/api/extraction.md "Layout memory")
            if found is not None:
                return attribute(taxon, path, found, self.locale)
        found = None
        kind_of_value = taxon.get('type', 'string')
        accept = None if kind_of_value == 'string' else (lambda text: _reads(text, taxon, self.locale))
        for rule in taxon.get('rules') or []:
            kind = rule.get('type')
            if kind == 'regex':
                found = rules.regex(scope, rule)
            elif kind == 'label':
                found = labels.label(scope, rule, self.known, accept)
            elif kind == 'jsonata':
                found = self._jsonata(rule, path, scope)
            if found is not None and found.text.strip():
                break
            found = None
        if found is None and scope is self.whole and row is None:   # the "label: value" fallback (labels.py)
            texts = [t for r in taxon.get('rules') or [] if r.get('type') == 'label' for t in labels.texts(r['label'])]
            texts += [t for t in labels.texts(taxon.get('label')) if t not in texts]
            found = labels.pairs(scope, texts, self.known, accept)
        return attribute(taxon, path, found, self.locale)

    def _jsonata(self, rule: dict[str, Any], path: str, scope: Scope) -> Found | None:
        data = self.jsonata_input()
        if scope is not self.whole:
            data = {**data, 'row': {'text': scope.text, 'lines': [u.id for u in scope.units]}}
        try:
            value = evaluate(rule['expression'], data)
        except ExpressionError as exc:
            raise ApiError(f"taxon '{path}': its jsonata rule failed: {exc}", status=422) from None
        return rules.found_of(value, self.doc, rule)

    def group(self, taxon: dict[str, Any], path: str, scope: Scope, parent: Obj | None,
              row: dict[str, Found] | None, key: str, index: int = 0) -> None:
        budget.check(f"extracting group '{path}'")
        if taxon.get('cardinality') == 'many':
            for k, (inst_scope, inst_row) in enumerate(self._instances(taxon, path, scope)):
                self._instance(taxon, path, inst_scope, parent, inst_row, f'{key}.{k}', k)
            return
        self._instance(taxon, path, scope, parent, row, key, index)

    def _instance(self, taxon, path, scope, parent, row, key, index) -> None:
        obj = self.add(Obj(key=key, path=path, taxon=taxon, parent=parent.key if parent else None, row=index))
        for child in taxon.get('children') or []:
            here = f"{path}/{child['name']}"
            if child.get('group'):
                self.group(child, here, scope, obj, row, f"{key}.{child['name']}")
            else:
                obj.attributes.append(self.leaf(child, here, scope, row))

    def _instances(self, taxon: dict[str, Any], path: str, scope: Scope) -> list[tuple[Scope, dict[str, Found] | None]]:
        for rule in taxon.get('rules') or []:
            if rule.get('type') == 'table':
                columns, required = table_columns(taxon)
                if not columns:
                    continue
                rows = rules.table(self.doc, rule, columns, f"group '{path}'", required)
                if rows:
                    return [(Scope.of_units(list({u.id: u for f in r.values() for u in f.units}.values())), r)
                            for r in rows]
            elif rule.get('type') == 'jsonata':
                try:
                    value = evaluate(rule['expression'], self.jsonata_input())
                except ExpressionError as exc:
                    raise ApiError(f"group '{path}': its jsonata rule failed: {exc}", status=422) from None
                items = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
                if len(items) > rules.MAX_TABLE_ROWS:
                    raise too_many(f"group '{path}'")
                out = []
                for item in items:
                    if not isinstance(item, dict):
                        continue
                    row = {name: f for name, v in item.items()
                           if (f := rules.found_of(v, self.doc, rule)) is not None}
                    out.append((scope, row))
                if out:
                    return out
        return []


def table_columns(taxon: dict[str, Any]) -> tuple[dict[str, list[str]], set[str]]:
    """A many group's columns: each value child's header texts from all its ``column`` rules, in
    order (a rule's ``header`` is a text or a list of texts), and the children that are
    ``required`` (the columns a header must hold: features/extraction/tables.py)."""
    columns: dict[str, list[str]] = {}
    required: set[str] = set()
    for child in taxon.get('children') or []:
        if child.get('group'):
            continue
        texts: list[str] = []
        for rule in child.get('rules') or []:
            if rule.get('type') == 'column':
                header = rule.get('header')
                texts += [header] if isinstance(header, str) else [h for h in header or [] if isinstance(h, str)]
        if texts:
            columns[child['name']] = texts
            if child.get('required'):
                required.add(child['name'])
    return columns, required


def extract(taxons: list[dict[str, Any]], nodes: list[dict[str, Any]], *, locale: str | None = None,
            recall=None) -> Result:
    """The data objects of a document (before assessment); ``locale`` a locale's name, "auto"
    (the document's own conventions) or None (en-US). ``recall(doc)``: the places a layout
    memory holds for the document (features/extraction/memories.py ``recall_for``), read before
    a value taxon's rules; a place that stops matching falls back to the rules."""
    started = time.perf_counter()
    doc = Document(nodes)
    run = _Run(doc, locale, taxons, recall)
    for k, taxon in enumerate(taxons):
        run.group(taxon, taxon['name'], run.whole, None, None, str(k))
    conventions = run.locale if isinstance(run.locale, Conventions) else None
    return Result(run.objects, time.perf_counter() - started, conventions,
                  run.recalled.report() if run.recalled is not None else None)


# ----------------------------------------------------------------------------- assessment

def group_data(obj: dict[str, Any], children_of: dict[str, list[dict[str, Any]]],
               taxon: dict[str, Any]) -> dict[str, Any]:
    """The JSONata input of an object: {child name: typed value, subgroup: object | [objects]}."""
    data: dict[str, Any] = {a['tag']: a.get('typedValue') for a in obj.get('attributes') or []}
    for child in taxon.get('children') or []:
        if not child.get('group'):
            continue
        kids = [k for k in children_of.get(obj['id'], []) if k.get('path', '').rsplit('/', 1)[-1] == child['name']]
        values = [group_data(k, children_of, child) for k in sorted(kids, key=lambda k: k.get('rowNum') or 0)]
        data[child['name']] = values if child.get('cardinality') == 'many' else (values[0] if values else None)
    return data


def assess(objects: list[dict[str, Any]], taxon_of: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The open exceptions of a stored tree, by key: {key: {exceptionType, taxon, message, severity,
    dataObjectId, attributeId?, validation?}}. ``objects`` carry ids, ``parentId``, ``path`` and
    their attributes (each with ``id``); ``taxon_of`` maps a taxon path to its taxon."""
    out: dict[str, dict[str, Any]] = {}
    by_id = {o['id']: o for o in objects}
    children_of: dict[str, list[dict[str, Any]]] = {}
    for o in objects:
        if o.get('parentId'):
            children_of.setdefault(o['parentId'], []).append(o)

    def chain(o: dict[str, Any]) -> list[dict[str, Any]]:
        ups, cur = [], o
        while cur.get('parentId') and cur['parentId'] in by_id:
            cur = by_id[cur['parentId']]
            ups.append(cur)
        return ups

    def add(o, kind, taxon_path, message, *, attr=None, validation=None, severity='ERROR'):
        key = '|'.join([o['id'], kind, taxon_path, validation or ''])
        entry = {'key': key, 'exceptionType': kind, 'taxon': taxon_path, 'message': message, 'severity': severity,
                 'dataObjectId': o['id']}
        if attr is not None:
            entry['attributeId'] = attr['id']
        if validation:
            entry['validation'] = validation
        out[key] = entry

    data_cache: dict[str, dict[str, Any]] = {}

    def data_of(o: dict[str, Any]) -> dict[str, Any]:
        if o['id'] not in data_cache:
            group = taxon_of.get(o.get('path') or '') or {}
            data_cache[o['id']] = group_data(o, children_of, group)
        return data_cache[o['id']]

    for o in objects:
        group = taxon_of.get(o.get('path') or '')
        if group is None:
            continue
        for attr in o.get('attributes') or []:
            taxon = taxon_of.get(attr.get('taxon') or '') or {}
            label = _label(taxon) if taxon else attr.get('tag')
            path = attr.get('taxon') or ''
            empty = attr.get('value') is None or not str(attr.get('value')).strip()
            if empty:
                if taxon.get('required'):
                    add(o, REQUIRED_MISSING, path, f'{label} ({path}) was not found in the document: enter it from the '
                                                    'document', attr=attr)
                continue
            if attr.get('normaliseError'):
                kind = AMBIGUOUS_VALUE if attr.get('normaliseErrorType') == AMBIGUOUS_VALUE else INVALID_VALUE
                add(o, kind, path, f"{label} ({path}): {attr['normaliseError']}" +
                    ('' if kind == AMBIGUOUS_VALUE else ': correct it'), attr=attr)
                continue
            threshold = taxon.get('threshold')
            conf = attr.get('confidence')
            suspect = (attr.get('dataFeatures') or {}).get('ocrSuspect')
            if suspect and not attr.get('confirmed'):   # OCR's typical confusion (ocr_suspect), whatever the threshold
                add(o, LOW_CONFIDENCE, path, f"{label} ({path}): '{attr['value']}' was read by OCR with {suspect}: "
                                             'check it against the document and confirm or correct it', attr=attr,
                    severity='WARNING')
            elif threshold is not None and conf is not None and conf < threshold and not attr.get('confirmed'):
                add(o, LOW_CONFIDENCE, path, f"{label} ({path}): '{attr['value']}' was read with confidence "
                                             f'{conf:.2f}, '
                                             f'under its threshold {threshold:.2f}: check it against the document and '
                                             'confirm or correct it', attr=attr, severity='WARNING')
            for entry in taxon.get('validations') or []:
                _validate(o, entry, path, label, data_of, chain, add, attr=attr)
        for entry in group.get('validations') or []:
            _validate(o, entry, o.get('path') or '', _label(group), data_of, chain, add)
    return out


def _validate(o, entry, path, label, data_of, chain, add, *, attr=None) -> None:
    if attr is not None and attr.get('confirmed'):
        return
    name = str(entry.get('name') or entry['ruleFormula'])
    ups = [data_of(u) for u in chain(o)]
    try:
        ok = run_formula(entry['ruleFormula'], data_of(o), ups)
        if ok is True or (ok not in (None, False, '', 0) and not isinstance(ok, list)) or \
                (isinstance(ok, list) and any(ok)):
            return
        message = None
        if isinstance(entry.get('messageFormula'), str) and entry['messageFormula'].strip():
            message = run_formula(entry['messageFormula'], data_of(o), ups)
        text = f"{label} ({path}): {message if message is not None else f'validation {name!r} failed'}"
    except ExpressionError as exc:
        text = f'{label} ({path}): validation {name!r} could not be evaluated: {exc}'
    add(o, VALIDATION_FAILED, path, text, attr=attr, validation=name)
