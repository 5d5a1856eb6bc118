"""The shapes of extraction's structured fields (docs/api/extraction.md): a data definition's
taxon, a data object's attribute, and the options of an extraction run (``ExtractOptions``).
Pure data: the shape check here is the structural one (an object with its name); the rules that
need the extraction engine (RE2 patterns, JSONata, where a rule may stand) are checked by the
definitions' hook in features/extraction/hooks.py.

``ExtractOptions`` is the one shape of an EXTRACT run's options, checked once, here
(``check_extract_options``): by the EXTRACT step of a plan or pipeline (features/work/step_shapes.py
reads it from the installed shapes, kernel/shapes.py), by ``POST /api/document-families/{id}/extract``
(features/extraction/service.py), and its review fields by the review task (features/extraction/review_task.py).
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.kernel.shapes import Shape

RULE_SCHEMA = {
    'type': 'object', 'required': ['type'], 'additionalProperties': False,
    'description': 'Where the value is: regex {pattern, group?, ignoreCase?} (RE2), label {label (a text or '
                   'a list of up to 20, tried in order), direction: right|below}, column {header} (a child of a many '
                   'group), table {stopAt?} (a many group), '
                   'jsonata {expression}; confidence (0..1) overrides the rule\'s default.',
    'properties': {'type': {'type': 'string', 'enum': ['regex', 'label', 'column', 'table', 'jsonata']},
                   'pattern': {'type': 'string'}, 'group': {}, 'ignoreCase': {'type': 'boolean'},
                   'label': {'oneOf': [{'type': 'string'}, {'type': 'array', 'maxItems': 20,
                                                             'items': {'type': 'string', 'maxLength': 100}}]},
                   'direction': {'type': 'string', 'enum': ['right', 'below']},
                   'header': {'type': 'string'}, 'stopAt': {'type': 'string'}, 'expression': {'type': 'string'},
                   'confidence': {'type': 'number', 'minimum': 0, 'maximum': 1}}}

TAXON_SCHEMA = {
    'type': 'object', 'required': ['name'],
    'description': 'A taxon: a group (group: true, cardinality one|many, children) or a value (type string|number|'
                   'decimal|currency|date|boolean|selection, options, required, threshold, locale) with its '
                   'rules and validations (JSONata over the enclosing group).',
    'properties': {
        'name': {'type': 'string', 'pattern': '^[A-Za-z_][A-Za-z0-9_-]{0,63}$'},
        'label': {'type': 'string'}, 'description': {'type': 'string'},
        'group': {'type': 'boolean'}, 'cardinality': {'type': 'string', 'enum': ['one', 'many']},
        'children': {'type': 'array', 'items': {'type': 'object'}},
        'type': {'type': 'string', 'enum': ['string', 'number', 'decimal', 'currency', 'date', 'boolean',
                                            'selection']},
        'options': {'type': 'array', 'items': {'oneOf': [   # texts, or {value, label} (docs/api/extraction.md)
            {'type': 'string'},
            {'type': 'object', 'properties': {'value': {'type': 'string'}, 'label': {'type': 'string'}}}]}},
        'required': {'type': 'boolean'},
        'threshold': {'type': 'number', 'minimum': 0, 'maximum': 1}, 'locale': {'type': 'string'},
        'currency': {'type': 'string'}, 'decimalPlaces': {'type': 'integer'},
        'rules': {'type': 'array', 'items': RULE_SCHEMA},
        'validations': {'type': 'array', 'items': {'type': 'object', 'required': ['ruleFormula'], 'properties': {
            'name': {'type': 'string'}, 'ruleFormula': {'type': 'string'}, 'messageFormula': {'type': 'string'}}}},
    }}

ATTRIBUTE_SCHEMA = {
    'type': 'object',
    'description': "One value of a data object: taxon (path) or tag, value (the text), typedValue, the SDK's "
                   'typed fields (stringValue, numberValue, decimalValue, dateValue, booleanValue), confidence, '
                   'dataFeatures (provenance: nodeIds, page, bbox, rule), confirmed, history, dataExceptions.',
    'properties': {'id': {'type': 'string'}, 'taxon': {'type': 'string'}, 'tag': {'type': 'string'},
                   'value': {'type': 'string', 'nullable': True}, 'typedValue': {},
                   'confidence': {'type': 'number', 'minimum': 0, 'maximum': 1},
                   'dataFeatures': {'type': 'object'}, 'confirmed': {'type': 'boolean'}},
    'additionalProperties': True}

EXAMPLE_TAXONS = (
    {'name': 'invoice', 'label': 'Invoice', 'group': True, 'cardinality': 'one', 'children': [
        {'name': 'number', 'label': 'Invoice number', 'type': 'string', 'required': True,
         'rules': [{'type': 'label', 'label': 'Invoice No'}]},
        {'name': 'total', 'label': 'Total', 'type': 'currency',
         'rules': [{'type': 'regex', 'pattern': r'Total\s+(\S+)'}]},
    ]},
)
EXAMPLE_ATTRIBUTES = ({'taxon': 'invoice/number', 'value': 'INV-1', 'confidence': 0.9},)


def check_taxon(value: Any) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get('name'), str) or not value['name']:
        raise ValueError('a taxon must be an object with a name')
    return value


def check_attribute(value: Any) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get('taxon') or value.get('tag'), str):
        raise ValueError('an attribute must be an object with its taxon (a taxon path) or tag')
    return value


# ----------------------------------------------------------------------------- locales

# The locales the normalisers know (features/extraction/normalise.py reads them with this table): a
# taxon's locale, a definition's metadata.locale and an extraction run's options.locale name one.
LOCALES = {
    # locale: (decimal separator, grouping separators, numeric date order)
    'en-US': ('.', ',', 'MDY'), 'en-CA': ('.', ',', 'MDY'),
    'en-GB': ('.', ',', 'DMY'), 'en-IE': ('.', ',', 'DMY'), 'en-AU': ('.', ',', 'DMY'),
    'en-IN': ('.', ',', 'DMY'),
    'de-DE': (',', '. ', 'DMY'), 'de-AT': (',', '. ', 'DMY'), 'de-CH': ('.', "'", 'DMY'),
    'fr-FR': (',', ' \u00a0\u202f.', 'DMY'), 'es-ES': (',', '.', 'DMY'), 'it-IT': (',', '.', 'DMY'),
    'nl-NL': (',', '.', 'DMY'), 'pt-BR': (',', '.', 'DMY'), 'ja-JP': ('.', ',', 'YMD'),
}
DEFAULT_LOCALE = 'en-US'
AUTO_LOCALE = 'auto'   # a run's or a definition's locale: the document's own conventions (normalise.detect)
LOCALE_CHOICES = (*LOCALES, AUTO_LOCALE)


# ----------------------------------------------------------------------------- an extraction run's options

MAX_ASSIGNEE_RULES = 20
_TEXT = {'type': 'string', 'minLength': 1, 'maxLength': 500}
_ID = {'type': 'string', 'format': 'uuid'}
EXTRACT_OPTIONS_SCHEMA = {
    'type': 'object', 'required': ['dataDefinition', 'dataStore'], 'additionalProperties': False,
    'description': 'The options of an extraction run (an EXTRACT step, POST /api/document-families/{id}/extract): '
                   'the data definition and data store (ids or slugs), the locale that reads numbers and dates '
                   '(else the definition\'s metadata.locale, else en-US; "auto": as the document writes them), '
                   'and the review: statusSlug, teamId, '
                   'assigneeId, assigneeRules, reviewTitle of the review task, closedStatusSlug it moves to and '
                   'resolvedDocumentStatus the family moves to once no exception is open '
                   '(docs/api/extraction.md "The EXTRACT step").',
    'properties': {
        'dataDefinition': _TEXT, 'dataStore': _TEXT,
        'locale': {'type': 'string', 'enum': list(LOCALE_CHOICES)},
        'statusSlug': _TEXT, 'resolvedDocumentStatus': _TEXT, 'reviewTitle': _TEXT, 'closedStatusSlug': _TEXT,
        'teamId': _ID, 'assigneeId': _ID,
        'assigneeRules': {'type': 'array', 'maxItems': MAX_ASSIGNEE_RULES, 'items': {
            'type': 'object', 'required': ['when'], 'additionalProperties': False,
            'properties': {'when': {'type': 'string', 'minLength': 1}, 'teamId': _ID, 'assigneeId': _ID}}},
    }}
EXTRACT_OPTION_KEYS = frozenset(EXTRACT_OPTIONS_SCHEMA['properties'])
REVIEW_OPTION_KEYS = ('statusSlug', 'teamId', 'assigneeId', 'assigneeRules', 'resolvedDocumentStatus',
                      'reviewTitle', 'closedStatusSlug')
EXAMPLE_EXTRACT_OPTIONS = ({'dataDefinition': 'invoice', 'dataStore': 'invoices', 'locale': 'en-GB',
                            'statusSlug': 'to-review', 'resolvedDocumentStatus': 'extracted'},)


def _text(options: dict[str, Any], key: str, *, required: bool = False) -> None:
    value = options.get(key)
    if value is None:
        if required:
            raise ValueError(f'options.{key} is required (an id or slug)')
        return
    if not isinstance(value, str) or not value.strip() or len(value) > _TEXT['maxLength']:
        raise ValueError(f"options.{key} must be a non-empty string of at most {_TEXT['maxLength']} characters")


def _uuid(value: Any, where: str) -> None:
    if value is None:
        return
    try:
        uuid.UUID(str(value))
    except ValueError:
        raise ValueError(f'{where} must be an id (a UUID)') from None


def check_extract_options(options: Any) -> dict[str, Any]:
    """An extraction run's options as sent, or ValueError naming the field (``options.locale ...``)
    for a 400: every key known, the locale one of normalise.LOCALES (as a taxon's locale,
    taxons.py), ids UUIDs, texts non-empty."""
    if not isinstance(options, dict):
        raise ValueError('options must be an object')
    unknown = sorted(set(options) - EXTRACT_OPTION_KEYS)
    if unknown:
        raise ValueError(f'options.{unknown[0]} is not an option of an EXTRACT step '
                         f'({", ".join(sorted(EXTRACT_OPTION_KEYS))})')
    for key in ('dataDefinition', 'dataStore'):
        _text(options, key, required=True)
    for key in ('statusSlug', 'resolvedDocumentStatus', 'reviewTitle', 'closedStatusSlug'):
        _text(options, key)
    locale = options.get('locale')
    if locale is not None and locale not in LOCALE_CHOICES:
        raise ValueError(f'options.locale must be one of {", ".join(LOCALE_CHOICES)}')
    for key in ('teamId', 'assigneeId'):
        _uuid(options.get(key), f'options.{key}')
    rules = options.get('assigneeRules')
    if rules is None:
        return options
    if not isinstance(rules, list) or len(rules) > MAX_ASSIGNEE_RULES:
        raise ValueError(f'options.assigneeRules must be a list of at most {MAX_ASSIGNEE_RULES} rules')
    for i, rule in enumerate(rules):
        here = f'options.assigneeRules[{i}]'
        if not isinstance(rule, dict) or set(rule) - {'when', 'teamId', 'assigneeId'}:
            raise ValueError(f'{here} must be {{when, teamId?, assigneeId?}}')
        if not isinstance(rule.get('when'), str) or not rule['when'].strip():
            raise ValueError(f'{here}.when must be a JSONata expression')
        _expression(rule['when'], f'{here}.when')
        _uuid(rule.get('teamId'), f'{here}.teamId')
        _uuid(rule.get('assigneeId'), f'{here}.assigneeId')
    return options


def _expression(expression: str, where: str) -> None:
    """An expression that can never run (a syntax error, a regex RE2 refuses) is refused at write
    (core/expressions.py ``check``; docs/api/limits.md "Regular expressions are RE2")."""
    from chalicelib.core import expressions  # noqa: PLC0415 - kept off the cold start of the shapes
    try:
        expressions.check(expression)
    except expressions.ExpressionError as exc:
        raise ValueError(f'{where} is not an expression that can run: {exc.reason}') from None


# Installed by the extraction feature's declarations (kernel/shapes.py).
SHAPES = (
    Shape(name='Taxon', schema=TAXON_SCHEMA, examples=EXAMPLE_TAXONS, check=check_taxon),
    Shape(name='DataAttribute', schema=ATTRIBUTE_SCHEMA, examples=EXAMPLE_ATTRIBUTES, check=check_attribute),
    Shape(name='ExtractOptions', schema=EXTRACT_OPTIONS_SCHEMA, examples=EXAMPLE_EXTRACT_OPTIONS,
          check=check_extract_options),
)
