"""API keys at rest: only the SHA-256 of a key is stored (pk ``KEY#{hash}``); the user's keys
are listed through the by_parent index (``KEYS#U#{userId}``)."""
from __future__ import annotations

from typing import Any

from .table import ENTITY_SK, configure


def put_key(key_hash: str, record: dict[str, Any]) -> None:
    model = configure()
    item = model(f'KEY#{key_hash}', ENTITY_SK, kind='apikey', data=record,
                 ppk=f"KEYS#U#{record['userId']}", csk=f"{record['createdOn']}#{record['id']}")
    item.save(condition=model.pk.does_not_exist())


def get_key(key_hash: str) -> dict[str, Any] | None:
    model = configure()
    try:
        item = model.get(f'KEY#{key_hash}', ENTITY_SK, consistent_read=True)
    except model.DoesNotExist:
        return None
    return item.data.as_dict() if item.data is not None else None


def keys_of(user_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(pk, record) of a user's keys, oldest first."""
    model = configure()
    return [(i.pk, i.data.as_dict()) for i in model.by_parent.query(f'KEYS#U#{user_id}') if i.data is not None]


def delete_key(pk: str) -> None:
    model = configure()
    model(pk, ENTITY_SK).delete()
