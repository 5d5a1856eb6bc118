"""The parse stage over the real corpus (tests/fixtures/documents, its manifest of known words),
in process: every file's words reach the family's document and text, every hostile file ends
the stage ``failed`` with its cause and leaves the family's document as it was. Through the
worker and the local server: tests/integration/test_parsing_local.py."""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from chalicelib.features.documents import blobs
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.features.parsing import service
from tests.api.test_documents_upload import bucket  # noqa: F401 - fixture

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


def _parse(family_id: str, *, ocr: bool) -> service.Slice:
    state = service.new_state(f'run-{uuid.uuid4().hex[:8]}')
    for _ in range(1000):
        done = service.run_slice(family_id, state, principal=SERVICE, deadline=time.monotonic() + 60, ocr=ocr)
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
    done = service.run_slice(family['id'], handed.state, principal=SERVICE, deadline=time.monotonic() + 120,
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
