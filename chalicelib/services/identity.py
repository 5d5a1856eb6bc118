"""Authentication: turn the request's credential into a Principal, and manage API keys.

Credentials accepted: ``x-api-key`` (and the legacy ``x-access-token`` that existing SDKs send).
Keys are stored hashed; an expired or revoked key is a 401 like an unknown one.
"""
from __future__ import annotations

import uuid
from typing import Any, Mapping

from chalicelib.core.clock import now, now_iso, parse_instant
from chalicelib.core.errors import BadRequest, NotFound, Unauthorized
from chalicelib.core.principal import Principal
from chalicelib.core.secrets import hash_key, new_api_key
from chalicelib.store import credentials

from .users import memberships_of


def authenticate(headers: Mapping[str, str]) -> Principal:
    raw = headers.get('x-api-key') or headers.get('x-access-token')
    if raw:
        return principal_from_api_key(raw.strip())
    raise Unauthorized('A credential is required: send an API key in the x-api-key header')


def principal_for_user(user_id: str, email: str, credential: str, rate_key: str) -> Principal:
    memberships = memberships_of(user_id)
    return Principal(user_id=user_id, email=email, memberships=memberships,
                     platform_admin='PLATFORM_ADMIN' in memberships.values(),
                     credential=credential, rate_key=rate_key)


def principal_from_api_key(raw: str) -> Principal:
    if not raw or len(raw) > 512:
        raise Unauthorized('Invalid API key')
    key_hash = hash_key(raw)
    record = credentials.get_key(key_hash)
    if record is None:
        raise Unauthorized('Invalid API key')
    expires = record.get('expiresAt')
    if expires and parse_instant(expires) <= now():
        raise Unauthorized('API key has expired')
    return principal_for_user(record['userId'], record.get('userEmail', ''), 'api-key', f'key:{record["id"]}')


def _public(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in ('id', 'name', 'prefix', 'createdOn', 'expiresAt', 'userId') if k in record}


def create_api_key(user_id: str, email: str, name: str, expires_at: str | None = None,
                   raw: str | None = None) -> dict[str, Any]:
    """Store a new key (hashed) and return its record with the raw key, shown this once."""
    raw = raw or new_api_key()
    record = {'id': str(uuid.uuid4()), 'name': name, 'userId': user_id, 'userEmail': email,
              'prefix': raw[:7], 'createdOn': now_iso(), 'expiresAt': expires_at}
    credentials.put_key(hash_key(raw), record)
    return {**_public(record), 'key': raw}


def list_api_keys(user_id: str) -> list[dict[str, Any]]:
    return [_public(r) for _, r in credentials.keys_of(user_id)]


def revoke_api_key(user_id: str, key_id: str) -> None:
    for pk, record in credentials.keys_of(user_id):
        if record.get('id') == key_id:
            credentials.delete_key(pk)
            return
    raise NotFound(f'No API key with id {key_id}')


def parse_key_request(body: dict[str, Any]) -> tuple[str, str | None]:
    name = body.get('name')
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise BadRequest("Field 'name' is required (1-200 characters)")
    expires = body.get('expiresAt')
    if expires is not None:
        from chalicelib.core.clock import iso
        try:
            when = parse_instant(expires)
        except (ValueError, TypeError):
            raise BadRequest("Field 'expiresAt' must be an ISO 8601 date-time") from None
        expires = iso(when)
    return name.strip(), expires
