"""Credentials through HTTP: API keys (x-api-key, legacy x-access-token), bearer JWTs from the
identity provider (RS256 and ES256, keys served by a local JWKS server), Basic email:key, and
the self-service API key routes. Also: no raw key or token is ever stored, logged or echoed."""
from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import time
import uuid

import pytest

from tests.conftest import ADMIN_KEY, make_user
from tests.unit.test_jwt_verify import AUDIENCE, ISSUER, JwksServer, Signer

RSA = Signer('RS256')
EC = Signer('ES256')


@pytest.fixture
def idp(monkeypatch):
    from chalicelib.core import jwt_verify
    from chalicelib.core.config import get_config, reset_config
    server = JwksServer(RSA, EC)
    monkeypatch.setenv('AUTH_JWT_ISSUER', ISSUER)
    monkeypatch.setenv('AUTH_JWT_AUDIENCE', AUDIENCE)
    monkeypatch.setenv('AUTH_JWT_JWKS_URL', server.url)
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests
    jwt_verify.reset_caches()
    yield server
    server.close()
    monkeypatch.delenv('AUTH_JWT_ISSUER')
    monkeypatch.delenv('AUTH_JWT_AUDIENCE')
    monkeypatch.delenv('AUTH_JWT_JWKS_URL')
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests
    jwt_verify.reset_caches()


def bearer(token: str) -> dict[str, str]:
    return {'authorization': f'Bearer {token}'}


def basic(email: str, key: str) -> dict[str, str]:
    return {'authorization': 'Basic ' + base64.b64encode(f'{email}:{key}'.encode()).decode()}


def assert_401(r) -> None:
    assert r.status == 401, (r.status, r.json)
    assert r.json['status'] == 401 and r.json['error'] == 'Unauthorized' and r.json['message']
    assert 'www-authenticate' in r.headers


# ----------------------------------------------------------------------------- API keys

def test_missing_or_unknown_credentials_are_401_with_www_authenticate(api):
    assert_401(api.get('/api/projects', key=None))
    assert_401(api.get('/api/projects', key='pk_' + 'x' * 43))
    assert_401(api.get('/api/projects', key='not-even-a-key'))
    assert_401(api.get('/api/projects', key=None, headers={'authorization': 'Digest abc'}))
    assert_401(api.get('/api/projects', key=None, headers={'authorization': 'Bearer'}))


def test_api_key_in_x_api_key_legacy_header_or_bearer(api, platform):
    assert api.get('/api/account/me').status == 200
    legacy = api.get('/api/account/me', key=None, headers={'x-access-token': ADMIN_KEY})
    assert legacy.status == 200 and legacy.json['id'] == platform['userId']
    assert api.get('/api/account/me', key=None, headers=bearer(ADMIN_KEY)).status == 200


def test_account_me_is_the_calling_user(api, org_id):
    user, key = make_user(api, org_id, 'VIEWER')
    me = api.as_key(key).get('/api/account/me')
    assert me.status == 200
    assert me.json['id'] == user['id'] and me.json['email'] == user['email']
    assert me.json['memberships'] == [{'organizationId': org_id, 'role': 'VIEWER'}]
    assert me.json['platformAdmin'] is False


def test_api_key_lifecycle_create_list_use_revoke(api, org_id):
    _, key = make_user(api, org_id, 'MEMBER')
    member = api.as_key(key)
    made = member.post('/api/account/me/api-keys', {'name': 'ci'})
    assert made.status == 201, made.json
    raw = made.json['key']
    assert raw.startswith('pk_') and len(raw) > 40
    assert set(made.json) == {'id', 'name', 'prefix', 'createdOn', 'expiresAt', 'userId', 'key'}
    listed = member.get('/api/account/me/api-keys')
    assert listed.status == 200 and isinstance(listed.json, list)
    assert made.json['id'] in {k['id'] for k in listed.json}
    assert all('key' not in k and raw not in json.dumps(k) for k in listed.json)
    new = api.as_key(raw)
    assert new.get('/api/projects').status == 200
    assert member.delete(f'/api/account/me/api-keys/{made.json["id"]}').status == 204
    assert_401(new.get('/api/projects'))                     # revoked at once
    assert made.json['id'] not in {k['id'] for k in member.get('/api/account/me/api-keys').json}
    assert member.delete(f'/api/account/me/api-keys/{made.json["id"]}').status == 404


def test_a_key_that_names_someone_else_is_401(api, org_id, platform):
    from chalicelib.core.secrets import key_owner, new_api_key
    forged = new_api_key(platform['userId'])           # the admin's id, a made-up secret
    assert key_owner(forged) == platform['userId']
    assert_401(api.get('/api/account/me', key=forged))
    user, key = make_user(api, org_id, 'VIEWER')
    assert key_owner(key) == user['id']
    spliced = key[:26] + api.post('/api/account/me/api-keys', {'name': 'x'}).json['key'][26:]
    assert_401(api.get('/api/account/me', key=spliced))  # the viewer's id, the admin's secret


def test_a_key_id_that_is_not_yours_is_404_and_the_key_survives(api, org_id):
    _, key_a = make_user(api, org_id, 'MEMBER')
    _, key_b = make_user(api, org_id, 'MEMBER')
    a, b = api.as_key(key_a), api.as_key(key_b)
    b_key = b.post('/api/account/me/api-keys', {'name': 'mine'}).json
    assert a.delete(f'/api/account/me/api-keys/{b_key["id"]}').status == 404
    assert a.delete(f'/api/account/me/api-keys/{uuid.uuid4()}').status == 404
    assert a.delete('/api/account/me/api-keys/not-a-uuid').status == 404
    assert api.as_key(b_key['key']).get('/api/account/me').status == 200
    assert b_key['id'] not in {k['id'] for k in a.get('/api/account/me/api-keys').json}


def test_a_user_holds_a_bounded_number_of_keys(api, org_id, monkeypatch):
    from chalicelib.features.identity import service as identity
    monkeypatch.setattr(identity, 'MAX_KEYS_PER_USER', 2)
    _, key = make_user(api, org_id, 'VIEWER')            # holds one key already
    viewer = api.as_key(key)
    second = viewer.post('/api/account/me/api-keys', {'name': 'two'})
    assert second.status == 201
    assert viewer.post('/api/account/me/api-keys', {'name': 'three'}).status == 409
    assert viewer.delete(f"/api/account/me/api-keys/{second.json['id']}").status == 204
    assert viewer.post('/api/account/me/api-keys', {'name': 'three'}).status == 201


@pytest.mark.parametrize('body', [
    {}, {'name': ''}, {'name': '   '}, {'name': 7}, {'name': 'x' * 201},
    {'name': 'k', 'expiresAt': '2020-01-01T00:00:00Z'},       # in the past
    {'name': 'k', 'expiresAt': 'tomorrow'}, {'name': 'k', 'expiresAt': 12},
])
def test_bad_key_requests_are_400(api, body):
    r = api.post('/api/account/me/api-keys', body)
    assert r.status == 400, (body, r.json)
    assert r.json['status'] == 400


def test_expired_key_is_401(api, org_id, monkeypatch):
    from chalicelib.features.identity import service as identity
    _, key = make_user(api, org_id, 'MEMBER')
    member = api.as_key(key)
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)).isoformat()
    made = member.post('/api/account/me/api-keys', {'name': 'short', 'expiresAt': soon})
    assert made.status == 201 and made.json['expiresAt'].endswith('Z')
    short = api.as_key(made.json['key'])
    assert short.get('/api/account/me').status == 200
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=6)
    monkeypatch.setattr(identity, 'now', lambda: later)
    r = short.get('/api/account/me')
    assert_401(r)
    assert 'expired' in r.json['message']
    assert member.get('/api/account/me').status == 200        # keys without expiry still work


def test_keys_of_a_removed_or_deactivated_user_stop_working(api, org_id):
    user, key = make_user(api, org_id, 'MEMBER')
    assert api.as_key(key).get('/api/account/me').status == 200
    assert api.put(f'/api/users/{user["id"]}', {'active': False}).status == 200
    assert_401(api.as_key(key).get('/api/account/me'))
    other, key2 = make_user(api, org_id, 'MEMBER')
    assert api.delete(f'/api/users/{other["id"]}').status == 204
    assert_401(api.as_key(key2).get('/api/account/me'))


def test_removing_a_membership_takes_effect_on_the_next_request(api, org_id):
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    user, key = make_user(api, org_id, 'MEMBER')
    member = api.as_key(key)
    assert member.get(f'/api/projects/{project["id"]}').status == 200
    mine = api.get(f"/api/memberships?filter=userId=='{user['id']}'").json['content']
    assert len(mine) == 1
    mid = mine[0]['id']
    assert api.delete(f'/api/memberships/{mid}').status == 204
    assert member.get(f'/api/projects/{project["id"]}').status == 404


# ----------------------------------------------------------------------------- Basic

def test_basic_email_and_key(api, org_id):
    user, key = make_user(api, org_id, 'VIEWER')
    r = api.get('/api/account/me', key=None, headers=basic(user['email'].upper(), key))
    assert r.status == 200 and r.json['id'] == user['id']
    other, _ = make_user(api, org_id, 'VIEWER')
    assert_401(api.get('/api/account/me', key=None, headers=basic(other['email'], key)))
    assert_401(api.get('/api/account/me', key=None, headers=basic(user['email'], 'pk_unknown')))
    assert_401(api.get('/api/account/me', key=None, headers={'authorization': 'Basic !!notbase64'}))
    admin = api.get('/api/account/me').json                # a key that does not name its owner
    assert api.get('/api/account/me', key=None, headers=basic(admin['email'], ADMIN_KEY)).json['id'] == admin['id']
    no_colon = base64.b64encode(key.encode()).decode()
    assert_401(api.get('/api/account/me', key=None, headers={'authorization': f'Basic {no_colon}'}))


# ----------------------------------------------------------------------------- bearer JWT

@pytest.mark.parametrize('signer', [RSA, EC], ids=['RS256', 'ES256'])
def test_bearer_jwt_names_the_user_by_email(api, org_id, idp, signer):
    user, _ = make_user(api, org_id, 'MEMBER')
    r = api.get('/api/account/me', key=None, headers=bearer(signer.token(user['email'].upper())))
    assert r.status == 200, r.json
    assert r.json['id'] == user['id']
    assert r.json['memberships'] == [{'organizationId': org_id, 'role': 'MEMBER'}]
    made = api.post('/api/projects', {'name': 'by-jwt', 'organizationId': org_id}, key=None,
                    headers=bearer(signer.token(user['email'])))
    assert made.status == 201 and made.json['createdByUserId'] == user['id']


def test_bad_bearer_tokens_are_401(api, org_id, idp):
    user, _ = make_user(api, org_id, 'MEMBER')
    email = user['email']
    now = int(time.time())
    impostor = Signer('ES256')
    cases = {
        'expired': RSA.token(email, exp=now - 120, iat=now - 600, nbf=now - 600),
        'wrong audience': RSA.token(email, aud='someone-else'),
        'wrong issuer': EC.token(email, iss='https://evil.example/'),
        'unknown key': impostor.token(email),
        'forged under a known kid': Signer('RS256', kid=RSA.kid).token(email),
        'no email': RSA.token(None),
        'unverified email': RSA.token(email, email_verified=False),
        'no such user': RSA.token('nobody-' + uuid.uuid4().hex[:6] + '@example.com'),
        'garbage': 'eyJhbGciOi.garbage.token',
    }
    for name, token in cases.items():
        r = api.get('/api/account/me', key=None, headers=bearer(token))
        assert r.status == 401, (name, r.status, r.json)
        assert 'www-authenticate' in r.headers, name
    assert api.get('/api/account/me', key=None, headers=bearer(RSA.token(email))).status == 200


def test_bearer_jwt_is_refused_when_no_provider_is_configured(api, org_id):
    user, _ = make_user(api, org_id, 'MEMBER')
    assert_401(api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email']))))


def test_provider_unreachable_is_503_not_a_silent_pass(api, org_id, idp):
    user, _ = make_user(api, org_id, 'MEMBER')
    idp.fail = True
    r = api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email'])))
    assert r.status == 503 and r.json['status'] == 503


# ----------------------------------------------------------------------------- secrets at rest

def test_no_raw_key_or_token_in_table_logs_or_later_responses(api, org_id, idp, caplog):
    import boto3
    caplog.set_level(logging.DEBUG)
    user, _ = make_user(api, org_id, 'MEMBER')
    me = api.as_key(None)
    token = RSA.token(user['email'])
    made = me.post('/api/account/me/api-keys', {'name': 'secret-check'}, headers=bearer(token))
    assert made.status == 201
    raw = made.json['key']
    responses = [
        me.get('/api/account/me', headers={'x-api-key': raw}),
        me.get('/api/account/me/api-keys', headers={'x-api-key': raw}),
        me.get('/api/account/me', headers=basic(user['email'], raw)),
        me.get('/api/account/me', headers=bearer(token)),
        me.get('/api/projects', headers={'x-api-key': raw + 'x'}),          # a failing attempt
        me.get('/api/projects', headers=bearer(token + 'x')),
        me.post('/api/projects', {'name': 'p', 'organizationId': org_id}, headers={'x-api-key': raw}),
        me.get(f'/api/users/{user["id"]}', headers={'x-api-key': raw}),
    ]
    assert [r.status for r in responses][:4] == [200, 200, 200, 200]
    basic_value = basic(user['email'], raw)['authorization'].split()[1]
    secrets = {'raw key': raw, 'key body': raw[3:], 'token': token, 'token signature': token.rsplit('.', 1)[1],
               'basic credentials': basic_value, 'admin key': ADMIN_KEY}
    for r in responses:
        text = r.body.decode() + json.dumps(r.headers)
        for name, secret in secrets.items():
            assert secret not in text, f'{name} echoed in a response'
    table = boto3.client('dynamodb', region_name='us-east-1')
    items, kwargs = [], {'TableName': 'platform-test'}
    while True:
        page = table.scan(**kwargs)
        items.extend(page['Items'])
        if 'LastEvaluatedKey' not in page:
            break
        kwargs['ExclusiveStartKey'] = page['LastEvaluatedKey']
    dump = json.dumps(items)
    assert len(items) > 20 and 'KEY#' in dump           # the scan did see the key records
    for name, secret in secrets.items():
        assert secret not in dump, f'{name} stored in the table'
    logged = caplog.text + ''.join(str(r.args) for r in caplog.records)
    assert 'dynamodb' in logged.lower()                  # DEBUG logging was really captured
    for name, secret in secrets.items():
        assert secret not in logged, f'{name} written to the logs'
