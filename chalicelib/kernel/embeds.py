"""Which references are embedded in responses, as the contract lists them (and as the platform's
Python SDK models read them): ``project.organization.id``, ``assistant.project.id``,
``product.productGroup.name``, ...

A family's declaration names them (``Family.embeds``, kernel/registry.py: keys of
``Family.references``, the object named after the id field without ``Id``). A response then
carries, next to ``xId``, ``x``: the referenced record as its own GET returns it, less the target
family's ``heavy`` fields (none of them is always present, so the object still matches the
target's <Entity> schema). kernel/embedding.py fetches them (one BatchGetItem per response or page).
"""
from __future__ import annotations

from chalicelib.kernel.registry import BY_PATH


def embeds_of(path: str) -> dict[str, tuple[str, str]]:
    """Embedded reference name -> (id field, target family path) for a family."""
    family = BY_PATH[path]
    return {name: family.references[name] for name in family.embeds}


def heavy_of(path: str) -> tuple[str, ...]:
    """Fields left out of a record of the family when it is embedded in another's response."""
    return BY_PATH[path].heavy
