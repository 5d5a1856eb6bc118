"""UI telemetry: ``POST /api/events/ui/batch`` stores the UI's events in the ``events`` family.

A batch ``{events: [{kind, occurredAt, payload}], organizationId?}``:

* is refused whole (400, nothing stored) when it is not that shape, holds more than
  ``MAX_EVENTS`` events, or any kind does not start with ``ui.`` (``KIND``), any ``occurredAt``
  is not an ISO 8601 date-time (omitted: the time of receipt), any ``payload`` is not an object;
* is attributed to the caller's organization: ``organizationId`` when given (one the caller
  belongs to), else the caller's only organization; several and none named is 400; none at all
  (a platform admin without membership) drops every event; a SUSPENDED organization refuses
  the batch with the 403 every other write there gets (docs/api/lifecycle.md);
* keeps ``ui.presence.*``, ``ui.task.*`` and ``ui.task_group.*`` only when the organization's
  ``features.presenceTrackingEnabled`` is exactly true, read through a 60 s in-process cache; a
  failed read counts as disabled (and is not cached). Other ``ui.*`` kinds are always kept;
* strips every payload (at any depth) of what must not be collected: address-like keys and
  values that are IP addresses, keystroke keys, pointer coordinates and scroll positions
  (``sanitize``);
* stamps each event with the caller's e-mail and, when the request has a client address,
  ``clientIpHash``: HMAC-SHA256 of the normalised address under ``CLIENT_IP_HASH_KEY``. The raw
  address is never stored. Without a configured key a random per-process key is used (hashes
  then only correlate within one process): a deployed stage gets its key from the data stack.

Stored: ``eventType`` = kind, ``payload``, ``occurredOn``, ``source`` = ``ui``, ``userEmail``,
``clientIpHash``. Readable by the organization's MANAGE users (features/events/hooks.py).

Writing: TransactWriteItems takes 100 items, and 100 events plus their counter are 101, so a
batch is written in chunks of ``CHUNK`` events, one transaction each. Event ids derive from the
caller, the batch's content and the position in it, so a client retrying a batch after a
partial failure stores each event once: a chunk that is already there is recognised (its first
entity exists) and skipped. Answer: ``{accepted, dropped}``.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from chalicelib.core import limits, observability
from chalicelib.core.clock import normalize_instant, now_iso
from chalicelib.core.config import get_config
from chalicelib.core.errors import BadRequest
from chalicelib.core.principal import Principal
from chalicelib.kernel import access, records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict

log = observability.get_logger('ui-events')

MAX_EVENTS = limits.MAX_UI_EVENTS
# Events per transaction: each event is an item, plus the events counter, one per-value counter
# per distinct kind (eventType is indexed) and one guard shard of the organization per event
# at most (kernel/parents.py): 30 + 1 + 30 + 30 = 91, under TransactWriteItems' 100.
CHUNK = 30
PRESENCE_CACHE_SECONDS = 60.0
GATED_PREFIXES = ('ui.presence.', 'ui.task.', 'ui.task_group.')
KIND = re.compile(r'ui\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*')
MAX_KIND = limits.MAX_UI_EVENT_KIND
CONFLICT_RETRIES = 6
_IDS = uuid.UUID('0b7d2c47-52f1-4c0e-9a7e-3b1d6a9c2e55')


def record_batch(body: dict[str, Any], *, principal: Principal, client_address: str | None) -> dict[str, int]:
    """Validate, filter, sanitise and store one batch -> ``{accepted, dropped}``."""
    events = _parse(body)
    org = _organization(body, principal)
    if org is None:
        return {'accepted': 0, 'dropped': len(events)}
    access.require_active(principal, org)   # a suspended organization: 403, as every other write
    presence = any(e['kind'].startswith(GATED_PREFIXES) for e in events) and presence_enabled(org)
    kept = [(i, e) for i, e in enumerate(events) if presence or not e['kind'].startswith(GATED_PREFIXES)]
    if kept:
        _store(kept, events, org, principal, client_ip_hash(client_address))
    return {'accepted': len(kept), 'dropped': len(events) - len(kept)}


# ----------------------------------------------------------------------------- input

def _parse(body: dict[str, Any]) -> list[dict[str, Any]]:
    events = body.get('events')
    if not isinstance(events, list):
        raise BadRequest("Field 'events' is required: a list of {kind, occurredAt, payload}")
    if len(events) > MAX_EVENTS:
        raise BadRequest(f'A batch holds at most {MAX_EVENTS} events ({len(events)} sent)')
    out = []
    for n, event in enumerate(events):
        if not isinstance(event, dict):
            raise BadRequest(f'events[{n}] must be an object')
        kind = event.get('kind')
        if not isinstance(kind, str) or not kind.startswith('ui.'):
            raise BadRequest(f"events[{n}].kind must start with 'ui.'")
        if len(kind) > MAX_KIND or not KIND.fullmatch(kind):
            raise BadRequest(f"events[{n}].kind must be 'ui.' and dot-separated words of letters, digits, "
                             f"'_' and '-' (at most {MAX_KIND} characters)")
        occurred = event.get('occurredAt')
        if occurred is None:
            occurred = now_iso()
        else:
            try:
                occurred = normalize_instant(occurred) if isinstance(occurred, str) else None
            except ValueError:
                occurred = None
            if occurred is None:
                raise BadRequest(f'events[{n}].occurredAt must be an ISO 8601 date-time')
        payload = event.get('payload', {})
        if payload is None:
            payload = {}
        if not isinstance(payload, dict):
            raise BadRequest(f'events[{n}].payload must be an object')
        out.append({'kind': kind, 'occurredAt': occurred, 'payload': payload})
    return out


def _organization(body: dict[str, Any], principal: Principal) -> str | None:
    named = body.get('organizationId')
    if named is not None:
        if not isinstance(named, str):
            raise BadRequest("Field 'organizationId' must be a string")
        try:
            named = str(uuid.UUID(named))
        except ValueError:
            named = None
        if named is None or not access.can_see_org(principal, named) or \
                (principal.platform_admin and named not in principal.memberships
                 and table.get('organizations', named, consistent=False) is None):
            raise BadRequest(f"Field 'organizationId' refers to an organization that does not exist: "
                             f"{str(body.get('organizationId'))[:64]}")
        return named
    if len(principal.memberships) > 1:
        raise BadRequest("Field 'organizationId' is required (you belong to several organizations)")
    return principal.default_org


# ----------------------------------------------------------------------------- presence flag

class _FlagCache:
    """organization id -> (expiry, enabled); a failed read is not remembered."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._values: dict[str, tuple[float, bool]] = {}

    def get(self, org: str) -> bool | None:
        with self._lock:
            entry = self._values.get(org)
        if entry is None or entry[0] <= self.clock():
            return None
        return entry[1]

    def put(self, org: str, enabled: bool) -> None:
        with self._lock:
            if len(self._values) > 10_000:
                self._values.clear()
            self._values[org] = (self.clock() + PRESENCE_CACHE_SECONDS, enabled)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


presence_cache = _FlagCache()


def presence_enabled(org: str | None) -> bool:
    """``features.presenceTrackingEnabled`` of the organization, exactly true; cached 60 s.
    An empty id or a failed lookup is False."""
    if not org:
        return False
    cached = presence_cache.get(org)
    if cached is not None:
        return cached
    try:
        stored = table.get('organizations', org, consistent=False)
    except Exception:  # noqa: BLE001 - the contract: a failed lookup counts as disabled
        log.warning('presence flag of organization %s could not be read: counted as disabled', org)
        return False
    features = stored.data.get('features') if stored is not None else None
    enabled = isinstance(features, dict) and features.get('presenceTrackingEnabled') is True
    presence_cache.put(org, enabled)
    return enabled


# ----------------------------------------------------------------------------- privacy

_WORDS = re.compile(r'[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+')
_ADDRESS_WORDS = frozenset({'ip', 'ips', 'ipv', 'addr', 'address', 'addresses', 'forwarded', 'xff'})
_KEYSTROKE_PARTS = ('keystroke', 'keypress', 'keydown', 'keyup', 'keycode', 'charcode', 'keyboard')
_KEYSTROKE_KEYS = frozenset({'key', 'keys', 'which', 'typed', 'typing', 'char', 'chars'})
_POINTER_WORDS = frozenset({'pointer', 'mouse', 'cursor', 'coord', 'coords', 'coordinates', 'touch', 'touches'})
_POINTER_KEY = re.compile(r'(?:client|page|screen|offset|movement|layer|pointer|mouse|touch|pos|position)?[xy]')


def dropped_key(key: str) -> bool:
    """Is this payload key one the platform must not keep (address, keystroke, pointer, scroll)?"""
    words = [w.lower() for w in _WORDS.findall(key)]
    flat = ''.join(words)
    if _ADDRESS_WORDS.intersection(words):
        return True
    if flat in _KEYSTROKE_KEYS or any(part in flat for part in _KEYSTROKE_PARTS):
        return True
    if _POINTER_WORDS.intersection(words) or _POINTER_KEY.fullmatch(flat):
        return True
    return 'scroll' in flat


def looks_like_address(value: Any) -> bool:
    """An IP address, alone or with a port (``10.0.0.1:443``, ``[::1]:80``)."""
    if not isinstance(value, str) or len(value) > 60:
        return False
    text = value.strip()
    candidates = [text]
    if text.startswith('[') and ']' in text:
        candidates.append(text[1:text.index(']')])
    elif text.count(':') == 1:
        candidates.append(text.split(':', 1)[0])
    for candidate in candidates:
        try:
            ipaddress.ip_address(candidate.split('%', 1)[0])
            return True
        except ValueError:
            continue
    return False


def sanitize(value: Any) -> Any:
    """The payload without dropped keys and address values, at any depth."""
    if isinstance(value, dict):
        return {k: sanitize(v) for k, v in value.items() if not dropped_key(k) and not looks_like_address(v)}
    if isinstance(value, list):
        return [sanitize(v) for v in value if not looks_like_address(v)]
    return value


_process_key: bytes | None = None
_key_lock = threading.Lock()


def _hash_key() -> bytes:
    global _process_key
    configured = get_config().client_ip_hash_key
    if configured:
        return configured.encode('utf-8')
    with _key_lock:
        if _process_key is None:
            log.warning('CLIENT_IP_HASH_KEY is not set: hashing client addresses with a per-process key')
            _process_key = secrets.token_bytes(32)
        return _process_key


def client_ip_hash(address: str | None) -> str | None:
    """HMAC-SHA256 (hex) of the normalised client address; None when there is no valid one."""
    if not address:
        return None
    text = address.strip()
    if text.startswith('[') and ']' in text:
        text = text[1:text.index(']')]
    elif text.count(':') == 1:
        text = text.split(':', 1)[0]
    try:
        ip = ipaddress.ip_address(text.split('%', 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return hmac.new(_hash_key(), str(ip).encode('ascii'), hashlib.sha256).hexdigest()


# ----------------------------------------------------------------------------- storage

def _store(kept: list[tuple[int, dict[str, Any]]], events: list[dict[str, Any]], org: str,
           principal: Principal, ip_hash: str | None) -> None:
    family = family_of('events')
    digest = hashlib.sha256(json.dumps([org, events], sort_keys=True, default=str).encode('utf-8')).hexdigest()
    made = []
    for index, event in kept:
        values: dict[str, Any] = {'eventType': event['kind'], 'source': 'ui', 'payload': sanitize(event['payload']),
                                  'occurredOn': event['occurredAt'], 'userEmail': principal.email}
        if ip_hash is not None:
            values['clientIpHash'] = ip_hash
        rid = str(uuid.uuid5(_IDS, f'{principal.user_id}/{digest}/{index}'))
        made.append(records.new_record(family, values, principal=principal, org=org, id_=rid))
    for start in range(0, len(made), CHUNK):
        _write_chunk(family, made[start:start + CHUNK], principal)


def _write_chunk(family, chunk: list[dict[str, Any]], principal: Principal) -> None:
    for attempt in range(CONFLICT_RETRIES):
        try:
            records.commit(records.create_ops(family, chunk, principal))
            return
        except WriteConflict as exc:
            if exc.op is not None and exc.op.tag.get('what') == 'entity':
                return   # this chunk of a retried batch is stored already (a chunk is all or nothing)
            if exc.code != 'TransactionConflict' or attempt + 1 == CONFLICT_RETRIES:
                raise
            time.sleep(0.02 * 2 ** attempt * (0.5 + secrets.randbelow(1000) / 1000))
