"""Field declarations: the vocabulary the resource registry is written in.

A family's fields are declared once as compact text, e.g.::

    "name! description slug active:bool=true priority:int? ownerId>users?"

Token grammar: ``name[:type[(Shape)]][?][!][=default][>family][@Enum]``
  type      string (default), bool, int, number, datetime, object, any, strings, array
  (Shape)   the value (for ``array``: each element) has a named shape (kernel/shapes.py, declared by
            a feature): validated on write, declared as a named OpenAPI schema
  ?         nullable: the field accepts null (null clears it)
  !         required on create
  =default  server default applied on create when the field is omitted
  >family   the value is the id of a record of that family (checked to exist on write)
  @Enum     the value is one of a named enumeration (see ENUMS)

Shapes and enumerations are declared by the features, beside their families (``SHAPES`` and
``ENUMS`` of chalicelib/features/*/declarations.py), and installed with them
(kernel/registry.py ``install``): the kernel holds only the generic ones.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chalicelib.kernel.shapes import SHAPES

TYPES = {'string', 'bool', 'int', 'number', 'datetime', 'object', 'any', 'strings', 'array'}

# Named enumerations (also exported as OpenAPI components): the kernel's own, then the features'
# (``ENUMS`` of their declarations.py, installed by ``install_enums``).
ENUMS: dict[str, tuple[str, ...]] = {
    'SortDirection': ('ASC', 'DESC'),
    'AuditAction': ('CREATE', 'UPDATE', 'DELETE'),
}
_KERNEL_ENUMS = frozenset(ENUMS)

# Input values accepted for an enumeration and stored as another (the features' ``ENUM_ALIASES``:
# the contract's TODO -> OPEN of tasks).
ENUM_ALIASES: dict[str, dict[str, str]] = {}


@dataclass(frozen=True)
class Retired:
    """A value an enumeration no longer has (the features' ``ENUM_RETIRED``): written or filtered
    on, it is a 400 saying ``hint`` (what replaces it); a stored record still holding it is
    answered as ``value`` with the fields ``also`` set (kernel/embedding.py ``presented``), until
    an ops migration rewrites it."""
    value: str
    hint: str
    also: tuple[tuple[str, Any], ...] = ()


ENUM_RETIRED: dict[str, dict[str, Retired]] = {}


def retired_value(enum: str | None, value: Any) -> Retired | None:
    """The retirement of ``value`` in the enumeration ``enum``, if it is a retired value."""
    return ENUM_RETIRED.get(enum, {}).get(value) if enum and isinstance(value, str) else None


def install_enums(enums: dict[str, tuple[str, ...]], aliases: dict[str, dict[str, str]],
                  retired: dict[str, dict[str, Retired]] | None = None) -> None:
    """Install the features' enumerations, their input aliases and retired values
    (kernel/registry.py ``install``). A name declared twice, an alias of an unknown enumeration or
    to a value it lacks, a retired value still in its enumeration or answered as one it lacks,
    raises; a second install of the same ones changes nothing."""
    retired = retired or {}
    clash = _KERNEL_ENUMS & set(enums)
    if clash:
        raise ValueError(f'an enumeration is declared twice: {sorted(clash)}')
    for name, mapping in aliases.items():
        if name not in enums or not set(mapping.values()) <= set(enums[name]):
            raise ValueError(f'aliases of {name!r} must map to values of a declared enumeration')
    for name, mapping in retired.items():
        if name not in enums or set(mapping) & set(enums[name]) or \
                not {r.value for r in mapping.values()} <= set(enums[name]):
            raise ValueError(f'retired values of {name!r} must be out of the enumeration and answered as one of it')
    installed = {k: v for k, v in ENUMS.items() if k not in _KERNEL_ENUMS}
    if installed:
        if installed != enums or ENUM_ALIASES != aliases or ENUM_RETIRED != retired:
            raise ValueError('the enumerations are installed already, with other declarations')
        return
    ENUMS.update(enums)
    ENUM_ALIASES.update(aliases)
    ENUM_RETIRED.update(retired)


INT32 = (-2 ** 31, 2 ** 31 - 1)


@dataclass(frozen=True)
class Field:
    name: str
    type: str = 'string'
    nullable: bool = False
    required: bool = False
    default: Any = None
    ref: str | None = None
    enum: str | None = None
    shape: str | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not None


_TOKEN = re.compile(
    r'^(?P<name>[A-Za-z_][A-Za-z0-9_]*)'
    r'(?::(?P<type>[a-z]+)(?:\((?P<shape>[A-Za-z]+)\))?)?'
    r'(?P<flags>[?!]*)'
    r'(?:=(?P<default>[^>@]+))?'
    r'(?:>(?P<ref>[a-z-]+))?'
    r'(?:@(?P<enum>[A-Za-z]+))?'
    r'(?P<flags2>[?!]*)$')


def _default(text: str | None, type_: str) -> Any:
    if text is None:
        return None
    if type_ == 'bool':
        return text == 'true'
    if type_ == 'int':
        return int(text)
    return text


def parse_fields(spec: str) -> tuple[Field, ...]:
    out = []
    for token in spec.split():
        m = _TOKEN.match(token)
        if not m:
            raise ValueError(f'bad field token {token!r}')
        type_ = m['type'] or 'string'
        if type_ not in TYPES:
            raise ValueError(f'bad field type in {token!r}')
        flags = (m['flags'] or '') + (m['flags2'] or '')
        enum = m['enum']
        if enum and enum not in ENUMS:
            raise ValueError(f'unknown enum in {token!r}')
        if m['shape'] and m['shape'] not in SHAPES:
            raise ValueError(f'unknown shape in {token!r}')
        out.append(Field(name=m['name'], type=type_, nullable='?' in flags, required='!' in flags,
                         default=_default(m['default'], type_), ref=m['ref'], enum=enum,
                         shape=m['shape']))
    return tuple(out)
