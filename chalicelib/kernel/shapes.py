"""Named shapes of structured field values: what a registry field declared as
``endpoints:array(ServiceBridgeEndpoint)`` or ``baseUrl:string(ServiceBridgeBaseUrl)`` holds.

The kernel holds the mechanism only; each feature declares its shapes beside its families, in its
``declarations.py`` (``SHAPES``: the bridges' in features/bridges/shapes.py, a plan's steps and
schedules in features/work/, extraction's taxons in features/extraction/shapes.py), and
chalicelib/features/__init__.py installs them with the families (kernel/registry.py ``install``).

A shape is used three ways:
  * validation on write (kernel/models.py runs ``check`` on the value, or on each element of an
    array field, then ``check_all`` on the whole array);
  * the OpenAPI document (kernel/http/openapi.py publishes ``schema`` as a named component and
    refers to it from the family's schemas), so clients see the structure, not a free object;
  * examples (``examples``: valid values, for tests that build valid bodies);
  * answers (``present``, optional): how a stored value is shown in every response of its family
    (kernel/embedding.py ``presented``), when clients read another form than the one the server
    runs on; ``check`` then takes that form back (a write accepts what a read answered). The
    executions' steps (features/work/step_shapes.py; docs/api/sdk-compatibility.md) are one.

``check`` receives a value that already has the field's base type (a str, a dict, one element
of a list) and returns the value to store, or raises ValueError with a message fit for a 400.
Pure data and functions: installed at cold start, so nothing heavy in a shape's module.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Shape:
    name: str
    schema: dict[str, Any]
    examples: tuple[Any, ...]
    check: Callable[[Any], Any]
    check_all: Callable[[list[Any]], None] | None = None
    present: Callable[[Any], Any] | None = None


def ref(name: str) -> dict[str, str]:
    """A JSON-schema reference to another named shape or enumeration (an OpenAPI component)."""
    return {'$ref': f'#/components/schemas/{name}'}


SHAPES: dict[str, Shape] = {}
"""Every installed shape by name (empty until chalicelib/features/__init__.py installs them)."""


def install(shapes: Iterable[Shape]) -> None:
    """Install the features' shapes (kernel/registry.py ``install`` calls this before it reads any
    family's fields). A name declared twice raises; a second install of the same shapes changes
    nothing."""
    shapes = list(shapes)
    names = [s.name for s in shapes]
    if len(set(names)) != len(names):
        raise ValueError(f'a shape is declared twice: {sorted({n for n in names if names.count(n) > 1})}')
    if SHAPES:
        if set(SHAPES) != set(names):
            raise ValueError('the shapes are installed already, with other declarations')
        return
    SHAPES.update((s.name, s) for s in shapes)
