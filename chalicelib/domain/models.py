"""Pydantic models built from the registry's field declarations (lazily, once per family).

``input_model(family)`` validates the fields of a create or update body: every writable field
optional and nullable at the type level (null and required-ness are rules of the service,
checked against the declaration), strict types (no "1" for an integer, no 1 for a boolean),
int32 integers, canonical date-times, enumerations with their accepted aliases.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field as PField,
                      StrictBool, StrictFloat, StrictInt, StrictStr, create_model)

from chalicelib.core.clock import normalize_instant

from .fields import ENUM_ALIASES, ENUMS, INT32, Field
from .registry import Family

MAX_STRING = 100_000


def _instant(value: str) -> str:
    try:
        return normalize_instant(value)
    except (ValueError, OverflowError):
        raise ValueError('must be an ISO 8601 date-time') from None


def _enum_type(name: str):
    aliases = ENUM_ALIASES.get(name, {})

    def _alias(value: Any) -> Any:
        return aliases.get(value, value) if isinstance(value, str) else value
    return Annotated[Literal[ENUMS[name]], BeforeValidator(_alias)]


def python_type(f: Field) -> Any:
    if f.enum:
        return _enum_type(f.enum)
    return {
        'string': Annotated[StrictStr, PField(max_length=MAX_STRING)],
        'bool': StrictBool,
        'int': Annotated[StrictInt, PField(ge=INT32[0], le=INT32[1])],
        'number': Union[StrictInt, StrictFloat],
        'datetime': Annotated[StrictStr, AfterValidator(_instant)],
        'object': dict[str, Any],
        'any': Any,
        'strings': list[Annotated[StrictStr, PField(max_length=MAX_STRING)]],
        'array': list[Any],
    }[f.type]


@lru_cache(maxsize=None)
def input_model(family: Family) -> type[BaseModel]:
    fields = {f.name: (Optional[python_type(f)], None) for f in family.writable.values()}
    return create_model(f'{family.entity}Input', __config__=ConfigDict(extra='ignore'), **fields)
