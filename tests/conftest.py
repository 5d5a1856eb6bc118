"""Shared fixtures: a fresh moto-backed AWS per test, the app behind chalice.test.Client, and
callers with the built-in roles.

Tests talk HTTP to the app (chalice's test client runs the same LocalGateway routing and
middleware as the local server); tests/integration also drive the real local server."""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

# Never let a test reach a real endpoint or real credentials.
os.environ.pop('AWS_ENDPOINT_URL', None)
os.environ.pop('AWS_PROFILE', None)
os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='testing',
                  AWS_SECRET_ACCESS_KEY='testing', TABLE_NAME='platform-test',
                  # generous limits: only tests/api/test_ratelimit*.py exercise the real figures
                  RATE_LIMIT_PER_MINUTE='100000', RATE_LIMIT_BURST_PER_SECOND='100000')

from moto import mock_aws  # noqa: E402

import chalicelib.features  # noqa: E402, F401 - the family hooks, installed as the app installs them

ADMIN_KEY = 'pk_test-admin-key'


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class Api:
    """HTTP calls against the app: api.get('/api/projects', key=...), api.post(path, {...})."""

    def __init__(self, client, key: str | None) -> None:
        self._client = client
        self.key = key

    def call(self, method: str, path: str, body: Any = None, key: str | None = '__default__',
             headers: dict[str, str] | None = None, raw: bytes | str | None = None) -> Reply:
        hdrs = {'content-type': 'application/json'}
        use_key = self.key if key == '__default__' else key
        if use_key:
            hdrs['x-api-key'] = use_key
        hdrs.update(headers or {})
        payload = raw if raw is not None else (json.dumps(body) if body is not None else None)
        resp = self._client.http.request(method, path, headers=hdrs, body=payload)
        return Reply(resp.status_code, {k.lower(): v for k, v in resp.headers.items()}, resp.body)

    def get(self, path, **kw):
        return self.call('GET', path, **kw)

    def post(self, path, body=None, **kw):
        return self.call('POST', path, body, **kw)

    def put(self, path, body=None, **kw):
        return self.call('PUT', path, body, **kw)

    def delete(self, path, **kw):
        return self.call('DELETE', path, **kw)

    def as_key(self, key: str | None) -> Api:
        return Api(self._client, key)


@pytest.fixture
def aws():
    from chalicelib.core.config import reset_config
    from chalicelib.features.bridges import secrets
    from chalicelib.features.events import ui_events
    from chalicelib.kernel.store import model
    reset_config()
    model.reset()
    secrets.reset()                  # no secret value or client outlives its moto backend
    ui_events.presence_cache.clear()
    with mock_aws():
        from tests import work_support
        work_support.create_resources()   # the activity queue, its DLQ, the event bus
        yield
    model.reset()
    secrets.reset()


@pytest.fixture
def work(client):
    """The app's queue worker, table-stream publisher and scheduler, driven with real payloads
    (tests/work_support.py)."""
    from tests.work_support import Work
    return Work()


@pytest.fixture
def platform(aws):
    """Bootstrapped platform: default org, admin user with PLATFORM_ADMIN, admin API key."""
    from chalicelib.features.identity.bootstrap import bootstrap
    return bootstrap(api_key=ADMIN_KEY)


@pytest.fixture
def client(platform):
    from chalice.test import Client

    from app import app
    with Client(app) as c:
        yield c


@pytest.fixture
def api(client) -> Api:
    return Api(client, ADMIN_KEY)


@pytest.fixture
def org_id(platform) -> str:
    return platform['organizationId']


def make_org(api: Api, name: str | None = None) -> dict[str, Any]:
    slug = f'org-{uuid.uuid4().hex[:10]}'
    r = api.post('/api/organizations', {'name': name or slug, 'slug': slug})
    assert r.status == 201, r.json
    return r.json


def make_user(api: Api, org_id: str, role: str) -> tuple[dict[str, Any], str]:
    """A user with ``role`` in ``org_id`` and an API key for them -> (user, key)."""
    from chalicelib.features.identity.service import create_api_key
    email = f'user-{uuid.uuid4().hex[:10]}@example.com'
    user = api.post('/api/users', {'email': email})
    assert user.status == 201, user.json
    m = api.post('/api/memberships', {'organizationId': org_id, 'userId': user.json['id'], 'role': role})
    assert m.status == 201, m.json
    return user.json, create_api_key(user.json['id'], email, 'test')['key']


@pytest.fixture
def users(api, org_id):
    """Keys of fresh users with each built-in role in the default organization."""
    return {role: make_user(api, org_id, role)[1] for role in ('MANAGE', 'MEMBER', 'VIEWER')}


def pytest_configure(config):
    config.addinivalue_line('markers', 'quarantine: a test with a known intermittent failure, left out of '
                                       '`make test` (each says why)')
    config.addinivalue_line('markers', 'browser: needs Debian\'s chromium + chromium-driver; runs only when '
                                       'selected with -m browser (`make browser-test` installs them and does)')


def pytest_collection_modifyitems(config, items):
    """Browser tests run only when the marker expression names them (`make browser-test`): they
    are deselected, never skipped, elsewhere, and fail loudly when selected without a browser."""
    if 'browser' in (config.getoption('markexpr') or ''):
        return
    dropped = [item for item in items if item.get_closest_marker('browser')]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not item.get_closest_marker('browser')]
