"""API keys at rest: only the SHA-256 of a key is stored (pk ``KEY#{hash}``); the user's keys
are listed through the by_parent index (``KEYS#U#{userId}``)."""
from __future__ import annotations

from typing import Any

from .table import ENTITY_SK, configure


def put_key(key_hash: str, record: dict[str, Any]) -> None:
    model = configure()
    item = model(f'KEY#{key_hash}', ENTITY_SK, kind='apikey', data=record,
                 ppk=f"KEYS#U#{record['userId']}", csk=f"{record['createdOn']}#{record['id']}")
    item.save(condition=model.pk.does_not_exist())


def get_key(key_hash: str) -> dict[str, Any] | None:
    model = configure()
    try:
        item = model.get(f'KEY#{key_hash}', ENTITY_SK, consistent_read=True)
    except model.DoesNotExist:
        return None
    return item.data.as_dict() if item.data is not None else None


def keys_of(user_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(pk, record) of a user's keys, oldest first."""
    model = configure()
    return [(i.pk, i.data.as_dict()) for i in model.by_parent.query(f'KEYS#U#{user_id}') if i.data is not None]


def delete_key(pk: str) -> None:
    model = configure()
    model(pk, ENTITY_SK).delete()


def user_id_for_email(email: str) -> str | None:
    """The id of the user with this (already lowercased) e-mail: one GetItem on its unique item."""
    from .repository import unique_key
    model = configure()
    try:
        return model.get(unique_key('users', 'ALL', 'email', email), ENTITY_SK, consistent_read=True).ref
    except model.DoesNotExist:
        return None


# ----------------------------------------------------------------------------- API Gateway keys
# With USAGE_PLAN_ID configured, every platform key gets a twin API Gateway key in that usage
# plan, so the gateway throttles per key too (infra/usage_plan.py). The twin's value is the
# key's SHA-256 (what the table stores anyway): the Lambda authorizer computes it from the
# presented key without any lookup and returns it as the usage identifier. Clients never send
# it: the API's key source is AUTHORIZER.

def _apigateway():
    import boto3
    from chalicelib.core.config import get_config
    cfg = get_config()
    return boto3.client('apigateway', region_name=cfg.region, endpoint_url=cfg.endpoint_url)


def provision_gateway_key(key_hash: str, record: dict[str, Any]) -> None:
    """Create the gateway twin of a new key (no-op without a usage plan); sets gatewayKeyId."""
    from chalicelib.core.config import get_config
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
