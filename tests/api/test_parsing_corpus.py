"""The parse stage over the real corpus (tests/fixtures/documents, its manifest of known words),
in process: every file's words reach the family's document and text, every hostile file ends
the stage ``failed`` with its cause and leaves the family's document as it was. Through the
worker and the local server: tests/integration/test_parsing_local.py."""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest

from chalicelib.features.documents import blobs
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.features.parsing import stage

CORPUS = Path(__file__).resolve().parents[1] / 'fixtures' / 'documents'
MANIFEST = json.loads((CORPUS / 'manifest.json').read_text())
TEXT_FILES = [n for n, m in MANIFEST['real'].items() if not m.get('ocr')]


@pytest.fixture
def store(api, org_id, bucket):  # noqa: F811
    project = api.post('/api/projects', {'name': f'corpus-{uuid.uuid4().hex[:6]}', 'organizationId': org_id}).json
    return api.post('/api/document-stores', {'projectId': project['id'], 'name': 'corpus',
                                             'slug': f'corpus-{uuid.uuid4().hex[:8]}'}).json


TYPES = {'.pdf': 'application/pdf', '.png': 'image/png',
         '.docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'}


def _upload(api, store, name: str) -> dict:
    """Uploaded through the API; a 0-byte file cannot be (every upload route refuses an empty
    body), so its family gets one byte that the object is then emptied of, as storage could."""
    data = (CORPUS / name).read_bytes()
    media_type = MANIFEST['real'].get(name, {}).get('mediaType') or TYPES[Path(name).suffix]
    r = api.post(f"/api/document-stores/{store['id']}/upload?path=corpus/{name}", raw=data or b'x',
                 headers={'content-type': media_type})
    assert r.status == 201, r.json
    if not data:
        blobs.put(r.json['storageKey'], b'', media_type)
    return r.json


def _parse(family_id: str, *, ocr: bool) -> stage.Slice:
    state = stage.new_state(f'run-{uuid.uuid4().hex[:8]}')
    for _ in range(1000):
        done = stage.run_slice(family_id, state, principal=SERVICE, deadline=time.monotonic() + 60, ocr=ocr)
        if done.kind != 'continue' or done.ocr:
            return done
        state = done.state
    raise AssertionError('never ended')


@pytest.mark.parametrize('name', TEXT_FILES)
def test_each_text_file_is_parsed_with_its_words(api, store, name):
    family = _upload(api, store, name)
    done = _parse(family['id'], ocr=False)
    expected = MANIFEST['real'][name]
    assert done.kind == 'done' and done.output['parsed'], done
    assert done.output['parser'] == expected['parser']
    text = api.get(f"/api/document-families/{family['id']}/text").body.decode()
    for word in expected['words']:
        assert word in text, (name, word)
    doc = api.get(f"/api/document-families/{family['id']}/document").json
    if expected.get('pages'):
        pages = [n for n in doc['nodes'] if n['nodeType'] == 'page']
        assert len(pages) == expected['pages'] == doc['pageCount']
        word = next(n for n in doc['nodes'] if n['nodeType'] == 'word')
        assert len(word['features']['bbox']) == 4 and word['features']['page'] >= 1


def test_a_scan_needs_ocr_without_tesseract_and_is_read_with_it(api, store):
    family = _upload(api, store, 'scanned-page.png')
    handed = _parse(family['id'], ocr=False)
    assert handed.kind == 'continue' and handed.ocr and handed.state['nextPage'] == 1
    done = stage.run_slice(family['id'], handed.state, principal=SERVICE, deadline=time.monotonic() + 120,
                             ocr=True)
    assert done.kind == 'done' and done.output['parser'] == 'image-ocr', done
    doc = api.get(f"/api/document-families/{family['id']}/document").json
    words = [n for n in doc['nodes'] if n['nodeType'] == 'word']
    assert 'Preamble' in {w['content'] for w in words} and all(0 <= w['features']['confidence'] <= 1 for w in words)


@pytest.mark.parametrize('name', sorted(MANIFEST['hostile']))
def test_each_hostile_file_fails_with_its_cause_and_changes_nothing(api, store, name):
    family = _upload(api, store, name)
    started = time.monotonic()
    done = _parse(family['id'], ocr=True)
    assert done.kind == 'failed', done
    assert done.message.startswith(MANIFEST['hostile'][name]['cause'] + ':'), done.message
    assert time.monotonic() - started < 60
    assert api.get(f"/api/document-families/{family['id']}/document").json == {'version': 0, 'nodes': []}
    assert api.get(f"/api/document-families/{family['id']}").json['contentObjectId'] == family['contentObjectId']


def _run_all(work, rounds: int = 30) -> None:
    for _ in range(rounds):
        if not (work.publish_outbox() + work.drain(seconds=10)):
            return


def _parse_run(api, family_id: str) -> dict:
    page = api.get('/api/executions?pageSize=50&filter=' + quote(f"documentFamilyId == '{family_id}'")).json
    return next(e for e in page['content'] if (e.get('metadata') or {}).get('stage') == 'parse')


def _labels(api, store, *names: str) -> dict[str, str]:
    """Labels of the organization (a SCRIPT adds existing labels only), by name -> id."""
    tag = uuid.uuid4().hex[:6]
    made = {n: api.post('/api/labels', {'organizationId': store['organizationId'], 'name': f'{n}-{tag}'}).json
            for n in names}
    return {n: label['id'] for n, label in made.items()} | {f'{n}:name': label['name'] for n, label in made.items()}


def test_through_the_worker_the_stage_runs_first_and_a_script_labels_from_the_text(api, store, work):
    labels = _labels(api, store, 'licence', 'other')
    api.post('/api/assistants', {'projectId': store['projectId'], 'name': 'Reader', 'slug': 'reader',
                                 'options': {'pipeline': {'steps': [{'name': 'label', 'stepType': 'SCRIPT', 'options': {
                                     'expression': f"{{'labels': [$contains(document.text, 'Preamble') ? "
                                                   f"'{labels['licence:name']}' : '{labels['other:name']}'], "
                                                   "'metadata': {'pages': $string(document.pageCount), "
                                                   "'parser': stages.parse.parser}}"}}]}}})
    family = _upload(api, store, 'lppl.pdf')
    _run_all(work)
    run = _parse_run(api, family['id'])
    assert run['status'] == 'SUCCEEDED', run['statusMessages']
    assert run['output']['parse']['parsed'] and run['output']['parse']['pageCount'] == 8
    got = api.get(f"/api/document-families/{family['id']}").json
    assert got['documentVersion'] == 1 and got['labels'] == [labels['licence']], got
    assert got['metadata'] == {'pages': '8', 'parser': 'pdf-text'}
    from chalicelib.ops import check_table
    violations, snap = check_table.run()   # the run, the version, the derived object: every invariant kept
    assert not violations, check_table.report(violations, snap, check_table.CHECKS)


def test_a_scan_continues_on_the_ocr_queue_and_a_hostile_file_fails_and_starts_no_pipeline(api, store, work):
    labels = _labels(api, store, 'read', 'unread')
    api.post('/api/assistants', {'projectId': store['projectId'], 'name': 'Tagger', 'slug': 'tagger',
                                 'options': {'pipeline': {'steps': [{'name': 'tag', 'stepType': 'SCRIPT', 'options': {
                                     'expression': f"{{'labels': [document ? '{labels['read:name']}' : "
                                                   f"'{labels['unread:name']}']}}"}}]}}})
    scan = _upload(api, store, 'scanned-pages.tiff')
    bad = _upload(api, store, 'hostile-encrypted.pdf')
    _run_all(work)
    run = _parse_run(api, scan['id'])
    assert run['status'] == 'SUCCEEDED', run['statusMessages']
    assert any('continues in a new message' in m['message'] and 'needs OCR' in m['message']
               for m in run['statusMessages']), run['statusMessages']
    assert run['output']['parse']['parser'] == 'image-ocr' and run['output']['parse']['pageCount'] == 2
    failed = _parse_run(api, bad['id'])
    assert failed['status'] == 'FAILED' and any(m['message'].startswith("step 'parse': attempt 1 failed: encrypted:")
                                                for m in failed['statusMessages']), failed['statusMessages']
    assert api.get(f"/api/document-families/{scan['id']}").json['labels'] == [labels['read']]
    assert api.get(f"/api/document-families/{bad['id']}").json['labels'] == []   # no pipeline ran


def test_reprocess_parses_again_and_runs_the_named_assistant(api, store, work):
    from tests.conftest import make_org, make_user
    reader = api.post('/api/assistants', {'projectId': store['projectId'], 'name': 'Reader', 'slug': 'reader',
                                          'options': {'pipeline': {'steps': [{'name': 'count', 'stepType': 'SCRIPT',
                                                                              'options': {'expression': '1'}}]}}}).json
    api.post('/api/assistants', {'projectId': store['projectId'], 'name': 'Other', 'slug': 'other',
                                 'options': {'pipeline': {'steps': [{'name': 'x', 'stepType': 'SCRIPT',
                                                                     'options': {'expression': '2'}}]}}})
    family = _upload(api, store, 'upref.pdf')
    _run_all(work)
    doc = api.get(f"/api/document-families/{family['id']}/document").json
    edited = [n for n in doc['nodes'] if n['nodeType'] != 'word']
    assert api.put(f"/api/document-families/{family['id']}/document", {'version': 1, 'nodes': edited}).status == 200
    r = api.post(f"/api/document-families/{family['id']}/reprocess")
    assert r.status == 202 and r.json['metadata']['stage'] == 'parse', r.json
    assert r.json['metadata']['trigger'].startswith('reprocess:') and r.json['status'] == 'PENDING'
    _run_all(work)
    again = api.get(f"/api/executions/{r.json['id']}").json
    assert again['status'] == 'SUCCEEDED', again['statusMessages']
    doc = api.get(f"/api/document-families/{family['id']}/document").json
    assert doc['version'] == 3 and any(n['nodeType'] == 'word' for n in doc['nodes'])
    base = f"/api/stores/default/{store['slug']}/families/{family['id']}"
    objects = api.get(base).json['contentObjects']
    assert [o['contentType'] for o in objects] == ['NATIVE', 'DOCUMENT']   # the parse's result replaced
    assert objects[1]['documentVersion'] == '3'
    runs = api.get('/api/executions?pageSize=50&filter=' + quote(
        f"documentFamilyId == '{family['id']}'")).json['content']
    assert sorted(e['name'] for e in runs if not e['metadata'].get('stages')) == ['Other', 'Other', 'Reader', 'Reader']
    # the SDK's path, naming one assistant: only that one runs again
    r = api.put(f"{base}/reprocess?assistantId={reader['id']}")
    assert r.status == 202, r.json
    r2 = api.put(f"{base}/objects/{objects[0]['id']}/reprocess?assistantId={reader['id']}")
    assert r2.status == 202 and r2.json['id'] != r.json['id']
    _run_all(work)
    runs = api.get('/api/executions?pageSize=50&filter=' + quote(
        f"documentFamilyId == '{family['id']}'")).json['content']
    names = [e['name'] for e in runs if not e['metadata'].get('stages')]
    assert names.count('Reader') == 4 and names.count('Other') == 2
    # errors and tenancy
    unknown = {'assistantId': str(uuid.uuid4())}
    assert api.post(f"/api/document-families/{family['id']}/reprocess", unknown).status == 400
    assert api.post(f"/api/document-families/{family['id']}/reprocess", raw=b'[1]').status == 400
    assert api.put(f"{base}/objects/{uuid.uuid4()}/reprocess").status == 404
    org = make_org(api)
    _, key = make_user(api, org['id'], 'MANAGE')
    stranger = api.as_key(key)
    assert stranger.post(f"/api/document-families/{family['id']}/reprocess").status == 404
    assert stranger.put(f'{base}/reprocess').status == 404
    _, viewer = make_user(api, store['organizationId'], 'VIEWER')
    assert api.as_key(viewer).post(f"/api/document-families/{family['id']}/reprocess").status == 403
