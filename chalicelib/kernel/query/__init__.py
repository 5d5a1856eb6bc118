"""The list filter language: ``parse`` -> AST -> ``compile_filter`` (DynamoDB) + ``evaluate``.

Typical use by a list endpoint::

    node = parse(filter_text, schema)                  # FilterError -> 400
    condition, residual = compile_filter(node, schema)  # condition -> FilterExpression
    items = [i for i in returned_items
             if residual is None or evaluate(residual, i, ctx, root='data')]
"""
from chalicelib.kernel.query.ast import And, Compare, IsNull, Node, Not, Or
from chalicelib.kernel.query.dynamo import compile_filter
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
    'compile_filter', 'evaluate', 'parse', 'render',
]
