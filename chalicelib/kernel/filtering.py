"""Bridges the filter language (chalicelib/kernel/query) to a family's list: the registry as the
filter schema, related records for references (``project.name``) and collections
(``memberTask.statusSlug``), and the plan a list decides with (evaluated on the records it
reads: no index projects records, so nothing is filtered inside DynamoDB; docs/scale.md
"Projections").

A reference path resolves only a record the caller may see (the same rule as a GET of it:
kernel/crud.py ``visible``); any other behaves as missing, so a filter can never read a
field of a record the caller could not read directly."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import budget
from chalicelib.core.errors import BadRequest
from chalicelib.core.principal import Principal
from chalicelib.kernel import access, crud
from chalicelib.kernel.fields import retired_value
from chalicelib.kernel.query import (
    And,
    Compare,
    FilterError,
    Not,
    Or,
    Resolved,
    evaluate,
    parse,
)
from chalicelib.kernel.query.ast import make_and
from chalicelib.kernel.registry import Family
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table

_TYPES = {'string': 'string', 'bool': 'boolean', 'int': 'integer', 'number': 'number',
          'datetime': 'datetime', 'object': 'any', 'any': 'any', 'strings': 'list', 'array': 'list'}


class RegistrySchema:
    """Resolve filter paths against a family's declared fields, references and collections."""

    def __init__(self, family: Family, nested: bool = True) -> None:
        self.family = family
        self.nested = nested

    def _field(self, path: tuple[str, ...]):
        spec = self.family.fields.get(path[0])
        if spec is None:
            return None
        kind = _TYPES[spec.type]
        if len(path) > 1 and kind != 'any':
            return None
        return Resolved('field', kind, path[0], tuple(path[1:]))

    def canonical(self, path: tuple[str, ...]) -> tuple[str, ...]:
        """``project.id`` is the reference field ``projectId`` itself (the legacy spelling
        ``organization.id: '...'`` then pins a list to one partition like ``organizationId``)."""
        if self.nested and len(path) == 2 and path[1] == 'id' and path[0] in self.family.references:
            return (self.family.references[path[0]][0],)
        return path

    def resolve(self, path: tuple[str, ...]):
        found = self._field(path)
        if found is not None or not self.nested or len(path) < 2:
            return found
        head, rest = path[0], tuple(path[1:])
        if head in self.family.references:
            target = RegistrySchema(family_of(self.family.references[head][1]), nested=False).resolve(rest)
            return None if target is None else Resolved('reference', target.type, head, rest)
        if head in self.family.collections:
            target = RegistrySchema(family_of(self.family.collections[head][0]), nested=False).resolve(rest)
            return None if target is None else Resolved('collection', target.type, head, rest)
        return None


@dataclass
class RelatedRecords:
    """Evaluation context: fetches referenced records and collections once per request."""
    family: Family
    tenants: list[str]
    principal: Principal
    _refs: dict[tuple[str, str], Any] = field(default_factory=dict)
    _collections: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)

    def reference(self, item: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
        id_field, target = self.family.references[name]
        ref_id = item.get(id_field)
        if not isinstance(ref_id, str):
            return None
        key = (target, ref_id)
        if key not in self._refs:
            stored = table.get(target, ref_id, consistent=False)
            self._refs[key] = stored.data if stored is not None and self._visible(target, stored) else None
        return self._refs[key]

    def _visible(self, path: str, stored: table.Stored) -> bool:
        """What a GET of it would allow: visible, and not of a suspended organization."""
        return crud.visible(family_of(path), self.principal, stored) and \
            not access.suspended(self.principal, [stored.org])

    def collection(self, item: Mapping[str, Any], name: str) -> Iterable[Mapping[str, Any]]:
        if name not in self._collections:
            target, fk = self.family.collections[name]
            groups: dict[str, list[dict[str, Any]]] = {}
            for tenant in self.tenants:
                for n, member in enumerate(table.query_tenant(target, tenant, has_field=fk)):
                    if n % 256 == 0:
                        budget.check(f'reading the {name} collection ({target}) for a filter')
                    groups.setdefault(member[fk], []).append(member)
            self._collections[name] = groups
        return self._collections[name].get(item.get('id'), [])


@dataclass
class FilterPlan:
    node: Any = None
    context: Any = None

    @property
    def is_empty(self) -> bool:
        return self.node is None

    def bind(self, context: RelatedRecords) -> None:
        self.context = context

    def matches(self, item: dict[str, Any]) -> bool:
        """Does the item pass the filter?"""
        if self.node is None:
            return True
        return evaluate(self.node, item, self.context)

    def only_pins(self, name: str) -> bool:
        """Is the whole filter one ``name == '...'`` comparison (redundant once pinned)?"""
        return (isinstance(self.node, Compare) and self.node.op == '==' and self.node.path == (name,)
                and isinstance(self.node.value, str))

    def pinned(self, name: str) -> str | None:
        """The value of a top-level ``name == '...'`` conjunct (it selects one partition)."""
        leaves = self.node.items if isinstance(self.node, And) else (self.node,)
        for leaf in leaves:
            if (isinstance(leaf, Compare) and leaf.op == '==' and leaf.path == (name,)
                    and isinstance(leaf.value, str)):
                return leaf.value
        return None


def plan_for(family: Family, filters: list[str]) -> FilterPlan:
    if not filters:
        return FilterPlan()
    schema = RegistrySchema(family)
    nodes = []
    for index, text in enumerate(filters):
        try:
            nodes.append(parse(text, schema))
        except FilterError as exc:
            where = f' (filter #{index + 1})' if len(filters) > 1 else ''
            raise BadRequest(f'Invalid filter{where}: {exc}') from None
    for node in nodes:
        _refuse_retired(family, node)
    return FilterPlan(node=make_and(nodes))


def _refuse_retired(family: Family, node) -> None:
    """A comparison with a value its field's enumeration retired is a 400 saying what replaces it
    (kernel/fields.py ``Retired``): it would match nothing, silently."""
    if isinstance(node, (And, Or)):
        for item in node.items:
            _refuse_retired(family, item)
    elif isinstance(node, Not):
        _refuse_retired(family, node.item)
    elif isinstance(node, Compare) and len(node.path) == 1:
        spec = family.fields.get(node.path[0])
        for value in node.value if isinstance(node.value, tuple) else (node.value,):
            retired = retired_value(spec.enum if spec else None, value)
            if retired is not None:
                raise BadRequest(f'Invalid filter: {value!r} is no longer a value of {node.path[0]}: {retired.hint}')
