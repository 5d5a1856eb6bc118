"""Document processing (issue 26, docs/api/processing.md): a project's assistants run their
pipeline over each new document family, through the outbox stream and the activity queue
(tests/work_support.py drives both with the payloads AWS sends). Bridge calls reach an
upstream on loopback only through the egress allowlist (tests/netguard.py)."""
from __future__ import annotations

import json
import uuid

import pytest
from urllib3 import encode_multipart_formdata

from tests.bridging import endpoint, make_bridge

PDF = b'%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n'


pytestmark = pytest.mark.usefixtures('net')   # tests/api/conftest.py: no packet leaves this machine


@pytest.fixture
def prj(api, org_id, bucket, reach):
    project = api.post('/api/projects', {'name': 'processing', 'organizationId': org_id}).json
    for slug, kind in (('received', 'UNRESOLVED'), ('processed', 'RESOLVED')):
        r = api.post('/api/document-statuses', {'projectId': project['id'], 'status': slug, 'slug': slug,
                                                'statusType': kind})
        assert r.status == 201, r.json
    store = api.post('/api/document-stores', {'projectId': project['id'], 'name': 'inbox',
                                              'slug': f'inbox-{uuid.uuid4().hex[:8]}'}).json
    bridge = make_bridge(api, project['id'], reach, [endpoint('echo', '/echo'), endpoint('fail', '/status')],
                         slug='ocr', agentCallable=True)
    return {'project': project, 'store': store, 'bridge': bridge}


def steps(*, fail: bool = False, attempts: int = 1) -> list[dict]:
    call = {'name': 'ocr', 'stepType': 'BRIDGE_CALL',
            'options': {'bridge': 'ocr', 'endpointName': 'fail' if fail else 'echo',
                        'query': {'url': '=contentUrl', 'path': '=family.path',
                                  **({'code': '500'} if fail else {})}},
            'executionPolicy': {'maxAttempts': attempts, 'onExhausted': 'FAIL'}}
    script = {'name': 'classify', 'stepType': 'SCRIPT',
              'options': {'expression': "{'documentStatus': 'processed', 'labels': ['invoice'], "
                                        "'metadata': {'pages': 1, 'ocrPath': outputs.ocr.body.path}, "
                                        "'score': 0.9}"}}
    return [call, script]


def assistant(api, prj, **extra) -> dict:
    body = {'projectId': prj['project']['id'], 'name': 'Invoice reader', 'slug': f'a-{uuid.uuid4().hex[:6]}',
            'options': {'pipeline': {'steps': extra.pop('steps', None) or steps()}}, **extra}
    r = api.post('/api/assistants', body)
    assert r.status == 201, r.json
    return r.json


def upload(api, prj, path: str, data: bytes = PDF) -> dict:
    body, content_type = encode_multipart_formdata({'file': (path.rsplit('/', 1)[-1], data, 'application/pdf')})
    r = api.call('POST', f"/api/stores/default/{prj['store']['slug']}/fs?path={path}", raw=body,
                 headers={'content-type': content_type})
    assert r.status == 201, r.json
    return r.json


def settle(work, rounds: int = 40) -> None:
    """Publish the outbox and run the queue until neither has anything left (bounded: a stream
    batch that keeps failing is an error here, not a hang)."""
    for _ in range(rounds):
        published = 0
        for _ in range(50):
            got = work.stream.poll_once()
            assert got['failed'] == 0, 'an outbox event failed'
            published += got['records']
            if not got['records']:
                break
        received = work.drain(seconds=5)
        if not published and not received:
            return
    raise AssertionError('the outbox and the queue did not settle')


def executions_of(api, family_id: str) -> list[dict]:
    r = api.get(f"/api/executions?filter=documentFamilyId == '{family_id}'&pageSize=100")
    assert r.status == 200, r.json
    return r.json['content']


def test_an_upload_runs_the_pipeline_of_the_subscribed_assistant(api, prj, work, upstream):
    helper = assistant(api, prj, subscription="path =like= '*.pdf'")
    family = upload(api, prj, 'in/2026/a.pdf')
    assert family['documentStatus']['slug'] == 'received'
    settle(work)
    [execution] = executions_of(api, family['id'])
    assert execution['status'] == 'SUCCEEDED', execution['statusMessages']
    assert execution['assistantId'] == helper['id'] and execution['documentFamilyId'] == family['id']
    assert execution['output']['classify'] == {'score': 0.9}
    assert any('applied documentStatus, labels, metadata' in m['message'] for m in execution['statusMessages'])
    # the BRIDGE_CALL reached the loopback upstream with the content's presigned URL
    [seen] = upstream.seen
    query = dict(p.split('=', 1) for p in seen.path.split('?', 1)[1].split('&'))
    assert seen.path.startswith('/echo?') and 'X-Amz-Signature' in seen.path and 'X-Amz-Expires' in seen.path
    assert 'path=in%2F2026%2Fa.pdf' in seen.path and query['url'].startswith('http')
    after = api.get(f"/api/document-families/{family['id']}").json
    assert after['documentStatus']['slug'] == 'processed' and after['labels'] == ['invoice']
    assert after['metadata'] == {'pages': 1, 'ocrPath': seen.path}
    assert after['processing'] == {'assistantId': helper['id'], 'assistantName': 'Invoice reader',
                                   'executionId': execution['id'], 'status': 'SUCCEEDED', 'step': 'classify',
                                   'trigger': 'created', 'updatedOn': execution['updatedOn']}
    # the change went through the family's service: its domain event, its sequence
    assert after['changeSequence'] == family['changeSequence'] + 1
    events = api.get("/api/events?filter=eventType == 'document-families.updated'").json['content']
    assert [e['payload']['resourceId'] for e in events] == [family['id']]


def test_a_non_matching_subscription_or_an_inactive_assistant_starts_nothing(api, prj, work, upstream):
    assistant(api, prj, subscription="path =like= '*.docx'")
    assistant(api, prj, active=False)
    assistant(api, prj, subscription=f"documentStoreId == '{uuid.uuid4()}'")
    family = upload(api, prj, 'b.pdf')
    settle(work)
    assert executions_of(api, family['id']) == [] and upstream.seen == []
    after = api.get(f"/api/document-families/{family['id']}").json
    assert 'processing' not in after and after['changeSequence'] == family['changeSequence']


def test_a_failing_bridge_call_fails_the_execution_and_leaves_the_family_unchanged(api, prj, work, upstream):
    assistant(api, prj, steps=steps(fail=True, attempts=2))
    family = upload(api, prj, 'c.pdf')
    settle(work)
    [execution] = executions_of(api, family['id'])
    assert execution['status'] == 'FAILED' and execution['attempts'] == 2
    assert len(upstream.seen) == 2 and all(s.path.startswith('/status?') for s in upstream.seen)
    assert any('the upstream answered 500' in m['message'] for m in execution['statusMessages'])
    assert execution['statusMessages'][-1]['type'] == 'ERROR'
    after = api.get(f"/api/document-families/{family['id']}").json
    assert after['documentStatus'] == family['documentStatus'] and after['labels'] == []
    assert after['changeSequence'] == family['changeSequence'] and after['metadata'] == family['metadata']
    assert after['processing']['status'] == 'FAILED' and after['processing']['executionId'] == execution['id']
    # the start message delivered again creates no second execution and calls nothing again
    work.send({'type': 'pipeline.start', 'assistantId': execution['assistantId'],
               'documentFamilyId': family['id'], 'trigger': 'created'})
    settle(work)
    assert [e['id'] for e in executions_of(api, family['id'])] == [execution['id']]
    assert len(upstream.seen) == 2


def test_the_stream_delivered_twice_starts_one_execution(api, prj, work, upstream):
    assistant(api, prj)
    family = upload(api, prj, 'd.pdf')
    settle(work)
    import app
    from localdev.pollers import StreamReader
    again = StreamReader(app.outbox_publisher, work.cfg.table_name, region='us-east-1', endpoint_url=None)
    while again.poll_once()['records']:
        pass
    settle(work)
    assert len(executions_of(api, family['id'])) == 1 and len(upstream.seen) == 1


@pytest.mark.slow
def test_run_on_existing_content_processes_each_existing_family_once(api, prj, work, upstream, monkeypatch):
    from chalicelib.features.work import pipelines
    monkeypatch.setattr(pipelines, 'EXISTING_PAGE', 7)   # four pages: the cursor travels in the messages
    families = [upload(api, prj, f'old/{n}.pdf') for n in range(25)]
    settle(work)
    helper = assistant(api, prj, runOnExistingContent=True,
                       steps=[{'name': 'read', 'stepType': 'SCRIPT', 'options': {'expression': 'family.path'}}])
    settle(work)
    page = api.get(f"/api/executions?filter=assistantId == '{helper['id']}'&pageSize=100").json
    assert page['totalElements'] == 25
    assert sorted(e['documentFamilyId'] for e in page['content']) == sorted(f['id'] for f in families)
    assert {e['status'] for e in page['content']} == {'SUCCEEDED'}
    by_family = {e['documentFamilyId']: e for e in page['content']}
    assert by_family[families[0]['id']]['output'] == {'read': 'old/0.pdf'}
    # a new family afterwards is processed once, by its own trigger
    late = upload(api, prj, 'new.pdf')
    settle(work)
    assert len(executions_of(api, late['id'])) == 1
    assert api.get(f"/api/executions?filter=assistantId == '{helper['id']}'").json['totalElements'] == 26


def test_an_assistant_turned_active_runs_over_existing_content(api, prj, work, upstream):
    family = upload(api, prj, 'e.pdf')
    helper = assistant(api, prj, active=False, runOnExistingContent=True)
    settle(work)
    assert executions_of(api, family['id']) == []
    assert api.put(f"/api/assistants/{helper['id']}", {'active': True}).status == 200
    settle(work)
    [execution] = executions_of(api, family['id'])
    assert execution['status'] == 'SUCCEEDED' and execution['metadata']['trigger'].startswith('existing:')


@pytest.mark.slow
def test_a_cancelled_execution_runs_no_further_step(api, prj, work, upstream):
    slow = steps(fail=True, attempts=3)
    slow[0]['executionPolicy'].update(backoffBaseSeconds=600)
    assistant(api, prj, steps=slow)
    family = upload(api, prj, 'f.pdf')
    settle(work)
    [execution] = executions_of(api, family['id'])
    assert execution['status'] == 'PENDING' and execution['nextAttemptAt'] and len(upstream.seen) == 1
    assert api.post(f"/api/executions/{execution['id']}/cancel").status == 200
    work.send({'type': 'pipeline.step', 'executionId': execution['id'], 'step': 0, 'attempt': 2})
    settle(work)
    assert len(upstream.seen) == 1
    assert api.get(f"/api/executions/{execution['id']}").json['status'] == 'CANCELLED'
    after = api.get(f"/api/document-families/{family['id']}").json
    assert after['processing']['status'] == 'CANCELLED' and after['labels'] == []


def test_a_bridge_that_is_not_agent_callable_is_refused(api, prj, work, upstream, reach):
    make_bridge(api, prj['project']['id'], reach, [endpoint('echo', '/echo')], slug='private')
    private = steps()
    private[0]['options'].update(bridge='private', endpointName='echo')
    assistant(api, prj, steps=private)
    family = upload(api, prj, 'g.pdf')
    settle(work)
    [execution] = executions_of(api, family['id'])
    assert execution['status'] == 'FAILED' and upstream.seen == []
    assert any('not callable by agents' in m['message'] for m in execution['statusMessages'])


def test_a_malformed_pipeline_message_goes_to_the_dead_letter_queue(api, prj, work):
    work.send(json.dumps({'type': 'pipeline.step', 'executionId': 'x'}))
    work.drain(seconds=5)
    assert work.depth(work.dlq_url) == 1
