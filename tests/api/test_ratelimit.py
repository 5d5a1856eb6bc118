"""Rate limits through HTTP with the contract's figures (100 per minute per key, burst 20 per
second) and a fake clock for the limiter's windows."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from tests.api.test_auth_credentials import idp  # noqa: F401 - the JWKS fixture, shared
from tests.conftest import ADMIN_KEY, Api, make_user

T0 = 1_800_000_000          # a minute boundary (divisible by 60)
ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    from chalicelib.core.config import get_config, reset_config
    from chalicelib.features.identity import ratelimit
    monkeypatch.setenv('RATE_LIMIT_PER_MINUTE', '100')
    monkeypatch.setenv('RATE_LIMIT_BURST_PER_SECOND', '20')
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests
    fake = FakeClock(T0 + 0.25)
    monkeypatch.setattr(ratelimit, 'clock', fake)
    yield fake
    monkeypatch.undo()
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests


def limit_headers(r) -> tuple[int, int, int]:
    return (int(r.headers['x-ratelimit-limit']), int(r.headers['x-ratelimit-remaining']),
            int(r.headers['x-ratelimit-reset']))


def test_the_101st_request_in_a_minute_is_429(api, clock):
    for i in range(1, 101):
        r = api.get('/api/account/me')
        assert r.status == 200, (i, r.json)
        assert limit_headers(r) == (100, 100 - i, T0 + 60)
        clock.now += 0.5                       # 2 a second: the burst never binds
    r = api.get('/api/account/me')
    assert r.status == 429
    assert r.json == {'error': 'Too Many Requests', 'status': 429, 'message': r.json['message']}
    assert limit_headers(r) == (100, 0, T0 + 60)
    assert int(r.headers['retry-after']) == math.ceil(T0 + 60 - clock.now) == 10
    # refused requests do not use up quota, and the next minute starts afresh
    clock.now = T0 + 60.1
    r = api.get('/api/account/me')
    assert r.status == 200 and limit_headers(r) == (100, 99, T0 + 120)


def test_the_21st_request_in_one_second_is_429(api, clock):
    for i in range(1, 21):
        r = api.get('/api/account/me')
        assert r.status == 200, i
        assert limit_headers(r) == (100, 100 - i, T0 + 60)
    r = api.get('/api/account/me')
    assert r.status == 429 and r.json['status'] == 429
    assert limit_headers(r) == (100, 0, T0 + 1)          # the burst window reopens next second
    assert r.headers['retry-after'] == '1'
    clock.now += 1
    r = api.get('/api/account/me')
    assert r.status == 200 and limit_headers(r) == (100, 79, T0 + 60)


def test_limits_are_per_key(api, org_id, clock):
    _, other_key = make_user(api, org_id, 'VIEWER')
    other = api.as_key(other_key)
    clock.now += 1
    for _ in range(20):
        assert api.get('/api/account/me').status == 200
    assert api.get('/api/account/me').status == 429
    r = other.get('/api/account/me')
    assert r.status == 200 and limit_headers(r)[1] == 99
    second = api.post('/api/account/me/api-keys', {'name': 'second'})
    assert second.status == 429                            # the admin key is still over its burst
    clock.now += 1
    second = api.post('/api/account/me/api-keys', {'name': 'second'}).json['key']
    r = api.as_key(second).get('/api/account/me')
    assert r.status == 200 and limit_headers(r)[1] == 99   # a new key has its own counter


def test_bearer_callers_are_limited_per_user(api, org_id, clock, idp):  # noqa: F811 - shared fixture
    from tests.api.test_auth_credentials import EC, RSA, bearer
    user, _ = make_user(api, org_id, 'VIEWER')
    clock.now += 1
    for _ in range(10):
        assert api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email']))).status == 200
        assert api.get('/api/account/me', key=None, headers=bearer(EC.token(user['email']))).status == 200
    r = api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email'])))
    assert r.status == 429                                 # 20 tokens, one user, one counter


def test_requests_without_a_valid_credential_are_not_counted(api, clock):
    for _ in range(30):                                     # more than the burst, in one second
        for r in (api.get('/api/projects', key=None), api.get('/api/projects', key='pk_guess'),
                  api.get('/v3/api-docs', key=None)):
            assert r.status in (401, 200) and limit_headers(r) == (100, 100, T0 + 60)
    r = api.get('/api/projects')                            # a valid key from the same client
    assert r.status == 200 and limit_headers(r)[1] == 99


def test_every_response_carries_the_headers(api, clock):
    responses = {
        'ok': api.get('/api/projects'),
        'created': api.post('/api/labels', {'name': 'l'}),
        'bad request': api.post('/api/labels', raw='[1]'),
        'not found': api.get('/api/projects/00000000-0000-4000-8000-000000000000'),
        'method not allowed': api.call('PATCH', '/api/projects'),
        'unsupported media type': api.post('/api/labels', raw='x', headers={'content-type': 'text/plain'}),
        'unauthorized': api.get('/api/projects', key=None),
        'public': api.get('/v3/api-docs', key=None),
    }
    for name, r in responses.items():
        assert {'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'} <= set(r.headers), name
        assert r.headers['x-ratelimit-limit'] == '100', name
    assert [r.status for r in responses.values()] == [200, 201, 400, 404, 405, 415, 401, 200]


def _raw(pk: str, sk: str) -> dict:
    import boto3
    ddb = boto3.client('dynamodb', region_name='us-east-1')
    return ddb.get_item(TableName='platform-test', ConsistentRead=True,
                        Key={'pk': {'S': pk}, 'sk': {'S': sk}}).get('Item') or {}


def test_the_windows_are_counted_in_one_expiring_item_per_user_and_minute(api, clock):
    """One item per user and minute (features/identity/gate.py) carries every counter of that minute
    and expires (TTL); the next minute is another item, so nothing is ever cleaned up, and the
    user's ACL item carries no counter at all."""
    from chalicelib.core.secrets import hash_key
    from chalicelib.features.identity.gate import credential_name
    me = api.get('/api/account/me').json
    cred = credential_name(f'key-{hash_key(ADMIN_KEY)[:20]}')
    clock.now += 1
    api.get('/api/account/me')
    api.get('/api/account/me')
    got = _raw(f"RATE#{me['id']}", f'M#{T0 // 60}')
    assert got['kind'] == {'S': 'gate'} and int(got['ttl']['N']) == T0 + 60 + 120
    assert got['u'] == {'N': '3'} and got['u00'] == {'N': '1'} and got['u01'] == {'N': '2'}
    assert got[f'c_{cred}'] == {'N': '3'}
    assert got[f'c00_{cred}'] == {'N': '1'} and got[f'c01_{cred}'] == {'N': '2'}
    clock.now = T0 + 60 + 5.5
    r = api.get('/api/account/me')
    assert r.status == 200 and limit_headers(r)[1] == 99
    nxt = _raw(f"RATE#{me['id']}", f'M#{T0 // 60 + 1}')
    assert nxt['u'] == {'N': '1'} and nxt['u05'] == {'N': '1'} and 'u01' not in nxt
    assert _raw(f"RATE#{me['id']}", f'M#{T0 // 60}')['u'] == {'N': '3'}   # untouched: the TTL ends it
    acl = _raw(f"users#{me['id']}", 'ACL')
    assert f'acl_{me["memberships"][0]["organizationId"]}' in acl
    assert not [n for n in acl if not n.startswith(('acl_', 'key_')) and n not in ('pk', 'sk', 'kind', 'sub')]


def test_a_refused_request_writes_nothing(api, clock):
    me = api.get('/api/account/me').json
    for _ in range(19):
        assert api.get('/api/account/me').status == 200
    before = _raw(f"RATE#{me['id']}", f'M#{T0 // 60}')
    assert before['u'] == {'N': '20'} and before['u00'] == {'N': '20'}
    for _ in range(5):
        assert api.get('/api/account/me').status == 429
    assert _raw(f"RATE#{me['id']}", f'M#{T0 // 60}') == before


@pytest.mark.slow
def test_forty_keys_of_one_user_across_a_minute_boundary_keep_every_item_small(api, clock, monkeypatch):
    """Issue 27: 40 keys of one user in use, over two minutes and across their boundary: every
    request answered (no 5xx), the user's ACL item the same size before and after (roles and
    keys only), and each minute's gate item bounded by the traffic the limits admit in a minute
    (the old layout grew the ACL item to ~700 attributes and then failed its cleanup)."""
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('RATE_LIMIT_USER_PER_MINUTE', '100000')
    monkeypatch.setenv('RATE_LIMIT_USER_BURST_PER_SECOND', '100000')
    reset_config()
    get_config()
    me = api.get('/api/account/me').json
    keys = []
    for i in range(40):
        clock.now += 0.5                          # under the admin key's own burst
        keys.append(api.post('/api/account/me/api-keys', {'name': f'k{i}'}).json['key'])
    acl_before = _raw(f"users#{me['id']}", 'ACL')
    clock.now = T0 + 30.25
    statuses = []
    for step in range(240):                       # 2 a second for two minutes: 6 requests per key a minute
        statuses.append(api.as_key(keys[step % 40]).get('/api/account/me').status)
        clock.now += 0.5
    assert statuses == [200] * 240
    assert _raw(f"users#{me['id']}", 'ACL') == acl_before
    for minute in (T0 // 60, T0 // 60 + 1, T0 // 60 + 2):
        item = _raw(f"RATE#{me['id']}", f'M#{minute}')
        counters = [n for n in item if n not in ('pk', 'sk', 'kind', 'ttl')]
        # per minute: u, <= 60 seconds, <= 40 credentials, <= 120 (credential, second) pairs
        assert len(counters) <= 1 + 60 + 40 + 120, (minute, len(counters))
        assert 'ttl' in item


def test_dynamodb_calls_of_one_authenticated_get_by_id(api, org_id, clock, idp):  # noqa: F811 - shared fixture
    """One UpdateItem authenticates and counts the request while one BatchGetItem reads the user
    and the resource (tests/api/test_request_path.py: concurrently). A key that names no owner
    (the bootstrap key) and a bearer token map to their user once per process (a GetItem on the
    first request only)."""
    from chalicelib.features.identity import admission
    from chalicelib.kernel.store import model
    from tests.api.test_auth_credentials import RSA, bearer
    # a team embeds no referenced record (a project embeds its organization: one read more for
    # a caller whose organizations the admission did not read, tests/api/test_request_path.py)
    project = api.post('/api/teams', {'name': 'p', 'organizationId': org_id}).json
    key = api.post('/api/account/me/api-keys', {'name': 'counted'}).json['key']
    calls: list[str] = []
    clients = {id(c): c for c in (model.configure()._get_connection().connection.client,
                                  model.boto3_table().meta.client)}

    def record(event_name, **kwargs):
        calls.append(event_name.rsplit('.', 1)[1])

    def count(caller: Api, headers=None) -> list[str]:
        calls.clear()
        for c in clients.values():
            c.meta.events.register('before-call.dynamodb.*', record)
        try:
            assert caller.get(f'/api/teams/{project["id"]}', headers=headers).status == 200
        finally:
            for c in clients.values():
                c.meta.events.unregister('before-call.dynamodb.*', record)
        return sorted(calls)
    assert count(api.as_key(key)) == ['BatchGetItem', 'UpdateItem']
    admission._owner_of_key.clear()
    assert count(api) == ['BatchGetItem', 'GetItem', 'UpdateItem']      # the bootstrap key's pointer, once
    assert count(api) == ['BatchGetItem', 'UpdateItem']
    email = api.get('/api/account/me').json['email']
    assert api.get('/api/account/me', key=None, headers=bearer(RSA.token(email))).status == 200   # first sign-in binds
    admission._user_of_subject.clear()
    assert count(api.as_key(None), bearer(RSA.token(email))) == ['BatchGetItem', 'GetItem', 'UpdateItem']
    assert count(api.as_key(None), bearer(RSA.token(email))) == ['BatchGetItem', 'UpdateItem']


def _second_app():
    """A second, separate Chalice app object built from app.py with fresh blueprint modules (as
    another Lambda instance would build it), on the same moto backend. The first app's modules
    are put back afterwards."""
    import sys

    def blueprint_module(name):   # the modules app.py builds its routes from (a Blueprint each, or the middleware)
        return (name.startswith(('chalicelib.kernel.http', 'chalicelib.front'))
                or (name.startswith('chalicelib.features.') and name.endswith(('routes', '.authorizer'))))
    def forget(name):   # out of sys.modules and off its package, so `from package import mod` loads it anew
        del sys.modules[name]
        parent, _, leaf = name.rpartition('.')
        if parent in sys.modules and getattr(sys.modules[parent], leaf, None) is not None:
            delattr(sys.modules[parent], leaf)

    saved = {name: mod for name, mod in sys.modules.items() if blueprint_module(name)}
    for name in saved:
        forget(name)
    try:
        spec = importlib.util.spec_from_file_location('app_second_instance', ROOT / 'app.py')
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name in [n for n in sys.modules if blueprint_module(n)]:
            forget(name)
        sys.modules.update(saved)
        for name, mod in saved.items():
            parent, _, leaf = name.rpartition('.')
            setattr(sys.modules[parent], leaf, mod)
    return module.app


@pytest.mark.slow   # 100 requests (5 s); the quick loop keeps the 101st-request test on one instance
def test_the_counter_holds_across_two_app_instances(client, clock):
    from chalice.test import Client

    import app as first
    second_app = _second_app()
    assert second_app is not first.app
    with Client(second_app) as second_client:
        a, b = Api(client, ADMIN_KEY), Api(second_client, ADMIN_KEY)
        for i in range(1, 101):
            r = (a if i % 2 else b).get('/api/account/me')
            assert r.status == 200 and limit_headers(r)[1] == 100 - i, i
            clock.now += 0.5
        assert a.get('/api/account/me').status == 429
        assert b.get('/api/account/me').status == 429


def test_count_n_requests_is_the_entry_point_for_batches(api, clock):
    """``ratelimit.count(principal, n)``: n more requests of an admitted caller in one
    UpdateItem, all or none (an MCP batch counts every call)."""
    from chalicelib.features.identity import ratelimit
    from chalicelib.features.identity import service as identity
    assert limit_headers(api.get('/api/account/me'))[1] == 99
    principal = identity.authenticate({'x-api-key': ADMIN_KEY})
    assert ratelimit.count(principal, 15).remaining == 84
    with pytest.raises(ratelimit.Refused):
        ratelimit.count(principal, 5)                     # 21 in this second: all refused
    assert limit_headers(api.get('/api/account/me'))[1] == 83   # the refused five were not counted
    clock.now += 1
    assert ratelimit.count(principal, 0).remaining == 100       # nothing to count
