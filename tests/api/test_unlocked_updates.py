"""Unlocked changes of plain fields (kernel/unlocked.py): one UpdateItem, no read-modify-write,
the same answers as the general path. Contention itself: tests/integration/test_contention.py."""
from __future__ import annotations

import pytest

from tests.invariants import table_invariants  # noqa: F401 - the checker fixture

pytestmark = pytest.mark.usefixtures('table_invariants')


@pytest.fixture
def project(api, org_id):
    r = api.post('/api/projects', {'name': 'Bravo', 'organizationId': org_id, 'options': {'a': 1},
                                   'notes': 'n', 'color': '#111111'})
    assert r.status == 201
    return r.json


@pytest.fixture
def writes(monkeypatch):
    """Which write path each PUT took."""
    from chalicelib.kernel.store import repository
    seen: list[str] = []
    real_commit, real_update = repository.commit, repository.update_fields
    monkeypatch.setattr(repository, 'commit', lambda ops: (seen.append('commit'), real_commit(ops))[1])
    monkeypatch.setattr(repository, 'update_fields',
                        lambda *a, **kw: (seen.append('update_fields'), real_update(*a, **kw))[1])
    return seen


def test_a_plain_change_is_one_update_and_answers_like_the_general_path(api, project, writes):
    path = f"/api/projects/{project['id']}"
    r = api.put(path, {'description': 'new', 'options': {'b': [1, 2.5, None, {'c': True}]}, 'color': ''})
    assert r.status == 200 and writes == ['update_fields']
    body = r.json
    assert body['description'] == 'new' and body['options'] == {'b': [1, 2.5, None, {'c': True}]}
    assert body['color'] == '' and body['notes'] == 'n'
    assert body['changeSequence'] == 2 and body['updatedOn'] > project['updatedOn']
    assert api.get(path).json == body
    assert api.get(f'{path}/sequence').json == 2
    writes.clear()
    r = api.put(path, {'notes': None, 'description': 'd'})   # null clears (docs/api/sdk-compatibility.md)
    assert r.status == 200 and writes == ['update_fields'] and 'notes' not in r.json
    assert api.get(path).json == r.json
    label = api.post('/api/labels', {'organizationId': project['organizationId'], 'name': 'l'}).json
    writes.clear()
    r = api.put(f"/api/labels/{label['id']}", {'color': '#222222'})   # an organization's record too
    assert r.status == 200 and writes == ['update_fields'] and r.json['color'] == '#222222'


def test_an_unlocked_change_publishes_its_domain_event(api, project, writes):
    """The event rides on the record's item (obx) in the same UpdateItem; the stream handler
    publishes it from the MODIFY record like an outbox item from its INSERT."""
    from chalicelib.features.events import outbox
    from chalicelib.kernel.store import model
    path = f"/api/projects/{project['id']}"
    assert api.put(path, {'description': 'evented'}).status == 200 and writes == ['update_fields']
    item = model.boto3_table().get_item(Key={'pk': f"projects#{project['id']}", 'sk': '#'})['Item']
    event = dict(item['obx'])
    assert event['eventType'] == 'projects.updated' and event['resourceId'] == project['id']
    assert event['changedFields'] == ['description']
    from boto3.dynamodb.types import TypeSerializer
    image = {k: TypeSerializer().serialize(v) for k, v in item.items()}
    older = dict(image)
    older.pop('obx')
    found = outbox.events_of([{'eventName': 'MODIFY', 'dynamodb': {'SequenceNumber': '1', 'NewImage': image,
                                                                   'OldImage': older}}])
    assert [e['id'] for _, e in found] == [event['id']]
    # a later write that leaves the same event on the item publishes nothing again
    assert outbox.events_of([{'eventName': 'MODIFY', 'dynamodb': {'SequenceNumber': '2', 'NewImage': image,
                                                                  'OldImage': image}}]) == []


def test_what_is_not_plain_takes_the_read_modify_write_path(api, project, org_id, writes):
    path = f"/api/projects/{project['id']}"
    assert api.put(path, {'slug': 'bravo-2'}).status == 200                       # unique
    assert api.put(path, {'description': 'x', 'changeSequence': 2}).status == 200  # locked
    status = api.post('/api/project-statuses', {'organizationId': org_id, 'status': 'S'}).json
    writes.clear()
    assert api.put(path, {'statusId': status['id']}).status == 200                # reference
    assert writes == ['commit']
    writes.clear()
    assert api.put(f"/api/organizations/{org_id}", {'description': 'hooked'}).status == 200   # hook
    assert writes == ['commit']


def test_the_name_moves_its_list_position(api, org_id, project):
    other = api.post('/api/projects', {'name': 'Charlie', 'organizationId': org_id}).json
    def names():
        page = api.get(f"/api/projects?filter=organizationId=='{org_id}'&sort=name:asc").json
        return [p['name'] for p in page['content']]
    assert names() == ['Bravo', 'Charlie']
    assert api.put(f"/api/projects/{project['id']}", {'name': 'Delta'}).status == 200
    assert names() == ['Charlie', 'Delta']
    updated = [p['name'] for p in api.get(
        f"/api/projects?filter=organizationId=='{org_id}'&sort=updatedOn:desc").json['content']]
    assert updated == ['Delta', 'Charlie'] and other


def test_a_stale_lock_after_an_unlocked_change_is_409_with_the_current_sequence(api, project):
    path = f"/api/projects/{project['id']}"
    assert api.put(path, {'notes': 'unlocked'}).json['changeSequence'] == 2
    r = api.put(path, {'notes': 'locked', 'changeSequence': 1})
    assert r.status == 409 and r.json['changeSequence'] == 2


def test_gone_records_and_bad_values(api, org_id, project):
    path = f"/api/projects/{project['id']}"
    assert api.put(path, {'notes': 'x' * 390_000}).status in (400, 413)
    assistant = api.post('/api/assistants', {'projectId': project['id'], 'name': 'a'}).json
    assert api.delete(f"/api/assistants/{assistant['id']}").status == 204
    assert api.put(f"/api/assistants/{assistant['id']}", {'description': 'x'}).status == 404
    assert api.put(path, {'name': None}).status == 400   # required: the same 400 as the general path


def test_a_record_deleted_between_the_read_and_the_update_is_404(api, project, monkeypatch):
    from chalicelib.kernel import unlocked
    real = unlocked.repo.update_fields

    def delete_first(*args, **kwargs):
        api.delete(f"/api/projects/{project['id']}")
        return real(*args, **kwargs)
    monkeypatch.setattr(unlocked.repo, 'update_fields', delete_first)
    r = api.put(f"/api/projects/{project['id']}", {'description': 'late'})
    assert r.status == 404
