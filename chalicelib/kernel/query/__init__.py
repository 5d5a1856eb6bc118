"""The list filter language: ``parse`` -> AST -> ``evaluate``.

Typical use by a list endpoint::

    node = parse(filter_text, schema)                  # FilterError -> 400
    items = [i for i in records if evaluate(node, i, ctx)]

Filters are decided on the records a list reads, never inside DynamoDB: no index projects
records (docs/scale.md "Projections"), and BatchGetItem takes no FilterExpression.
"""
from chalicelib.kernel.query.ast import And, Compare, IsNull, Node, Not, Or
from chalicelib.kernel.query.errors import FilterError
from chalicelib.kernel.query.evaluate import evaluate
from chalicelib.kernel.query.parser import MAX_DEPTH, MAX_LENGTH, parse
from chalicelib.kernel.query.render import render
from chalicelib.kernel.query.schema import (
    NULL_CONTEXT,
    DictSchema,
    FilterContext,
    FilterSchema,
    NullContext,
    Resolved,
)

__all__ = [
    'And', 'Compare', 'DictSchema', 'FilterContext', 'FilterError', 'FilterSchema', 'IsNull',
    'MAX_DEPTH', 'MAX_LENGTH', 'NULL_CONTEXT', 'Node', 'Not', 'NullContext', 'Or', 'Resolved',
    'evaluate', 'parse', 'render',
]
