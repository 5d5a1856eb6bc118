"""Documents are read, through `make run` for real (issue 39; docs/api/documents.md "Parsed
documents", docs/api/processing.md "The parse stage"): every corpus file of
tests/fixtures/documents, uploaded through the store file API and through a multipart upload
session, has within 60 s a document holding its known words (PDFs and images: with pages and
boxes), parsed by the local stack's own pollers (the OCR queue's included); a SCRIPT step of a
subscribed assistant sets a label from a word of the text; each hostile file ends its parse
execution FAILED naming its cause, within its budget, while the server keeps answering.

Every target is 127.0.0.1 (no name is looked up)."""
from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from urllib3 import encode_multipart_formdata

from tests.live import LiveStack

CORPUS = Path(__file__).resolve().parents[1] / 'fixtures' / 'documents'
MANIFEST = json.loads((CORPUS / 'manifest.json').read_text())
WITHIN_SECONDS = 60
HOSTILE_TYPES = {'.pdf': 'application/pdf', '.png': 'image/png',
                 '.docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'}
# the SCRIPT step: a label from a word of the parsed text
LABEL_EXPRESSION = ("{{'labels': [$contains(document.text, 'verbatim') ? '{yes}' : '{no}'], "
                    "'metadata': {{'parsedPages': document.pageCount}}}}")


@pytest.fixture(scope='module')
def live(tmp_path_factory):
    stack = LiveStack(tmp_path_factory.mktemp('parsing'))
    yield stack
    stack.stop()


@pytest.fixture(scope='module')
def place(live):
    org = next(o for o in live.get('/api/organizations').body['content'] if o.get('slug') == 'default')
    project = live.created('/api/projects', {'name': f'parsing-{uuid.uuid4().hex[:6]}', 'organizationId': org['id']})
    store = live.created('/api/document-stores', {'projectId': project['id'], 'name': 'corpus',
                                                  'slug': f'corpus-{uuid.uuid4().hex[:8]}'})
    tag = uuid.uuid4().hex[:6]   # a SCRIPT adds labels of the organization: made first
    labels = {answer: live.created('/api/labels', {'name': f'{answer}-verbatim-{tag}', 'organizationId': org['id']})
              for answer in ('mentions', 'no')}
    live.created('/api/assistants', {
        'projectId': project['id'], 'name': 'Reader', 'slug': f'reader-{uuid.uuid4().hex[:6]}',
        'subscription': f"documentStoreId == '{store['id']}'",
        'options': {'pipeline': {'steps': [{'name': 'label', 'stepType': 'SCRIPT',
                                            'options': {'expression': LABEL_EXPRESSION.format(
                                                yes=labels['mentions']['name'], no=labels['no']['name'])}}]}}})
    return {'org': org, 'project': project, 'store': store, 'labels': labels}


def _media_type(name: str) -> str:
    return MANIFEST['real'].get(name, {}).get('mediaType') or HOSTILE_TYPES[Path(name).suffix]


def _by_store_file_api(live, place, name: str, data: bytes) -> dict:
    body, content_type = encode_multipart_formdata({'file': (name, data, _media_type(name))})
    answer = live.call('POST', f"/api/stores/default/{place['store']['slug']}/fs?path=fs/{name}", raw=body,
                       content_type=content_type)
    assert answer.status == 201, answer
    return answer.body


def _by_multipart_session(live, place, name: str, data: bytes) -> dict:
    store = place['store']['id']
    length = f'&contentLength={len(data)}' if data else ''   # a 0-byte file: a session of no declared length
    session = live.post(f"/api/document-stores/{store}/multipart-upload-request?path=mp/{name}"
                        f"&contentType={quote(_media_type(name))}{length}").body
    urls = live.post(f'/api/document-stores/{store}/multipart-upload-part-urls',
                     {'uploadId': session['uploadId'], 'storageKey': session['storageKey'], 'partNumbers': [1]}).body
    request = urllib.request.Request(urls['parts'][0]['url'], data=data, method='PUT',
                                     headers={'Content-Type': 'application/octet-stream'})
    with urllib.request.urlopen(request, timeout=30) as resp:
        etag = resp.headers['ETag']
    done = live.post(f'/api/document-stores/{store}/multipart-upload-complete',
                     {'uploadId': session['uploadId'], 'storageKey': session['storageKey'],
                      'parts': [{'partNumber': 1, 'etag': etag}]})
    assert done.status == 201, done
    return done.body


def _parse_execution(live, family_id: str) -> dict | None:
    page = live.get('/api/executions?pageSize=50&filter=' + quote(f"documentFamilyId == '{family_id}'")).body
    parses = [e for e in page['content'] if (e.get('metadata') or {}).get('stage') == 'parse']
    return parses[0] if parses else None


def _wait(check, seconds: float):
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    return None


def _check_read(live, name: str, how: str, family: dict, at: float) -> None:
    expected = MANIFEST['real'][name]

    def read():
        doc = live.get(f"/api/document-families/{family['id']}/document").body
        return doc if doc['version'] >= 1 else None
    doc = _wait(read, max(1.0, WITHIN_SECONDS - (time.monotonic() - at)))
    execution = _parse_execution(live, family['id'])
    assert doc is not None, (name, how, time.monotonic() - at, execution and execution['statusMessages'])
    text = '\n'.join(n['content'] for n in doc['nodes'] if n['content'])
    for word in expected['words']:
        assert word in text, (name, how, word)
    if expected.get('pages'):
        assert doc['pageCount'] == expected['pages'], (name, doc['pageCount'])
        boxed = [n for n in doc['nodes'] if n['nodeType'] == 'word']
        assert boxed and all(len(n['features']['bbox']) == 4 and n['features']['page'] >= 1 for n in boxed)
        if expected.get('ocr'):
            assert all(0 <= n['features']['confidence'] <= 1 for n in boxed)
    assert execution['status'] == 'SUCCEEDED', execution


def test_every_corpus_file_is_read_within_60_seconds_and_its_words_reach_the_steps(live, place):
    """File by file (both uploads of a file at once): a file's 60 s are its own, not the queue of
    every scan uploaded before it (make run has one OCR worker; Lambda runs them side by side)."""
    uploaded = []
    for name in MANIFEST['real']:
        data = (CORPUS / name).read_bytes()
        pair = [(name, how.__name__, how(live, place, name, data), time.monotonic())
                for how in (_by_store_file_api, _by_multipart_session)]
        uploaded += pair
        for name, how, family, at in pair:
            _check_read(live, name, how, family, at)
    # the subscribed assistant's SCRIPT step saw the text: a label from one of its words
    for name, how, family, _ in uploaded:
        def labelled(family=family):
            got = live.get(f"/api/document-families/{family['id']}").body
            return got if got['labels'] else None
        got = _wait(labelled, WITHIN_SECONDS)
        assert got is not None, (name, how)
        text = live.get(f"/api/document-families/{family['id']}/text").body   # text/plain: the str
        verbatim = 'verbatim' in str(text)
        assert got['labels'] == [place['labels']['mentions' if verbatim else 'no']['id']], (name, got['labels'])
        if 'verbatim' in MANIFEST['real'][name]['words']:
            assert verbatim, name


def test_each_hostile_file_fails_with_its_cause_while_the_server_answers(live, place):
    stop = threading.Event()
    latencies: list[float] = []
    failures: list[int] = []

    def probe():
        while not stop.is_set():
            started = time.monotonic()
            answer = live.get('/api/account/me')
            latencies.append(time.monotonic() - started)
            if answer.status != 200:
                failures.append(answer.status)
            time.sleep(0.2)
    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    try:
        families = {}
        for name in MANIFEST['hostile']:
            data = (CORPUS / name).read_bytes()
            # a 0-byte file: the small-upload routes refuse an empty body, a multipart session takes it
            how = _by_store_file_api if data else _by_multipart_session
            families[name] = (how(live, place, name, data), time.monotonic())
        for name, (family, at) in families.items():
            def ended(family=family):
                execution = _parse_execution(live, family['id'])
                return execution if execution and execution['status'] not in ('PENDING', 'RUNNING') else None
            execution = _wait(ended, max(1.0, WITHIN_SECONDS - (time.monotonic() - at)))
            assert execution is not None, (name, ''.join(live.output[-30:]))
            cause = MANIFEST['hostile'][name]['cause']
            assert execution['status'] == 'FAILED', (name, execution['statusMessages'])
            assert any(m['message'].startswith(f'{cause}:') or f': {cause}:' in m['message']
                       for m in execution['statusMessages']), (name, execution['statusMessages'])
            doc = live.get(f"/api/document-families/{family['id']}/document").body
            assert doc == {'version': 0, 'nodes': []}
            assert live.get(f"/api/document-families/{family['id']}").body['contentObjectId'] == \
                family['contentObjectId']
    finally:
        stop.set()
        prober.join(timeout=10)
    assert not failures and latencies and max(latencies) < 10, (failures, max(latencies or [0]))
