"""Compile a filter AST to a DynamoDB filter condition plus an in-memory residual.

``compile_filter`` pushes down what DynamoDB evaluates *exactly* like
:mod:`chalicelib.kernel.query.evaluate` and returns the rest as a residual AST to be evaluated in
memory on the items DynamoDB returns. For any data,
``evaluate(residual) on items matching condition`` == ``evaluate(node) on all items``.

What compiles (paths are rooted at the item's map attribute ``root``):

* ``==`` string: ``p = v``. ``==`` number/boolean, ``!=`` and the ordering operators are
  guarded by ``attribute_type(p, S|N|BOOL)``: DynamoDB's ``<>`` is true for a missing, null or
  differently typed attribute (our ``!=`` is false there), and the guard also keeps emulators
  such as moto exact (they compare ``1 = true`` as equal and fail on mixed-type ``<``).
* ``=in=``: ``p IN (...)`` per literal kind (numbers/booleans guarded as above), split into
  chunks of at most 100 operands (DynamoDB's limit).
* ``=like=``: no ``*`` -> ``=``; ``abc*`` -> ``begins_with``; ``*abc*`` (no other ``*``) ->
  ``attribute_type(p, S) AND contains`` (the guard stops ``contains`` matching list
  elements); ``*`` -> ``attribute_type(p, S)``. Runs of ``*`` count as one. Other patterns
  stay residual.
* ``is null`` -> ``attribute_not_exists(p) OR attribute_type(p, NULL)``; ``is not null`` is
  its negation. This is the only thing that compiles on list fields.
* ``and``: each compilable child is pushed down, the others stay residual. ``or`` and
  ``not`` compile only when every part compiles, otherwise they stay residual whole.

Never compiled: ``~~`` (DynamoDB cannot fold case), list-field comparisons, references,
collections. The pushed-down expression is kept under ``max_expression_length`` characters
(DynamoDB allows 4 KB in total, leaving room for the caller's own conditions); top-level
``and`` children that do not fit stay residual, an ``or``/``not`` that does not fit alone
stays residual.
"""
from __future__ import annotations

import decimal
import operator
import re
from collections.abc import Iterable

from boto3.dynamodb.conditions import Attr, ConditionBase, ConditionExpressionBuilder

from chalicelib.kernel.query import ast
from chalicelib.kernel.query.ast import And, IsNull, Not, Or, make_and
from chalicelib.kernel.query.schema import LIST, Resolved

MAX_IN_OPERANDS = 100
DEFAULT_MAX_EXPRESSION_LENGTH = 3000

# DynamoDB type of a literal's kind, for attribute_type guards.
_DYNAMO_TYPE = {'string': 'S', 'number': 'N', 'boolean': 'BOOL'}
_STARS = re.compile(r'\*+')
_SEGMENT = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


def compile_filter(node: ast.Node | None, schema=None, root: str = 'data', *,
                   max_expression_length: int = DEFAULT_MAX_EXPRESSION_LENGTH,
                   ) -> tuple[ConditionBase | None, ast.Node | None]:
    """Split ``node`` into (DynamoDB condition or None, residual AST or None).

    The condition goes to ``FilterExpression`` (combine it with the caller's own conditions
    with ``&``); the residual, when not None, must be evaluated in memory on the returned
    items with ``evaluate(residual, item, ctx, root=root)``.

    Leaves carry their resolution from :func:`parse`, so ``schema`` is not consulted; it is
    accepted so callers can pass what they passed to ``parse``. Hand-built leaves without a
    target are plain ``any`` fields, exactly as :func:`evaluate` treats them.
    """
    if node is None:
        return None, None
    budget = _Budget(max_expression_length)
    pushed: list[ConditionBase] = []
    residual: list[ast.Node] = []
    for child in _conjuncts(node):
        condition = _compile(child, root)
        if condition is not None and budget.take(condition):
            pushed.append(condition)
        else:
            residual.append(child)
    condition = _balanced(operator.and_, pushed) if pushed else None
    return condition, (make_and(residual) if residual else None)


def _conjuncts(node: ast.Node) -> Iterable[ast.Node]:
    """The children of (nested) top-level Ands, in order."""
    if isinstance(node, And):
        for child in node.items:
            yield from _conjuncts(child)
    else:
        yield node


def _compile(node: ast.Node, root: str) -> ConditionBase | None:
    """An exact condition for ``node``, or None when DynamoDB cannot express it exactly."""
    if isinstance(node, (And, Or)):
        parts = [_compile(child, root) for child in node.items]
        if any(part is None for part in parts):
            return None
        return _balanced(operator.and_ if isinstance(node, And) else operator.or_, parts)
    if isinstance(node, Not):
        inner = _compile(node.item, root)
        return None if inner is None else ~inner
    return _compile_leaf(node, ast.target_of(node), root)


def _compile_leaf(node, target: Resolved, root: str) -> ConditionBase | None:
    if target.kind != 'field':
        return None
    segments = (root, target.head) + tuple(target.rest)
    if not all(_SEGMENT.fullmatch(segment) for segment in segments):
        return None  # hand-built path boto3 would misread ('a[0]', 'a.b' in one segment)
    attr = Attr('.'.join(segments))
    if isinstance(node, IsNull):
        is_null = attr.not_exists() | attr.attribute_type('NULL')
        return ~is_null if node.negated else is_null
    if target.type == LIST:
        return None
    op, value = node.op, node.value
    if op == ast.MATCH:
        return None
    if op == ast.LIKE:
        return _like(attr, value) if isinstance(value, str) else None
    if op == ast.IN:
        return _in(attr, value)
    kind = _kind(value)
    if kind is None:  # only possible in hand-built ASTs (e.g. a float literal)
        return None
    if op == ast.EQ:
        condition = attr.eq(value)
        if kind == 'string':
            return condition
        return attr.attribute_type(_DYNAMO_TYPE[kind]) & condition
    if op == ast.NE:
        return attr.attribute_type(_DYNAMO_TYPE[kind]) & attr.ne(value)
    if op in ast.ORDERING_OPS and kind in ('string', 'number'):
        method = {ast.LT: attr.lt, ast.LE: attr.lte, ast.GT: attr.gt, ast.GE: attr.gte}[op]
        return attr.attribute_type(_DYNAMO_TYPE[kind]) & method(value)
    return None


def _like(attr: Attr, pattern: str) -> ConditionBase | None:
    pattern = _STARS.sub('*', pattern)
    stars = pattern.count('*')
    if stars == 0:
        return attr.eq(pattern)
    if pattern == '*':
        return attr.attribute_type('S')
    if stars == 1 and pattern.endswith('*'):
        return attr.begins_with(pattern[:-1])
    if stars == 2 and pattern.startswith('*') and pattern.endswith('*'):
        return attr.attribute_type('S') & attr.contains(pattern[1:-1])
    return None


def _in(attr: Attr, values) -> ConditionBase | None:
    by_kind: dict[str, list] = {}
    for value in values:
        by_kind.setdefault(_kind(value), []).append(value)
    if None in by_kind:
        return None
    parts = []
    for kind, group in by_kind.items():
        chunks = [group[i:i + MAX_IN_OPERANDS] for i in range(0, len(group), MAX_IN_OPERANDS)]
        membership = _balanced(operator.or_, [attr.is_in(chunk) for chunk in chunks])
        parts.append(membership if kind == 'string'
                     else attr.attribute_type(_DYNAMO_TYPE[kind]) & membership)
    return _balanced(operator.or_, parts) if parts else None


def _balanced(combine, parts: list[ConditionBase]) -> ConditionBase:
    """``parts[0] op parts[1] op ...`` as a balanced tree.

    boto3 renders conditions recursively, so a left-deep chain of a few hundred parts would
    exceed Python's recursion limit; a balanced tree is only log2(n) deep. The rendered
    length and the placeholder order are the same for any tree shape.
    """
    if len(parts) == 1:
        return parts[0]
    middle = len(parts) // 2
    return combine(_balanced(combine, parts[:middle]), _balanced(combine, parts[middle:]))


def _kind(value) -> str | None:
    if isinstance(value, bool):
        return 'boolean'
    if isinstance(value, str):
        return 'string'
    if isinstance(value, int) or (isinstance(value, decimal.Decimal) and value.is_finite()):
        return 'number'
    return None


class _Budget:
    """Tracks the length of ``c1 AND c2 AND ...`` as boto3 will render it.

    boto3 gives every attribute-name part and every value its own numbered placeholder
    (``#n0``, ``:v0``, ...) in left-to-right order and renders ``a & b`` as ``(a AND b)``, so
    the length of the conjunction (whatever its tree shape) is the sum of the parts' fixed
    text, 7 characters per ``AND`` and the placeholders' lengths, whose numbers continue from
    one part to the next.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.length = 0
        self.names = 0
        self.values = 0

    def take(self, condition: ConditionBase) -> bool:
        built = ConditionExpressionBuilder().build_expression(condition)
        names = len(built.attribute_name_placeholders)
        values = len(built.attribute_value_placeholders)
        fixed = (len(built.condition_expression)
                 - sum(map(len, built.attribute_name_placeholders))
                 - sum(map(len, built.attribute_value_placeholders)))
        length = (self.length + fixed + (7 if self.length else 0)
                  + _placeholders_length(self.names, names)
                  + _placeholders_length(self.values, values))
        if length > self.limit:
            return False
        self.length, self.names, self.values = length, self.names + names, self.values + values
        return True


def _placeholders_length(start: int, count: int) -> int:
    """Total length of placeholders ``#n{start}`` .. ``#n{start + count - 1}``."""
    return sum(2 + len(str(index)) for index in range(start, start + count))
