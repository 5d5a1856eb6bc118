"""Bearer JWTs from the external identity provider: verified against the provider's JWKS.

Checked: the signature (RS256 or ES256 only; the header's ``alg`` must match the JWK's key
type, so an RSA key can never be used as an HMAC secret or similar), ``exp`` (required) and
``nbf``/``iat`` with a small leeway, the issuer and the audience.

Keys are cached in-process per JWKS URL. A token whose ``kid`` is unknown triggers a refetch,
but at most once per ``UNKNOWN_KID_REFETCH_SECONDS`` for the same kid and at most once per
``MIN_REFETCH_INTERVAL_SECONDS`` overall, so a flood of made-up kids costs the identity
provider at most one request a second per Lambda instance. The whole key set is also
refreshed after ``MAX_KEYS_AGE_SECONDS`` (keys the provider withdrew stop working); when that
refresh fails the cached keys stay in use, but only until they are ``max_key_age`` old
(``AUTH_JWT_KEYS_MAX_AGE_SECONDS``, default 24 h): a provider that cannot be reached for longer
than that gets 503s rather than keys it may have withdrawn long ago.

No lock is held while fetching: one caller fetches (single flight), callers that have usable
keys go on with them meanwhile, and callers with none wait for that one fetch (bounded by its
timeout) instead of starting their own.

The fetch uses urllib, not the egress fence (core/egress.py): the JWKS URL is deployment
configuration, never tenant input, and may legitimately be a private host (an identity provider
inside the VPC) that the fence refuses by design. What it keeps from the fence's rules: https only
(http on loopback, for tests), a timeout, a size cap, no redirects to other schemes (urllib).

``jwt`` (pyjwt + cryptography) is imported on first use only: cold starts that never see a
bearer token do not pay for it.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

LEEWAY_SECONDS = 30
FETCH_TIMEOUT_SECONDS = 3
UNKNOWN_KID_REFETCH_SECONDS = 10
MIN_REFETCH_INTERVAL_SECONDS = 1
MAX_KEYS_AGE_SECONDS = 3600
DEFAULT_MAX_KEY_AGE_SECONDS = 86_400    # stale keys past this are not trusted (AUTH_JWT_KEYS_MAX_AGE_SECONDS)
MAX_TOKEN_BYTES = 8192
MAX_JWKS_BYTES = 512 * 1024
MAX_REMEMBERED_KIDS = 1000
# The only algorithms accepted, with the JWK key type each one needs.
ALGORITHMS = {'RS256': 'RSA', 'ES256': 'EC'}

clock: Callable[[], float] = time.monotonic   # tests patch this to move time


class InvalidToken(Exception):
    """The token does not verify; the message is safe to show (it never contains the token)."""


class KeysUnavailable(Exception):
    """The identity provider's keys could not be fetched and none are cached."""


def _fetch_jwks(url: str) -> dict[str, Any]:
    parts = urllib.parse.urlsplit(url)
    loopback = parts.hostname in ('127.0.0.1', 'localhost', '::1')
    if parts.scheme != 'https' and not (parts.scheme == 'http' and loopback):
        raise KeysUnavailable('AUTH_JWT_JWKS_URL must be an https URL')
    request = urllib.request.Request(url, headers={'Accept': 'application/json',
                                                   'User-Agent': 'platform-api-jwks'})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS) as response:  # noqa: S310
        body = response.read(MAX_JWKS_BYTES + 1)
    if len(body) > MAX_JWKS_BYTES:
        raise KeysUnavailable('JWKS document too large')
    return json.loads(body)


def _parse_keys(document: Any) -> dict[str | None, Any]:
    """kid -> PyJWK for the usable signing keys of a JWKS document (others are skipped)."""
    from jwt import PyJWK  # noqa: PLC0415 - lazy: pyjwt + cryptography only for bearer tokens
    from jwt.exceptions import PyJWKError  # noqa: PLC0415 - lazy, as above
    keys: dict[str | None, Any] = {}
    entries = document.get('keys') if isinstance(document, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get('use', 'sig') != 'sig':
            continue
        if entry.get('kty') not in ALGORITHMS.values():
            continue
        try:
            key = PyJWK(entry)
        except (PyJWKError, ValueError, TypeError):
            continue
        if key.algorithm_name in ALGORITHMS:
            keys[entry.get('kid')] = key
    return keys


class JwksCache:
    def __init__(self, url: str, fetch: Callable[[str], dict[str, Any]] = _fetch_jwks) -> None:
        self.url = url
        self._fetch = fetch
        self._keys: dict[str | None, Any] = {}
        self._fetched_at: float | None = None
        self._last_attempt: float | None = None
        self._tried: dict[str | None, float] = {}   # unknown kid -> when it last caused a refetch
        self._lock = threading.Lock()                 # guards the fields above; never held while fetching
        self._inflight: threading.Event | None = None  # set when the running fetch ends
        self.fetches = 0                              # observable for tests and metrics

    def _refresh(self, wait: bool = True) -> None:
        """Fetch the key set, or (``wait``) wait for the fetch another caller is running. The
        lock is taken only to decide and to install the result, never across the network."""
        with self._lock:
            waiting = self._inflight
            if waiting is None:
                self._inflight = done = threading.Event()
                self._last_attempt = clock()
                self.fetches += 1
        if waiting is not None:
            if wait:
                waiting.wait(FETCH_TIMEOUT_SECONDS + 1)
            return
        try:
            keys = _parse_keys(self._fetch(self.url))
        except Exception:  # noqa: BLE001 - network, HTTP, JSON: keep what we have
            keys = None
        with self._lock:
            if keys is not None:
                self._keys = keys
                self._fetched_at = clock()
            self._inflight = None
        done.set()

    def key_for(self, kid: str | None, max_key_age: float = DEFAULT_MAX_KEY_AGE_SECONDS) -> Any:
        with self._lock:
            now = clock()
            due = self._fetched_at is None or now - self._fetched_at > MAX_KEYS_AGE_SECONDS
            recent = self._last_attempt is not None and now - self._last_attempt < MIN_REFETCH_INTERVAL_SECONDS
            usable = self._fetched_at is not None and now - self._fetched_at <= max_key_age
        if due and not recent:
            self._refresh(wait=not usable)   # with usable keys, never wait for someone else's fetch
        with self._lock:
            now = clock()
            if self._fetched_at is None or now - self._fetched_at > max_key_age:
                raise KeysUnavailable('The identity provider keys are unavailable')
            key = self._lookup(kid)
            if key is not None:
                return key
            refetch = self._may_refetch(kid, now)
            if refetch:
                self._tried[kid] = now
        if refetch:
            self._refresh()
            with self._lock:
                key = self._lookup(kid)
                if key is not None:
                    self._tried.pop(kid, None)
                    return key
        raise InvalidToken('The token is signed by an unknown key')

    def _lookup(self, kid: str | None) -> Any:
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))   # a provider with one key may omit kid
        return self._keys.get(kid) if kid is not None else None

    def _may_refetch(self, kid: str | None, now: float) -> bool:
        if self._last_attempt is not None and now - self._last_attempt < MIN_REFETCH_INTERVAL_SECONDS:
            return False
        last = self._tried.get(kid)
        if last is not None and now - last < UNKNOWN_KID_REFETCH_SECONDS:
            return False
        if len(self._tried) >= MAX_REMEMBERED_KIDS:
            self._tried = {k: t for k, t in self._tried.items() if now - t < UNKNOWN_KID_REFETCH_SECONDS}
        return True


_caches: dict[str, JwksCache] = {}
_caches_lock = threading.Lock()


def cache_for(url: str) -> JwksCache:
    with _caches_lock:
        cache = _caches.get(url)
        if cache is None:
            cache = _caches[url] = JwksCache(url)
        return cache


def reset_caches() -> None:
    with _caches_lock:
        _caches.clear()


def verify(token: str, *, issuer: str, audience: str, jwks_url: str,
           max_key_age: float = DEFAULT_MAX_KEY_AGE_SECONDS) -> dict[str, Any]:
    """The verified claims of ``token``. Raises InvalidToken or KeysUnavailable."""
    import jwt  # noqa: PLC0415 - lazy: pyjwt + cryptography only for bearer tokens
    if not token or len(token) > MAX_TOKEN_BYTES:
        raise InvalidToken('The token is malformed')
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise InvalidToken('The token is malformed') from None
    alg = header.get('alg')
    if alg not in ALGORITHMS:
        raise InvalidToken('The token is signed with an unsupported algorithm')
    kid = header.get('kid')
    if kid is not None and not isinstance(kid, str):
        raise InvalidToken('The token is malformed')
    key = cache_for(jwks_url).key_for(kid, max_key_age)
    if key.algorithm_name != alg:
        raise InvalidToken('The token algorithm does not match its key')
    try:
        return jwt.decode(token, key.key, algorithms=[alg], audience=audience, issuer=issuer,
                          leeway=LEEWAY_SECONDS,
                          options={'require': ['exp', 'iss', 'aud'], 'verify_signature': True})
    except jwt.ExpiredSignatureError:
        raise InvalidToken('The token has expired') from None
    except jwt.ImmatureSignatureError:
        raise InvalidToken('The token is not valid yet') from None
    except jwt.InvalidAudienceError:
        raise InvalidToken('The token is not meant for this API (audience)') from None
    except jwt.InvalidIssuerError:
        raise InvalidToken('The token was not issued by the trusted identity provider') from None
    except jwt.MissingRequiredClaimError as exc:
        raise InvalidToken(f'The token lacks the {exc.claim} claim') from None
    except jwt.InvalidSignatureError:
        raise InvalidToken('The token signature is invalid') from None
    except (jwt.PyJWTError, ValueError, TypeError):
        raise InvalidToken('The token is invalid') from None
