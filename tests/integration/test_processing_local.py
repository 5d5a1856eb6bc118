"""Document processing through `make run` for real (issue 26, docs/api/processing.md): a PDF
uploaded through the store file API is processed by the project's assistant within 30 s, its
outbox event, start and step messages all driven by the local stack's own pollers; the
BRIDGE_CALL step reaches an upstream on 127.0.0.1 that only the egress allowlist opens.

Every target is 127.0.0.1 (no name is looked up): the server process cannot be put under the
test's network guard, so nothing else is ever named."""
from __future__ import annotations

import time
import uuid
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from urllib3 import encode_multipart_formdata

from tests.live import LiveStack
from tests.netguard import Upstream

PDF = b'%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n'


@pytest.fixture(scope='module')
def live(tmp_path_factory):
    stack = LiveStack(tmp_path_factory.mktemp('processing'), BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST='127.0.0.1')
    yield stack
    stack.stop()


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.close()


def _org(live) -> dict:
    orgs = live.get('/api/organizations').body['content']
    return next(o for o in orgs if o.get('slug') == 'default')


def test_an_uploaded_pdf_is_processed_within_30_seconds(live, upstream):
    org = _org(live)
    project = live.created('/api/projects', {'name': 'processing', 'organizationId': org['id']})
    invoice = live.created('/api/labels', {'name': 'invoice', 'organizationId': org['id']})
    for slug, kind in (('received', 'UNRESOLVED'), ('processed', 'RESOLVED')):
        live.created('/api/document-statuses', {'projectId': project['id'], 'status': slug, 'slug': slug,
                                                'statusType': kind})
    store = live.created('/api/document-stores', {'projectId': project['id'], 'name': 'inbox',
                                                  'slug': f'inbox-{uuid.uuid4().hex[:8]}'})
    live.created('/api/service-bridges', {
        'projectId': project['id'], 'name': 'ocr', 'slug': 'ocr', 'agentCallable': True,
        'baseUrl': f'http://127.0.0.1:{upstream.port}',
        'endpoints': [{'name': 'echo', 'method': 'GET', 'path': '/echo', 'defaultHeaders': {}}]})
    helper = live.created('/api/assistants', {
        'projectId': project['id'], 'name': 'Invoice reader', 'slug': 'invoice-reader',
        'subscription': f"path =like= '*.pdf' and documentStoreId == '{store['id']}'",
        'options': {'pipeline': {'steps': [
            {'name': 'ocr', 'stepType': 'BRIDGE_CALL',
             'options': {'bridge': 'ocr', 'endpointName': 'echo', 'query': {'url': '=contentUrl'}}},
            {'name': 'classify', 'stepType': 'SCRIPT',
             'options': {'expression': "{'documentStatus': 'processed', 'labels': ['invoice']}"}}]}}})
    live.created('/api/assistants', {'projectId': project['id'], 'name': 'Word only', 'slug': 'word-only',
                                     'subscription': "path =like= '*.docx'",
                                     'options': {'pipeline': {'steps': [
                                         {'name': 'x', 'stepType': 'SCRIPT', 'options': {'expression': '1'}}]}}})
    body, content_type = encode_multipart_formdata({'file': ('a.pdf', PDF, 'application/pdf')})
    started = time.monotonic()
    answer = live.call('POST', f"/api/stores/{org['slug']}/{store['slug']}/fs?path=in/a.pdf", raw=body,
                       content_type=content_type)
    assert answer.status == 201, answer
    family = answer.body

    of_family = '/api/executions?filter=' + quote(f"documentFamilyId == '{family['id']}'")

    def finished():
        page = live.get(of_family).body
        done = [e for e in page['content'] if e['status'] not in ('PENDING', 'RUNNING')]
        return done if done else None

    executions = None
    while time.monotonic() - started < 30 and executions is None:
        executions = finished()
        time.sleep(0.5)
    assert executions is not None, 'no execution ended within 30 s:\n' + ''.join(live.output[-20:])
    [execution] = executions
    assert execution['status'] == 'SUCCEEDED', execution['statusMessages']
    assert execution['assistantId'] == helper['id']
    after = live.get(f"/api/document-families/{family['id']}").body
    assert after['documentStatus']['slug'] == 'processed' and after['labels'] == [invoice['id']]
    assert after['processing']['executionId'] == execution['id']
    assert after['processing']['status'] == 'SUCCEEDED'
    # the bridge call reached the loopback upstream with the content's presigned URL, which serves the PDF
    [seen] = upstream.seen
    url = parse_qs(urlsplit(seen.path).query)['url'][0]
    assert 'X-Amz-Signature' in url and 'X-Amz-Expires' in url
    import urllib.request
    assert urlsplit(url).hostname == '127.0.0.1'
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.read() == PDF
    # the other assistant's subscription did not match: one execution only
    assert len(live.get(of_family).body['content']) == 1
