"""Credentials at rest, laid out so that authenticating is one strongly consistent read.

The partition of a user (pk ``users#{userId}``, the user entity's own partition) holds:

| sk             | item                                                                     |
|----------------|--------------------------------------------------------------------------|
| ``#``          | the user entity (written by the generic service)                          |
| ``ACL``        | the user's roles: one attribute ``acl_{orgId}`` = role per membership,    |
|                | changed in the same transaction as the membership (services/hooks/access) |
| ``KEY#{hash}`` | one per API key: ``data`` = the key record (never the key itself)         |

New keys name their user (``pk_{userId, base64url}_{secret}``, core/secrets.py), so an API-key
request reads user, roles and key record with ONE BatchGetItem (three known keys, consistent
reads). A pointer item ``KEY#{hash}`` / ``#`` (same record, ``ref`` = userId) finds the user of
a key whose text does not name it (keys handed to bootstrap): one GetItem more. Only the
SHA-256 of a key is ever stored.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pynamodb.expressions.operand import Path

from chalicelib.core.config import get_config

from .model import Item, client, configure
from .repository import Op, commit, update_item
from .table import ENTITY_SK, GLOBAL_TENANT, entity_pk, unique_owner

KEY_SK = 'KEY#'
ACL_SK = 'ACL'
ACL_ATTR = 'acl_'


@dataclass
class UserAccess:
    user: dict[str, Any] | None                                   # None: no such user
    roles: dict[str, str] = field(default_factory=dict)           # organization id -> role
    key: dict[str, Any] | None = None                             # the asked-for key's record


def user_access(user_id: str, key_hash: str | None = None) -> UserAccess:
    """The user, their roles and (when ``key_hash`` is given) that key's record: one
    BatchGetItem with strongly consistent reads."""
    model = configure()
    ddb = client()
    pk = {'S': entity_pk('users', user_id)}
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
    owned = model(entity_pk('users', record['userId']), f'{KEY_SK}{key_hash}', kind='apikey', data=record)
    return model, pointer, owned


def put_key(key_hash: str, record: dict[str, Any]) -> None:
    model, pointer, owned = _items(key_hash, record)
    commit([Op('put', item=pointer, condition=model.pk.does_not_exist(), tag={'what': 'key'}),
            Op('put', item=owned, condition=model.pk.does_not_exist(), tag={'what': 'key'})])


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
        entity_pk('users', user_id), model.sk.startswith(KEY_SK), consistent_read=True) if i.data is not None]
    return sorted(found, key=lambda pair: (pair[1].get('createdOn') or '', pair[1].get('id') or ''))


def delete_key(key_hash: str, record: dict[str, Any]) -> None:
    _, pointer, owned = _items(key_hash, record)
    commit([Op('delete', item=pointer, tag={'what': 'key'}), Op('delete', item=owned, tag={'what': 'key'})])


def user_id_for_email(email: str) -> str | None:
    """The id of the user with this (already lowercased) e-mail: one GetItem on its unique item."""
    return unique_owner('users', scope=GLOBAL_TENANT, field_name='email', value=email)


# ----------------------------------------------------------------------------- roles (the ACL item)

def acl_put(user_id: str, org_id: str, role: str) -> Op:
    """Transaction operation: the user holds ``role`` in ``org_id``."""
    model = configure()
    return update_item(entity_pk('users', user_id), ACL_SK,
                       [model.kind.set('acl'), Path(f'{ACL_ATTR}{org_id}').set(role)], what='acl')


def acl_delete(user_id: str, org_id: str) -> Op:
    """Transaction operation: the user no longer holds a role in ``org_id``."""
    return update_item(entity_pk('users', user_id), ACL_SK, [Path(f'{ACL_ATTR}{org_id}').remove()], what='acl')


# ----------------------------------------------------------------------------- API Gateway keys
# With USAGE_PLAN_ID configured, every platform key gets a twin API Gateway key in that usage
# plan, so the gateway throttles per key too (infra/usage_plan.py). The twin's value is the
# key's SHA-256 (what the table stores anyway): the Lambda authorizer computes it from the
# presented key without any lookup and returns it as the usage identifier. Clients never send
# it: the API's key source is AUTHORIZER.

def _apigateway():
    import boto3  # noqa: PLC0415 - lazy: only key creation and revocation talk to API Gateway
    cfg = get_config()
    return boto3.client('apigateway', region_name=cfg.region, endpoint_url=cfg.endpoint_url)


def provision_gateway_key(key_hash: str, record: dict[str, Any]) -> None:
    """Create the gateway twin of a new key (no-op without a usage plan); sets gatewayKeyId."""
    plan = get_config().usage_plan_id
    if not plan:
        return
    client = _apigateway()
    created = client.create_api_key(name=f"platform-key-{record['id']}", value=key_hash, enabled=True,
                                    description=f"platform API key {record['id']} of user {record['userId']}")
    client.create_usage_plan_key(usagePlanId=plan, keyId=created['id'], keyType='API_KEY')
    record['gatewayKeyId'] = created['id']


def remove_gateway_key(record: dict[str, Any]) -> None:
    key_id = record.get('gatewayKeyId')
    if not key_id:
        return
    client = _apigateway()
    try:
        client.delete_api_key(apiKey=key_id)
    except client.exceptions.NotFoundException:
        pass
