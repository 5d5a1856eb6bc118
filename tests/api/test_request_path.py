"""The request path (issue 17): an authenticated GET by id is two DynamoDB calls in flight
together (the gate UpdateItem: authentication and rate accounting; the BatchGetItem: the user,
the record, the caller's organizations), and nothing that can change is remembered: a revoked
key, a removed membership, a changed role and a suspended organization apply on the next request.
Call counts and overlap, never timings (bench/bench_request_path.py measures those)."""
from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import Api, make_org, make_user


class Recorder:
    """The DynamoDB calls of the store's clients, and how many were in flight at once."""

    def __init__(self, slow: dict[str, float] | None = None) -> None:
        from chalicelib.kernel.store import model
        self.clients = {id(c): c for c in (model.configure()._get_connection().connection.client,
                                           model.boto3_table().meta.client)}
        self.calls: list[str] = []
        self.spans: list[list[float]] = []   # [start, end] of each call
        self.in_flight = 0
        self.max_in_flight = 0
        self.slow = slow or {}
        self.lock = threading.Lock()
        self._open: dict[int, list[float]] = {}

    def _before(self, event_name, **kwargs):
        op = event_name.rsplit('.', 1)[1]
        with self.lock:
            self.calls.append(op)
            span = [time.perf_counter(), float('inf')]
            self.spans.append(span)
            self._open[threading.get_ident()] = span
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if op in self.slow:        # hold this call so an overlapping one surely starts meanwhile
            time.sleep(self.slow[op])

    def _after(self, event_name, **kwargs):
        with self.lock:
            self.in_flight -= 1
            span = self._open.pop(threading.get_ident(), None)
            if span is not None:
                span[1] = time.perf_counter()

    @property
    def rounds(self) -> int:
        """The longest chain of calls each starting after the one before it ended: how many
        round trips one after another the request waited for."""
        spans = sorted(self.spans)
        depth = [1] * len(spans)
        for i, (start, _) in enumerate(spans):
            depth[i] = 1 + max((depth[j] for j in range(i) if spans[j][1] <= start), default=0)
        return max(depth, default=0)

    def __enter__(self):
        for c in self.clients.values():
            c.meta.events.register('before-call.dynamodb.*', self._before)
            c.meta.events.register('after-call.dynamodb.*', self._after)
        return self

    def __exit__(self, *exc):
        for c in self.clients.values():
            c.meta.events.unregister('before-call.dynamodb.*', self._before)
            c.meta.events.unregister('after-call.dynamodb.*', self._after)


@pytest.fixture(autouse=True)
def one_minute(monkeypatch):
    """The limiter's clock stands still: no minute starts between a warm-up and a counted call
    (a new minute costs a user one UpdateItem more, once)."""
    from chalicelib.features.identity import ratelimit
    monkeypatch.setattr(ratelimit, 'clock', lambda: 1_800_000_000.5)


@pytest.fixture
def member(api, org_id):
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    _, key = make_user(api, org_id, 'MEMBER')
    caller = api.as_key(key)
    assert caller.get(f"/api/projects/{project['id']}").status == 200   # starts the minute, learns the hint
    return caller, project


def test_a_get_by_id_is_two_dynamodb_calls_in_flight_together(member):
    caller, project = member
    # each call is held a moment (a sleep lets the other thread run): under moto in process both
    # calls are CPU-bound, so without it the GIL alone could serialise calls that are concurrent
    with Recorder(slow={'BatchGetItem': 0.05, 'UpdateItem': 0.05}) as rec:
        r = caller.get(f"/api/projects/{project['id']}")
    assert r.status == 200 and r.json['id'] == project['id']
    assert sorted(rec.calls) == ['BatchGetItem', 'UpdateItem']
    assert rec.max_in_flight == 2


def test_the_first_request_of_a_process_reads_the_organization_with_the_rest(api, member):
    """No hint of the caller's organizations yet: the record's organization is read in the one
    BatchGetItem that reads what the answer needs (kernel/embedding.py ``read_ahead``)."""
    from chalicelib.features.identity import admission
    caller, project = member
    team = api.post('/api/teams', {'name': 't', 'organizationId': project['organizationId']}).json
    admission._org_hint.clear()
    with Recorder(slow=SLOW) as rec:
        assert caller.get(f"/api/teams/{team['id']}").status == 200
    assert sorted(rec.calls) == ['BatchGetItem', 'BatchGetItem', 'UpdateItem'] and rec.rounds == 2


SLOW = {'BatchGetItem': 0.03, 'UpdateItem': 0.03, 'GetItem': 0.03}


@pytest.mark.parametrize('kind', ['member', 'manager', 'platform admin'])
@pytest.mark.parametrize('first', [False, True], ids=['warm', 'first-of-process'])
def test_a_get_by_id_with_embedded_references_is_at_most_three_calls_in_two_rounds(api, org_id, kind, first):
    """Issue 27: a task embeds its project and its assignee, whose visibility depends on the
    assignee's ACL item: the gate's count and the authenticating BatchGetItem together, then
    ONE BatchGetItem of the project, the assignee, the assignee's ACL item (and the task's
    organization when nothing read it yet). Before: 4 calls for a member (an ACL GetItem
    more), 3 rounds."""
    from chalicelib.features.identity import admission
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    assignee, _ = make_user(api, org_id, 'MEMBER')
    task = api.post('/api/tasks', {'title': 't', 'projectId': project['id'], 'assigneeId': assignee['id']}).json
    caller = api if kind == 'platform admin' else api.as_key(make_user(api, org_id, {'member': 'MEMBER',
                                                                                     'manager': 'MANAGE'}[kind])[1])
    assert caller.get('/api/account/me').status == 200        # this process has seen the key pass
    if first:
        admission._org_hint.clear()
    with Recorder(slow=SLOW) as rec:
        r = caller.get(f"/api/tasks/{task['id']}")
    assert r.status == 200
    assert r.json['assignee']['id'] == assignee['id'] and r.json['assignee'].get('email') == assignee['email']
    assert r.json['project']['id'] == project['id'] and r.json['project']['name'] == 'p'
    assert len(rec.calls) <= 3 and rec.rounds <= 2, (rec.calls, rec.rounds)


def test_an_assignee_outside_the_callers_organizations_is_an_id_only(api, org_id):
    """What the read ahead found decides as the GetItem did: a user sharing no organization with
    the caller is embedded as ``{"id"}``."""
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    assignee, _ = make_user(api, org_id, 'MEMBER')
    task = api.post('/api/tasks', {'title': 't', 'projectId': project['id'], 'assigneeId': assignee['id']}).json
    _, key = make_user(api, org_id, 'MEMBER')
    membership = api.get(f"/api/memberships?filter=userId=='{assignee['id']}'").json['content'][0]
    assert api.delete(f"/api/memberships/{membership['id']}").status == 204
    r = api.as_key(key).get(f"/api/tasks/{task['id']}")
    assert r.status == 200 and r.json['assignee'] == {'id': assignee['id']}


def test_a_platform_admin_get_by_id_is_two_calls(api, org_id):
    team = api.post('/api/teams', {'name': 't', 'organizationId': org_id}).json
    assert api.get(f"/api/teams/{team['id']}").status == 200   # this process met the bootstrap key
    with Recorder() as rec:
        assert api.get(f"/api/teams/{team['id']}").status == 200
    assert sorted(rec.calls) == ['BatchGetItem', 'UpdateItem']


def test_embedded_references_cost_one_batch_read_unless_already_read(api, member):
    """A project embeds its organization (issue 9): a member's organizations are read with the
    admission anyway, so that costs nothing; a platform admin's are not (no hint), one
    BatchGetItem more, and so does any other reference (an owner)."""
    caller, project = member
    with Recorder() as rec:
        r = caller.get(f"/api/projects/{project['id']}")
    assert r.json['organization']['id'] == project['organizationId']
    assert sorted(rec.calls) == ['BatchGetItem', 'UpdateItem']
    with Recorder() as rec:
        r = api.get(f"/api/projects/{project['id']}")
    assert r.json['organization']['id'] == project['organizationId']
    assert sorted(rec.calls) == ['BatchGetItem', 'BatchGetItem', 'UpdateItem']


def test_nothing_is_answered_before_the_gate_decides(api, member):
    """The record is read with the gate, but a caller the gate refuses sees none of it."""
    caller, project = member
    keys = caller.get('/api/account/me/api-keys').json
    assert caller.delete(f"/api/account/me/api-keys/{keys[0]['id']}").status == 204
    r = caller.get(f"/api/projects/{project['id']}")
    assert r.status == 401 and 'name' not in r.json
    other = make_org(api)
    _, outsider_key = make_user(api, other['id'], 'MANAGE')
    r = api.as_key(outsider_key).get(f"/api/projects/{project['id']}")
    assert r.status == 404 and 'name' not in r.json


def test_role_and_membership_changes_apply_on_the_next_request(api, org_id):
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    user, key = make_user(api, org_id, 'MEMBER')
    caller = api.as_key(key)
    assert caller.put(f"/api/projects/{project['id']}", {'description': 'a'}).status == 200
    membership = api.get(f"/api/memberships?filter=userId=='{user['id']}'").json['content'][0]
    assert api.put(f"/api/memberships/{membership['id']}", {'role': 'VIEWER'}).status == 200
    assert caller.put(f"/api/projects/{project['id']}", {'description': 'b'}).status == 403
    assert caller.get(f"/api/projects/{project['id']}").status == 200
    assert api.delete(f"/api/memberships/{membership['id']}").status == 204
    assert caller.get(f"/api/projects/{project['id']}").status == 404


def test_suspension_applies_on_the_next_request_with_the_hint_warm(api, member, org_id):
    caller, project = member
    assert caller.get(f"/api/projects/{project['id']}").status == 200        # hint: this organization
    assert api.put(f'/api/organizations/{org_id}', {'organizationStatus': 'SUSPENDED'}).status == 200
    r = caller.get(f"/api/projects/{project['id']}")
    assert r.status == 403 and 'suspended' in r.json['message']
    assert api.put(f'/api/organizations/{org_id}', {'organizationStatus': 'ACTIVE'}).status == 200
    assert caller.get(f"/api/projects/{project['id']}").status == 200


def test_an_inactive_user_is_401_and_not_counted(api, org_id):
    user, key = make_user(api, org_id, 'MEMBER')
    caller = api.as_key(key)
    before = int(caller.get('/api/account/me').headers['x-ratelimit-remaining'])
    assert api.put(f"/api/users/{user['id']}", {'active': False}).status == 200
    for _ in range(3):
        assert caller.get('/api/account/me').status == 401
    assert api.put(f"/api/users/{user['id']}", {'active': True}).status == 200
    assert int(caller.get('/api/account/me').headers['x-ratelimit-remaining']) == before - 1


def test_a_key_stored_before_the_gate_carried_keys_still_works_and_still_revokes(api, org_id):
    """Keys written before this change have no ``key_`` attribute on the gate item: the first
    request checks the key record and adds it; a revocation removes it again."""
    import boto3

    from chalicelib.core.secrets import hash_key
    user, key = make_user(api, org_id, 'MEMBER')
    ddb = boto3.client('dynamodb', region_name='us-east-1')
    ddb.update_item(TableName='platform-test', Key={'pk': {'S': f"users#{user['id']}"}, 'sk': {'S': 'ACL'}},
                    UpdateExpression='REMOVE #k', ExpressionAttributeNames={'#k': f'key_{hash_key(key)}'})
    caller = api.as_key(key)
    assert caller.get('/api/account/me').status == 200
    assert caller.get('/api/account/me').status == 200
    keys = caller.get('/api/account/me/api-keys').json
    assert caller.delete(f"/api/account/me/api-keys/{keys[0]['id']}").status == 204
    assert caller.get('/api/account/me').status == 401


def test_authenticate_is_the_uncounted_entry_point(api, org_id):
    """``identity.authenticate(headers) -> Principal``: the same identity, no request counted
    (MCP tools and other front doors that count on their own terms)."""
    from chalicelib.features.identity import service as identity
    user, key = make_user(api, org_id, 'VIEWER')
    caller = api.as_key(key)
    before = int(caller.get('/api/account/me').headers['x-ratelimit-remaining'])
    principal = identity.authenticate({'x-api-key': key})
    assert principal.user_id == user['id'] and principal.memberships == {org_id: 'VIEWER'}
    assert int(caller.get('/api/account/me').headers['x-ratelimit-remaining']) == before - 1


def test_a_get_of_a_malformed_id_reads_nothing_ahead(api):
    assert api.get('/api/account/me').status == 200   # this process met the bootstrap key
    with Recorder() as rec:
        r = Api.get(api, '/api/projects/not-a-uuid')
    assert r.status == 400
    assert sorted(rec.calls) == ['BatchGetItem', 'UpdateItem']   # the user only: nothing to read ahead


def test_when_the_gate_fails_a_bad_key_is_still_401_and_a_write_503(api, org_id):
    """The limiter fails closed for writes; authentication does not fail open: the caller is
    authenticated by the uncounted read path first."""
    from chalicelib.features.identity.gate import is_gate_key
    from tests.faults import error, inject

    def gate(op, params):
        return error('ThrottlingException') if op == 'UpdateItem' and is_gate_key(params.get('Key', {})) else None
    _, key = make_user(api, org_id, 'MEMBER')
    caller = api.as_key(key)
    with inject(gate) as answered:
        assert api.as_key(key[:-2] + 'zz').get('/api/account/me').status == 401
        assert api.as_key(key[:-2] + 'zz').post('/api/labels', {'name': 'x', 'organizationId': org_id}).status == 401
        assert caller.post('/api/labels', {'name': 'x', 'organizationId': org_id}).status == 503
        assert caller.get('/api/account/me').status == 200
        assert answered
