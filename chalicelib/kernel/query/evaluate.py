"""In-memory evaluation of a filter AST. This is the reference semantics (and the test oracle).

The logic is two-valued; every leaf is simply true or false:

* Missing and null are the same. A comparison (any operator, ``!=`` included) against a
  missing or null value is false; ``is null`` is true exactly for missing or null values and
  ``is not null`` is its negation. ``not(x)`` is plain negation, so ``not(a == 1)`` is true
  when ``a`` is missing.
* Values are of one of three kinds: string, number (``int``, ``float`` or ``Decimal``, never
  ``bool``; floats count as their shortest decimal representation, NaN/infinity as no number)
  and boolean. Comparing values of different kinds is false, for every operator. Objects and
  lists (outside list fields) have no kind, so comparisons with them are false.
* Numbers compare numerically (``1 == Decimal('1.0')``); strings by code point, which is the
  UTF-8 byte order DynamoDB uses; booleans only with ``==``/``!=``/``=in=``. Datetime fields
  hold canonical UTC text and their literals were normalised by the parser, so comparing the
  text compares the instants.
* ``=like=``: case-sensitive whole-value match of a string where ``*`` matches any run of
  characters (there is no escape for a literal ``*``).
* ``~~``: case-insensitive (``str.casefold``) match of a string; without ``*`` the pattern
  matches anywhere in the value (as ``*pat*``), with ``*`` it is a whole-value wildcard match.
* ``=in=``: equal (as ``==``) to one of the values.
* List fields (type ``list``): ``==``, ``=in=`` and ``~~`` hold when at least one element
  matches; ``is null`` is true for a missing or null list (an empty list is not null). A
  non-list value in a list field is treated as a one-element list.
* References: the path after the head is looked up in ``ctx.reference(item, head)``; no
  referenced record means the value is missing.
* Collections: a leaf holds when at least one record of ``ctx.collection(item, head)``
  satisfies it, so ``is null`` means "some record has no value" and an empty collection makes
  every leaf false. Each leaf is its own existential: ``memberTask.a == 1 and memberTask.b == 2``
  may be satisfied by two different records; ``not(memberTask.x == 'a')`` means no record
  has ``x == 'a'``.
"""
from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any

from chalicelib.kernel.query import ast
from chalicelib.kernel.query.ast import And, Compare, IsNull, Not, Or
from chalicelib.kernel.query.schema import LIST, NULL_CONTEXT, Resolved

_MISSING = object()


def evaluate(node: ast.Node | None, item: Mapping[str, Any], ctx=NULL_CONTEXT, *,
             root: str | None = None) -> bool:
    """Whether ``item`` satisfies the filter ``node`` (``None``, no filter, is always true).

    ``item`` is the record's field dict. When its fields live under a map attribute (a stored
    DynamoDB item ``{'pk': ..., 'data': {...}}``), pass ``root='data'``. ``ctx`` provides
    referenced records and collections; it receives ``item`` exactly as given here.
    """
    if node is None:
        return True
    fields = item.get(root, _MISSING) if root is not None else item
    if not isinstance(fields, Mapping):
        fields = {}
    return _eval(node, item, fields, ctx)


def _eval(node, item, fields, ctx) -> bool:
    if isinstance(node, And):
        return all(_eval(child, item, fields, ctx) for child in node.items)
    if isinstance(node, Or):
        return any(_eval(child, item, fields, ctx) for child in node.items)
    if isinstance(node, Not):
        return not _eval(node.item, item, fields, ctx)
    target = ast.target_of(node)
    values = _values(target, item, fields, ctx)
    if isinstance(node, IsNull):
        return any((value is _MISSING or value is None) != node.negated for value in values)
    if isinstance(node, Compare):
        if target.type == LIST:
            return any(_compare_list(node.op, value, node.value) for value in values)
        return any(_compare(node.op, value, node.value) for value in values)
    raise TypeError(f'not a filter node: {node!r}')


def _values(target: Resolved, item, fields, ctx) -> Iterable[Any]:
    """The candidate values of a leaf: one for fields and references, one per record of a
    collection (the leaf holds if it holds for any of them)."""
    if target.kind == 'field':
        return (_walk(fields, (target.head,) + tuple(target.rest)),)
    if target.kind == 'reference':
        record = ctx.reference(item, target.head)
        return (_walk(record, target.rest) if record is not None else _MISSING,)
    if target.kind == 'collection':
        return (_walk(record, target.rest) for record in ctx.collection(item, target.head) or ())
    raise ValueError(f'unknown target kind {target.kind!r}')


def _walk(value, path) -> Any:
    for segment in path:
        if not isinstance(value, Mapping) or segment not in value:
            return _MISSING
        value = value[segment]
    return value


def _kind(value) -> str | None:
    if isinstance(value, bool):
        return 'boolean'
    if isinstance(value, str):
        return 'string'
    if isinstance(value, int):
        return 'number'
    if isinstance(value, decimal.Decimal):
        return 'number' if value.is_finite() else None
    if isinstance(value, float):
        return 'number' if math.isfinite(value) else None
    return None


def _as_number(value):
    # A float counts as its shortest repr, which is what storing it via str() keeps.
    return decimal.Decimal(repr(value)) if isinstance(value, float) else value


def _compare_list(op: str, value, literal) -> bool:
    if value is _MISSING or value is None:
        return False
    elements = value if isinstance(value, (list, tuple)) else (value,)
    return any(_compare(op, element, literal) for element in elements)


def _compare(op: str, value, literal) -> bool:
    if value is _MISSING or value is None:
        return False
    if op == ast.IN:
        return any(_compare(ast.EQ, value, option) for option in literal)
    kind = _kind(value)
    if kind is None or kind != _kind(literal):
        return False
    if op == ast.LIKE:
        return _glob(literal, value)
    if op == ast.MATCH:
        return _contains_match(literal, value)
    if kind == 'number':
        value = _as_number(value)
    if op == ast.EQ:
        return value == literal
    if op == ast.NE:
        return value != literal
    if kind == 'boolean':  # booleans are not ordered (the parser refuses this anyway)
        return False
    if op == ast.LT:
        return value < literal
    if op == ast.LE:
        return value <= literal
    if op == ast.GT:
        return value > literal
    if op == ast.GE:
        return value >= literal
    raise ValueError(f'unknown operator {op!r}')


def _contains_match(pattern: str, value: str) -> bool:
    folded_pattern, folded = _fold(pattern), value.casefold()
    if '*' not in folded_pattern:
        return folded_pattern in folded
    return _glob(folded_pattern, folded)


@functools.lru_cache(maxsize=256)
def _fold(pattern: str) -> str:
    return pattern.casefold()


def _glob(pattern: str, value: str) -> bool:
    """Whole-value match where ``*`` matches any run of characters; linear-ish, no regex.

    The first piece must be a prefix and the last a suffix (not overlapping the prefix); the
    pieces in between are found left to right, each as early as possible, which is optimal
    because ``*`` can absorb anything.
    """
    pieces = pattern.split('*')
    if len(pieces) == 1:
        return value == pattern
    first, middle, last = pieces[0], pieces[1:-1], pieces[-1]
    end = len(value) - len(last)
    if end < len(first) or not value.startswith(first) or not value.endswith(last):
        return False
    pos = len(first)
    for piece in middle:
        if piece:
            found = value.find(piece, pos, end)
            if found < 0:
                return False
            pos = found + len(piece)
    return True
