"""Document content (immutable versions in S3) and linked deltas through HTTP; faults in S3 and
DynamoDB leave the document as it was with no referenced orphan. The 20-parallel-deltas test
runs against the real local server: tests/integration/test_documents_local.py."""
from __future__ import annotations

import json

import pytest

from chalicelib.features.documents import deltas
from tests import faults
from tests.api.test_documents_upload import _objects
from tests.support import create


@pytest.fixture
def family(api, org_id, bucket):  # noqa: F811
    return create(api, 'document-families', org_id)


def _doc(api, family):
    r = api.get(f"/api/document-families/{family['id']}/document")
    assert r.status == 200, r.json
    return r.json


def _put(api, family, version, nodes):
    return api.put(f"/api/document-families/{family['id']}/document", {'version': version, 'nodes': nodes})


def _delta(api, family, *ops, **extra):
    return api.post('/api/linked-deltas', {'documentFamilyId': family['id'], 'operations': list(ops), **extra})


TREE = [{'id': 'p1', 'nodeType': 'page', 'index': 0}, {'id': 'l1', 'parentId': 'p1', 'content': 'Hello', 'index': 0},
        {'id': 'l2', 'parentId': 'p1', 'content': 'World', 'index': 1}]


def test_versions_start_at_zero_and_a_stale_put_is_409(api, family):
    assert _doc(api, family) == {'version': 0, 'nodes': []}
    r = _put(api, family, 0, TREE)
    assert r.status == 200 and r.json['version'] == 1
    doc = _doc(api, family)
    assert doc['version'] == 1 and [n['id'] for n in doc['nodes']] == ['p1', 'l1', 'l2']
    assert doc['nodes'][1] == {'id': 'l1', 'parentId': 'p1', 'nodeType': '', 'content': 'Hello', 'index': 0,
                               'features': {}}
    r = _put(api, family, 0, [])
    assert r.status == 409 and r.json['version'] == 1
    assert _put(api, family, 1, []).status == 200 and _doc(api, family) == {'version': 2, 'nodes': []}
    got = api.get(f"/api/document-families/{family['id']}").json
    assert got['documentVersion'] == 2 and got['documentKey'].endswith('.json')


@pytest.mark.parametrize('body', [
    {'nodes': []}, {'version': -1, 'nodes': []}, {'version': True, 'nodes': []}, {'version': 0, 'nodes': {}},
    {'version': 0, 'nodes': [{'id': ''}]}, {'version': 0, 'nodes': [{'id': 'a'}, {'id': 'a'}]},
    {'version': 0, 'nodes': [{'id': 'a', 'index': '1'}]}, {'version': 0, 'nodes': [{'id': 'a', 'extra': 1}]},
    {'version': 0, 'nodes': [{'id': 'a', 'features': []}]},
])
def test_bad_documents_are_400(api, family, body):
    r = api.put(f"/api/document-families/{family['id']}/document", body)
    assert r.status == 400, r.json


def test_a_parent_cycle_opens_and_saves(api, family):
    cyclic = [{'id': 'A', 'parentId': 'B'}, {'id': 'B', 'parentId': 'A'}, {'id': 'r'}, {'id': 'c', 'parentId': 'r'}]
    assert _put(api, family, 0, cyclic).status == 200
    doc = _doc(api, family)
    assert [n['id'] for n in doc['nodes']] == ['r', 'c', 'A', 'B']
    # deltas on the loop terminate too: move a node of the loop, delete the loop
    r = _delta(api, family, {'op': 'move', 'id': 'c', 'parentId': 'A'},
               {'op': 'update', 'id': 'B', 'set': {'content': 'x'}})
    assert r.status == 201 and r.json['state'] == 'APPLIED', r.json
    r = _delta(api, family, {'op': 'move', 'id': 'A', 'parentId': 'c'})
    assert r.json['state'] == 'FAILED' and 'under itself' in r.json['errorMessage']
    r = _delta(api, family, {'op': 'delete', 'id': 'A'})
    assert r.json['state'] == 'APPLIED'
    assert [n['id'] for n in _doc(api, family)['nodes']] == ['r']


def test_delta_states_applied_partial_failed(api, family):
    assert _put(api, family, 0, TREE).status == 200
    r = _delta(api, family, {'op': 'add', 'node': {'id': 'l3', 'parentId': 'p1', 'index': 2, 'content': '!'}},
               {'op': 'update', 'id': 'l1', 'set': {'content': 'Hi', 'features': {'bold': True}}}, name='edit')
    assert r.status == 201, r.json
    applied = r.json
    assert applied['state'] == 'APPLIED' and applied['appliedVersion'] == 2 and applied['baseVersion'] == 1
    assert 'errorMessage' not in applied and applied['name'] == 'edit'
    r = _delta(api, family, {'op': 'delete', 'id': 'l2'}, {'op': 'update', 'id': 'gone', 'set': {'index': 1}},
               {'op': 'add', 'node': {'id': 'n', 'parentId': 'nowhere'}}, {'op': 'move', 'id': 'l3', 'parentId': None},
               baseVersion=1)
    partial = r.json
    assert partial['state'] == 'APPLIED_PARTIAL' and partial['appliedVersion'] == 3 and partial['baseVersion'] == 1
    assert 'operation 1 (update): node gone does not exist' in partial['errorMessage']
    assert 'operation 2 (add): parent nowhere does not exist' in partial['errorMessage']
    r = _delta(api, family, {'op': 'delete', 'id': 'l2'}, {'op': 'move', 'id': 'x', 'parentId': None})
    failed = r.json
    assert failed['state'] == 'FAILED' and 'appliedVersion' not in failed
    doc = _doc(api, family)
    assert doc['version'] == 3
    assert {n['id']: (n['parentId'], n['content']) for n in doc['nodes']} == {
        'p1': (None, None), 'l1': ('p1', 'Hi'), 'l3': (None, '!')}
    listed = api.get(f"/api/linked-deltas?filter=documentFamilyId=='{family['id']}'&sort=createdOn").json
    assert [d['state'] for d in listed['content']] == ['APPLIED', 'APPLIED_PARTIAL', 'FAILED']
    assert api.get("/api/linked-deltas?filter=state=='FAILED'").json['totalElements'] == 1


@pytest.mark.parametrize('ops', [[], [{'op': 'jump'}], [{'op': 'update', 'id': 'a', 'set': {'parentId': 'b'}}],
                                 [{'op': 'move', 'id': 'a'}], [{'op': 'add', 'node': {'id': 5}}], 'x'])
def test_malformed_operations_are_400(api, family, ops):
    r = api.post('/api/linked-deltas', {'documentFamilyId': family['id'], 'operations': ops})
    assert r.status == 400, r.json


def test_a_delta_on_an_unknown_or_foreign_family_is_400(api, family):
    from tests.conftest import make_org
    other = make_org(api)
    foreign = create(api, 'document-families', other['id'])
    for fid in ('00000000-0000-0000-0000-000000000000', 'junk'):
        r = api.post('/api/linked-deltas', {'documentFamilyId': fid, 'operations': [{'op': 'delete', 'id': 'x'}]})
        assert r.status == 400 and 'documentFamilyId' in r.json['message']
    assert foreign['organizationId'] == other['id']
    r = api.post('/api/linked-deltas', {'documentFamilyId': family['id'], 'baseVersion': 3,
                                        'operations': [{'op': 'delete', 'id': 'x'}]})
    assert r.status == 400 and 'baseVersion' in r.json['message']


def test_a_viewer_cannot_save(api, users, family):
    r = api.as_key(users['VIEWER']).post('/api/linked-deltas', {
        'documentFamilyId': family['id'], 'operations': [{'op': 'add', 'node': {'id': 'x'}}]})
    assert r.status == 403
    assert api.as_key(users['VIEWER']).put(f"/api/document-families/{family['id']}/document",
                                           {'version': 0, 'nodes': []}).status == 403
    assert api.as_key(users['VIEWER']).get(f"/api/document-families/{family['id']}/document").status == 200


def _state(api, bucket, family):  # noqa: F811
    got = api.get(f"/api/document-families/{family['id']}").json
    return got.get('documentVersion'), got.get('documentKey'), sorted(_objects(bucket))


def test_s3_failing_leaves_the_document_as_it_was(api, family, bucket):  # noqa: F811
    from chalicelib.features.documents import blobs
    assert _put(api, family, 0, TREE).status == 200
    before = _state(api, bucket, family)
    with faults.inject(lambda op, params: faults.error('InternalError') if op == 'PutObject' else None,
                       clients=[blobs.client()], service='s3') as answered:
        r = _delta(api, family, {'op': 'delete', 'id': 'l1'})
    assert answered and r.status == 503, r.json
    assert _state(api, bucket, family) == before
    assert api.get('/api/linked-deltas').json['totalElements'] == 0


@pytest.mark.parametrize('fault', ['throttled', 'validation'])
def test_dynamodb_failing_leaves_the_document_as_it_was_and_no_orphan(api, family, bucket, monkeypatch, fault):  # noqa: F811
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('STORE_RETRY_BUDGET_SECONDS', '0.2')
    reset_config()
    get_config()   # read now: requests run with the stage's variables patched in
    get_config()   # read now: chalice's test client swaps os.environ during requests
    assert _put(api, family, 0, TREE).status == 200
    before = _state(api, bucket, family)

    def rule(op, params):
        if op == 'PutItem' and 'document-families#' in str(params.get('Item', {}).get('pk')):
            return faults.error('ThrottlingException' if fault == 'throttled' else 'ValidationException')
        if op != 'TransactWriteItems':
            return None
        n = faults.transaction_size(params)
        code = 'ThrottlingError' if fault == 'throttled' else 'ValidationError'
        return faults.cancelled(*([code] + ['None'] * (n - 1)))
    with faults.inject(rule) as answered:
        r = _delta(api, family, {'op': 'delete', 'id': 'l1'})
        p = _put(api, family, 1, [])
    assert answered and r.status in (400, 503) and p.status in (400, 503), (r.json, p.json)
    assert _state(api, bucket, family) == before   # same pointer, no new object anywhere
    assert _doc(api, family)['nodes'][1]['id'] == 'l1'


@pytest.mark.parametrize('op', ['PutItem', 'TransactWriteItems'])
def test_a_version_whose_write_landed_but_whose_answer_was_lost_keeps_its_object(api, family, bucket,  # noqa: F811
                                                                                  monkeypatch, op):
    """A delta's write landed, its answers were lost (chaos run of cc4faf9): the family names
    the new version, so its object stays and the delta is applied once."""
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('STORE_RETRY_BUDGET_SECONDS', '0.2')
    reset_config()
    get_config()
    assert _put(api, family, 0, TREE).status == 200

    def write_of_the_family(params):
        return 'document-families#' in json.dumps(params)
    with faults.inject(faults.lands_then_lost((op,), when=write_of_the_family)) as answered:
        r = _put(api, family, 1, TREE[:1]) if op == 'PutItem' else _delta(api, family, {'op': 'delete', 'id': 'l1'})
    assert answered, r.json
    version, key, objects = _state(api, bucket, family)
    assert version == 2 and key in objects, (r.status, r.json, version, key, objects)
    assert r.status in (200, 201), r.json
    assert len(_doc(api, family)['nodes']) == (1 if op == 'PutItem' else 2)


def test_a_lost_race_is_applied_again_on_the_newer_version(api, family, bucket, monkeypatch):  # noqa: F811
    assert _put(api, family, 0, TREE).status == 200
    real = deltas._save_version
    calls = []

    def racing(fam, nodes, principal, extra_ops=lambda v: []):
        if not calls:   # another writer saves first, between our read and our write
            calls.append(1)
            assert _delta(api, family, {'op': 'add', 'node': {'id': 'other', 'parentId': 'p1'}}).status == 201
        return real(fam, nodes, principal, extra_ops)
    monkeypatch.setattr(deltas, '_save_version', racing)
    r = _delta(api, family, {'op': 'add', 'node': {'id': 'mine', 'parentId': 'p1'}})
    assert r.status == 201 and r.json['state'] == 'APPLIED' and r.json['appliedVersion'] == 3
    assert {'mine', 'other'} <= {n['id'] for n in _doc(api, family)['nodes']}
    assert len([k for k in _objects(bucket) if '/document/' in k]) == 3   # the loser's object was deleted


def test_a_bare_delta_record_without_a_family_is_stored_as_sent(api, org_id):
    project = create(api, 'projects', org_id)
    r = api.post('/api/linked-deltas', {'projectId': project['id'], 'name': 'manual', 'state': 'PENDING'})
    assert r.status == 201 and r.json['state'] == 'PENDING'


def test_a_thousand_deletes_on_a_deep_chain_answer_fast(api, family):
    """Issue 24, finding 1: each delete walked every node up to the root (quadratic in depth:
    hours for this delta); deletes now remove their subtree in one walk down."""
    import time
    depth = 8_000
    chain = [{'id': f'n{i}', 'parentId': f'n{i - 1}' if i else None} for i in range(depth)]
    assert _put(api, family, 0, chain).status == 200
    started = time.monotonic()
    r = _delta(api, family, *({'op': 'delete', 'id': f'n{i}'} for i in range(depth - 1, depth - 1001, -1)))
    elapsed = time.monotonic() - started
    assert r.status == 201 and r.json['state'] == 'APPLIED', r.json
    assert elapsed < 5, f'{elapsed:.1f} s'
    nodes = _doc(api, family)['nodes']
    assert len(nodes) == depth - 1000 and nodes[-1]['id'] == f'n{depth - 1001}'
    # one delete near the root takes the whole chain below it
    assert _delta(api, family, {'op': 'delete', 'id': 'n1'}).json['state'] == 'APPLIED'
    assert [n['id'] for n in _doc(api, family)['nodes']] == ['n0']


def test_a_delta_past_the_request_budget_is_422_and_writes_nothing(api, family, monkeypatch):
    """The request's time budget (core/budget.py) is checked at every operation."""
    from chalicelib.core.config import get_config, reset_config
    assert _put(api, family, 0, TREE).status == 200
    monkeypatch.setenv('REQUEST_BUDGET_SECONDS', '0')
    reset_config()
    get_config()   # read now: requests run with the stage's variables patched in
    r = _delta(api, family, {'op': 'delete', 'id': 'l1'})
    monkeypatch.delenv('REQUEST_BUDGET_SECONDS')
    reset_config()
    get_config()   # read now: requests run with the stage's variables patched in
    assert r.status == 422 and 'work budget' in r.json['message'] and 'applying operation 1 of 1' in r.json['message']
    assert r.json['limit'] == 'workBudget'
    assert _doc(api, family)['version'] == 1
    assert api.get('/api/linked-deltas').json['totalElements'] == 0
