"""The signed-in user: /api/account/me and their API keys.

Every route here acts on the caller's own account only: a key id that is not the caller's is
a 404, the raw key is in the create response only (the table holds its hash)."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.core import limits
from chalicelib.kernel.http.docmeta import describe, ref, schema
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


# ----------------------------------------------------------------------------- account routes

_API_KEY = schema('ApiKey', {
    'type': 'object',
    'required': ['id', 'name', 'prefix', 'createdOn', 'expiresAt', 'userId'],
    'properties': {
        'id': {'type': 'string', 'format': 'uuid'},
        'name': {'type': 'string'},
        'prefix': {'type': 'string', 'description': 'the first characters of the key, to recognise it'},
        'createdOn': {'type': 'string', 'format': 'date-time'},
        'expiresAt': {'type': 'string', 'format': 'date-time', 'nullable': True},
        'userId': {'type': 'string', 'format': 'uuid'},
    },
})
_NEW_API_KEY = schema('CreatedApiKey', {
    'allOf': [_API_KEY, {
        'type': 'object', 'required': ['key'],
        'properties': {'key': {'type': 'string', 'description': 'the raw key, shown this once'}},
    }],
})
_API_KEY_REQUEST = schema('ApiKeyCreateRequest', {
    'type': 'object', 'required': ['name'],
    'properties': {
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 200, 'pattern': '\\S'},
        'expiresAt': {'type': 'string', 'format': 'date-time', 'nullable': True,
                      'description': 'must be in the future; null or omitted: the key does not expire'},
    },
})
_ACCOUNT = schema('Account', {
    'allOf': [ref('User'), {
        'type': 'object', 'required': ['memberships', 'invitations', 'platformAdmin'],
        'properties': {
            'memberships': {'type': 'array', 'items': {
                'type': 'object', 'required': ['organizationId', 'role'],
                'properties': {'organizationId': {'type': 'string', 'format': 'uuid'},
                               'role': ref('MembershipRole')}}},
            'invitations': {'type': 'array', 'description': (
                'memberships offered to the user and not answered yet: accept with PUT /api/memberships/{id} '
                '{"status": "ACTIVE"}, decline with DELETE'), 'items': {
                'type': 'object', 'required': ['id', 'organizationId', 'role'],
                'properties': {'id': {'type': 'string', 'format': 'uuid', 'description': 'the membership id'},
                               'organizationId': {'type': 'string', 'format': 'uuid'},
                               'organizationName': {'type': 'string', 'nullable': True},
                               'role': ref('MembershipRole'),
                               'invitedByUserId': {'type': 'string', 'nullable': True},
                               'createdOn': {'type': 'string', 'format': 'date-time', 'nullable': True}}}},
            'platformAdmin': {'type': 'boolean'},
        },
    }],
})

describe('getAccountMe', summary='The signed-in user, with their memberships', tags=['account'],
         responses={200: _ACCOUNT}, errors=[401, 404, 429, 503])
describe('listMyApiKeys', summary="List the signed-in user's API keys", tags=['account'],
         responses={200: {'type': 'array', 'items': _API_KEY}}, errors=[401, 429, 503])
describe('createMyApiKey', summary='Create an API key for the signed-in user', tags=['account'],
         description=f'A user holds at most {limits.MAX_API_KEYS_PER_USER} live API keys: one more is 409 '
                     '(revoke one first). The key is shown once, in this answer.',
         request=_API_KEY_REQUEST, responses={201: _NEW_API_KEY}, errors=[400, 401, 409, 413, 415, 429, 503])
describe('revokeMyApiKey', summary="Revoke one of the signed-in user's API keys", tags=['account'],
         responses={204: None}, errors=[401, 404, 429, 503])
