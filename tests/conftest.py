"""Shared fixtures: a fresh moto-backed AWS per test, the app behind chalice.test.Client, and
callers with the built-in roles.

Tests talk HTTP to the app (chalice's test client runs the same LocalGateway routing and
middleware as the local server); tests/integration also drive the real local server."""
from __future__ import annotations

import json
import os
import uuid
import zlib
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
from localdev.moto_server import patch_moto  # noqa: E402

# The in-process moto gets the local server's fixes of TransactWriteItems (localdev/moto_server.py):
# a failed transaction rolls back the items it names, in place, instead of moto deep-copying the
# whole table before every transaction (a test's cost grew with its table: the 25-family
# processing test spent 2/3 of its 6 minutes in deepcopy), and ClientRequestToken is honoured.
patch_moto()


def _share_botocore_models() -> None:
    """Every test's mock_aws starts fresh boto3 sessions, and each session's loader parsed the
    service models again (~70 JSON files, a third of a test's setup). The files never change
    during a run: parse each once for the process. (botocore shares a loaded model among the
    clients of one session the same way, so nothing relies on a private copy.)

    The endpoint table (1.25 MB, decoded by every new session's first client: 20-40 ms a test)
    is parsed once too, but the endpoint resolver completes the entry of each region it resolves
    in place (hostname filled in, defaults merged): a session is handed its own copy of the
    entries, the rest shared (a third of the decoding's cost; a table as fresh as a parsed one:
    tests/unit/test_endpoints_slim.py compares it with the DynamoDB slice, after other tests)."""
    import functools

    from botocore import loaders
    real = loaders.JSONFileLoader.load_file

    @functools.cache
    def parsed(file_path):
        return real(loaders.JSONFileLoader(), file_path)

    def own_entries(table):
        return {**table, 'partitions': [
            {**partition, 'services': {
                name: {**service, 'endpoints': {region: dict(entry) for region, entry in service['endpoints'].items()}}
                if 'endpoints' in service else service
                for name, service in partition['services'].items()}}
            for partition in table['partitions']]}

    def load_file(self, file_path):
        if file_path.endswith('endpoints'):
            table = parsed(file_path)
            return own_entries(table) if table is not None else None
        return parsed(file_path)

    loaders.JSONFileLoader.load_file = load_file

    # Each session's loader also listed the data directories (~420 services, a stat of each)
    # to know the services, for every model type a client loads: once per process too.
    real_list = loaders.Loader.list_available_services
    listed: dict[tuple[tuple[str, ...], str], list[str]] = {}

    def list_available_services(self, type_name):
        key = (tuple(self.search_paths), type_name)
        if key not in listed:
            listed[key] = real_list(self, type_name)
        return listed[key]

    loaders.Loader.list_available_services = list_available_services


_share_botocore_models()

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


_BOOTSTRAPPED: dict[tuple[str, str], tuple[float, dict[str, Any], Any]] = {}
# A copy is made again after this long: its records' times (its outbox items' age, which the
# invariant checker judges against the clock: "never published after 5 minutes") stay recent.
BOOTSTRAP_COPY_SECONDS = 60.0


@pytest.fixture
def platform(aws):
    """Bootstrapped platform: default org, admin user with PLATFORM_ADMIN, admin API key.

    The first test of a process (per table name and region) runs the bootstrap; later tests get
    a deep copy of the DynamoDB backend it left (the same table, items and stream records, the
    same ids), which is a fifth of the bootstrap's cost, made again every minute. Bootstrap
    writes DynamoDB only."""
    import copy
    import time

    from moto.backends import get_backend
    from moto.core import DEFAULT_ACCOUNT_ID

    from chalicelib.core.config import get_config
    from chalicelib.features.identity.bootstrap import bootstrap
    cfg = get_config()
    key = (cfg.table_name, cfg.region)
    backends = get_backend('dynamodb')[DEFAULT_ACCOUNT_ID]
    if key not in _BOOTSTRAPPED or time.monotonic() - _BOOTSTRAPPED[key][0] > BOOTSTRAP_COPY_SECONDS:
        result = bootstrap(api_key=ADMIN_KEY)
        _BOOTSTRAPPED[key] = (time.monotonic(), result, copy.deepcopy(backends[cfg.region]))
        return dict(result)
    _, result, backend = _BOOTSTRAPPED[key]
    backends[cfg.region] = copy.deepcopy(backend)
    return dict(result)


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


_GC_FROZEN = False


def pytest_runtest_logfinish(nodeid, location):
    """After a process's first test, the objects alive then (the app, botocore's models, moto:
    most of the heap, and never garbage) are moved out of the cyclic collector's sight
    (gc.freeze): every full collection walked them again, several times a test. What a later
    test makes is collected as before."""
    global _GC_FROZEN
    if not _GC_FROZEN:
        import gc
        _GC_FROZEN = True
        gc.collect()
        gc.freeze()


def pytest_configure(config):
    config.addinivalue_line('markers', 'quarantine: a test with a known intermittent failure, left out of '
                                       '`make test` (each says why)')
    config.addinivalue_line('markers', 'browser: needs Debian\'s chromium + chromium-driver; runs only when '
                                       'the -m expression names browser (`make test`\'s live-server group and '
                                       '`make browser-test` install them and do)')
    config.addinivalue_line('markers', 'slow: left out of the quick loop (`make check`, QUICK_CHECK=1); '
                                       '`make test` runs it')


def pytest_collection_modifyitems(config, items):
    """Browser tests run only when the marker expression names them (`make test`'s live-server
    group, `make browser-test`): they
    are deselected, never skipped, elsewhere, and fail loudly when selected without a browser.

    The quick loop (QUICK_CHECK=1, `make check`) also leaves out the tests marked ``slow`` and
    samples large parametrized tests: of a test function with more cases than QUICK_CASES (in
    tests/unit) or QUICK_API_CASES (in tests/api) it keeps that many, evenly spread (the auth
    matrix's route x caller sample, the registry's per-family cases). `make test` runs every
    case (docs/architecture.md "The test loop")."""
    keep = list(items)
    if 'browser' not in (config.getoption('markexpr') or ''):
        keep = [item for item in keep if not item.get_closest_marker('browser')]
    if os.environ.get('QUICK_CHECK') == '1':
        keep = _quick(keep)
    kept = set(keep)
    dropped = [item for item in items if item not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


QUICK_CASES = 12       # a case of tests/unit takes milliseconds
QUICK_API_CASES = 6    # a case of tests/api is requests to the app on moto: 0.2-0.7 s


def _quick(items: list) -> list:
    groups: dict[tuple[str, str], list] = {}
    for item in items:
        groups.setdefault((item.nodeid.split('::')[0], getattr(item, 'originalname', item.name)), []).append(item)
    chosen = set()
    for (path, name), group in groups.items():
        size = QUICK_API_CASES if path.startswith('tests/api/') else QUICK_CASES
        step = max(1, -(-len(group) // size))
        # each function starts its sample elsewhere (a stable hash: every xdist worker must
        # collect the same): the registry's test functions meet different families
        start = zlib.crc32(f'{path}::{name}'.encode()) % step
        chosen.update(id(item) for item in group[start::step])
    return [item for item in items if id(item) in chosen and not item.get_closest_marker('slow')]
