"""An update's domain event carries its changed fields' old and new values (issue 41, finding
5; docs/api/work.md "Domain events"): read from the stream record's images when the event is
published, bounded in size, secrets never; the newest events first with sort=createdOn:desc."""
from __future__ import annotations

from chalicelib.features.events import outbox


def _events(api, task_id: str, event_type: str) -> list[dict]:
    page = api.get(f"/api/events?filter=eventType=='{event_type}'&sort=createdOn:desc&pageSize=100").json
    return [e for e in page['content'] if e['payload'].get('resourceId') == task_id]


def test_an_update_event_names_old_and_new_values(api, org_id, work):
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 'before', 'description': 'd0'}).json
    assert api.put(f"/api/tasks/{task['id']}", {'title': 'after', 'description': 'd1',
                                                  'changeSequence': 1}).status == 200
    assert api.put(f"/api/tasks/{task['id']}", {'description': 'x' * 5000}).status == 200
    work.publish_outbox()
    newest, older = _events(api, task['id'], 'tasks.updated')
    assert older['payload']['changes'] == {'title': {'old': 'before', 'new': 'after'},
                                           'description': {'old': 'd0', 'new': 'd1'}}
    assert newest['payload']['changes'] == {'description': {'omitted': 'size'}}   # over the value cap
    assert newest['occurredOn'] >= older['occurredOn']   # sort=createdOn:desc: the newest first
    created = _events(api, task['id'], 'tasks.created')
    assert len(created) == 1 and 'changes' not in created[0]['payload']


def test_changes_never_carry_a_secret_and_stay_within_their_cap():
    old = {'clientSecret': 's1', 'note': 'key pk_abcdefghijkl here', 'big': 'a',
           **{f'f{i}': 'v' * 300 for i in range(9)}}
    new = {'clientSecret': 's2', 'note': 'none', 'big': 'b' * 2000, **{f'f{i}': 'w' * 300 for i in range(9)}}
    fields = ['clientSecret', 'note', 'big', *[f'f{i}' for i in range(9)]]
    changes = outbox.changes_of(fields, old, new)
    assert changes['clientSecret'] == {'omitted': 'secret'}
    assert changes['note'] == {'old': 'key pk_[redacted] here', 'new': 'none'}
    assert changes['big'] == {'omitted': 'size'}
    kept = [f for f in fields if 'old' in changes[f]]
    assert sum(len(str(changes[f])) for f in kept) <= outbox.CHANGES_BYTES
    assert changes['f8'] == {'omitted': 'size'}   # past the event's cap
