"""Membership look-ups shared by identity, visibility and user lists."""
from __future__ import annotations

from chalicelib.core.principal import Principal
from chalicelib.store import table


def memberships_of(user_id: str) -> dict[str, str]:
    """organization id -> role, from the user's partition of the by_parent index (one Query)."""
    model = table.configure()
    out: dict[str, str] = {}
    for item in model.by_parent.query(f'memberships#U#{user_id}'):
        data = item.data.as_dict() if item.data is not None else {}
        if item.org and data.get('role'):
            out[item.org] = data['role']
    return out


def shares_organization(principal: Principal, user_id: str) -> bool:
    return bool(set(memberships_of(user_id)) & set(principal.memberships))
