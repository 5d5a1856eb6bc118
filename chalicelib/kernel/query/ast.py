"""Filter AST: small immutable nodes produced by :func:`chalicelib.kernel.query.parser.parse`.

Leaves carry the ``target`` the parser resolved their path to (a
:class:`chalicelib.kernel.query.schema.Resolved`: field / reference / collection and the type); it is
what the evaluator and the DynamoDB compiler dispatch on. A leaf built by hand without a
target is treated as a plain field of type ``any``.

Literal values are ``str``, ``int``, ``decimal.Decimal`` or ``bool``; datetime literals have
already been normalised to the canonical UTC text form; ``=in=`` carries a tuple of values.
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass, field

from chalicelib.kernel.query.schema import ANY, Resolved

Scalar = str | int | decimal.Decimal | bool

EQ, NE, GT, GE, LT, LE = '==', '!=', '>', '>=', '<', '<='
LIKE, IN, MATCH = '=like=', '=in=', '~~'
ORDERING_OPS = frozenset({GT, GE, LT, LE})
COMPARE_OPS = frozenset({EQ, NE, GT, GE, LT, LE, LIKE, IN, MATCH})


@dataclass(frozen=True)
class Compare:
    """``path op value``; for ``=in=`` the value is a tuple of scalars."""

    path: tuple[str, ...]
    op: str
    value: Scalar | tuple[Scalar, ...]
    target: Resolved | None = field(default=None, repr=False)


@dataclass(frozen=True)
class IsNull:
    """``path is null`` (``negated=False``) or ``path is not null`` (``negated=True``)."""

    path: tuple[str, ...]
    negated: bool = False
    target: Resolved | None = field(default=None, repr=False)


@dataclass(frozen=True)
class And:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    item: Node


Node = Compare | IsNull | And | Or | Not


def target_of(leaf: Compare | IsNull) -> Resolved:
    """The leaf's resolution; a hand-built leaf without one is a plain field of type 'any'."""
    if leaf.target is not None:
        return leaf.target
    return Resolved('field', ANY, leaf.path[0], tuple(leaf.path[1:]))


def make_and(items) -> Node:
    """Conjunction of ``items``, flattening nested Ands; a single item is returned as is."""
    flat: list[Node] = []
    for item in items:
        flat.extend(item.items if isinstance(item, And) else (item,))
    if not flat:
        raise ValueError('make_and needs at least one item')
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def make_or(items) -> Node:
    """Disjunction of ``items``, flattening nested Ors; a single item is returned as is."""
    flat: list[Node] = []
    for item in items:
        flat.extend(item.items if isinstance(item, Or) else (item,))
    if not flat:
        raise ValueError('make_or needs at least one item')
    return flat[0] if len(flat) == 1 else Or(tuple(flat))
