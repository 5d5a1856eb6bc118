"""The taxons of a data definition: their shape, checked when the definition is written, and the
caps every extraction is held to (docs/api/extraction.md "Taxons", "Budgets").

A definition's ``taxons`` is a list of group taxons (the top of each data object tree). A taxon:

  {"name", "label", "group": true, "cardinality": "one" | "many", "children": [...],
   "rules": [table | jsonata] (many groups), "validations": [...]}
  {"name", "label", "type": string | number | decimal | currency | date | boolean | selection,
   "options": [...] (selection), "required", "threshold" (0..1), "locale", "currency",
   "rules": [regex | label | column | jsonata], "validations": [...]}

A rule: ``{"type": "regex", "pattern", "group"?, "ignoreCase"?}``,
``{"type": "label", "label" (a text, or a list of 1-20 texts of 1-100 characters: synonyms and
languages, features/extraction/labels.py), "direction": "right" | "below"}``, ``{"type": "column", "header"}``
(a child of a many group with a table rule; ``header`` one text or a list of up to 10),
``{"type": "table", "stopAt"?}`` (a many group),
``{"type": "jsonata", "expression"}``. A validation: ``{"name", "ruleFormula", "messageFormula"?}``
(JSONata over the enclosing group's data, the same language content objects validate with).

Regular expressions run on RE2 (google-re2): linear in the text whatever the pattern, so no
pattern can backtrack for minutes; what RE2 refuses (backreferences, lookarounds, a program over
``REGEX_MAX_MEMORY``) is refused here, when the definition is written.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from chalicelib.core.errors import BadRequest
from chalicelib.core.expressions import MAX_EXPRESSION_LENGTH, ExpressionError
from chalicelib.core.expressions import check as check_expression
from chalicelib.features.extraction.normalise import LOCALES, TYPES

MAX_TAXONS = 200            # taxons per definition (groups and leaves)
MAX_RULES = 5               # rules per taxon
MAX_VALIDATIONS = 10        # validations per taxon
MAX_DEPTH = 5               # groups under groups
MAX_PATTERN_LENGTH = 1_000
REGEX_MAX_MEMORY = 1 << 20  # bytes RE2 may take for one compiled pattern
MAX_LABEL_LENGTH = 200
MAX_LABELS = 20             # texts in a label rule's list (labels.py reads them in order)
MAX_LABEL_TEXT = 100        # characters of one text of the list
MAX_HEADER_TEXTS = 10       # texts one column rule's header lists
RULE_TYPES = ('regex', 'label', 'column', 'table', 'jsonata')
_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_-]{0,63}')
_TAXON_KEYS = {'name', 'label', 'description', 'group', 'cardinality', 'children', 'type', 'taxonType', 'options',
               'required', 'threshold', 'locale', 'currency', 'decimalPlaces', 'rules', 'validations', 'color'}
_RULE_KEYS = {'regex': {'pattern', 'group', 'ignoreCase'}, 'label': {'label', 'direction'},
              'column': {'header'}, 'table': {'stopAt'}, 'jsonata': {'expression'}}


class DefinitionError(ValueError):
    """A definition the extraction cannot run: the message names the taxon and the rule."""


def compile_regex(pattern: str, ignore_case: bool = False):
    import re2  # noqa: PLC0415 - lazy: only extraction and definition writes need it
    options = re2.Options()
    options.max_mem = REGEX_MAX_MEMORY
    options.log_errors = False
    options.case_sensitive = not ignore_case
    return re2.compile(pattern, options)


def _check_jsonata(expression: str) -> str | None:
    """Why ``expression`` can never run (a syntax error, a regex RE2 refuses), or None: the
    same parse as evaluation's (core/expressions.py ``check``)."""
    try:
        check_expression(expression)
    except ExpressionError as exc:
        return exc.reason
    return None


def _rule(rule: Any, where: str, taxon: dict[str, Any], parent: dict[str, Any] | None) -> None:
    if not isinstance(rule, dict):
        raise DefinitionError(f'{where}: a rule must be an object')
    kind = rule.get('type')
    if kind not in RULE_TYPES:
        raise DefinitionError(f'{where}: type must be one of {", ".join(RULE_TYPES)}')
    unknown = sorted(set(rule) - _RULE_KEYS[kind] - {'type', 'confidence'})
    if unknown:
        raise DefinitionError(f'{where}: {unknown[0]} is not an option of a {kind} rule')
    conf = rule.get('confidence')
    if conf is not None and (not isinstance(conf, (int, float)) or isinstance(conf, bool) or not 0 <= conf <= 1):
        raise DefinitionError(f'{where}: confidence must be a number from 0 to 1')
    group = bool(taxon.get('group'))
    if group and kind not in ('table', 'jsonata'):
        raise DefinitionError(f'{where}: a group taxon takes table or jsonata rules, not {kind}')
    if not group and kind == 'table':
        raise DefinitionError(f'{where}: a table rule belongs on a group taxon with cardinality many')
    if kind == 'table' and taxon.get('cardinality') != 'many':
        raise DefinitionError(f'{where}: a table rule needs the group to have cardinality many')
    if kind == 'regex':
        pattern = rule.get('pattern')
        if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN_LENGTH:
            raise DefinitionError(f'{where}: pattern must be a regular expression of 1 to {MAX_PATTERN_LENGTH} '
                                  'characters')
        if rule.get('ignoreCase') is not None and not isinstance(rule.get('ignoreCase'), bool):
            raise DefinitionError(f'{where}: ignoreCase must be true or false')
        try:
            compiled = compile_regex(pattern, bool(rule.get('ignoreCase')))
        except Exception as exc:  # noqa: BLE001 - re2 raises its own error type
            reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise DefinitionError(f'{where}: the pattern is not a regular expression the linear-time engine (RE2) '
                                  f'runs: {reason} (no backreferences or lookarounds; at most '
                                  f'{REGEX_MAX_MEMORY // 1024} KiB compiled)') from None
        capture = rule.get('group', 1)
        if isinstance(capture, bool) or not isinstance(capture, (int, str)):
            raise DefinitionError(f'{where}: group must be a capture group number or name')
        if isinstance(capture, int) and not 0 <= capture <= compiled.groups:
            raise DefinitionError(f'{where}: the pattern has {compiled.groups} capture group(s), not group {capture}')
        if isinstance(capture, str) and capture not in compiled.groupindex:
            raise DefinitionError(f'{where}: the pattern has no capture group named {capture!r}')
    elif kind in ('label', 'column'):
        key = 'label' if kind == 'label' else 'header'
        text = rule.get(key)
        if kind == 'label' and isinstance(text, list):
            _label_list(text, where)
        elif kind == 'column' and isinstance(text, list):
            _header_texts(text, where)
        elif not isinstance(text, str) or not text.strip() or len(text) > MAX_LABEL_LENGTH:
            raise DefinitionError(f'{where}: {key} must be a text of 1 to {MAX_LABEL_LENGTH} characters'
                                  + (f' or a list of 1 to {MAX_LABELS} texts of 1 to {MAX_LABEL_TEXT} characters'
                                     if kind == 'label' else f' or a list of 1 to {MAX_HEADER_TEXTS} such texts'))
        if kind == 'label' and rule.get('direction', 'right') not in ('right', 'below'):
            raise DefinitionError(f'{where}: direction must be right or below')
        if kind == 'column' and not (parent and parent.get('cardinality') == 'many'
                                     and any(r.get('type') == 'table' for r in parent.get('rules') or [])):
            raise DefinitionError(f'{where}: a column rule belongs on a child of a many group with a table rule')
    elif kind == 'table':
        stop = rule.get('stopAt')
        if stop is not None:
            if not isinstance(stop, str) or not stop or len(stop) > MAX_PATTERN_LENGTH:
                raise DefinitionError(f'{where}: stopAt must be a regular expression')
            try:
                compile_regex(stop, True)
            except Exception:  # noqa: BLE001
                raise DefinitionError(f'{where}: stopAt is not a regular expression RE2 runs') from None
    elif kind == 'jsonata':
        expression = rule.get('expression')
        if not isinstance(expression, str) or not expression.strip() or len(expression) > MAX_EXPRESSION_LENGTH:
            raise DefinitionError(f'{where}: expression must be JSONata of 1 to {MAX_EXPRESSION_LENGTH} characters')
        reason = _check_jsonata(expression)
        if reason:
            raise DefinitionError(f'{where}: the expression does not parse: {reason}')


def _label_list(texts: list[Any], where: str) -> None:
    """A label rule's list of texts: bounded, each a non-empty text (labels.py reads them in order)."""
    if not texts or len(texts) > MAX_LABELS:
        raise DefinitionError(f'{where}: label must be a list of 1 to {MAX_LABELS} texts, not {len(texts)} '
                              '(limit maxLabelsPerRule)')
    for k, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_LABEL_TEXT:
            raise DefinitionError(f'{where}: label[{k}] must be a text of 1 to {MAX_LABEL_TEXT} characters')


def _header_texts(texts: list[Any], where: str) -> None:
    """A column's header as a list: synonyms or languages of one column, tried in order."""
    if not 1 <= len(texts) <= MAX_HEADER_TEXTS:
        raise DefinitionError(f'{where}: header must list 1 to {MAX_HEADER_TEXTS} texts, not {len(texts)} '
                              '(limit maxHeaderTexts)')
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_LABEL_LENGTH:
            raise DefinitionError(f'{where}: header {i + 1} must be a text of 1 to {MAX_LABEL_LENGTH} characters')


def _validation(entry: Any, where: str) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get('ruleFormula'), str) or not entry['ruleFormula'].strip():
        raise DefinitionError(f'{where}: a validation is {{name, ruleFormula, messageFormula?}} with a JSONata '
                              'ruleFormula')
    for key in ('ruleFormula', 'messageFormula'):
        if entry.get(key) is not None:
            if not isinstance(entry[key], str):
                raise DefinitionError(f'{where}: {key} must be JSONata text')
            from chalicelib.features.documents.validation import rewrite_up_paths  # noqa: PLC0415 - lazy: cold start
            reason = _check_jsonata(rewrite_up_paths(entry[key]))
            if reason:
                raise DefinitionError(f'{where}: {key} does not parse: {reason}')


def _taxon(taxon: Any, path: str, depth: int, parent: dict[str, Any] | None, seen: list[int]) -> None:
    if not isinstance(taxon, dict):
        raise DefinitionError(f'{path or "taxons"}: a taxon must be an object')
    name = taxon.get('name')
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise DefinitionError(f"taxon {path + '/' if path else ''}{name!r}: name must be 1-64 letters, digits, _ or -, "
                              'starting with a letter or _')
    here = f'{path}/{name}' if path else name
    where = f"taxon '{here}'"
    seen[0] += 1
    if seen[0] > MAX_TAXONS:
        raise DefinitionError(f'a data definition has at most {MAX_TAXONS} taxons (limit maxTaxons)')
    unknown = sorted(set(taxon) - _TAXON_KEYS)
    if unknown:
        raise DefinitionError(f'{where}: {unknown[0]} is not a taxon field')
    rules = taxon.get('rules') or []
    if not isinstance(rules, list):
        raise DefinitionError(f'{where}: rules must be a list')
    if len(rules) > MAX_RULES:
        raise DefinitionError(f'{where}: at most {MAX_RULES} rules per taxon (limit maxRulesPerTaxon)')
    validations = taxon.get('validations') or []
    if not isinstance(validations, list) or len(validations) > MAX_VALIDATIONS:
        raise DefinitionError(f'{where}: validations must be a list of at most {MAX_VALIDATIONS}')
    if taxon.get('group'):
        if depth >= MAX_DEPTH:
            raise DefinitionError(f'{where}: groups nest at most {MAX_DEPTH} deep')
        if taxon.get('cardinality', 'one') not in ('one', 'many'):
            raise DefinitionError(f'{where}: cardinality must be one or many')
        children = taxon.get('children')
        if not isinstance(children, list) or not children:
            raise DefinitionError(f'{where}: a group taxon needs children')
        names = [c.get('name') for c in children if isinstance(c, dict)]
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise DefinitionError(f'{where}: two children share the name {twice!r}')
    else:
        if parent is None:
            raise DefinitionError(f'{where}: a top-level taxon must be a group (group: true, with children)')
        kind = taxon.get('type', 'string')
        if kind not in TYPES:
            raise DefinitionError(f'{where}: type must be one of {", ".join(TYPES)}')
        if kind == 'selection':
            options = taxon.get('options')
            if not isinstance(options, list) or not options or not all(
                    isinstance(o, str) or (isinstance(o, dict) and isinstance(o.get('value'), str)) for o in options):
                raise DefinitionError(f'{where}: a selection needs options (texts or {{value, label}})')
        threshold = taxon.get('threshold')
        if threshold is not None and (not isinstance(threshold, (int, float)) or isinstance(threshold, bool)
                                      or not 0 <= threshold <= 1):
            raise DefinitionError(f'{where}: threshold must be a number from 0 to 1')
        if taxon.get('required') is not None and not isinstance(taxon.get('required'), bool):
            raise DefinitionError(f'{where}: required must be true or false')
        if taxon.get('locale') is not None and taxon['locale'] not in LOCALES:
            raise DefinitionError(f'{where}: locale must be one of {", ".join(LOCALES)}')
    for i, rule in enumerate(rules):
        _rule(rule, f'{where} rule {i + 1}', taxon, parent)
    for i, entry in enumerate(validations):
        _validation(entry, f'{where} validation {i + 1}')
    for child in taxon.get('children') or []:
        _taxon(child, here, depth + 1, taxon, seen)


def check(taxons: Any) -> None:
    """Raise DefinitionError naming the taxon and rule of the first problem."""
    if taxons is None:
        return
    if not isinstance(taxons, list):
        raise DefinitionError('taxons must be a list')
    names = [t.get('name') for t in taxons if isinstance(t, dict)]
    if len(set(names)) != len(names):
        raise DefinitionError('two top-level taxons share a name')
    seen = [0]
    for taxon in taxons:
        _taxon(taxon, '', 0, None, seen)


def check_or_400(taxons: Any) -> None:
    try:
        check(taxons)
    except DefinitionError as exc:
        raise BadRequest(f'taxons: {exc}') from None


def walk(taxons: list[dict[str, Any]], path: str = '') -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, taxon) of every taxon, depth first."""
    for t in taxons or []:
        here = f"{path}/{t['name']}" if path else t['name']
        yield here, t
        yield from walk(t.get('children') or [], here)


def find(taxons: list[dict[str, Any]], path: str) -> dict[str, Any] | None:
    return next((t for p, t in walk(taxons) if p == path), None)


def taxonomy_view(definition: dict[str, Any]) -> dict[str, Any]:
    """A definition as the SDK's Taxonomy (kodexa.model.objects Taxonomy / Taxon)."""
    def taxon(t: dict[str, Any], path: str) -> dict[str, Any]:
        here = f"{path}/{t['name']}" if path else t['name']
        out = {'id': here, 'name': t['name'], 'label': t.get('label') or t['name'], 'path': here,
               'group': bool(t.get('group')), 'enabled': True,
               'taxonType': 'SECTION' if t.get('group') else str(t.get('type', 'string')).upper(),
               'children': [taxon(c, here) for c in t.get('children') or []]}
        if t.get('description'):
            out['description'] = t['description']
        if t.get('options'):
            out['selectionOptions'] = [{'label': o if isinstance(o, str) else o.get('label') or o['value'],
                                        'value': o if isinstance(o, str) else o['value']} for o in t['options']]
        if t.get('group') and t.get('cardinality') == 'many':
            out['multiValue'] = True
        return out
    ref = f"{definition.get('organizationSlug') or definition.get('organizationId')}/{definition.get('slug')}"
    return {'id': definition.get('id'), 'ref': ref, 'slug': definition.get('slug'), 'name': definition.get('name') or
            definition.get('slug') or '', 'taxonomyType': definition.get('taxonomyType') or 'CONTENT',
            'enabled': definition.get('enabled', True), 'type': 'taxonomy',
            'taxons': [taxon(t, '') for t in definition.get('taxons') or []]}
