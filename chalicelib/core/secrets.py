"""Credential primitives: key generation, hashing at rest, constant-time comparison.

API keys look like ``pk_{owner}_{secret}``: ``owner`` is the user's id (16 bytes, base64url,
22 characters; not a secret), ``secret`` 256 random bits. Naming the owner lets authentication
read the owner's partition directly (features/identity/credentials.py) instead of first looking the key
up. Keys without an owner part (``pk_`` + anything, e.g. a key handed to bootstrap) work too.

``usage_identifier`` derives, without I/O, the API Gateway usage key the Lambda authorizer
returns for a request (infra/usage_plan.py).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import uuid
from collections.abc import Mapping

from chalicelib.core.config import get_config

KEY_PREFIX = 'pk_'
_OWNER_LEN = 22


def new_api_key(owner_id: str | None = None) -> str:
    secret = secrets.token_urlsafe(32)
    if owner_id is None:
        return KEY_PREFIX + secret
    owner = base64.urlsafe_b64encode(uuid.UUID(owner_id).bytes).rstrip(b'=').decode('ascii')
    return f'{KEY_PREFIX}{owner}_{secret}'


def key_owner(raw: str) -> str | None:
    """The user id a key names, or None when it names none (or is malformed)."""
    start = len(KEY_PREFIX)
    if not raw.startswith(KEY_PREFIX) or len(raw) < start + _OWNER_LEN + 2 or raw[start + _OWNER_LEN] != '_':
        return None
    try:
        data = base64.urlsafe_b64decode(raw[start:start + _OWNER_LEN] + '==')
        return str(uuid.UUID(bytes=data)) if len(data) == 16 else None
    except (binascii.Error, ValueError):
        return None


def key_hint(raw: str) -> str:
    """What a key list shows to recognise a key: its last four characters."""
    return f'{KEY_PREFIX}…{raw[-4:]}'


def hash_key(raw: str) -> str:
    """API keys carry 256 random bits, so one SHA-256 is a sound at-rest hash (no salt or
    stretching needed: there is nothing to brute-force), and it makes lookup one read."""
    return hashlib.sha256(raw.encode('utf-8')).hexdigest()


def same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    return hmac.compare_digest(a.encode('utf-8'), b.encode('utf-8'))


def usage_identifier(headers: Mapping[str, str] | None) -> str | None:
    """The API Gateway usage identifier for a request (infra/usage_plan.py): for an API key
    (x-api-key, x-access-token, Bearer pk_..., or the key of Basic credentials) its SHA-256,
    the value of that key's gateway twin; for anyone else the shared gateway key. No I/O: the
    Lambda authorizer runs this on every request."""
    h = {str(k).lower(): v for k, v in (headers or {}).items()}
    raw = (h.get('x-api-key') or h.get('x-access-token') or '').strip()
    if not raw:
        scheme, _, value = str(h.get('authorization') or '').strip().partition(' ')
        value = value.strip()
        if scheme.lower() == 'bearer' and value.startswith(KEY_PREFIX):
            raw = value
        elif scheme.lower() == 'basic':
            try:
                raw = base64.b64decode(value, validate=True).decode('utf-8').rpartition(':')[2]
            except (binascii.Error, ValueError):
                raw = ''
    cfg = get_config()
    if raw and cfg.usage_plan_id and len(raw) <= 512:
        return hash_key(raw)
    return cfg.gateway_shared_key

