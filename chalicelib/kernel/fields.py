"""Field declarations: the vocabulary the resource registry is written in.

A family's fields are declared once as compact text, e.g.::

    "name! description slug active:bool=true priority:int? ownerId>users?"

Token grammar: ``name[:type[(Shape)]][?][!][=default][>family][@Enum]``
  type      string (default), bool, int, number, datetime, object, any, strings, array
  (Shape)   the value (for ``array``: each element) has a named shape of kernel/shapes/__init__.py:
            validated on write, declared as a named OpenAPI schema
  ?         nullable: the field accepts null (null clears it)
  !         required on create
  =default  server default applied on create when the field is omitted
  >family   the value is the id of a record of that family (checked to exist on write)
  @Enum     the value is one of a named enumeration (see ENUMS)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chalicelib.kernel.shapes import SHAPE_NAMES
from chalicelib.kernel.shapes.bridges import METHODS

TYPES = {'string', 'bool', 'int', 'number', 'datetime', 'object', 'any', 'strings', 'array'}

# Named enumerations (also exported as OpenAPI components).
ENUMS: dict[str, tuple[str, ...]] = {
    'TaskStatusType': ('OPEN', 'IN_PROGRESS', 'DONE', 'BLOCKED', 'PENDING'),
    'ExecutionStatus': ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'),
    'ExecutionStatusMessageType': ('INFO', 'WARNING', 'ERROR'),
    'SortDirection': ('ASC', 'DESC'),
    'AuditAction': ('CREATE', 'UPDATE', 'DELETE'),
    'ChatMessageRole': ('USER', 'ASSISTANT', 'SYSTEM', 'TOOL'),
    'WebLlmModelSize': ('SMALL', 'MEDIUM', 'LARGE'),
    'MembershipRole': ('PLATFORM_ADMIN', 'MANAGE', 'MEMBER', 'VIEWER'),
    'MembershipStatus': ('ACTIVE', 'INVITED'),
    'LinkedDeltaState': ('PENDING', 'APPLIED', 'APPLIED_PARTIAL', 'FAILED'),
    'OrganizationStatus': ('ACTIVE', 'SUSPENDED'),
    'ActivityStatus': ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED'),
    'ServiceBridgeMethod': METHODS,
    'ScheduleTargetType': ('ACTIVITY_PLAN',),
}

# Input values accepted for an enumeration and stored as another (contract: TODO -> OPEN).
ENUM_ALIASES: dict[str, dict[str, str]] = {'TaskStatusType': {'TODO': 'OPEN'}}

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
        if m['shape'] and m['shape'] not in SHAPE_NAMES:
            raise ValueError(f'unknown shape in {token!r}')
        out.append(Field(name=m['name'], type=type_, nullable='?' in flags, required='!' in flags,
                         default=_default(m['default'], type_), ref=m['ref'], enum=enum,
                         shape=m['shape']))
    return tuple(out)
