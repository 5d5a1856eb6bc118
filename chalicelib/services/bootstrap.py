"""First-run set-up of an empty deployment: the ``default`` organization, the platform admin
user (PLATFORM_ADMIN) and an API key for them. Idempotent: an existing admin is reused."""
from __future__ import annotations

import json
from typing import Any

from chalicelib.core.principal import Principal, set_current
from chalicelib.core.secrets import hash_key
from chalicelib.store import credentials, table

from . import identity, resources

SYSTEM = Principal(user_id='00000000-0000-0000-0000-000000000001', email='system@platform',
                   platform_admin=True, credential='system')


def _find_unique(family: str, scope: str, field: str, value: str) -> str | None:
    from chalicelib.store.repository import unique_key
    model = table.configure()
    try:
        return model.get(unique_key(family, scope, field, value), '#', consistent_read=True).ref
    except model.DoesNotExist:
        return None


def bootstrap(admin_email: str = 'admin@example.com', org_slug: str = 'default',
              api_key: str | None = None) -> dict[str, Any]:
    """Returns {'organizationId', 'userId', 'apiKey' (None when an existing key was kept)}."""
    table.create_table()
    set_current(SYSTEM)
    try:
        org_id = _find_unique('organizations', 'ALL', 'slug', org_slug)
        if org_id is None:
            org_id = resources.create('organizations', json.dumps(
                {'name': 'Default', 'slug': org_slug}).encode())['id']
        user_id = _find_unique('users', 'ALL', 'email', admin_email)
        if user_id is None:
            user_id = resources.create('users', json.dumps(
                {'email': admin_email, 'firstName': 'Platform', 'lastName': 'Admin'}).encode())['id']
        if _find_unique('memberships', org_id, 'userId', user_id) is None:
            resources.create('memberships', json.dumps(
                {'organizationId': org_id, 'userId': user_id, 'role': 'PLATFORM_ADMIN'}).encode())
    finally:
        set_current(None)
    raw = None
    if api_key:
        if credentials.get_key(hash_key(api_key)) is None:
            identity.create_api_key(user_id, admin_email, 'bootstrap', raw=api_key)
        raw = api_key
    elif not identity.list_api_keys(user_id):
        raw = identity.create_api_key(user_id, admin_email, 'bootstrap')['key']
    return {'organizationId': org_id, 'userId': user_id, 'apiKey': raw}
