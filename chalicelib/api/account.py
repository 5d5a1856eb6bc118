"""The signed-in user: /api/account/me and their API keys.

Every route here acts on the caller's own account only: a key id that is not the caller's is
a 404, the raw key is in the create response only (the table holds its hash)."""
from __future__ import annotations

from chalice import Blueprint

from .http import ANY_CONTENT, JSON_CONTENT, created, no_content, raw_body

bp = Blueprint(__name__)


@bp.route('/api/account/me', methods=['GET'], name='getAccountMe', content_types=ANY_CONTENT)
def me():
    from chalicelib.core.principal import current
    from chalicelib.services.resources import get
    principal = current()
    user = principal.user if principal.user is not None else get('users', principal.user_id)
    return {**user, 'memberships': [{'organizationId': o, 'role': r} for o, r in sorted(principal.memberships.items())],
            'platformAdmin': principal.platform_admin}


@bp.route('/api/account/me/api-keys', methods=['GET'], name='listMyApiKeys', content_types=ANY_CONTENT)
def list_keys():
    from chalicelib.core.principal import current
    from chalicelib.services.identity import list_api_keys
    return list_api_keys(current().user_id)


@bp.route('/api/account/me/api-keys', methods=['POST'], name='createMyApiKey', content_types=JSON_CONTENT)
def create_key():
    from chalicelib.core import jsonbody
    from chalicelib.core.principal import current
    from chalicelib.services.identity import create_own_api_key
    principal = current()
    return created(create_own_api_key(principal.user_id, principal.email, jsonbody.loads_object(raw_body())))


@bp.route('/api/account/me/api-keys/{id}', methods=['DELETE'], name='revokeMyApiKey', content_types=ANY_CONTENT)
def revoke_key(id):
    from chalicelib.core.principal import current
    from chalicelib.services.identity import revoke_api_key
    revoke_api_key(current().user_id, id)
    return no_content()
