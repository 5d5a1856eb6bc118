"""The signed-in user: /api/account/me and their API keys.

Every route here acts on the caller's own account only: a key id that is not the caller's is
a 404, the raw key is in the create response only (the table holds its hash)."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.kernel.http.request import ANY_CONTENT, JSON_CONTENT, body, caller, created, no_content

bp = Blueprint(__name__)


@bp.route('/api/account/me', methods=['GET'], name='getAccountMe', content_types=ANY_CONTENT)
def me():
    from chalicelib.features.identity import service as identity  # noqa: PLC0415 - lazy: cold start
    return identity.account(caller())


@bp.route('/api/account/me/api-keys', methods=['GET'], name='listMyApiKeys', content_types=ANY_CONTENT)
def list_keys():
    from chalicelib.features.identity import service as identity  # noqa: PLC0415 - lazy: cold start
    return identity.list_api_keys(caller().user_id)


@bp.route('/api/account/me/api-keys', methods=['POST'], name='createMyApiKey', content_types=JSON_CONTENT)
def create_key():
    from chalicelib.features.identity import service as identity  # noqa: PLC0415 - lazy: cold start
    return created(identity.create_own_api_key(body(), caller()))


@bp.route('/api/account/me/api-keys/{id}', methods=['DELETE'], name='revokeMyApiKey', content_types=ANY_CONTENT)
def revoke_key(id):
    from chalicelib.features.identity import service as identity  # noqa: PLC0415 - lazy: cold start
    identity.revoke_api_key(caller().user_id, id)
    return no_content()
