"""Document processing (issue 26, docs/api/processing.md): a project's assistants run their
pipeline over each new document family, through the outbox stream and the activity queue
(tests/work_support.py drives both with the payloads AWS sends). Bridge calls reach an
upstream on loopback only through the egress allowlist (tests/netguard.py)."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from urllib3 import encode_multipart_formdata

from tests.bridging import endpoint, make_bridge

# a real PDF: every new family is parsed before the pipelines run (issue 39), and a file that
# cannot be read starts none
PDF = (Path(__file__).resolve().parents[1] / 'fixtures' / 'documents' / 'ltnews11.pdf').read_bytes()


pytestmark = pytest.mark.usefixtures('net')   # tests/api/conftest.py: no packet leaves this machine


@pytest.fixture
def prj(api, org_id, bucket, reach):
    project = api.post('/api/projects', {'name': 'processing', 'organizationId': org_id}).json
    invoice = api.post('/api/labels', {'organizationId': org_id, 'name': 'invoice'}).json
    for slug, kind in (('received', 'UNRESOLVED'), ('processed', 'RESOLVED')):
        r = api.post('/api/document-statuses', {'projectId': project['id'], 'status': slug, 'slug': slug,
                                                'statusType': kind})
        assert r.status == 201, r.json
    store = api.post('/api/document-stores', {'projectId': project['id'], 'name': 'inbox',
                                              'slug': f'inbox-{uuid.uuid4().hex[:8]}'}).json
    bridge = make_bridge(api, project['id'], reach, [endpoint('echo', '/echo'), endpoint('fail', '/status')],
                         slug='ocr', agentCallable=True)
    return {'project': project, 'store': store, 'bridge': bridge, 'invoice': invoice}


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


def executions_of(api, family_id: str, *, stages: bool = False) -> list[dict]:
    """The family's executions: its pipelines' runs (with ``stages``, the run of the stages before
    the pipelines too: the parse stage, issue 39)."""
    r = api.get(f"/api/executions?filter=documentFamilyId == '{family_id}'&pageSize=100")
    assert r.status == 200, r.json
    return [e for e in r.json['content'] if stages or not (e.get('metadata') or {}).get('stages')]


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
    assert after['documentStatus']['slug'] == 'processed' and after['labels'] == [prj['invoice']['id']]
    assert after['metadata'] == {'pages': 1, 'ocrPath': seen.path}
    assert after['processing'] == {'assistantId': helper['id'], 'assistantName': 'Invoice reader',
                                   'executionId': execution['id'], 'status': 'SUCCEEDED', 'step': 'classify',
                                   'trigger': 'created', 'updatedOn': execution['updatedOn']}
    # the change went through the family's service: its domain event, its sequence
    # the parse stage's new document version, then the SCRIPT's update (issue 39)
    assert after['changeSequence'] == family['changeSequence'] + 2
    events = api.get("/api/events?filter=eventType == 'document-families.updated'").json['content']
    assert [e['payload']['resourceId'] for e in events] == [family['id']] * 2   # the parse's version, the SCRIPT


def test_a_non_matching_subscription_or_an_inactive_assistant_starts_nothing(api, prj, work, upstream):
    assistant(api, prj, subscription="path =like= '*.docx'")
    assistant(api, prj, active=False)
    assistant(api, prj, subscription=f"documentStoreId == '{uuid.uuid4()}'")
    family = upload(api, prj, 'b.pdf')
    settle(work)
    assert executions_of(api, family['id']) == [] and upstream.seen == []
    after = api.get(f"/api/document-families/{family['id']}").json
    # only the parse stage ran (issue 39): its run is the family's latest, its version the one change
    assert after['processing']['status'] == 'SUCCEEDED' and 'assistantId' not in after['processing']
    assert after['changeSequence'] == family['changeSequence'] + 1


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
    assert after['changeSequence'] == family['changeSequence'] + 1   # the parse stage's version only (issue 39)
    assert after['metadata'] == family['metadata']
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


# ----------------------------------------------------------------------------- the one execution engine (issue 40)

def _forge_running(execution_id: str) -> None:
    """Make the execution look as a worker leaves it when it dies (or its outcome write fails)
    right after claiming attempt 1: RUNNING, one attempt made, just now."""
    from chalicelib.core import clock
    from chalicelib.features.identity.service_token import SERVICE
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family
    from chalicelib.kernel.store import table
    stored = table.get('executions', execution_id)
    forged = {**stored.data, 'status': 'RUNNING', 'attempts': 1, 'updatedOn': clock.now_iso(),
              'changeSequence': stored.seq + 1}
    records.commit(records.update_ops(family('executions'), forged, stored, principal=SERVICE))


def test_a_step_found_running_on_redelivery_is_checked_back_not_consumed(api, prj, work, monkeypatch):
    """The one redelivery rule (docs/api/work.md "The worker"), for a pipeline's step: a message
    whose attempt is RUNNING within its time is not consumed (which left a dead attempt RUNNING
    for good): a check-back message comes when the attempt's time is up, finds it interrupted,
    and attempt 2 runs. Before issue 40, pipelines consumed it as 'attempt in progress'."""
    from chalicelib.features.work import engine, pipelines
    monkeypatch.setattr(engine, 'INTERRUPTED_AFTER_SECONDS', 0)
    monkeypatch.setattr(pipelines, 'STAGES_BEFORE_PIPELINES', [])   # the queue is stepped by hand: no parse stage
    script = {'name': 'read', 'stepType': 'SCRIPT', 'options': {'expression': 'family.path'},
              'executionPolicy': {'maxAttempts': 2, 'timeoutSeconds': 1}}
    assistant(api, prj, steps=[script])
    family = upload(api, prj, 'redelivered.pdf')
    work.publish_outbox()
    work.queue.poll_once(wait_seconds=0)          # the start: the run exists, its step 0 attempt 1 queued
    [execution] = executions_of(api, family['id'])
    work.queue.sqs.purge_queue(QueueUrl=work.queue.url)
    _forge_running(execution['id'])               # a worker claimed attempt 1 and died
    work.send({'type': 'pipeline.step', 'executionId': execution['id'], 'step': 0, 'attempt': 1})
    work.drain(seconds=15)
    execution = api.get(f"/api/executions/{execution['id']}").json
    assert execution['status'] == 'SUCCEEDED' and execution['attempts'] == 2, execution['statusMessages']
    assert any('interrupted' in m['message'] for m in execution['statusMessages'])
    assert execution['output'] == {'read': 'redelivered.pdf'}


@pytest.fixture
def probe(monkeypatch):
    """A step kind only the engine knows (as PARSE and EXTRACT are added): one entry in
    engine.RUNNERS, its runner a plain function of (execution, options, seconds, principal) as a
    feature's service exposes it. ``script`` lists what each call does in turn."""
    from chalicelib.features.work import engine
    calls: list[dict] = []
    script: list = []

    def run_probe_step(execution, options, seconds, principal):
        calls.append({'progress': (execution.get('metadata') or {}).get('progress'), 'seconds': seconds,
                      'options': options, 'principal': principal.email})
        action = script.pop(0) if script else {'done': True}
        if isinstance(action, BaseException):
            raise action
        return action

    monkeypatch.setitem(engine.RUNNERS, 'PROBE', engine.Runner(
        lambda run: run_probe_step(run.execution, run.options, run.seconds, run.principal)))
    return {'calls': calls, 'script': script}


def probe_steps(**policy) -> list[dict]:
    return [{'name': 'probe', 'stepType': 'PROBE', 'options': {'pages': 3},
             **({'executionPolicy': policy} if policy else {})}]


def test_a_new_step_kind_continues_across_messages_without_counting_attempts(api, prj, work, probe):
    from chalicelib.core.resumable import Continue
    probe['script'].extend([Continue({'page': 1}, message='pages 1-1 of 3 read'),
                            Continue({'page': 2}), {'pages': 3}])
    assistant(api, prj, steps=probe_steps())
    family = upload(api, prj, 'scan.pdf')
    settle(work)
    [execution] = executions_of(api, family['id'])
    assert execution['status'] == 'SUCCEEDED', execution['statusMessages']
    assert execution['attempts'] == 1 and execution['output'] == {'probe': {'pages': 3}}
    assert [c['progress'] for c in probe['calls']] == [None, {'page': 1}, {'page': 2}]   # handed back
    assert all(c['options'] == {'pages': 3} and 0 < c['seconds'] <= 20 for c in probe['calls'])
    assert probe['calls'][0]['principal'].startswith('assistant:')   # a pipeline's steps act as its assistant
    assert 'progress' not in execution['metadata'] and 'continuations' not in execution['metadata']
    lines = [m['message'] for m in execution['statusMessages']]
    assert any('pages 1-1 of 3 read; continues in a new message' in line for line in lines)
    assert any('(continuation 2)' in line for line in lines)
    from chalicelib.ops import check_table
    violations, snap = check_table.run()   # five writes of the run, each in the layout its record counts in
    assert not violations, check_table.report(violations, snap, check_table.CHECKS)


def test_the_progress_of_a_continued_step_is_visible_on_the_execution(api, prj, work, probe, monkeypatch):
    from chalicelib.core.resumable import Continue
    from chalicelib.features.work import engine, pipelines
    monkeypatch.setattr(engine, 'MAX_CONTINUATIONS', 2)
    monkeypatch.setattr(pipelines, 'STAGES_BEFORE_PIPELINES', [])   # the queue is stepped by hand: no parse stage
    probe['script'].extend([Continue({'page': n}, delay_seconds=0) for n in range(1, 10)])
    assistant(api, prj, steps=probe_steps(maxAttempts=3))
    family = upload(api, prj, 'endless.pdf')
    work.publish_outbox()
    work.queue.poll_once(wait_seconds=0)          # the start
    work.queue.poll_once(wait_seconds=0)          # the first message: not finished
    [execution] = executions_of(api, family['id'])
    assert execution['status'] == 'PENDING' and execution['attempts'] == 0
    assert execution['metadata']['progress'] == {'page': 1} and execution['metadata']['continuations'] == 1
    settle(work)
    execution = api.get(f"/api/executions/{execution['id']}").json
    # the cap: a step that never finishes fails (no retry: it would not finish either)
    assert execution['status'] == 'FAILED' and len(probe['calls']) == 3, execution['statusMessages']
    assert 'not finished after 2 continuations' in execution['statusMessages'][-1]['message']


def test_a_new_step_kind_says_retry_or_fail_now_with_the_errors_of_core(api, prj, work, probe):
    from chalicelib.core.errors import BadRequest, ServiceUnavailable
    probe['script'].extend([ServiceUnavailable('the OCR pool is busy'), {'pages': 3}])
    assistant(api, prj, steps=probe_steps(maxAttempts=3))
    retried = upload(api, prj, 'busy.pdf')
    settle(work)
    [execution] = executions_of(api, retried['id'])
    assert execution['status'] == 'SUCCEEDED' and execution['attempts'] == 2, execution['statusMessages']
    assert any('the OCR pool is busy; attempt 2 in 0 s' in m['message'] for m in execution['statusMessages'])

    probe['script'].extend([BadRequest('the file is not a PDF')])
    refused = upload(api, prj, 'broken.pdf')
    settle(work)
    [execution] = executions_of(api, refused['id'])
    assert execution['status'] == 'FAILED' and execution['attempts'] == 1, execution['statusMessages']
    assert 'the file is not a PDF; 1 of 3 attempts made, no retry' in execution['statusMessages'][-1]['message']


def test_the_stages_before_the_pipelines_run_first_and_the_pipelines_see_their_output(api, prj, work, probe,
                                                                                        monkeypatch):
    from chalicelib.features.work import pipelines
    monkeypatch.setattr(pipelines, 'STAGES_BEFORE_PIPELINES', [{'name': 'parse', 'stepType': 'PROBE'}])
    probe['script'].append({'pageCount': 4})
    helper = assistant(api, prj, steps=[{'name': 'pages', 'stepType': 'SCRIPT',
                                         'options': {'expression': 'stages.parse.pageCount * 10'}}])
    family = upload(api, prj, 'staged.pdf')
    settle(work)
    runs = {e['name']: e for e in executions_of(api, family['id'], stages=True)}
    assert set(runs) == {pipelines.STAGES_NAME, 'Invoice reader'}
    stage, run = runs[pipelines.STAGES_NAME], runs['Invoice reader']
    assert stage['status'] == 'SUCCEEDED' and stage['output'] == {'parse': {'pageCount': 4}}
    assert 'assistantId' not in stage and probe['calls'][0]['principal'] == 'service@internal'   # as the service
    assert run['status'] == 'SUCCEEDED' and run['assistantId'] == helper['id'] and run['output'] == {'pages': 40}
    assert run['createdOn'] >= stage['endDate']   # the pipeline started once the stages had ended
    # a stage that fails starts no pipeline
    probe['script'].append(RuntimeError('the parser crashed'))
    other = upload(api, prj, 'unparsable.pdf')
    settle(work)
    [stage] = executions_of(api, other['id'], stages=True)
    assert stage['name'] == pipelines.STAGES_NAME and stage['status'] == 'FAILED'
    assert 'internal error (RuntimeError)' in stage['statusMessages'][-1]['message']


def test_the_second_trigger_of_a_continuing_stage_sends_no_second_step_message(api, prj, work, probe, monkeypatch):
    """CI's OCR image rehearsal: the stream's trigger (the second of every family, the upload's
    being the first) came while the parse stage waited on the OCR queue (PENDING, no attempt
    counted), and sent the step's message again: the page went to the OCR queue twice and the
    image's delivery found its claim taken. A duplicate start resends the first step only when
    it was never claimed (engine.step_unclaimed), and a step's message names its slice: an
    earlier slice's copy is a duplicate (docs/operations/worker.md "Resumable steps")."""
    from chalicelib.core.resumable import Continue
    from chalicelib.features.work import pipelines
    monkeypatch.setattr(pipelines, 'STAGES_BEFORE_PIPELINES', [{'name': 'parse', 'stepType': 'PROBE'}])
    probe['script'].append(Continue({'page': 1}, message='page 1 needs OCR', delay_seconds=600))
    family = upload(api, prj, 'handed-over.pdf')   # the upload's own trigger
    for _ in range(3):                              # the run created, its step claimed and continued
        work.queue.poll_once(wait_seconds=0)
    [stage] = executions_of(api, family['id'], stages=True)
    assert stage['status'] == 'PENDING' and stage['metadata']['continuations'] == 1, stage['statusMessages']
    assert len(probe['calls']) == 1
    work.publish_outbox()                           # the stream's trigger: a duplicate start
    for _ in range(3):
        work.queue.poll_once(wait_seconds=0)
    assert len(probe['calls']) == 1, 'the continuing step ran again on a duplicate start'
    # a copy of the first slice's own message (SQS delivers at least once): a duplicate too
    work.send({'type': 'pipeline.step', 'executionId': stage['id'], 'step': 0, 'attempt': 1, 'continuation': 0})
    work.queue.poll_once(wait_seconds=0)
    assert len(probe['calls']) == 1, 'an earlier slice\'s message ran the step again'
    [stage] = executions_of(api, family['id'], stages=True)
    assert stage['metadata']['continuations'] == 1 and stage['changeSequence'] == 3, stage['statusMessages']
    # the slice's own message (as the continuation sent it) runs it
    probe['script'].append({'pages': 2})
    work.send({'type': 'pipeline.step', 'executionId': stage['id'], 'step': 0, 'attempt': 1, 'continuation': 1})
    work.queue.poll_once(wait_seconds=0)
    assert len(probe['calls']) == 2 and probe['calls'][1]['progress'] == {'page': 1}
    # before any claim, a duplicate start still sends the first step again (a crash after the write)
    probe['script'].append({'pages': 1})
    other = upload(api, prj, 'crashed.pdf')
    work.queue.poll_once(wait_seconds=0)           # the run created and its step message sent ...
    work.queue.sqs.purge_queue(QueueUrl=work.queue.url)   # ... and lost
    work.publish_outbox()
    settle(work)
    [stage] = executions_of(api, other['id'], stages=True)
    assert stage['status'] == 'SUCCEEDED', stage['statusMessages']


# ----------------------------------------------------------------------------- labels and locked (issue 40)

def test_a_script_names_labels_by_name_or_id_and_the_family_holds_ids(api, prj, org_id, work):
    """Defect 2: a SCRIPT stored label NAMES where batch-update stores ids, so one family held
    ['invoice', '<id of invoice>']. Now both hold ids (docs/api/processing.md)."""
    urgent = api.post('/api/labels', {'organizationId': org_id, 'name': 'urgent'}).json
    invoice = prj['invoice']['id']
    assistant(api, prj, steps=[{'name': 'tag', 'stepType': 'SCRIPT',
                                'options': {'expression': f"{{'labels': ['invoice', '{urgent['id']}']}}"}}])
    family = upload(api, prj, 'labelled.pdf')
    settle(work)
    [execution] = executions_of(api, family['id'])
    assert execution['status'] == 'SUCCEEDED', execution['statusMessages']
    assert api.get(f"/api/document-families/{family['id']}").json['labels'] == [invoice, urgent['id']]
    r = api.post('/api/batch-update', {'projectId': prj['project']['id'], 'documentFamilyIds': [family['id']],
                                       'labelUpdates': {'newLabels': [invoice]}})
    assert r.status == 200 and r.json['contentObjectUpdates'][0]['success'] is True, r.json
    assert api.get(f"/api/document-families/{family['id']}").json['labels'] == [invoice, urgent['id']]


def test_a_script_naming_an_unknown_label_fails_at_once_and_creates_nothing(api, prj, org_id, work):
    assistant(api, prj, steps=[{'name': 'tag', 'stepType': 'SCRIPT', 'options': {'expression': "{'labels': 'nope'}"},
                                'executionPolicy': {'maxAttempts': 3}}])
    family = upload(api, prj, 'unknown-label.pdf')
    settle(work)
    [execution] = executions_of(api, family['id'])
    assert execution['status'] == 'FAILED' and execution['attempts'] == 1, execution['statusMessages']
    assert "no label named 'nope' in the organization" in execution['statusMessages'][-1]['message']
    assert api.get(f"/api/document-families/{family['id']}").json['labels'] == []
    assert api.get("/api/labels?filter=name=='nope'").json['totalElements'] == 0


def test_a_script_setting_a_resolved_status_locks_the_family_as_batch_update_does(api, prj, work):
    """Defect 3: a SCRIPT's RESOLVED status left the family unlocked where batch-update locked it.
    A later run's SCRIPT on the locked family fails at once and changes nothing."""
    assistant(api, prj, steps=[{'name': 'resolve', 'stepType': 'SCRIPT',
                                'options': {'expression': "{'documentStatus': 'processed'}"}}])
    family = upload(api, prj, 'resolved.pdf')
    settle(work)
    after = api.get(f"/api/document-families/{family['id']}").json
    assert after['documentStatus']['slug'] == 'processed' and after['locked'] is True
    late = assistant(api, prj, steps=[{'name': 'relabel', 'stepType': 'SCRIPT',
                                       'options': {'expression': "{'labels': ['invoice']}"},
                                       'executionPolicy': {'maxAttempts': 3}}], active=False, runOnExistingContent=True)
    settle(work)   # its created event published while it is inactive
    assert api.put(f"/api/assistants/{late['id']}", {'active': True}).status == 200
    settle(work)
    [run] = [e for e in executions_of(api, family['id']) if e['assistantId'] == late['id']]
    assert run['status'] == 'FAILED' and run['attempts'] == 1, run['statusMessages']
    assert 'is locked' in run['statusMessages'][-1]['message']
    final = api.get(f"/api/document-families/{family['id']}").json
    assert final['labels'] == [] and final['changeSequence'] == after['changeSequence']


def test_a_bridge_call_sends_the_parsed_text(api, prj, work, upstream):
    """Issue 39: a step's input holds the parsed document; a BRIDGE_CALL sends its text."""
    from urllib.parse import parse_qs, urlsplit
    assistant(api, prj, steps=[{'name': 'send', 'stepType': 'BRIDGE_CALL',
                                'options': {'bridge': 'ocr', 'endpointName': 'echo',
                                            'query': {'text': '=$substring(document.text, 0, 300)',
                                                      'pages': '=document.pageCount'}}}])
    upload(api, prj, 'news.pdf')
    settle(work)
    [seen] = upstream.seen
    sent = parse_qs(urlsplit(seen.path).query)
    assert sent['pages'] == ['1'] and 'News' in sent['text'][0], sent


def _queued(work) -> None:
    """Publish the outbox and run the queue's messages once (the runs are created and queued)."""
    while work.stream.poll_once()['records']:
        pass
    work.drain(seconds=5)


def test_a_run_whose_family_was_deleted_after_the_delete_looked_goes_with_it(api, prj, work, upstream, monkeypatch):
    """The chaos run's checker found an execution naming a deleted family: created (or changed)
    after the family's delete read its executions. A run that finds its family gone deletes itself
    instead of ending FAILED with a reference to nothing."""
    assistant(api, prj)
    family = upload(api, prj, 'race.pdf')
    while work.stream.poll_once()['records']:
        pass
    from chalicelib.features.work import pipelines
    stages = pipelines.run_stages(family['id'], pipelines.CREATED)   # the stages' run exists, its step queued
    assert stages.startswith('started'), stages
    from chalicelib.features.documents import service as documents
    real = documents.delete_dependents
    monkeypatch.setattr(documents, 'delete_dependents',   # the delete's reads miss the new run
                        lambda fam, principal, **kw: None if fam.id == family['id'] else real(fam, principal, **kw))
    assert api.delete(f"/api/document-families/{family['id']}").status == 204
    monkeypatch.setattr(documents, 'delete_dependents', real)
    [run] = [e for e in executions_of(api, family['id'], stages=True)]
    settle(work)
    assert api.get(f"/api/executions/{run['id']}").status == 404
    assert executions_of(api, family['id'], stages=True) == []


def test_a_run_created_after_its_family_was_deleted_deletes_itself_at_once(api, prj, work, monkeypatch):
    """The chaos run of 1235cd8: the upload's own parse trigger reached the worker while the test
    deleted the family; the worker read the family just before its delete, created the stages run
    just after, and the run named a deleted family until its step ran. Its creation now finds the
    family gone (the conditional summary write) and the run goes at once, no step needed."""
    assistant(api, prj)
    family = upload(api, prj, 'late.pdf')
    from chalicelib.features.work import pipelines
    from chalicelib.kernel.store import table
    read_before = table.get('document-families', family['id'])
    assert api.delete(f"/api/document-families/{family['id']}").status == 204
    real_get = pipelines.table.get
    monkeypatch.setattr(pipelines.table, 'get', lambda path, id_, *a, **k: read_before
                        if (path, id_) == ('document-families', family['id']) else real_get(path, id_, *a, **k))
    outcome = pipelines.run_stages(family['id'], pipelines.CREATED)
    assert outcome.startswith('deleted'), outcome
    assert api.get(f"/api/executions/{pipelines.stages_id(family['id'], pipelines.CREATED)}").status == 404
    assert executions_of(api, family['id'], stages=True) == []


def test_a_run_created_while_its_family_is_deleted_is_swept_by_the_delete(api, prj, work, monkeypatch):
    """A run created between the delete's read of the family's executions and the family's own
    delete: the delete reads them once more after it committed (features/documents/service.py
    ``sweep_dependents``), so no execution names the family when the DELETE answers."""
    assistant(api, prj)
    family = upload(api, prj, 'between.pdf')
    from chalicelib.features.documents import service as documents
    from chalicelib.features.work import pipelines
    real = documents.delete_dependents
    created = []

    def then_a_run_starts(fam, principal, **kw):
        real(fam, principal, **kw)
        if fam.id == family['id'] and not created:   # the worker's run lands right after the read
            created.append(pipelines.run_stages(family['id'], pipelines.CREATED))
    monkeypatch.setattr(documents, 'delete_dependents', then_a_run_starts)
    assert api.delete(f"/api/document-families/{family['id']}").status == 204
    assert created and created[0].startswith('started'), created
    assert api.get(f"/api/executions/{pipelines.stages_id(family['id'], pipelines.CREATED)}").status == 404


def test_a_run_changed_while_its_family_is_deleted_is_deleted_not_skipped(api, prj, work, upstream, monkeypatch):
    assistant(api, prj)
    family = upload(api, prj, 'busy.pdf')
    settle(work)
    runs = executions_of(api, family['id'], stages=True)
    assert len(runs) == 2   # the parse stage's and the assistant's
    from chalicelib.features.documents import service as documents
    from chalicelib.kernel.store import table
    real_batch_get = table.batch_get

    def stale(keys):   # each run as read just before a writer changed it (its sequence moved on)
        found = real_batch_get(keys)
        return {k: (table.Stored(s.family, s.data, s.seq - 1, s.org, s.indexed, s.guarded)
                    if s.family == 'executions' else s) for k, s in found.items()}
    monkeypatch.setattr(documents.table, 'batch_get', stale)
    assert api.delete(f"/api/document-families/{family['id']}").status == 204
    monkeypatch.setattr(documents.table, 'batch_get', real_batch_get)
    assert executions_of(api, family['id'], stages=True) == []
