"""Strict JSON request-body parsing.

Chalice's json_body uses plain json.loads (duplicate keys: last wins, NaN accepted, a 500 on
bad JSON). The contract wants: malformed JSON -> 400; a body that is not an object -> 400; one
field twice under keys that differ only in letter case -> 400. Numbers that DynamoDB cannot
hold (NaN, Infinity, more than 38 significant digits, magnitudes outside 1E-130..9.99E+125), object
keys it cannot hold (empty, over 64 KB) and absurd nesting are refused here too.
"""
from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from chalicelib.core.errors import BadRequest, PayloadTooLarge
from chalicelib.core.limits import MAX_JSON_BODY_BYTES as MAX_BODY_BYTES

MAX_DEPTH = 30
MAX_KEY_BYTES = 65_535     # DynamoDB attribute (map key) names: 1 byte to 64 KB
NUMBER_MIN, NUMBER_LIMIT = 1e-130, 1e126  # DynamoDB stores magnitudes 1E-130 to 9.99..E+125


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, str] = {}
    out: dict[str, Any] = {}
    for key, value in pairs:
        if not key or len(key.encode('utf-8', 'surrogatepass')) > MAX_KEY_BYTES:
            # DynamoDB map keys are attribute names: 1 character to 64 KB (an empty one is refused)
            raise BadRequest(f'Object keys must be 1 character to {MAX_KEY_BYTES} bytes long')
        folded = key.lower()
        if folded in seen:
            raise BadRequest(f"Field '{key}' appears more than once (as '{seen[folded]}' and '{key}')")
        seen[folded] = key
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise BadRequest(f'Invalid JSON number: {name}')


def _parse_float(text: str) -> float | Decimal:
    value = float(text)
    if value in (float('inf'), float('-inf')) or not (value == 0 or NUMBER_MIN <= abs(value) < NUMBER_LIMIT):
        raise BadRequest(f'Number out of range: {text[:40]}')
    return value


def _parse_int(text: str) -> int:
    if len(text.lstrip('-')) > 38:
        raise BadRequest(f'Number out of range: {text[:40]}...')
    return int(text)


def _text(value: str) -> None:
    try:
        value.encode('utf-8')
    except UnicodeEncodeError:  # a lone surrogate escape such as "\ud800"
        raise BadRequest('JSON strings must be valid Unicode (lone surrogate escape)') from None


def _depth(value: Any, level: int = 0) -> int:
    """Check nesting depth and that every string and key is storable text."""
    if level > MAX_DEPTH:
        raise BadRequest(f'JSON nested deeper than {MAX_DEPTH} levels')
    if isinstance(value, str):
        _text(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _text(k)
            _depth(v, level + 1)
    elif isinstance(value, list):
        for v in value:
            _depth(v, level + 1)
    return level


def loads(raw: bytes | str | None) -> Any:
    if raw is None or raw == b'' or raw == '':
        raise BadRequest('A JSON request body is required')
    if isinstance(raw, bytes):
        if len(raw) > MAX_BODY_BYTES:
            # 413, as the front door answers bodies past its own 10 MB (docs/api/limits.md): one
            # fault, one status, whatever the size
            raise PayloadTooLarge(f'Request body larger than {MAX_BODY_BYTES} bytes (a JSON body\'s limit)')
        try:
            raw = raw.decode('utf-8')
        except UnicodeDecodeError:
            raise BadRequest('Request body is not UTF-8') from None
    try:
        value = json.loads(raw, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant,
                           parse_float=_parse_float, parse_int=_parse_int)
    except BadRequest:
        raise
    except RecursionError:
        raise BadRequest(f'JSON nested deeper than {MAX_DEPTH} levels') from None
    except (ValueError, TypeError) as exc:
        raise BadRequest(f'Malformed JSON: {exc}') from None
    _depth(value)
    return value


def loads_object(raw: bytes | str | None) -> dict[str, Any]:
    value = loads(raw)
    if not isinstance(value, dict):
        raise BadRequest('Request body must be a JSON object')
    return value
