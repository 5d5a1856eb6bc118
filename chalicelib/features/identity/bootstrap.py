"""First-run set-up of an empty deployment: the ``default`` organization, the platform admin
user (PLATFORM_ADMIN) and an API key for them. Idempotent: an existing admin is reused."""
from __future__ import annotations

from typing import Any

from chalicelib.core.principal import Principal
from chalicelib.core.secrets import hash_key
from chalicelib.features.identity import credentials
from chalicelib.features.identity import service as identity
from chalicelib.kernel import crud
from chalicelib.kernel.store import table

SYSTEM = Principal(user_id='00000000-0000-0000-0000-000000000001', email='system@platform',
                   platform_admin=True, credential='system')


def bootstrap(admin_email: str = 'admin@example.com', org_slug: str = 'default',
              api_key: str | None = None) -> dict[str, Any]:
    """Returns {'organizationId', 'userId', 'apiKey' (None when an existing key was kept)}."""
    table.ensure_table()
    org_id = table.unique_owner('organizations', scope=table.GLOBAL_TENANT, field_name='slug', value=org_slug)
    if org_id is None:
        org_id = crud.create('organizations', {'name': 'Default', 'slug': org_slug}, SYSTEM)['id']
    user_id = table.unique_owner('users', scope=table.GLOBAL_TENANT, field_name='email', value=admin_email)
    if user_id is None:
        user_id = crud.create('users', {'email': admin_email, 'firstName': 'Platform', 'lastName': 'Admin'},
                                   SYSTEM)['id']
    if not table.unique_exists('memberships', scope=org_id, field_name='userId', value=user_id):
        crud.create('memberships', {'organizationId': org_id, 'userId': user_id, 'role': 'PLATFORM_ADMIN'},
                         SYSTEM)
    raw = None
    if api_key:
        if credentials.get_key(hash_key(api_key)) is None:
            identity.create_api_key(user_id, admin_email, 'bootstrap', raw=api_key)
        raw = api_key
    elif not identity.list_api_keys(user_id):
        raw = identity.create_api_key(user_id, admin_email, 'bootstrap')['key']
    return {'organizationId': org_id, 'userId': user_id, 'apiKey': raw}
