"""Limits and failure modes from the security review (issue 10), through HTTP: the rate limiter
under a throttled table, the per-user ceiling, transactions cancelled for throttling or
provider errors, DynamoDB's own messages, API keys and their gateway twins, stale identity
provider keys. Faults are AWS's own error shapes, injected into the app's botocore clients
(tests/faults.py), so the store code under test is the code that runs on AWS."""
from __future__ import annotations

import json
import logging

import pytest

from tests.api.test_auth_credentials import RSA, bearer, idp  # noqa: F401 - the JWKS fixture, shared
from tests.api.test_ratelimit import T0, FakeClock, limit_headers
from tests.api.test_ratelimit_gateway import gateway  # noqa: F401 - the usage-plan fixture, shared
from tests.conftest import make_user
from tests.faults import cancelled, error, inject, timeout
from tests.invariants import table_invariants  # noqa: F401 - the checker after every test (issue 16)

pytestmark = pytest.mark.usefixtures('table_invariants')


def _settings(monkeypatch, **env: str) -> None:
    from chalicelib.core.config import get_config, reset_config
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests


@pytest.fixture
def limits(monkeypatch):
    """The contract's figures (100 a minute, 20 a second per key), a per-user ceiling of 150 a
    minute and 60 a second, and a fake clock for the limiter's windows."""
    from chalicelib.core.config import get_config, reset_config
    from chalicelib.features.identity import ratelimit
    _settings(monkeypatch, RATE_LIMIT_PER_MINUTE='100', RATE_LIMIT_BURST_PER_SECOND='20',
              RATE_LIMIT_USER_PER_MINUTE='150', RATE_LIMIT_USER_BURST_PER_SECOND='60')
    fake = FakeClock(T0 + 0.25)
    monkeypatch.setattr(ratelimit, 'clock', fake)
    if hasattr(ratelimit, '_Fallback'):   # a fresh in-process window for each test
        monkeypatch.setattr(ratelimit, '_fallback', ratelimit._Fallback())
    yield fake
    monkeypatch.undo()
    reset_config()
    get_config()


@pytest.fixture
def quick_retries(monkeypatch):
    """A short retry budget: a table that keeps failing is given up on within 0.3 s."""
    from chalicelib.core.config import get_config, reset_config
    _settings(monkeypatch, STORE_RETRY_BUDGET_SECONDS='0.3')
    yield
    monkeypatch.undo()
    reset_config()
    get_config()


def _rate_window(op, params):
    """The request gate's UpdateItem (features/identity/gate.py: one item per user and minute)."""
    from chalicelib.features.identity.gate import is_gate_key
    return op == 'UpdateItem' and is_gate_key(params.get('Key', {}))


def _assert_503(r):
    assert r.status == 503, (r.status, r.json)
    assert r.json['status'] == 503 and r.json['error'] == 'Service Unavailable' and r.json['message']
    assert int(r.headers['retry-after']) >= 1


def _labels(api, org_id, name):
    return api.get(f"/api/labels?filter=name=='{name}'&filter=organizationId=='{org_id}'").json['totalElements']


# ----------------------------------------------------------------------------- the rate limiter

@pytest.mark.parametrize('code', ['ProvisionedThroughputExceededException', 'ThrottlingException',
                                  'InternalServerError'])
def test_the_limiter_fails_closed_for_writes_when_its_table_is_throttled(api, org_id, limits, code):
    with inject(lambda op, params: error(code) if _rate_window(op, params) else None) as answered:
        r = api.post('/api/labels', {'name': 'flood', 'organizationId': org_id})
        _assert_503(r)
        assert {'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'} <= set(r.headers)
        assert api.put(f'/api/organizations/{org_id}', {'description': 'x'}).status == 503
        assert api.delete(f'/api/organizations/{org_id}').status == 503
        # reads go on, still limited: counted in this process while the table cannot count
        for i in range(1, 21):
            r = api.get('/api/account/me')
            assert r.status == 200 and limit_headers(r) == (100, 100 - i, T0 + 60), i
        r = api.get('/api/account/me')
        assert r.status == 429 and r.headers['retry-after'] == '1'
        assert answered
    assert _labels(api, org_id, 'flood') == 0
    assert api.post('/api/labels', {'name': 'after', 'organizationId': org_id}).status == 201


def test_a_user_has_one_ceiling_however_many_keys_they_hold(api, org_id, limits):
    user, key1 = make_user(api, org_id, 'MEMBER')
    keys = [key1] + [api.as_key(key1).post('/api/account/me/api-keys', {'name': f'k{i}'}).json['key']
                     for i in range(2)]
    limits.now = T0 + 1.25                     # a new second; the two creates counted already
    used = 2
    for key in keys[:2]:
        for _ in range(60):
            r = api.as_key(key).get('/api/account/me')
            assert r.status == 200, (used, r.json)
            used += 1
            limits.now += 0.25                 # 4 a second per key: no burst binds
    assert used == 122
    third = api.as_key(keys[2])
    for _ in range(150 - used):
        assert third.get('/api/account/me').status == 200
        limits.now += 0.25
    r = third.get('/api/account/me')
    assert r.status == 429 and limit_headers(r) == (100, 0, T0 + 60)   # that key used only 28 of its 100
    assert int(r.headers['retry-after']) >= 1
    assert api.get('/api/account/me').status == 200                      # another user is not affected
    limits.now = T0 + 60.5
    assert third.get('/api/account/me').status == 200


@pytest.mark.slow   # 100 requests (4 s), the per-key figure the quick loop checks in test_ratelimit.py
def test_the_per_key_figure_still_binds_first_for_one_key(api, org_id, limits):
    _, key = make_user(api, org_id, 'VIEWER')
    one = api.as_key(key)
    for i in range(1, 101):
        r = one.get('/api/account/me')
        assert r.status == 200 and limit_headers(r)[1] == 100 - i
        limits.now += 0.5
    assert one.get('/api/account/me').status == 429


# ----------------------------------------------------------------------------- transactions

def test_a_transaction_cancelled_for_throttling_is_retried(api, org_id):
    # The default retry budget, not quick_retries' 0.3 s: three transactions on a loaded CI
    # machine took longer than that (a clean-clone run gave up after one attempt, 503).
    # Only the backoff's short delays are slept: it succeeds on the third attempt.
    from chalicelib.core.config import get_config
    assert get_config().store_retry_budget_seconds >= 2
    left = {'n': 2}

    def rule(op, params):
        if op == 'TransactWriteItems' and left['n'] > 0:
            left['n'] -= 1
            return cancelled(*(['ThrottlingError'] + ['None'] * (len(params['TransactItems']) - 1)))
        return None
    with inject(rule) as answered:
        r = api.post('/api/labels', {'name': 'retried', 'organizationId': org_id})
    assert r.status == 201 and answered == ['TransactWriteItems'] * 2
    assert _labels(api, org_id, 'retried') == 1


@pytest.mark.parametrize('answer', [
    lambda n: cancelled(*(['ProvisionedThroughputExceeded'] + ['None'] * (n - 1))),
    lambda n: cancelled(*(['None'] * (n - 1) + ['ThrottlingError'])),
    lambda n: cancelled(*(['TransactionConflict'] + ['None'] * (n - 1))),
    lambda n: error('InternalServerError'),
    lambda n: error('ThrottlingException'),
], ids=['provisioned throughput', 'throttling', 'transaction conflict', 'internal error', 'throttled call'])
def test_a_table_that_keeps_failing_is_503_and_nothing_is_written(api, org_id, quick_retries, answer, monkeypatch):
    from chalicelib.core import budget
    # An update that keeps meeting TransactionConflict re-applies for as long as the request's
    # hard ceiling (API Gateway's 29 s, less a second) allows, then 503: with a 6 s gateway the
    # ceiling is 5 s and the answer the same (the case: 33 s -> 10 s).
    monkeypatch.setattr(budget, 'GATEWAY_SECONDS', 6.0)
    label = api.post('/api/labels', {'name': 'stays', 'organizationId': org_id}).json
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    def rule(op, params):
        if op == 'TransactWriteItems':
            return answer(len(params['TransactItems']))
        if op in ('PutItem', 'DeleteItem'):   # a write of one item is a plain conditional call
            return error('ProvisionedThroughputExceededException')
        return None
    with inject(rule):
        _assert_503(api.post('/api/labels', {'name': 'never', 'organizationId': org_id}))
        _assert_503(api.post('/api/tasks', {'projectId': project['id']}))
        _assert_503(api.put(f"/api/labels/{label['id']}", {'name': 'changed', 'changeSequence': 1}))
        _assert_503(api.delete(f"/api/labels/{label['id']}"))
    assert _labels(api, org_id, 'never') == 0
    after = api.get(f"/api/labels/{label['id']}").json
    assert after['name'] == 'stays' and after['changeSequence'] == 1


def test_a_write_that_gets_no_answer_is_503_and_says_it_may_have_been_applied(api, org_id, quick_retries):
    """A timeout is not a refusal: the attempt may have landed (the chaos run's slow answers). It
    is retried like a throttled one (same token), then 503, never 500, and the message does not
    claim that nothing changed."""
    label = api.post('/api/labels', {'name': 'stays', 'organizationId': org_id}).json
    writes = ('TransactWriteItems', 'PutItem', 'DeleteItem', 'UpdateItem')
    from chalicelib.features.identity.gate import is_gate_key

    def rule(op, params):   # the table's writes, not the admission's counting (it has its own test)
        return timeout() if op in writes and not is_gate_key(params.get('Key', {})) else None
    with inject(rule) as answered:
        created = api.post('/api/labels', {'name': 'never', 'organizationId': org_id})
        unlocked = api.put(f"/api/labels/{label['id']}", {'name': 'changed'})
        locked = api.put(f"/api/labels/{label['id']}", {'name': 'changed', 'changeSequence': 1})
        deleted = api.delete(f"/api/labels/{label['id']}")
    for r in (created, unlocked, locked, deleted):
        _assert_503(r)
        assert 'may have been applied' in r.json['message'] and 'nothing was changed' not in r.json['message']
    assert answered.count('TransactWriteItems') > 3   # retried, not given up at once
    after = api.get(f"/api/labels/{label['id']}").json
    assert after['name'] == 'stays' and after['changeSequence'] == 1


@pytest.mark.parametrize('where', ['view', 'admission'])
def test_an_aws_failure_no_store_function_caught_is_503_anything_else_500(api, org_id, monkeypatch, where):
    """The last resorts: an AWS call that timed out or was throttled where no store function
    turned it into its own 503 is still a 503 with Retry-After; any other exception is a 500
    naming the request, with no stack trace, as before."""
    from botocore.exceptions import ClientError, EndpointConnectionError

    from chalicelib.features.identity import admission
    from chalicelib.kernel import crud
    label = api.post('/api/labels', {'name': 'l', 'organizationId': org_id}).json
    target = (crud, 'get') if where == 'view' else (admission, 'admit')
    for exc in (timeout(), EndpointConnectionError(endpoint_url='http://127.0.0.1:1/'),
                ClientError(error('ThrottlingException'), 'GetItem'),
                ClientError({'Error': {'Code': '503', 'Message': 'Service Unavailable'}}, 'HeadObject'),
                ClientError(error('RequestThrottled'), 'SendMessage')):
        monkeypatch.setattr(*target, lambda *a, _exc=exc, **k: (_ for _ in ()).throw(_exc))
        _assert_503(api.get(f"/api/labels/{label['id']}"))
    monkeypatch.setattr(*target, lambda *a, **k: (_ for _ in ()).throw(RuntimeError('a bug')))
    r = api.get(f"/api/labels/{label['id']}")
    assert r.status == 500 and r.json['status'] == 500 and 'request' in r.json['message']
    assert 'a bug' not in json.dumps(r.json) and 'Traceback' not in json.dumps(r.json)
    monkeypatch.setattr(*target, lambda *a, **k: (_ for _ in ()).throw(
        ClientError(error('ValidationException'), 'GetItem')))
    assert api.get(f"/api/labels/{label['id']}").status == 500   # a refused request is a bug, not an outage


def test_condition_failures_still_answer_409_and_400(api, org_id, quick_retries):
    """Only throttling and provider errors are retried: a stale sequence is 409 with the current
    value, a taken slug 409, a missing reference 400, as before."""
    label = api.post('/api/labels', {'name': 'l', 'organizationId': org_id}).json
    assert api.put(f"/api/labels/{label['id']}", {'name': 'x', 'changeSequence': 1}).status == 200
    stale = api.put(f"/api/labels/{label['id']}", {'name': 'y', 'changeSequence': 1})
    assert stale.status == 409 and stale.json['changeSequence'] == 2
    team = {'name': 't', 'slug': 'dup', 'organizationId': org_id}
    assert api.post('/api/teams', team).status == 201
    assert api.post('/api/teams', team).status == 409
    missing = '00000000-0000-4000-8000-000000000001'
    r = api.post('/api/projects', {'name': 'p', 'organizationId': org_id, 'statusId': missing})
    assert r.status == 400


def test_dynamodb_validation_messages_are_never_echoed(api, org_id):
    """A change that would make the item larger than DynamoDB's 400 KB: 400 in our words."""
    big = 'x' * 250_000
    project = api.post('/api/projects', {'name': 'big', 'organizationId': org_id, 'options': {'a': big}})
    assert project.status == 201
    r = api.put(f"/api/projects/{project.json['id']}", {'memory': {'b': big}})
    assert r.status == 400, r.json
    assert 'Item size' not in r.json['message'] and 'maximum allowed size' not in r.json['message']
    assert '400 KB' in r.json['message']
    with inject(lambda op, params: error('ValidationException', 'One or more parameter values were invalid: '
                                         'secret detail') if op == 'TransactWriteItems' else None):
        r = api.post('/api/labels', {'name': 'v', 'organizationId': org_id})
    assert r.status == 400 and 'secret detail' not in r.json['message'] and 'parameter values' not in r.json['message']


# ----------------------------------------------------------------------------- API keys and the gateway

def _gateway_keys(apigw):
    return apigw.get_api_keys(includeValues=False)['items']


def test_no_gateway_key_outlives_a_key_that_could_not_be_stored(gateway, client, api, quick_retries):  # noqa: F811
    apigw, _ = gateway
    before = {k['id'] for k in _gateway_keys(apigw)}
    with inject(lambda op, params: error('ProvisionedThroughputExceededException')
                if op == 'TransactWriteItems' else None):
        r = api.post('/api/account/me/api-keys', {'name': 'unlucky'})
    _assert_503(r)
    assert {k['id'] for k in _gateway_keys(apigw)} == before
    assert 'unlucky' not in {k['name'] for k in api.get('/api/account/me/api-keys').json}
    assert api.post('/api/account/me/api-keys', {'name': 'lucky'}).status == 201
    assert len(_gateway_keys(apigw)) == len(before) + 1


def test_a_usage_plan_link_that_fails_leaves_no_gateway_key(gateway, client, api, monkeypatch):  # noqa: F811
    from chalicelib.features.identity import credentials
    apigw, _ = gateway
    before = {k['id'] for k in _gateway_keys(apigw)}
    monkeypatch.setattr(credentials, '_apigateway', lambda: apigw)
    with inject(lambda op, params: error('TooManyRequestsException') if op == 'CreateUsagePlanKey' else None,
                clients=[apigw], service='api-gateway'):
        _assert_503(api.post('/api/account/me/api-keys', {'name': 'half'}))
    assert {k['id'] for k in _gateway_keys(apigw)} == before
    assert 'half' not in {k['name'] for k in api.get('/api/account/me/api-keys').json}


def test_a_revoke_is_not_a_500_when_the_gateway_pushes_back(gateway, client, api, monkeypatch, caplog):  # noqa: F811
    from chalicelib.features.identity import credentials
    apigw, _ = gateway
    monkeypatch.setattr(credentials, '_apigateway', lambda: apigw)
    monkeypatch.setattr(credentials, 'sleep', lambda s: None, raising=False)
    made = api.post('/api/account/me/api-keys', {'name': 'going'}).json
    with inject(lambda op, params: error('TooManyRequestsException') if op == 'DeleteApiKey' else None,
                clients=[apigw], service='api-gateway'), caplog.at_level(logging.ERROR):
        r = api.delete(f"/api/account/me/api-keys/{made['id']}")
    assert r.status == 204, r.json
    assert api.get('/api/account/me', key=made['key']).status == 401            # revoked all the same
    twin = next(k['id'] for k in _gateway_keys(apigw) if k['name'] == f"platform-key-{made['id']}")
    assert twin in caplog.text                                                  # named for clean-up
    assert api.delete(f"/api/account/me/api-keys/{made['id']}").status == 404


def test_a_revoke_that_loses_a_race_with_another_revoke_is_404_not_500(api, org_id):
    from chalicelib.features.identity import service as identity
    _, key = make_user(api, org_id, 'MEMBER')
    me = api.as_key(key)
    made = me.post('/api/account/me/api-keys', {'name': 'twice'}).json
    state = {'first': True}

    def rule(op, params):
        # the other revoke wins at this very moment: its transaction holds the items ...
        if op == 'TransactWriteItems' and state['first'] and any('Delete' in i for i in params['TransactItems']):
            state['first'] = False
            user_id = me.get('/api/account/me').json['id']
            identity.revoke_api_key(user_id, made['id'])           # ... and commits
            return cancelled(*(['TransactionConflict'] * len(params['TransactItems'])))
        return None
    with inject(rule):
        r = me.delete(f"/api/account/me/api-keys/{made['id']}")
    assert r.status == 404, r.json
    assert api.get('/api/account/me', key=made['key']).status == 401


def test_the_iam_policy_grants_exactly_the_gateway_calls_the_code_makes(gateway, client, api, monkeypatch):  # noqa: F811
    """Every API Gateway call of key creation (with its compensation) and revocation, mapped to
    the IAM action and resource path it needs, equals the API Gateway grants of infra/iam.py."""
    from chalicelib.features.identity import credentials
    from infra import iam
    apigw, plan_id = gateway
    monkeypatch.setattr(credentials, '_apigateway', lambda: apigw)
    called: set[tuple[str, str]] = set()

    def record(op, params):
        http = apigw.meta.service_model.operation_model(op).http
        called.add((f"apigateway:{http['method']}", http['requestUri'].split('?')[0]))
        return None
    with inject(record, clients=[apigw], service='api-gateway'):
        made = api.post('/api/account/me/api-keys', {'name': 'audited'}).json
        assert api.delete(f"/api/account/me/api-keys/{made['id']}").status == 204   # as compensation does too
    granted = set()
    for grant in iam.grants('prod'):
        for action in grant.actions:
            if action.startswith('apigateway:'):
                for resource in grant.resources:
                    path = resource.split('::', 1)[1].replace('{usage_plan}', '{usageplanId}')
                    granted.add((action, path.replace('/apikeys/*', '/apikeys/{api_Key}')))
    assert called == granted, (called, granted)
    policy = json.loads(iam.policy_path('prod').read_text())
    assert policy == iam.chalice_policy('prod')                               # `make policy` is current


# ----------------------------------------------------------------------------- identity-provider keys

def test_keys_older_than_the_bound_stop_being_trusted_when_refresh_keeps_failing(api, org_id, idp, monkeypatch):  # noqa: F811
    from chalicelib.core import jwt_verify
    user, _ = make_user(api, org_id, 'MEMBER')
    fake = FakeClock(10_000.0)
    monkeypatch.setattr(jwt_verify, 'clock', fake)
    assert api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email']))).status == 200
    idp.fail = True
    fake.now += 6 * 3600                       # refresh due and failing: the cached keys still serve
    assert api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email']))).status == 200
    fake.now += 18 * 3600 + 1                  # now older than 24 h: no longer trusted
    r = api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email'])))
    _assert_503(r)
    idp.fail = False
    fake.now += 2
    assert api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email']))).status == 200


def test_the_stale_key_bound_is_configurable(api, org_id, idp, monkeypatch):  # noqa: F811
    from chalicelib.core import jwt_verify
    _settings(monkeypatch, AUTH_JWT_KEYS_MAX_AGE_SECONDS='7200')
    user, _ = make_user(api, org_id, 'MEMBER')
    fake = FakeClock(10_000.0)
    monkeypatch.setattr(jwt_verify, 'clock', fake)
    assert api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email']))).status == 200
    idp.fail = True
    fake.now += 7201
    _assert_503(api.get('/api/account/me', key=None, headers=bearer(RSA.token(user['email']))))
