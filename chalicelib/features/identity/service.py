"""Authentication: turn the request's credential into a Principal, and manage API keys.

Credentials accepted (the first one present wins, in this order):
  ``x-api-key: <key>`` (and the legacy ``x-access-token`` that existing SDKs send)
  ``Authorization: Bearer <JWT>`` from the external identity provider (see core/jwt_verify.py):
      its subject (``iss`` + ``sub``) names the user it was bound to on first sign-in; a subject
      seen for the first time is bound to the user whose e-mail the token asserts, only when
      ``email_verified`` is true and that user has no subject yet (``principal_from_jwt``).
      ``Bearer <API key>`` is accepted as an API key too.
  ``Authorization: Basic base64(email:apiKey)``: the key must belong to that e-mail's user.

Keys are stored hashed (SHA-256, see core/secrets.py); an expired or revoked key is a 401 like
an unknown one. A credential whose user no longer exists or is inactive is a 401 as well.

Two entry points:

``admit(headers, method, reads=...)``: the request path (the middleware,
features/identity/admission.py). Rate accounting is ONE UpdateItem on the user's gate item for
the current minute (features/identity/gate.py: a small item that expires), and ONE strongly consistent
BatchGetItem reads, at the same time on a second thread, the user's record, their ACL item (live
keys, bound subject, roles), the entities the route will read (a GET by id: that record) and the
organizations the caller belonged to on their previous request in this process (``_org_hint``),
whose status decides suspension (kernel/access.py). Nothing is answered before both have
decided. So a GET by id costs two calls in flight together, then one BatchGetItem of what its
answer embeds (kernel/embedding.py ``read_ahead``). A credential not yet seen passing in this
process is read before it is counted (once). A key whose text does not name its owner (keys
handed to bootstrap) and a bearer token first map to the user (the key's pointer item; the
subject's unique item): both mappings never change, so they are remembered per process and cost
one GetItem only on a process's first request of that credential. Nothing that can change is
cached: a revoked key, a removed membership, a changed role or a suspended organization apply
on the next request.

``authenticate(headers) -> Principal``: the same identity without counting a request (MCP
tools, tests): one BatchGetItem of user, roles and key record (features/identity/credentials.py).
"""
from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping
from typing import Any

from chalicelib.core import jwt_verify, limits
from chalicelib.core.clock import iso, now, now_iso, parse_instant
from chalicelib.core.config import get_config
from chalicelib.core.errors import BadRequest, Conflict, NotFound, ServiceUnavailable, Unauthorized
from chalicelib.core.observability import get_logger
from chalicelib.core.principal import Principal
from chalicelib.core.secrets import KEY_PREFIX, hash_key, key_hint, key_owner, new_api_key
from chalicelib.features.identity import credentials
from chalicelib.kernel import crud
from chalicelib.kernel.store import table

log = get_logger('auth')

MAX_CREDENTIAL_LENGTH = 512
MAX_KEYS_PER_USER = limits.MAX_API_KEYS_PER_USER
MAX_SUBJECT_LENGTH = 255
JWT_RATE_KEY = 'jwt'   # a user's bearer tokens count as one credential


def authenticate(headers: Mapping[str, str], *, audience: str | None = None) -> Principal:
    """The caller the headers name, uncounted (the rate-counting path is features/identity/admission.py).
    ``audience``: what a bearer JWT must name in ``aud`` (default ``AUTH_JWT_AUDIENCE``)."""
    raw = headers.get('x-api-key') or headers.get('x-access-token')
    if raw:
        return principal_from_api_key(raw.strip())
    authorization = (headers.get('authorization') or '').strip()
    if authorization:
        scheme, _, value = authorization.partition(' ')
        scheme, value = scheme.lower(), value.strip()
        if scheme == 'bearer' and value.startswith(KEY_PREFIX):
            return principal_from_api_key(value)
        if scheme == 'bearer':
            return principal_from_jwt(value, audience=audience)
        if scheme == 'basic':
            return principal_from_basic(value)
        raise Unauthorized('Unsupported Authorization scheme (use Bearer or Basic)')
    raise Unauthorized('A credential is required: send an API key in the x-api-key header, '
                       'a bearer token or Basic credentials')


def principal_for(access: credentials.UserAccess, user_id: str, *, credential: str, rate_key: str,
                  expected_email: str | None = None) -> Principal:
    user = access.user
    if user is None or user.get('active') is False:
        raise Unauthorized('The credential does not belong to an active user')
    email = str(user.get('email') or '')
    if expected_email is not None and email.lower() != expected_email.strip().lower():
        raise Unauthorized('Invalid credentials')
    return Principal(user_id=user_id, email=email, memberships=dict(access.roles),
                     platform_admin='PLATFORM_ADMIN' in access.roles.values(),
                     credential=credential, rate_key=rate_key, user=user)


def invalid_key() -> Unauthorized:
    """The 401 of an unknown, revoked or malformed API key. Under `make run` it says where the
    local admin key is and how more keys are made (docs/api/conventions.md "Identity")."""
    key_file = get_config().local_key_file
    if not key_file:
        return Unauthorized('Invalid API key')
    return Unauthorized(f'Invalid API key. Under make run the admin key is in {key_file} (kept across '
                        'restarts; `make run FRESH=1` starts empty with a new one); more keys: '
                        'POST /api/account/me/api-keys with that key')


def _key_access(raw: str) -> tuple[credentials.UserAccess, str, dict[str, Any]]:
    """(owner's access, owner id, key record) of a valid, unexpired key; else 401.

    A key that names its owner costs one BatchGetItem (user, roles, key record); any other key
    one GetItem (the pointer) more."""
    if not raw or len(raw) > MAX_CREDENTIAL_LENGTH:
        raise invalid_key()
    key_hash = hash_key(raw)
    owner = key_owner(raw)
    access = credentials.user_access(owner, key_hash) if owner else None
    if access is None or access.key is None:
        pointer = credentials.get_key(key_hash)
        if pointer is None:
            raise invalid_key()
        owner = pointer['userId']
        access = credentials.user_access(owner, key_hash)
        if access.key is None:   # revoked: both items go in one transaction
            raise invalid_key()
    expires = access.key.get('expiresAt')
    if expires and parse_instant(expires) <= now():
        raise Unauthorized('The API key has expired')
    return access, owner, access.key


def key_rate_key(key_hash: str) -> str:
    """The credential the rate limiter counts for an API key (a prefix of its hash)."""
    return f'key-{key_hash[:20]}'


def principal_from_api_key(raw: str) -> Principal:
    access, owner, _ = _key_access(raw)
    return principal_for(access, owner, credential='api-key', rate_key=key_rate_key(hash_key(raw)))


def basic_parts(value: str) -> tuple[str, str]:
    """(e-mail, key) of Basic credentials; 401 when they are malformed."""
    if not value or len(value) > 2 * MAX_CREDENTIAL_LENGTH:
        raise Unauthorized('Invalid Basic credentials')
    try:
        decoded = base64.b64decode(value, validate=True).decode('utf-8')
    except (binascii.Error, ValueError):
        raise Unauthorized('Invalid Basic credentials') from None
    email, sep, key = decoded.rpartition(':')   # keys never contain ':'; e-mails may
    if not sep or not email or not key:
        raise Unauthorized('Invalid Basic credentials')
    return email, key


def principal_from_basic(value: str) -> Principal:
    email, key = basic_parts(value)
    access, owner, _ = _key_access(key)
    return principal_for(access, owner, credential='basic', rate_key=key_rate_key(hash_key(key)),
                         expected_email=email)


def principal_from_jwt(token: str, *, audience: str | None = None) -> Principal:
    """The user a verified bearer token names.

    The identity provider's subject (``iss`` + ``sub``) is the identity: once bound to a user it
    alone names them, whatever e-mail later tokens carry. An unknown subject falls back to the
    token's e-mail only when the provider asserts it (``email_verified`` true; a missing claim
    counts as not verified), and only for a user no subject is bound to yet: the subject is then
    bound to that user (once, in one transaction). So an address reserved in advance, or a
    second identity-provider account claiming the same address, never lands in an account
    someone else signs in to."""
    subject, claims = verified_subject(token, audience=audience)
    user_id = credentials.user_id_for_subject(subject)
    if user_id is not None:
        return principal_for(credentials.user_access(user_id), user_id, credential='jwt', rate_key=JWT_RATE_KEY)
    return first_sign_in(claims, subject)


def verified_subject(token: str, *, audience: str | None = None) -> tuple[str, dict[str, Any]]:
    """(``{iss}|{sub}``, claims) of a bearer token the identity provider signed for ``audience``
    (default ``AUTH_JWT_AUDIENCE``); else 401 (503 when its keys cannot be fetched)."""
    cfg = get_config()
    audience = audience or cfg.jwt_audience   # the MCP connector passes its resource (features/mcp/auth.py)
    if not (cfg.jwt_issuer and audience and cfg.jwt_jwks_url):
        raise Unauthorized('Bearer tokens are not accepted by this deployment')
    try:
        claims = jwt_verify.verify(token, issuer=cfg.jwt_issuer, audience=audience,
                                   jwks_url=cfg.jwt_jwks_url, max_key_age=cfg.jwt_keys_max_age_seconds)
    except jwt_verify.InvalidToken as exc:
        raise Unauthorized(str(exc)) from None
    except jwt_verify.KeysUnavailable:
        log.warning('identity provider keys unavailable (%s)', cfg.jwt_jwks_url)
        raise ServiceUnavailable('The identity provider cannot be reached; retry later', retry_after=5) from None
    sub = claims.get('sub')
    if not isinstance(sub, str) or not sub or len(sub) > MAX_SUBJECT_LENGTH:
        raise Unauthorized('The token carries no subject')
    return f"{claims.get('iss')}|{sub}", claims


def _verified_email(claims: dict[str, Any]) -> str:
    email = claims.get('email')
    if not isinstance(email, str) or '@' not in email or len(email) > 254:
        raise Unauthorized('The token carries no e-mail claim')
    verified = claims.get('email_verified')
    if not (verified is True or (isinstance(verified, str) and verified.lower() == 'true')):
        raise Unauthorized('The token e-mail address is not verified')
    return email.strip().lower()


def first_sign_in(claims: dict[str, Any], subject: str) -> Principal:
    email = _verified_email(claims)
    user_id = credentials.user_id_for_email(email)
    if user_id is None:
        raise Unauthorized('No user has the e-mail address of this token')
    access = credentials.user_access(user_id)
    if access.subject is None and access.user is not None and \
            credentials.bind_subject(user_id, subject, email):
        access.subject = subject
    elif credentials.user_id_for_subject(subject) != user_id:   # lost a race to itself: that is fine
        # bound to another identity-provider account, or the address just moved
        raise Unauthorized('This account is bound to another sign-in identity')
    return principal_for(access, user_id, credential='jwt', rate_key=JWT_RATE_KEY)


# ----------------------------------------------------------------------------- API keys

def _public(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record.get(k) for k in ('id', 'name', 'prefix', 'createdOn', 'expiresAt', 'userId')}



def create_api_key(user_id: str, email: str, name: str, *, expires_at: str | None = None,
                   raw: str | None = None) -> dict[str, Any]:
    """Store a new key (hashed) and return its record with the raw key, shown this once.

    Order: the gateway twin first (with a usage plan), then the table. A key is only usable once
    stored, so a twin without a stored key would be an orphan: when storing fails, the twin is
    deleted before the error is answered (a twin that cannot be deleted is logged by id)."""
    raw = raw or new_api_key(user_id)
    record = {'id': str(uuid.uuid4()), 'name': name, 'userId': user_id,
              'prefix': key_hint(raw), 'createdOn': now_iso(), 'expiresAt': expires_at}
    key_hash = hash_key(raw)
    credentials.provision_gateway_key(key_hash, record)
    try:
        credentials.put_key(key_hash, record)
    except BaseException:
        credentials.remove_gateway_key(record)
        raise
    return {**_public(record), 'key': raw}


def create_own_api_key(body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    name, expires = parse_key_request(body)
    if len(credentials.keys_of(principal.user_id)) >= MAX_KEYS_PER_USER:
        raise Conflict(f'A user may hold at most {MAX_KEYS_PER_USER} API keys; revoke one first')
    return create_api_key(principal.user_id, principal.email, name, expires_at=expires)


def account(principal: Principal) -> dict[str, Any]:
    """GET /api/account/me: the caller's user record, memberships, invitations waiting for an
    answer (features/identity/memberships.py) and platform-admin flag."""
    user = principal.user if principal.user is not None else crud.get('users', principal.user_id, principal)
    pending = table.memberships_of(principal.user_id, invited=True)
    names = {o.id: o.data.get('name') for o in table.batch_get(
        ('organizations', m['organizationId']) for m in pending).values()} if pending else {}
    invitations = [{'id': m['id'], 'organizationId': m['organizationId'],
                    'organizationName': names.get(m['organizationId']), 'role': m['role'],
                    'invitedByUserId': m.get('createdByUserId'), 'createdOn': m.get('createdOn')}
                   for m in sorted(pending, key=lambda m: m.get('createdOn') or '')]
    return {**user, 'memberships': [{'organizationId': o, 'role': r} for o, r in sorted(principal.memberships.items())],
            'invitations': invitations, 'platformAdmin': principal.platform_admin}


def list_api_keys(user_id: str) -> list[dict[str, Any]]:
    return [_public(r) for _, r in credentials.keys_of(user_id)]


def revoke_api_key(user_id: str, key_id: str) -> None:
    """Revoke one of the user's keys: the table first (the key stops working on the next
    request), then its gateway twin. A key someone else revoked meanwhile is 404, like one that
    never existed; a twin API Gateway will not delete now is logged, never a 500 (the revocation
    has happened, and a twin of a revoked key admits nothing)."""
    for key_hash, record in credentials.keys_of(user_id):
        if record.get('id') == key_id:
            if not credentials.delete_key(key_hash, record):
                break
            credentials.remove_gateway_key(record)
            return
    raise NotFound(f'No API key with id {str(key_id)[:64]}')


def parse_key_request(body: dict[str, Any]) -> tuple[str, str | None]:
    name = body.get('name')
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise BadRequest("Field 'name' is required (1-200 characters)")
    expires = body.get('expiresAt')
    if expires is not None:
        try:
            when = parse_instant(expires)
            expires = iso(when)
        except (ValueError, TypeError, AttributeError, OverflowError):
            raise BadRequest("Field 'expiresAt' must be an ISO 8601 date-time") from None
        if when <= now():
            raise BadRequest("Field 'expiresAt' must be in the future")
    return name.strip(), expires
