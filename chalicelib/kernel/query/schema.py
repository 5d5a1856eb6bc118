"""What a filter path means: the schema protocol, the evaluation context, a dict-based schema.

The parser asks a :class:`FilterSchema` to resolve every dotted path. The answer says where
the value lives and what type it has:

* ``kind='field'``: a field of the item itself, looked up by walking nested dicts of the
  item's data (``head`` is the first segment, ``rest`` the others).
* ``kind='reference'``: ``head`` names a referenced record (``project.name``); the evaluator
  asks ``ctx.reference(item, head)`` for it and walks ``rest`` inside it.
* ``kind='collection'``: ``head`` names a collection of related records
  (``memberTask.statusSlug``); the evaluator asks ``ctx.collection(item, head)`` and the leaf
  holds when at least one record satisfies it on ``rest``.

``type`` is one of :data:`TYPES`. ``any`` stands for free-form data (objects and everything
below them) and accepts every operator and literal.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

STRING, BOOLEAN, INTEGER, NUMBER, DATETIME, ANY, LIST = (
    'string', 'boolean', 'integer', 'number', 'datetime', 'any', 'list')
TYPES = frozenset({STRING, BOOLEAN, INTEGER, NUMBER, DATETIME, ANY, LIST})
KINDS = frozenset({'field', 'reference', 'collection'})

# Spellings DictSchema accepts for a field type, mapped to the resolved type.
_TYPE_ALIASES = {
    'string': STRING, 'boolean': BOOLEAN, 'integer': INTEGER, 'number': NUMBER,
    'datetime': DATETIME, 'any': ANY, 'object': ANY, 'list': LIST, 'array': LIST,
    'string[]': LIST,
}


@dataclass(frozen=True)
class Resolved:
    kind: str  # 'field' | 'reference' | 'collection'
    type: str  # one of TYPES
    head: str
    rest: tuple[str, ...]


class FilterSchema(Protocol):
    def resolve(self, path: tuple[str, ...]) -> Resolved | None:
        """Resolve a dotted path; ``None`` means the field is unknown."""

    # Optional: ``canonical(path) -> path`` rewrites a path to the one it stands for before it
    # is resolved (a schema may say that ``project.id`` is the field ``projectId``).


class FilterContext(Protocol):
    """Access to records related to the item being evaluated."""

    def reference(self, item: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
        """The record ``item`` refers to by ``name``, or None when there is none."""

    def collection(self, item: Mapping[str, Any], name: str) -> Iterable[Mapping[str, Any]]:
        """The related records of ``item`` named ``name`` (possibly empty)."""


class NullContext:
    """A context without related records: no references, empty collections."""

    def reference(self, item, name):
        return None

    def collection(self, item, name):
        return ()


NULL_CONTEXT = NullContext()


class DictSchema:
    """A schema from plain dicts (tests, simple resources).

    ``fields`` maps a field name to its type (see ``_TYPE_ALIASES``: ``object``/``any`` allow
    any sub-path, of type ``any``; ``array``/``string[]`` mean ``list``). A key may itself be a
    dotted path (``'documentStatus.status': 'string'``) to type a nested field; the longest
    declared prefix of a path decides. ``references`` and ``collections`` map a name to the
    schema of the related records; only plain fields of those records can be filtered on.
    """

    def __init__(self, fields: Mapping[str, str],
                 references: Mapping[str, DictSchema] | None = None,
                 collections: Mapping[str, DictSchema] | None = None):
        self.fields = {}
        for name, type_name in fields.items():
            if type_name not in _TYPE_ALIASES:
                raise ValueError(f'unknown field type {type_name!r} for {name!r}')
            self.fields[name] = _TYPE_ALIASES[type_name]
        self.references = dict(references or {})
        self.collections = dict(collections or {})
        heads = {name.split('.')[0] for name in self.fields}
        clash = (heads & set(self.references)) | (heads & set(self.collections)) | (
            set(self.references) & set(self.collections))
        if clash:
            raise ValueError(f'names used twice in the schema: {sorted(clash)}')

    def resolve(self, path: tuple[str, ...]) -> Resolved | None:
        if not path:
            return None
        head, rest = path[0], tuple(path[1:])
        for related, kind in ((self.references, 'reference'), (self.collections, 'collection')):
            if head in related:
                sub = related[head].resolve(rest) if rest else None
                if sub is None or sub.kind != 'field':
                    return None
                return Resolved(kind, sub.type, head, rest)
        # Longest declared prefix wins: an exact match gives its type, an any/object prefix
        # types everything below it as 'any', any other prefix cannot have children.
        for end in range(len(path), 0, -1):
            declared = self.fields.get('.'.join(path[:end]))
            if declared is None:
                continue
            if end == len(path):
                return Resolved('field', declared, head, rest)
            return Resolved('field', ANY, head, rest) if declared == ANY else None
        return None
