"""The shapes of extraction's structured fields (docs/api/extraction.md): a data definition's
taxon and a data object's attribute. Pure data: the shape check here is the structural one
(an object with its name); the rules that need the extraction engine (RE2 patterns, JSONata,
where a rule may stand) are checked by the definitions' hook in features/extraction/hooks.py.
"""
from __future__ import annotations

from typing import Any

from chalicelib.kernel.shapes import Shape

RULE_SCHEMA = {
    'type': 'object', 'required': ['type'], 'additionalProperties': False,
    'description': 'Where the value is: regex {pattern, group?, ignoreCase?} (RE2), label {label, direction: '
                   'right|below}, column {header} (a child of a many group), table {stopAt?} (a many group), '
                   'jsonata {expression}; confidence (0..1) overrides the rule\'s default.',
    'properties': {'type': {'type': 'string', 'enum': ['regex', 'label', 'column', 'table', 'jsonata']},
                   'pattern': {'type': 'string'}, 'group': {}, 'ignoreCase': {'type': 'boolean'},
                   'label': {'type': 'string'}, 'direction': {'type': 'string', 'enum': ['right', 'below']},
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


# Installed by the extraction feature's declarations (kernel/shapes.py).
SHAPES = (
    Shape(name='Taxon', schema=TAXON_SCHEMA, examples=EXAMPLE_TAXONS, check=check_taxon),
    Shape(name='DataAttribute', schema=ATTRIBUTE_SCHEMA, examples=EXAMPLE_ATTRIBUTES, check=check_attribute),
)
