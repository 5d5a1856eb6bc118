"""The list filter language: ``parse`` -> AST -> ``compile_filter`` (DynamoDB) + ``evaluate``.

Typical use by a list endpoint::

    node = parse(filter_text, schema)                  # FilterError -> 400
    condition, residual = compile_filter(node, schema)  # condition -> FilterExpression
    items = [i for i in returned_items
             if residual is None or evaluate(residual, i, ctx, root='data')]
"""
from .ast import And, Compare, IsNull, Node, Not, Or
from .dynamo import compile_filter
from .errors import FilterError
from .evaluate import evaluate
from .parser import MAX_DEPTH, MAX_LENGTH, parse
from .render import render
from .schema import NULL_CONTEXT, DictSchema, FilterContext, FilterSchema, NullContext, Resolved

__all__ = [
    'And', 'Compare', 'DictSchema', 'FilterContext', 'FilterError', 'FilterSchema', 'IsNull',
    'MAX_DEPTH', 'MAX_LENGTH', 'NULL_CONTEXT', 'Node', 'Not', 'NullContext', 'Or', 'Resolved',
    'compile_filter', 'evaluate', 'parse', 'render',
]
