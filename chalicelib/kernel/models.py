"""Pydantic models built from the registry's field declarations (lazily, once per family).

``input_model(family)`` validates the fields of a create or update body: every writable field
optional and nullable at the type level (null and required-ness are rules of the service,
checked against the declaration), strict types (no "1" for an integer, no 1 for a boolean),
int32 integers, canonical date-times, enumerations with their accepted aliases.
"""
from __future__ import annotations

import uuid
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    create_model,
)
from pydantic import Field as PField

from chalicelib.core.clock import normalize_instant
from chalicelib.kernel.fields import ENUM_ALIASES, ENUMS, INT32, Field, retired_value
from chalicelib.kernel.registry import COMMON_FIELDS, FAMILIES, Family
from chalicelib.kernel.shapes import SHAPES

MAX_STRING = 100_000


def _instant(value: str) -> str:
    try:
        return normalize_instant(value)
    except (ValueError, OverflowError):
        raise ValueError('must be an ISO 8601 date-time') from None


def _enum_type(name: str):
    aliases = ENUM_ALIASES.get(name, {})

    def _alias(value: Any) -> Any:
        retired = retired_value(name, value)
        if retired is not None:   # no longer a value: say what replaces it (kernel/fields.py Retired)
            raise ValueError(f'{value!r} is no longer a value of {name}: {retired.hint}')
        return aliases.get(value, value) if isinstance(value, str) else value
    return Annotated[Literal[ENUMS[name]], BeforeValidator(_alias)]


def python_type(f: Field) -> Any:
    if f.enum:
        return _enum_type(f.enum)
    if f.shape:
        return _shaped_type(f)
    embedded = embedded_family(f)
    if embedded is not None:
        return _embedded_type(embedded)
    return _base_type(f)


def _base_type(f: Field) -> Any:
    return {
        'string': Annotated[StrictStr, PField(max_length=MAX_STRING)],
        'bool': StrictBool,
        'int': Annotated[StrictInt, PField(ge=INT32[0], le=INT32[1])],
        'number': StrictInt | StrictFloat,
        'datetime': Annotated[StrictStr, AfterValidator(_instant)],
        'object': dict[str, Any],
        'any': Any,
        'strings': list[Annotated[StrictStr, PField(max_length=MAX_STRING)]],
        'array': list[Any],
    }[f.type]


def _shaped_type(f: Field) -> Any:
    """The field's base type, then its shape's rules (kernel/shapes.py): on the value, or on each
    element of an array and then across them."""
    shape = SHAPES[f.shape]

    def check(value: Any) -> Any:
        if f.type != 'array':
            return shape.check(value)
        checked = [shape.check(item) for item in value]
        if shape.check_all is not None:
            shape.check_all(checked)
        return checked
    return Annotated[_base_type(f), AfterValidator(check)]


# ----------------------------------------------------------------------------- embedded records
# An object field named after a family (documentStatus, productGroup, product, featureType,
# knowledgeItemType) holds a whole record of that family: the contract's "full DocumentStatus
# object", described in OpenAPI as that family's <Entity> schema. It is checked as one on write
# (the fields every record carries, declared field types, UUID ids), and stored as sent, with
# date-times and enumeration aliases normalised like top-level fields.

def always_present(family: Family) -> tuple[str, ...]:
    """Fields every stored record of ``family`` carries (the OpenAPI <Entity> ``required``):
    the common fields, ownership, and non-nullable fields that are required or have a default."""
    names = [f.name for f in COMMON_FIELDS] + [f.name for f in family.ownership_fields]
    names += [f.name for f in family.own_fields
              if not f.nullable and (f.has_default or f.required) and f.name not in names]
    return tuple(names)


def embedded_family(f: Field) -> Family | None:
    if f.type != 'object':
        return None
    for family in FAMILIES:
        if family.entity[0].lower() + family.entity[1:] == f.name:
            return family
    return None


def _uuid_text(value: str) -> str:
    try:
        uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise ValueError('must be a UUID') from None
    return value


@cache
def embedded_model(family: Family) -> type[BaseModel]:
    required = {'id'}  # the server resolves the rest from the stored record (kernel/crud.py)
    fields: dict[str, Any] = {}
    for name, f in family.fields.items():
        type_ = python_type(f)
        if name == 'id' or f.ref:
            type_ = Annotated[StrictStr, AfterValidator(_uuid_text)]
        if name not in required:   # null on input is "not given" (kernel/references.py); read by id anyway
            type_ = type_ | None
        fields[name] = (type_, ...) if name in required else (type_, None)
    return create_model(f'{family.entity}Embedded', __config__=ConfigDict(extra='allow'), **fields)


def _embedded_type(family: Family) -> Any:
    def check(value: dict[str, Any]) -> dict[str, Any]:
        try:
            record = embedded_model(family).model_validate(value)
        except ValidationError as exc:
            problems = '; '.join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3])
            raise ValueError(f'must be a {family.entity} ({problems})') from None
        return record.model_dump(exclude_unset=True)
    return Annotated[dict[str, Any], AfterValidator(check)]


@cache
def input_model(family: Family) -> type[BaseModel]:
    fields = {f.name: (python_type(f) | None, None) for f in family.writable.values()}
    return create_model(f'{family.entity}Input', __config__=ConfigDict(extra='ignore'), **fields)
