"""The request path's front half: who is calling, may they, and how many requests they have
left, in one round trip of latency (features/identity/service.py docstring: ``admit``).

    principal, decision = admit(headers, method, reads=[('projects', id)])

* the count (features/identity/gate.py): ONE UpdateItem on the user's item for the current minute
  counts the request in the per-credential and per-user windows, refusing (writing nothing)
  when one is full;
* at the same time, on a second thread, ONE strongly consistent BatchGetItem reads the user's
  record (active, e-mail), their ACL item (live keys, bound subject, roles), the records
  ``reads`` names (the route's GET by id) and the organizations the hint names (their status:
  suspension);
* then the decision: 401 (credential not live, user missing or inactive, Basic e-mail mismatch;
  the request is given back to the counters), 429 (over a limit; not counted), or the principal
  with what was read for it (``principal.reads``, core/principal.py ``RequestReads``:
  ``prefetched`` records, ``organization_status``, ``orgs_of``).

A credential this process has not seen pass yet is read first and counted after (one round
more, once per process and credential): made-up keys naming a user never write that user's
counters. When the count cannot be made (throttled, failing), the limiter fails closed for
writes: a write is 503 and a read is counted in memory (features/identity/ratelimit.py); the
caller was authenticated by the read all the same, so a bad credential is still a 401.
"""
from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping

from chalicelib.core.errors import Unauthorized
from chalicelib.core.observability import get_logger
from chalicelib.core.principal import Principal
from chalicelib.core.secrets import KEY_PREFIX, hash_key, key_owner
from chalicelib.features.identity import credentials, gate, ratelimit
from chalicelib.features.identity import service as identity
from chalicelib.kernel.store import acl

log = get_logger('auth')

HINT_SIZE = 10_000        # users whose organizations a process remembers (a hint, never a decision)
MAX_HINTED_ORGS = 25      # beyond this, statuses are read when needed
_org_hint: dict[str, tuple[str, ...]] = {}
_owner_of_key: dict[str, str] = {}      # key hash -> user id (never changes)
_user_of_subject: dict[str, str] = {}   # '{iss}|{sub}' -> user id (bound once, never rebound)
_passed: dict[str, str] = {}            # '{userId}|{keyHash or subject}' that passed here: counted concurrently
_lock = threading.Lock()


class _Credential:
    __slots__ = ('user_id', 'key_hash', 'subject', 'rate_key', 'credential', 'expected_email', 'remembered')

    def __init__(self, user_id: str, *, key_hash: str | None = None, subject: str | None = None,
                 rate_key: str, credential: str, expected_email: str | None = None) -> None:
        self.user_id, self.key_hash, self.subject = user_id, key_hash, subject
        self.rate_key, self.credential, self.expected_email = rate_key, credential, expected_email
        self.remembered = False   # the user id came from this process's memory of the mapping


def _remember(cache: dict[str, str], key: str, value: str) -> None:
    with _lock:
        if len(cache) >= HINT_SIZE:
            cache.clear()
        cache[key] = value


def _key_credential(raw: str, credential: str, expected_email: str | None = None) -> _Credential:
    if not raw or len(raw) > identity.MAX_CREDENTIAL_LENGTH:
        raise identity.invalid_key()
    key_hash = hash_key(raw)
    owner = key_owner(raw)
    remembered = owner is None and key_hash in _owner_of_key
    if owner is None:
        owner = _owner_of_key.get(key_hash)
    if owner is None:
        pointer = credentials.get_key(key_hash)
        if pointer is None:
            raise identity.invalid_key()
        owner = pointer['userId']
        _remember(_owner_of_key, key_hash, owner)
    cred = _Credential(owner, key_hash=key_hash, rate_key=identity.key_rate_key(key_hash),
                       credential=credential, expected_email=expected_email)
    cred.remembered = remembered
    return cred


def _credential(headers: Mapping[str, str], audience: str | None = None) -> _Credential:
    """Which user and credential the headers name (identity.authenticate's rules and order)."""
    raw = headers.get('x-api-key') or headers.get('x-access-token')
    if raw:
        return _key_credential(raw.strip(), 'api-key')
    authorization = (headers.get('authorization') or '').strip()
    if authorization:
        scheme, _, value = authorization.partition(' ')
        scheme, value = scheme.lower(), value.strip()
        if scheme == 'bearer' and value.startswith(KEY_PREFIX):
            return _key_credential(value, 'api-key')
        if scheme == 'bearer':
            subject, claims = identity.verified_subject(value, audience=audience)
            user_id = _user_of_subject.get(subject)
            remembered = user_id is not None
            if user_id is None:
                user_id = credentials.user_id_for_subject(subject)
            if user_id is None:
                user_id = identity.first_sign_in(claims, subject).user_id   # binds, once
            _remember(_user_of_subject, subject, user_id)
            cred = _Credential(user_id, subject=subject, rate_key=identity.JWT_RATE_KEY, credential='jwt')
            cred.remembered = remembered
            return cred
        if scheme == 'basic':
            email, key = identity.basic_parts(value)
            return _key_credential(key, 'basic', expected_email=email)
        raise Unauthorized('Unsupported Authorization scheme (use Bearer or Basic)')
    raise Unauthorized('A credential is required: send an API key in the x-api-key header, '
                       'a bearer token or Basic credentials')


def _valid_reads(reads: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    out = []
    for family, id_ in reads:
        try:
            out.append((family, str(uuid.UUID(id_))))
        except (ValueError, AttributeError, TypeError):
            continue   # the view answers 400 for it; nothing to read ahead
    return out


def admit(headers: Mapping[str, str], method: str = 'GET', *,
          reads: Iterable[tuple[str, str]] = (), audience: str | None = None) -> tuple[Principal, ratelimit.Decision]:
    """Authenticate and count one request (module docstring). Raises ``Unauthorized``,
    ``ratelimit.Refused`` (429) or ``ratelimit.LimiterUnavailable`` (503 for a write).
    ``audience``: what a bearer JWT must name in ``aud`` (the MCP connector's resource)."""
    cred = _credential(headers, audience)
    try:
        return _admit(cred, headers, method, _valid_reads(reads), audience)
    except Unauthorized:
        if not cred.remembered:
            raise
    # the remembered mapping no longer holds (the key or subject was issued again, to another
    # user): forget it and look it up once more
    with _lock:
        _owner_of_key.pop(cred.key_hash or '', None)
        _user_of_subject.pop(cred.subject or '', None)
    return _admit(_credential(headers, audience), headers, method, _valid_reads(reads), audience)


def _identity(cred: _Credential) -> str:
    return f'{cred.user_id}|{cred.key_hash or cred.subject}'


def _count(cred: _Credential, *, minute: int, second: int, limits) -> gate.GateAnswer | Exception:
    try:
        return gate.count(cred.user_id, rate_key=cred.rate_key, minute=minute, second=second, limits=limits)
    except Exception as exc:  # noqa: BLE001 - the gate cannot count: decided by ratelimit, never a 500
        return exc


def _admit(cred: _Credential, headers: Mapping[str, str], method: str,
           wanted: list[tuple[str, str]], audience: str | None = None) -> tuple[Principal, ratelimit.Decision]:
    hinted = _org_hint.get(cred.user_id, ())
    orgs = [('organizations', o) for o in hinted]
    limits = ratelimit.limits()
    now = ratelimit.clock()
    minute, second = int(now // 60), int(now) % 60
    answer: gate.GateAnswer | Exception | None = None
    if _identity(cred) in _passed:
        # a credential that passed before in this process: count while the reads authenticate
        pending = acl.read_async(cred.user_id, wanted + orgs)
        answer = _count(cred, minute=minute, second=second, limits=limits)
        try:
            got = pending.result()
        except Exception:  # noqa: BLE001 - read again on this thread; its error is the request's
            got = acl.read(cred.user_id, wanted + orgs)
    else:
        # never seen passing here: authenticate first, so a made-up credential counts nothing
        got = acl.read(cred.user_id, wanted + orgs)
    try:
        user = _authenticated(cred, got)
    except Unauthorized:
        if isinstance(answer, gate.GateAnswer) and answer.admitted:
            gate.give_back(cred.user_id, cred.rate_key, minute=minute, second=second)
        with _lock:
            _passed.pop(_identity(cred), None)
        raise
    _remember(_passed, _identity(cred), '')
    if answer is None:
        answer = _count(cred, minute=minute, second=second, limits=limits)
    if isinstance(answer, Exception):
        log.warning('request gate unavailable (%s)', type(answer).__name__)
        decision = ratelimit.without_table(cred.user_id, cred.rate_key, method)
    else:
        decision = ratelimit.decide(answer, limits, now)
        if not answer.admitted:
            raise ratelimit.Refused(decision)
    roles = got.access.roles
    principal = Principal(user_id=cred.user_id, email=str(user.get('email') or ''), memberships=dict(roles),
                          platform_admin='PLATFORM_ADMIN' in roles.values(), credential=cred.credential,
                          rate_key=cred.rate_key, user=user)
    principal.reads.prefetched = {key: got.entities.get(key) for key in wanted}
    principal.reads.orgs_of = {cred.user_id: frozenset(roles)}
    statuses = principal.reads.organization_status
    records = principal.reads.records   # read anyway: embedding reuses them
    for _, org in orgs:
        stored = got.entities.get(('organizations', org))
        if stored is not None:
            records[('organizations', org)] = stored
        statuses[org] = stored.data.get('organizationStatus', 'ACTIVE') if stored is not None else None
    fresh = () if principal.platform_admin or len(roles) > MAX_HINTED_ORGS else tuple(sorted(roles))
    if fresh != hinted:
        with _lock:
            if len(_org_hint) >= HINT_SIZE:
                _org_hint.clear()
            _org_hint[cred.user_id] = fresh
    return principal, decision


def _authenticated(cred: _Credential, got: acl.Reads) -> dict:
    """The user record when the credential is live and the user active; else 401."""
    if cred.key_hash is not None:
        expiry = got.access.keys.get(cred.key_hash)
        if expiry is None:
            # a key stored before the ACL item carried keys: add it (once), when its record exists
            expiry = credentials.heal_key(cred.key_hash, cred.user_id)
            if expiry is None:
                raise identity.invalid_key()
        if expiry <= int(identity.now().timestamp()):   # identity.now: what tests move
            raise Unauthorized('The API key has expired')
    elif got.access.subject != cred.subject:
        raise Unauthorized('This account is bound to another sign-in identity')
    user = got.user
    if user is None or user.get('active') is False:
        raise Unauthorized('The credential does not belong to an active user')
    if cred.expected_email is not None and \
            str(user.get('email') or '').lower() != cred.expected_email.strip().lower():
        raise Unauthorized('Invalid credentials')
    return user
