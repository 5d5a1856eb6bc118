"""Credential primitives: key generation, hashing at rest, constant-time comparison."""
from __future__ import annotations

import hashlib
import hmac
import secrets

KEY_PREFIX = 'pk_'


def new_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(raw: str) -> str:
    """API keys are 256-bit random values, so one SHA-256 is a sound at-rest hash (no salt or
    stretching needed: there is nothing to brute-force), and it makes lookup one GetItem."""
    return hashlib.sha256(raw.encode('utf-8')).hexdigest()


def same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    return hmac.compare_digest(a.encode('utf-8'), b.encode('utf-8'))
