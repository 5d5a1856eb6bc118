"""Credentials at rest, laid out so that authenticating is one strongly consistent read.

The partition of a user (pk ``users#{userId}``, the user entity's own partition) holds:

| sk             | item                                                                     |
|----------------|--------------------------------------------------------------------------|
| ``#``          | the user entity (written by the generic service)                          |
| ``ACL``        | the user's roles: one attribute ``acl_{orgId}`` = role per active         |
|                | membership, changed in the same transaction as the membership             |
|                | (features/identity/memberships.py; an invitation writes none); ``sub`` =  |
|                | identity-provider subject bound on first bearer sign-in (``{iss}|{sub}``,  |
|                | set once, with its unique item ``UQ#users#ALL#sub#...`` in the same       |
|                | transaction)                                                              |
|                | ``key_{hash}`` = a live key's expiry: the request gate reads this item    |
|                | to authenticate while it counts elsewhere (kernel/store/acl.py ``read``)  |
| ``KEY#{hash}`` | one per API key: ``data`` = the key record (never the key itself)         |

New keys name their user (``pk_{userId, base64url}_{secret}``, core/secrets.py), so a request
goes straight to the user's ACL item (read beside the request gate's count, kernel/store/acl.py;
the item's roles and its reads are the kernel's, the keys and subjects written here);
``user_access`` (user, roles and key record with ONE BatchGetItem, consistent reads)
authenticates without counting (identity.authenticate).
A pointer item ``KEY#{hash}`` / ``#`` (same record, ``ref`` = userId) finds the user of
a key whose text does not name it (keys handed to bootstrap): one GetItem more. Only the
SHA-256 of a key is ever stored.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from pynamodb.expressions.operand import Path

from chalicelib.core.clock import parse_instant
from chalicelib.core.config import get_config
from chalicelib.core.observability import get_logger
from chalicelib.kernel.store.acl import ACL_ATTR, ACL_SK, KEY_ATTR, NEVER, SUBJECT_ATTR
from chalicelib.kernel.store.endpoints import watched
from chalicelib.kernel.store.model import Item, client, configure
from chalicelib.kernel.store.repository import Op, StoreUnavailable, WriteConflict, commit, update_item
from chalicelib.kernel.store.table import ENTITY_SK, GLOBAL_TENANT, entity_pk, unique_key, unique_owner
from chalicelib.kernel.tenancy import USERS

log = get_logger('credentials')

KEY_SK = 'KEY#'


@dataclass
class UserAccess:
    user: dict[str, Any] | None                                   # None: no such user
    roles: dict[str, str] = field(default_factory=dict)           # organization id -> role
    key: dict[str, Any] | None = None                             # the asked-for key's record
    subject: str | None = None                                    # bound identity-provider subject


def user_access(user_id: str, key_hash: str | None = None) -> UserAccess:
    """The user, their roles and (when ``key_hash`` is given) that key's record: one
    BatchGetItem with strongly consistent reads."""
    model = configure()
    ddb = client()
    pk = {'S': entity_pk(USERS, user_id)}
    keys = [{'pk': pk, 'sk': {'S': ENTITY_SK}}, {'pk': pk, 'sk': {'S': ACL_SK}}]
    if key_hash is not None:
        keys.append({'pk': pk, 'sk': {'S': f'{KEY_SK}{key_hash}'}})
    request = {model.Meta.table_name: {'Keys': keys, 'ConsistentRead': True}}
    raw_items: list[dict[str, Any]] = []
    for _ in range(5):   # unprocessed keys come back under throttling: ask again
        answer = ddb.batch_get_item(RequestItems=request)
        raw_items += answer.get('Responses', {}).get(model.Meta.table_name, [])
        request = answer.get('UnprocessedKeys') or {}
        if not request:
            break
    else:
        raise RuntimeError('credentials could not be read (throttled)')
    access = UserAccess(user=None)
    for raw in raw_items:
        sk = raw['sk']['S']
        if sk == ACL_SK:
            access.roles = {name[len(ACL_ATTR):]: value['S'] for name, value in raw.items()
                            if name.startswith(ACL_ATTR) and 'S' in value}
            access.subject = (raw.get(SUBJECT_ATTR) or {}).get('S')
            continue
        item = Item.from_raw_data(raw)
        data = item.data.as_dict() if item.data is not None else None
        if sk == ENTITY_SK:
            access.user = None if data is None or data.get('deleted') is True else data
        else:
            access.key = data
    return access


# ----------------------------------------------------------------------------- API keys

def _items(key_hash: str, record: dict[str, Any]):
    model = configure()
    pointer = model(f'{KEY_SK}{key_hash}', ENTITY_SK, kind='apikey', data=record, ref=record['userId'])
    owned = model(entity_pk(USERS, record['userId']), f'{KEY_SK}{key_hash}', kind='apikey', data=record)
    return model, pointer, owned


def key_expiry(record: dict[str, Any]) -> int:
    """The epoch second a key stops working (kernel/store/acl.py ``NEVER`` when it has no expiry)."""
    expires = record.get('expiresAt')
    return int(parse_instant(expires).timestamp()) if expires else NEVER


def key_live_op(user_id: str, key_hash: str, record: dict[str, Any]) -> Op:
    """Transaction operation: the ACL item knows the key is live (kernel/store/acl.py ``read`` reads it)."""
    model = configure()
    return update_item(entity_pk(USERS, user_id), ACL_SK,
                       [model.kind.set('acl'), Path(f'{KEY_ATTR}{key_hash}').set(key_expiry(record))], what='key')


def put_key(key_hash: str, record: dict[str, Any]) -> None:
    model, pointer, owned = _items(key_hash, record)
    commit([Op('put', item=pointer, condition=model.pk.does_not_exist(), tag={'what': 'key'}),
            Op('put', item=owned, condition=model.pk.does_not_exist(), tag={'what': 'key'}),
            key_live_op(record['userId'], key_hash, record)])


def heal_key(key_hash: str, user_id: str) -> int | None:
    """A key stored before the ACL item carried keys: add its ``key_`` attribute, provided its
    key record still exists (a revocation in between wins). Its expiry (epoch seconds), or
    None when it does not exist."""
    model = configure()
    try:
        item = model.get(entity_pk(USERS, user_id), f'{KEY_SK}{key_hash}', consistent_read=True)
    except model.DoesNotExist:
        return None
    record = item.data.as_dict() if item.data is not None else {}
    try:
        commit([Op('check', model_key=(entity_pk(USERS, user_id), f'{KEY_SK}{key_hash}'),
                   condition=model.pk.exists(), tag={'what': 'key'}),
                key_live_op(user_id, key_hash, record)])
    except WriteConflict:
        return None
    return key_expiry(record)


def get_key(key_hash: str) -> dict[str, Any] | None:
    """The record of a key by its hash (the pointer item): one GetItem."""
    model = configure()
    try:
        item = model.get(f'{KEY_SK}{key_hash}', ENTITY_SK, consistent_read=True)
    except model.DoesNotExist:
        return None
    return item.data.as_dict() if item.data is not None else None


def keys_of(user_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(hash, record) of a user's keys, from their partition (strongly consistent)."""
    model = configure()
    found = [(i.sk[len(KEY_SK):], i.data.as_dict()) for i in model.query(
        entity_pk(USERS, user_id), model.sk.startswith(KEY_SK), consistent_read=True) if i.data is not None]
    return sorted(found, key=lambda pair: (pair[1].get('createdOn') or '', pair[1].get('id') or ''))


def delete_key(key_hash: str, record: dict[str, Any]) -> bool:
    """Delete both items of a key; False when it was already gone (revoked by someone else)."""
    model, pointer, owned = _items(key_hash, record)
    for _ in range(3):
        try:
            commit([Op('delete', item=pointer, condition=model.pk.exists(), tag={'what': 'key'}),
                    Op('delete', item=owned, condition=model.pk.exists(), tag={'what': 'key'}),
                    update_item(entity_pk(USERS, record['userId']), ACL_SK,
                                [Path(f'{KEY_ATTR}{key_hash}').remove()], what='key')])
            return True
        except WriteConflict as exc:
            if exc.code == 'ConditionalCheckFailed':
                return False
    raise StoreUnavailable()   # still conflicting: another revoke is running, nothing was lost


def user_id_for_email(email: str) -> str | None:
    """The id of the user with this (already lowercased) e-mail: one GetItem on its unique item."""
    return unique_owner(USERS, scope=GLOBAL_TENANT, field_name='email', value=email)


# ----------------------------------------------------------------------------- identity-provider subjects

def user_id_for_subject(subject: str) -> str | None:
    """The user a bearer token's ``{iss}|{sub}`` is bound to: one GetItem on its unique item."""
    return unique_owner(USERS, scope=GLOBAL_TENANT, field_name=SUBJECT_ATTR, value=subject)


def bind_subject(user_id: str, subject: str, email: str) -> bool:
    """Bind ``subject`` to the user, once: the ACL item's ``sub`` (only while unset) and the
    subject's unique item, in one transaction, provided the user still has ``email``. False
    when any of that no longer holds (bound meanwhile, e-mail changed, subject taken)."""
    model = configure()
    sub = Path(SUBJECT_ATTR)
    claim = model(unique_key(USERS, scope=GLOBAL_TENANT, field_name=SUBJECT_ATTR, value=subject), ENTITY_SK,
                  kind='unique', ref=user_id)
    ops = [
        update_item(entity_pk(USERS, user_id), ACL_SK, [model.kind.set('acl'), sub.set(subject)],
                    condition=sub.does_not_exist(), what='subject'),
        Op('put', item=claim, condition=model.pk.does_not_exist(), tag={'what': 'subject'}),
        Op('check', model_key=(entity_pk(USERS, user_id), ENTITY_SK),
           condition=model.pk.exists() & (model.data['email'] == email), tag={'what': 'subject'}),
    ]
    try:
        commit(ops)
    except WriteConflict:
        return False
    return True


# ----------------------------------------------------------------------------- roles (the ACL item)

# ----------------------------------------------------------------------------- API Gateway keys
# With USAGE_PLAN_ID configured, every platform key gets a twin API Gateway key in that usage
# plan, so the gateway throttles per key too (infra/usage_plan.py). The twin's value is the
# key's SHA-256 (what the table stores anyway): the Lambda authorizer computes it from the
# presented key without any lookup and returns it as the usage identifier. Clients never send
# it: the API's key source is AUTHORIZER.

def _apigateway():
    import boto3  # noqa: PLC0415 - lazy: only key creation and revocation talk to API Gateway
    cfg = get_config()
    return watched(boto3.client('apigateway', region_name=cfg.region, endpoint_url=cfg.endpoint_url))


def _gateway_code(exc: Exception) -> str:
    return str(getattr(exc, 'response', {}).get('Error', {}).get('Code', ''))


GATEWAY_RETRYABLE = frozenset({'TooManyRequestsException', 'ServiceUnavailableException', 'InternalFailure'})
sleep = time.sleep   # tests patch this


def provision_gateway_key(key_hash: str, record: dict[str, Any]) -> None:
    """Create the gateway twin of a new key (no-op without a usage plan); sets gatewayKeyId.

    Called before the key is stored: a twin whose usage-plan link fails is deleted again
    (``discard_gateway_key``), and the caller deletes the twin when storing the key fails, so
    no gateway key outlives a key that was never stored. API Gateway refusing for load is 503."""
    plan = get_config().usage_plan_id
    if not plan:
        return
    gateway = _apigateway()
    try:
        created = gateway.create_api_key(name=f"platform-key-{record['id']}", value=key_hash, enabled=True,
                                         description=f"platform API key {record['id']} of user {record['userId']}")
    except gateway.exceptions.ClientError as exc:
        if _gateway_code(exc) in GATEWAY_RETRYABLE:
            raise StoreUnavailable() from None
        raise
    try:
        gateway.create_usage_plan_key(usagePlanId=plan, keyId=created['id'], keyType='API_KEY')
    except Exception as exc:
        discard_gateway_key(created['id'])
        if _gateway_code(exc) in GATEWAY_RETRYABLE:
            raise StoreUnavailable() from None
        raise
    record['gatewayKeyId'] = created['id']


def discard_gateway_key(key_id: str | None) -> bool:
    """Delete a gateway key, a few times if API Gateway pushes back; an already deleted key is
    fine. Never raises: a twin that cannot be deleted now is logged with its id for clean-up
    (it is inert: the platform refuses the key it belongs to). True when it is gone."""
    if not key_id:
        return True
    gateway = _apigateway()
    for attempt in range(3):
        try:
            gateway.delete_api_key(apiKey=key_id)
            return True
        except gateway.exceptions.NotFoundException:
            return True
        except Exception as exc:  # noqa: BLE001 - logged below; the caller's outcome does not depend on it
            if _gateway_code(exc) not in GATEWAY_RETRYABLE or attempt == 2:
                log.error('gateway key %s could not be deleted (%s): delete it by hand', key_id,
                          _gateway_code(exc) or type(exc).__name__)
                return False
            sleep(random.uniform(0, 0.2 * 2 ** attempt))
    return False


def remove_gateway_key(record: dict[str, Any]) -> bool:
    return discard_gateway_key(record.get('gatewayKeyId'))
