"""The parse stage's service and the parsed document's routes, in process (chalice.test.Client over
moto): a document written page range by page range, served whole and by pages, as text, as the
SDK's family view and KDDB; failures keep the previous document; another org's family is a 404
on every route (docs/api/documents.md "Parsed documents").

The readers here are a stand-in with the readers' API (features/parsing/readers: ``read`` ->
ReadResult, ``ParseFailure``, ``NoParser``, ``NeedsOcr``) so that what is tested is the stage:
where its pages go and what a failure leaves. The real readers over the real corpus run through
the local server in tests/integration/test_parsing_local.py."""
from __future__ import annotations

import json
import sqlite3
import time
import types
import urllib.parse
import uuid
from dataclasses import dataclass, field

import pytest
from urllib3 import encode_multipart_formdata

from chalicelib.features.documents import blobs, deltas
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.features.parsing import kddb, serving, stage
from tests.api.test_documents_upload import _objects
from tests.api.test_last_resort import mcp_on  # noqa: F401 - fixture
from tests.conftest import make_org


class ParseFailure(Exception):
    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause


class NoParser(Exception):
    def __init__(self, media_type: str) -> None:
        super().__init__(f'no parser for {media_type}')


class NeedsOcr(Exception):
    def __init__(self, page: int) -> None:
        super().__init__(f'page {page} has no text layer')
        self.page = page


@dataclass
class ReadResult:
    nodes: list
    page_count: int
    next_page: int | None
    parser: str = 'fake-pdf'
    media_type: str = 'application/pdf'
    warnings: list = field(default_factory=list)


def _page(n: int, words: list[str]) -> list[dict]:
    line = f'p{n}.l1'
    out = [{'id': f'p{n}', 'parentId': 'doc', 'nodeType': 'page', 'content': None, 'index': n - 1,
            'features': {'page': n, 'width': 612.0, 'height': 792.0}},
           {'id': line, 'parentId': f'p{n}', 'nodeType': 'line', 'content': ' '.join(words), 'index': 0,
            'features': {'page': n, 'bbox': [72.0, 100.0, 300.0, 112.0]}}]
    out += [{'id': f'{line}.w{i + 1}', 'parentId': line, 'nodeType': 'word', 'content': w, 'index': i,
             'features': {'page': n, 'bbox': [72.0 + 40 * i, 100.0, 100.0 + 40 * i, 112.0]}}
            for i, w in enumerate(words)]
    return out


def fake_readers(pages: int = 3, per_call: int = 1, fail: ParseFailure | None = None, ocr_from: int | None = None,
                 no_parser: bool = False, calls: list | None = None):
    def read(data, *, media_type, filename, first_page=1, deadline, limits=None, ocr=True, text_chars_before=0):
        if calls is not None:
            calls.append((first_page, ocr))
        if no_parser:
            raise NoParser(media_type)
        if fail is not None and first_page >= 2:
            raise fail
        if ocr_from is not None and first_page >= ocr_from and not ocr:
            raise NeedsOcr(first_page)
        last = min(pages, first_page + per_call - 1)
        nodes = [{'id': 'doc', 'parentId': None, 'nodeType': 'document', 'content': None, 'index': 0, 'features': {}}]
        for n in range(first_page, last + 1):
            nodes += _page(n, ['Invoice', f'page{n}', 'total'])
        return ReadResult(nodes, pages, last + 1 if last < pages else None)
    return types.SimpleNamespace(read=read, ParseFailure=ParseFailure, NoParser=NoParser, NeedsOcr=NeedsOcr,
                                 ocr_available=lambda: True)


@pytest.fixture
def store(api, org_id, bucket):  # noqa: F811
    project = api.post('/api/projects', {'name': f'parse-{uuid.uuid4().hex[:6]}', 'organizationId': org_id}).json
    made = api.post('/api/document-stores', {'projectId': project['id'], 'name': 'inbox',
                                             'slug': f'inbox-{uuid.uuid4().hex[:8]}'})
    assert made.status == 201, made.json
    return made.json


def upload(api, store, body=b'%PDF-1.4 fake', path='inv/a.pdf', content_type='application/pdf'):
    r = api.post(f"/api/document-stores/{store['id']}/upload?path={path}", raw=body,
                 headers={'content-type': content_type})
    assert r.status == 201, r.json
    return r.json


def parse(family_id, readers, monkeypatch, *, run='run-1', ocr=None) -> tuple[stage.Slice, int]:
    monkeypatch.setattr(stage, '_readers', lambda: readers)
    state = stage.new_state(run)
    for messages in range(1, 100):
        done = stage.run_slice(family_id, state, principal=SERVICE, deadline=time.monotonic() + 20, ocr=ocr)
        if done.kind != 'continue':
            return done, messages
        state = done.state
    raise AssertionError('the parse did not end')


def test_a_document_parsed_page_by_page_is_one_new_version_with_a_derived_object(api, store, monkeypatch,
                                                                                  bucket):  # noqa: F811
    family = upload(api, store)
    done, messages = parse(family['id'], fake_readers(pages=3), monkeypatch)
    assert done.kind == 'done' and messages == 3, done
    assert done.output['parsed'] and done.output['pageCount'] == 3 and done.output['nodeCount'] == 1 + 3 * 5
    assert (done.state['pagesDone'], done.state['pageCount']) == (3, 3)
    assert len(json.dumps(done.state)) < 400   # what rides on the execution stays small
    doc = api.get(f"/api/document-families/{family['id']}/document").json
    assert doc['version'] == 1 and doc['pageCount'] == 3 and doc['nextPage'] is None
    root = doc['nodes'][0]
    assert root['nodeType'] == 'document' and root['features'] == {'mediaType': 'application/pdf', 'pageCount': 3,
                                                                     'parser': 'fake-pdf'}
    words = [n for n in doc['nodes'] if n['nodeType'] == 'word']
    assert [w['content'] for w in words[:3]] == ['Invoice', 'page1', 'total']
    assert words[0]['features'] == {'page': 1, 'bbox': [72.0, 100.0, 100.0, 112.0]}
    # the derived content object records the parse; the original bytes are untouched
    view = api.get(f"/api/stores/default/{store['slug']}/families/{family['id']}").json
    native, derived = view['contentObjects']
    assert native['contentType'] == 'NATIVE' and native['id'] == family['contentObjectId']
    assert derived['contentType'] == 'DOCUMENT' and derived['docTransitionType'] == 'DERIVED'
    assert derived['sourceContentObjectId'] == native['id'] and derived['documentVersion'] == '1'
    assert view['storeRef'] == f"default/{store['slug']}"
    assert blobs.read(family['storageKey']) == b'%PDF-1.4 fake'
    # a finish delivered again stores nothing twice
    again = stage.run_slice(family['id'], {**done.state, 'nextPage': 3}, principal=SERVICE,
                              deadline=time.monotonic() + 20)
    assert again.kind == 'done' and 'earlier delivery' in again.message
    assert api.get(f"/api/document-families/{family['id']}").json['documentVersion'] == 1


def test_text_is_plain_text_with_form_feeds_between_pages(api, store, monkeypatch):
    family = upload(api, store)
    parse(family['id'], fake_readers(pages=2), monkeypatch)
    r = api.get(f"/api/document-families/{family['id']}/text")
    assert r.status == 200 and r.headers['content-type'].startswith('text/plain')
    assert r.body.decode() == 'Invoice page1 total\fInvoice page2 total'
    assert r.headers['x-page-count'] == '2' and 'x-next-page' not in r.headers
    empty = upload(api, store, path='inv/b.pdf')
    r = api.get(f"/api/document-families/{empty['id']}/text")
    assert r.status == 200 and r.body == b'' and r.headers['x-document-version'] == '0'


def test_a_large_document_is_read_by_pages(api, store, monkeypatch):
    family = upload(api, store)
    parse(family['id'], fake_readers(pages=5, per_call=2), monkeypatch)
    monkeypatch.setattr(deltas, 'MAX_READ_BYTES', 1)    # every answer: one page range
    monkeypatch.setattr(serving, 'MAX_TEXT_BYTES', 1)
    first = api.get(f"/api/document-families/{family['id']}/document").json
    assert (first['firstPage'], first['lastPage'], first['nextPage']) == (1, 2, 3)
    second = api.get(f"/api/document-families/{family['id']}/document?page={first['nextPage']}").json
    assert (second['firstPage'], second['lastPage'], second['nextPage']) == (3, 4, 5)
    assert {n['features'].get('page') for n in second['nodes'] if n['nodeType'] == 'word'} == {3, 4}
    last = api.get(f"/api/document-families/{family['id']}/document?page=5").json
    assert (last['firstPage'], last['lastPage'], last['nextPage']) == (5, 5, None)
    text = api.get(f"/api/document-families/{family['id']}/text?page=3")
    assert text.headers['x-first-page'] == '3' and text.headers['x-next-page'] == '5'
    for bad in ('0', 'x', '-1'):
        assert api.get(f"/api/document-families/{family['id']}/document?page={bad}").status == 400
    # a parsed document too large to edit whole says so
    monkeypatch.setattr(deltas, 'MAX_NODES', 3)
    r = api.post('/api/linked-deltas', {'documentFamilyId': family['id'],
                                        'operations': [{'op': 'delete', 'id': 'p1'}]})
    assert r.status == 400 and 'page by page' in r.json['message']


@pytest.mark.parametrize('cause', ['encrypted', 'truncated', 'corrupt'])
def test_a_failed_parse_keeps_the_previous_document_and_leaves_no_parts(api, store, monkeypatch, bucket,  # noqa: F811
                                                                        cause):
    family = upload(api, store)
    parse(family['id'], fake_readers(pages=2), monkeypatch, run='first')
    before = api.get(f"/api/document-families/{family['id']}/document").json
    keys = set(_objects(bucket))
    done, _ = parse(family['id'], fake_readers(pages=3, fail=ParseFailure(cause, 'the file says no')), monkeypatch,
                    run='second')
    assert done.kind == 'failed' and done.message.startswith(f'{cause}: the file says no')
    assert api.get(f"/api/document-families/{family['id']}/document").json == before
    assert set(_objects(bucket)) == keys   # the failed run's part (page 1) was deleted


def test_no_parser_keeps_the_family_and_says_so(api, store, monkeypatch):
    family = upload(api, store, body=b'\x00\x01', path='x.bin', content_type='application/x-thing')
    done, _ = parse(family['id'], fake_readers(no_parser=True), monkeypatch)
    assert done.kind == 'done' and done.message.startswith('no parser for application/x-thing')
    assert done.output == {'parsed': False, 'reason': 'no parser for application/x-thing'}
    assert api.get(f"/api/document-families/{family['id']}/document").json == {'version': 0, 'nodes': []}


def test_a_page_without_text_goes_to_ocr_and_continues_there(api, store, monkeypatch):
    family = upload(api, store)
    calls: list = []
    readers = fake_readers(pages=3, ocr_from=2, calls=calls)
    monkeypatch.setattr(stage, '_readers', lambda: readers)
    state = stage.new_state('r')
    first = stage.run_slice(family['id'], state, principal=SERVICE, deadline=time.monotonic() + 20, ocr=False)
    assert first.kind == 'continue' and not first.ocr
    second = stage.run_slice(family['id'], first.state, principal=SERVICE, deadline=time.monotonic() + 20,
                               ocr=False)
    assert second.kind == 'continue' and second.ocr and second.state['nextPage'] == 2
    rest = stage.run_slice(family['id'], second.state, principal=SERVICE, deadline=time.monotonic() + 20,
                             ocr=True)
    rest = stage.run_slice(family['id'], rest.state, principal=SERVICE, deadline=time.monotonic() + 20, ocr=True)
    assert rest.kind == 'done' and rest.output['pageCount'] == 3
    assert calls == [(1, False), (2, False), (2, True), (3, True)]


def _location_key(url: str) -> str:
    from chalicelib.core.config import get_config
    parsed = urllib.parse.urlparse(url)
    path = urllib.parse.unquote(parsed.path)
    if parsed.hostname.startswith(get_config().bucket_name + '.'):   # virtual-hosted style
        return path[1:]
    return path.split('/', 2)[2]   # path style: /{bucket}/{key}


def test_the_sdk_reads_the_document_as_kddb_and_writes_one_back(api, store, monkeypatch, tmp_path):
    family = upload(api, store)
    parse(family['id'], fake_readers(pages=2), monkeypatch)
    base = f"/api/stores/default/{store['slug']}/families/{family['id']}"
    native, derived = api.get(base).json['contentObjects']
    # the SDK's paths carry the store's version (``.../None/families/...``): accepted, ignored
    versioned = f"/api/stores/default/{store['slug']}/None/families/{family['id']}"
    assert api.get(versioned).json['contentObjects'] == [native, derived]
    assert api.get(f"{versioned}/objects/{derived['id']}/content").status == 307
    r = api.get(f"{base}/objects/{native['id']}/content")
    assert r.status == 307 and blobs.read(_location_key(r.headers['location'])) == b'%PDF-1.4 fake'
    r = api.get(f"{base}/objects/{derived['id']}/content")
    assert r.status == 307
    data = blobs.read(_location_key(r.headers['location']))
    path = tmp_path / 'doc.kddb'
    path.write_bytes(data)
    with sqlite3.connect(path) as db:
        words = [row[0] for row in db.execute("SELECT content FROM cnp JOIN cn ON cn.id = cnp.cn_id JOIN n_type "
                                               "ON n_type.id = cn.nt WHERE n_type.name = 'word' ORDER BY cn.id")]
    assert words == ['Invoice', 'page1', 'total', 'Invoice', 'page2', 'total']
    nodes = kddb.read(data)['nodes']
    nodes.append({'id': 'note', 'parentId': 'doc', 'nodeType': 'line', 'content': 'checked by a person',
                  'index': 9, 'features': {}})
    body, content_type = encode_multipart_formdata({'document': ('document.kddb', kddb.to_bytes(nodes))})
    r = api.post(f"{base}/objects/{derived['id']}/content", raw=body, headers={'content-type': content_type})
    assert r.status == 200, r.json
    doc = api.get(f"/api/document-families/{family['id']}/document").json
    assert doc['version'] == 2 and doc['nodes'][-1]['content'] == 'checked by a person'
    assert 'checked by a person' in api.get(f"/api/document-families/{family['id']}/text").body.decode()
    # the next read renders the new version
    r = api.get(f"{base}/objects/{derived['id']}/content")
    assert 'checked by a person' in [n['content'] for n in kddb.read(blobs.read(_location_key(
        r.headers['location'])))['nodes']]


@pytest.mark.parametrize('payload, status, words', [
    (b'', 400, 'empty'), (b'not sqlite at all', 400, 'not an SQLite database'),
    (b'SQLite format 3\x00' + b'\x00' * 100, 400, 'cannot be read'),
])
def test_a_bad_kddb_is_400_and_changes_nothing(api, store, monkeypatch, payload, status, words):
    family = upload(api, store)
    parse(family['id'], fake_readers(pages=1), monkeypatch)
    base = f"/api/stores/default/{store['slug']}/families/{family['id']}"
    derived = api.get(base).json['contentObjects'][1]
    r = api.post(f"{base}/objects/{derived['id']}/content", raw=payload,
                 headers={'content-type': 'application/octet-stream'})
    assert r.status == status and words in r.json['message'], r.json
    assert api.get(f"/api/document-families/{family['id']}/document").json['version'] == 1


def test_hostile_kddb_files_are_refused_within_bounds(tmp_path, monkeypatch):
    view = tmp_path / 'view.kddb'
    with sqlite3.connect(view) as db:
        for name in ('metadata', 'cnp', 'n_type', 'f_type', 'ft'):
            db.execute(f'CREATE TABLE {name} (id integer primary key, a, b, c, d, e)')
        db.execute('CREATE VIEW cn AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) '
                   'SELECT i AS id, 1 AS nt, NULL AS pid, 0 AS idx FROM r')
    with pytest.raises(kddb.KddbRejected, match="'cn' is not a table"):
        kddb.read(view.read_bytes())
    many = [{'id': f'n{i}', 'parentId': None, 'nodeType': 'x', 'content': 'y', 'index': i, 'features': {}}
            for i in range(50)]
    with pytest.raises(kddb.KddbRejected, match='holds 50 nodes'):
        kddb.read(kddb.to_bytes(many), max_nodes=49)
    bad = tmp_path / 'bad.kddb'
    bad.write_bytes(kddb.to_bytes(many[:1]))
    with sqlite3.connect(bad) as db:
        db.execute("UPDATE ft SET binary_value = x'c1'")   # 0xc1: never used in msgpack
    with pytest.raises(kddb.KddbRejected, match='not valid msgpack'):
        kddb.read(bad.read_bytes())
    slow = tmp_path / 'slow.kddb'
    slow.write_bytes(kddb.to_bytes([{**many[0], 'id': f'n{i}'} for i in range(20_000)]))
    started = time.monotonic()
    with pytest.raises(kddb.KddbRejected, match='longer than'):
        kddb.read(slow.read_bytes(), seconds=0)
    assert time.monotonic() - started < 5
    with pytest.raises(kddb.PayloadTooLarge):
        kddb.read(b'SQLite format 3\x00' + b'\x00' * kddb.MAX_KDDB_BYTES)


def test_another_orgs_family_is_404_on_every_new_route(api, store, monkeypatch):
    family = upload(api, store)
    parse(family['id'], fake_readers(pages=1), monkeypatch)
    other = make_org(api)
    from tests.conftest import make_user
    _, key = make_user(api, other['id'], 'MANAGE')
    stranger = api.as_key(key)
    base = f"/api/stores/default/{store['slug']}/families/{family['id']}"
    co = family['contentObjectId']
    for path in (f"/api/document-families/{family['id']}/text", f"/api/document-families/{family['id']}/document",
                 base, f'{base}/objects/{co}/content', f"/api/stores/{other['slug']}/{store['slug']}/families/"
                                                       f"{family['id']}"):
        r = stranger.get(path)
        assert r.status == 404, (path, r.status, r.json)
    r = stranger.post(f'{base}/objects/{co}/content', raw=kddb.to_bytes([]),
                      headers={'content-type': 'application/octet-stream'})
    assert r.status == 404
    # a family of the organization named through another of its stores is 404 too
    other_store = api.post('/api/document-stores', {'projectId': store['projectId'], 'name': 'b',
                                                    'slug': f'b-{uuid.uuid4().hex[:6]}'}).json
    assert api.get(f"/api/stores/default/{other_store['slug']}/families/{family['id']}").status == 404
    assert api.get(f'{base}/objects/{uuid.uuid4()}/content').status == 404
    assert json.loads(api.get(base).body)['id'] == family['id']


def _tool(api, name, arguments):
    body = {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call', 'params': {'name': name, 'arguments': arguments}}
    reply = api.post('/mcp', body, headers={'accept': 'application/json, text/event-stream'})
    assert reply.status == 200, reply.json
    return reply.json['result']


def test_an_agent_reads_the_text_through_mcp_with_its_callers_rights(api, store, monkeypatch, mcp_on):  # noqa: F811
    family = upload(api, store)
    parse(family['id'], fake_readers(pages=3), monkeypatch)
    result = _tool(api, 'get_document_text', {'documentFamilyId': family['id'], 'page': 2})
    assert result['isError'] is False, result
    content = result['structuredContent']
    assert content['text'] == 'Invoice page2 total\fInvoice page3 total' and content['firstPage'] == 2
    assert content['pageCount'] == 3 and content.get('nextPage') is None
    other = make_org(api)
    from tests.conftest import make_user
    _, key = make_user(api, other['id'], 'MANAGE')
    refused = _tool(api.as_key(key), 'get_document_text', {'documentFamilyId': family['id']})
    assert refused['isError'] is True and refused['structuredContent']['error']['status'] == 404


def test_a_page_that_needs_ocr_fails_when_no_ocr_runs_anywhere(api, store, monkeypatch):
    from chalicelib.core.config import get_config, reset_config
    family = upload(api, store)
    monkeypatch.setenv('OCR_QUEUE_NAME', '')
    reset_config()
    assert get_config().ocr_queue_name == ''
    try:
        done, _ = parse(family['id'], fake_readers(pages=2, ocr_from=1), monkeypatch, ocr=False)
    finally:
        monkeypatch.delenv('OCR_QUEUE_NAME')
        reset_config()
    assert done.kind == 'failed' and done.message.startswith('ocr-unavailable: page 1 has no text layer')
