"""Every work message carries its organization as ``MessageGroupId`` (features/work/store.py
``send_messages``; docs/operations/worker.md "Fairness between organizations"): the group SQS fair
queues (and `make run`'s fair poller, localdev/fair.py) share the workers by. An upload's whole
chain (the trigger from the table stream, the parse stage's messages, the pipelines' start and
steps) is in the family's organization's group."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from urllib3 import encode_multipart_formdata

PDF = (Path(__file__).resolve().parents[1] / 'fixtures' / 'documents' / 'ltnews11.pdf').read_bytes()

pytestmark = pytest.mark.usefixtures('net')   # tests/api/conftest.py: no packet leaves this machine


def test_an_uploads_messages_are_all_in_its_organizations_group(api, org_id, bucket, work):
    project = api.post('/api/projects', {'name': 'groups', 'organizationId': org_id}).json
    store = api.post('/api/document-stores', {'projectId': project['id'], 'name': 'inbox',
                                              'slug': f'inbox-{uuid.uuid4().hex[:8]}'}).json
    r = api.post('/api/assistants', {'projectId': project['id'], 'name': 'Labeller',
                                     'slug': f'a-{uuid.uuid4().hex[:6]}',
                                     'options': {'pipeline': {'steps': [
                                         {'name': 'mark', 'stepType': 'SCRIPT',
                                          'options': {'expression': "{'metadata': {'seen': true}}"}}]}}})
    assert r.status == 201, r.json
    body, content_type = encode_multipart_formdata({'file': ('a.pdf', PDF, 'application/pdf')})
    r = api.call('POST', f"/api/stores/default/{store['slug']}/fs?path=in/a.pdf", raw=body,
                 headers={'content-type': content_type})
    assert r.status == 201, r.json
    family = r.json
    seen: list[tuple[str, str | None]] = []
    handler = work.queue.handler

    def spying(event, context):
        import json
        seen.extend((json.loads(rec['body'])['type'], rec['attributes'].get('MessageGroupId'))
                    for rec in event['Records'])
        return handler(event, context)
    work.queue.handler = spying
    for _ in range(20):
        published = work.publish_outbox()
        if not work.drain(seconds=5) and not published:
            break
    got = api.get(f"/api/document-families/{family['id']}").json
    assert (got.get('metadata') or {}).get('seen') is True, got   # the chain ran to its end
    kinds = {kind for kind, _ in seen}
    assert {'pipeline.stages', 'pipeline.step', 'pipeline.start'} <= kinds, seen
    assert all(group == org_id for _, group in seen), seen
