"""Bridges the filter language (chalicelib/query) to a family's list: parse against the
registry, split into a DynamoDB FilterExpression and an in-memory residual."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.core.errors import BadRequest
from chalicelib.domain.registry import Family


@dataclass
class FilterPlan:
    condition: Any = None
    residual: Any = None
    is_empty: bool = True

    def matches(self, item: dict[str, Any]) -> bool:
        return True

    def pinned(self, field: str) -> str | None:
        return None


def plan_for(family: Family, filters: list[str]) -> FilterPlan:
    if filters:
        raise BadRequest('filter is not supported yet')
    return FilterPlan()
