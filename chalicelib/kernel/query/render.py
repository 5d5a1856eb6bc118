"""Render a filter AST back to filter text that :func:`parse` reads as the same filter."""
from __future__ import annotations

import decimal

from chalicelib.kernel.query import ast
from chalicelib.kernel.query.ast import And, Compare, IsNull, Not, Or


def render(node: ast.Node) -> str:
    if isinstance(node, And):
        # 'and' binds tighter than 'or': only Or (or a nested And, kept as written) needs parens.
        return ' and '.join(_wrap(child, (And, Or)) for child in node.items)
    if isinstance(node, Or):
        return ' or '.join(_wrap(child, (Or,)) for child in node.items)
    if isinstance(node, Not):
        return f'not({render(node.item)})'
    path = '.'.join(node.path)
    if isinstance(node, IsNull):
        return f'{path} is not null' if node.negated else f'{path} is null'
    if isinstance(node, Compare):
        if node.op == ast.IN:
            return f"{path} =in=({', '.join(literal(v) for v in node.value)})"
        return f'{path} {node.op} {literal(node.value)}'
    raise TypeError(f'not a filter node: {node!r}')


def _wrap(node: ast.Node, parenthesised) -> str:
    text = render(node)
    return f'({text})' if isinstance(node, parenthesised) else text


def literal(value) -> str:
    """Filter-language text of a literal value."""
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, str):
        return "'" + value.replace('\\', '\\\\').replace("'", "\\'") + "'"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal) and value.is_finite():
        return format(value, 'f')
    raise TypeError(f'not a filter literal: {value!r}')
