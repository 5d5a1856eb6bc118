"""Document families' ``labels`` and ``locked`` on every write path (issue 40, defects 2 and 3;
docs/api/documents.md "Labels" and "Locked families"): a family holds label ids; a locked
family refuses every change but its unlocking, through PUT, batch-update and its document
(PUT .../document, linked deltas). The SCRIPT path: tests/api/test_processing.py."""
from __future__ import annotations

import pytest

from tests.support import create


@pytest.fixture
def world(api, org_id, bucket):
    project = create(api, 'projects', org_id)
    statuses = {slug: api.post('/api/document-statuses', {'projectId': project['id'], 'status': slug, 'slug': slug,
                                                          'statusType': kind}).json
                for slug, kind in (('open', 'UNRESOLVED'), ('done', 'RESOLVED'))}
    label = api.post('/api/labels', {'organizationId': org_id, 'name': 'invoice'}).json
    family = api.post('/api/document-families', {'projectId': project['id'], 'path': 'a.pdf'}).json
    return {'project': project, 'statuses': statuses, 'label': label, 'family': family}


def url(world) -> str:
    return f"/api/document-families/{world['family']['id']}"


def test_a_family_holds_label_ids_a_name_or_an_unknown_id_is_400(api, world):
    assert api.put(url(world), {'labels': ['invoice']}).status == 400          # before issue 40: 200, a name stored
    r = api.put(url(world), {'labels': ['00000000-0000-0000-0000-000000000001']})
    assert r.status == 400 and 'label that does not exist' in r.json['message'], r.json
    r = api.post('/api/document-families', {'projectId': world['project']['id'], 'path': 'b.pdf', 'labels': ['x']})
    assert r.status == 400 and 'not a label id' in r.json['message'], r.json
    r = api.put(url(world), {'labels': [world['label']['id']]})
    assert r.status == 200 and r.json['labels'] == [world['label']['id']]


def test_another_organizations_family_is_404_whatever_its_labels(api, world):
    """The labels are checked against the family they go to only once the caller may see it:
    a 400 would tell another organization's caller that the id exists."""
    import uuid

    from chalicelib.features.identity.bootstrap import SYSTEM
    from chalicelib.features.identity.service import create_api_key
    from chalicelib.kernel.crud import create as create_record
    org = create_record('organizations', {'name': 'Other', 'slug': f'o-{uuid.uuid4().hex[:8]}'}, SYSTEM)
    email = f'other-{uuid.uuid4().hex[:8]}@example.com'
    user = create_record('users', {'email': email}, SYSTEM)
    create_record('memberships', {'organizationId': org['id'], 'userId': user['id'], 'role': 'MANAGE'}, SYSTEM)
    other = api.as_key(create_api_key(user['id'], email, 't')['key'])
    for body in ({'labels': ['invoice']}, {'documentStatus': {'id': world['statuses']['done']['id']}},
                 {'locked': False}):
        r = other.put(url(world), body)
        assert r.status == 404, r.json


def test_a_locked_family_refuses_a_put_until_it_is_unlocked_alone(api, world):
    assert api.put(url(world), {'locked': True}).status == 200
    r = api.put(url(world), {'metadata': {'a': 1}})
    assert r.status == 409 and 'is locked' in r.json['message'], r.json       # before issue 40: 200
    assert api.put(url(world), {'labels': [world['label']['id']], 'locked': False}).status == 409
    assert api.put(url(world), {'locked': True}).status == 200                 # a write that changes nothing
    assert api.put(url(world), {'locked': False}).status == 200
    r = api.put(url(world), {'metadata': {'a': 1}})
    assert r.status == 200 and r.json['metadata'] == {'a': 1} and r.json['locked'] is False


def test_a_final_status_locks_on_put_as_on_batch(api, world):
    r = api.put(url(world), {'documentStatus': {'slug': 'done'}})
    assert r.status == 200 and r.json['locked'] is True
    assert api.put(url(world), {'documentStatus': {'slug': 'open'}}).status == 409
    assert api.put(url(world), {'locked': False}).status == 200
    r = api.put(url(world), {'documentStatus': {'slug': 'open'}})
    assert r.status == 200 and r.json['locked'] is False


def test_batch_update_locks_with_a_final_status_and_then_reports_the_lock(api, world):
    project, label = world['project'], world['label']
    body = {'projectId': project['id'], 'documentFamilyIds': [world['family']['id']]}
    r = api.post('/api/batch-update', {**body, 'documentStatus': {'slug': 'done'}})
    (entry,) = r.json['contentObjectUpdates']
    assert entry['success'] is True and entry['documentFamily']['locked'] is True
    r = api.post('/api/batch-update', {**body, 'labelUpdates': {'newLabels': [label['id']]}})
    (entry,) = r.json['contentObjectUpdates']
    assert entry['success'] is False and entry['error'] == 'Conflict' and 'is locked' in entry['reason'], entry
    assert api.get(url(world)).json['labels'] == []


def test_a_locked_familys_document_does_not_change(api, world):
    assert api.put(f"{url(world)}/document", {'version': 0, 'nodes': [{'id': 'root'}]}).status == 200
    assert api.put(url(world), {'locked': True}).status == 200
    r = api.put(f"{url(world)}/document", {'version': 1, 'nodes': [{'id': 'other'}]})
    assert r.status == 409 and 'is locked' in r.json['message'], r.json
    r = api.post('/api/linked-deltas', {'documentFamilyId': world['family']['id'],
                                        'operations': [{'op': 'delete', 'id': 'root'}]})
    assert r.status == 409 and 'is locked' in r.json['message'], r.json
    assert api.get(f"{url(world)}/document").json['version'] == 1


def test_a_locked_family_can_still_be_deleted(api, world):
    assert api.put(url(world), {'locked': True}).status == 200
    assert api.delete(url(world)).status in (200, 204)
    assert api.get(url(world)).status == 404


@pytest.fixture
def writes(monkeypatch):
    """Which write path each PUT took (as tests/api/test_unlocked_updates.py)."""
    from chalicelib.kernel.store import repository
    seen: list[str] = []
    real_commit, real_update = repository.commit, repository.update_fields
    monkeypatch.setattr(repository, 'commit', lambda ops: (seen.append('commit'), real_commit(ops))[1])
    monkeypatch.setattr(repository, 'update_fields',
                        lambda *a, **kw: (seen.append('update_fields'), real_update(*a, **kw))[1])
    return seen


def test_a_plain_put_of_an_unlocked_family_is_one_update_with_the_lock_in_its_condition(api, world, writes):
    """The lock costs no transaction (kernel/unlocked.py): before this change every family PUT
    was a read plus a TransactWriteItems."""
    r = api.put(url(world), {'metadata': {'a': 1}})
    assert r.status == 200 and writes == ['update_fields'] and r.json['metadata'] == {'a': 1}
    writes.clear()
    assert api.put(url(world), {'locked': True}).status == 200 and writes == ['update_fields']
    writes.clear()
    r = api.put(url(world), {'metadata': {'a': 2}})          # read as locked: no write at all
    assert r.status == 409 and 'is locked' in r.json['message'] and writes == [], (r.json, writes)
    writes.clear()
    assert api.put(url(world), {'metadata': {'a': 1}}).status == 200 and writes == ['commit']   # changes nothing
    writes.clear()
    assert api.put(url(world), {'locked': False}).status == 200 and writes == ['update_fields']


def test_a_family_locked_between_the_read_and_the_write_is_409_and_unchanged(api, world, monkeypatch):
    """The condition, not the read, decides: the lock set by another writer after the PUT read
    the family fails the UpdateItem, and the family read again answers 409."""
    from chalicelib.kernel.store import model, repository
    real = repository.update_fields
    key = {'pk': f"document-families#{world['family']['id']}", 'sk': '#'}

    def locked_first(*a, **kw):
        model.boto3_table().update_item(Key=key, UpdateExpression='SET #d.#l = :t',
                                        ExpressionAttributeNames={'#d': 'data', '#l': 'locked'},
                                        ExpressionAttributeValues={':t': True})
        return real(*a, **kw)
    monkeypatch.setattr(repository, 'update_fields', locked_first)
    r = api.put(url(world), {'metadata': {'a': 1}})
    assert r.status == 409 and 'is locked' in r.json['message'], r.json
    monkeypatch.setattr(repository, 'update_fields', real)
    got = api.get(url(world)).json
    assert got['locked'] is True and got.get('metadata') != {'a': 1}
    assert got['changeSequence'] == world['family']['changeSequence']
