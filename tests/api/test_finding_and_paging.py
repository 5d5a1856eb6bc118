"""Finding documents and walking pages (issue 41, findings 4 and 5): ``query=`` on document
families matches their path and file name; list answers carry RFC 8288 ``Link`` headers."""
from __future__ import annotations

import re
import uuid

from tests.conftest import ADMIN_KEY


def _project(api, org_id: str) -> dict:
    r = api.post('/api/projects', {'name': f'P-{uuid.uuid4().hex[:6]}', 'organizationId': org_id})
    assert r.status == 201, r.json
    return r.json


def test_query_matches_a_document_family_s_path_and_file_name(api, org_id):
    project = _project(api, org_id)
    for path in ('inbox/2026/invoice-0001.pdf', 'inbox/2026/receipt-0002.pdf', 'archive/INVOICE-0003.PDF'):
        assert api.post('/api/document-families', {'projectId': project['id'], 'path': path}).status == 201
    pin = f"projectId=='{project['id']}'"

    def found(query: str) -> list[str]:
        r = api.get(f'/api/document-families?filter={pin}&query={query}&sort=path')
        assert r.status == 200, r.json
        return [f['path'] for f in r.json['content']]
    assert found('invoice') == ['archive/INVOICE-0003.PDF', 'inbox/2026/invoice-0001.pdf']
    assert found('inbox') == ['inbox/2026/invoice-0001.pdf', 'inbox/2026/receipt-0002.pdf']
    assert found('receipt*') == ['inbox/2026/receipt-0002.pdf']     # the file name, as a whole-value pattern
    assert found('inbox/*') == ['inbox/2026/invoice-0001.pdf', 'inbox/2026/receipt-0002.pdf']
    assert found('nothing-like-it') == []


def _links(header: str) -> dict[str, str]:
    return {rel: url for url, rel in re.findall(r'<([^>]*)>; rel="(\w+)"', header)}


def test_list_answers_link_first_prev_next_last(api, org_id):
    project = _project(api, org_id)
    for i in range(5):
        assert api.post('/api/tasks', {'title': f'T{i}', 'projectId': project['id']}).status == 201
    base = f"/api/tasks?filter=projectId%3D%3D%27{project['id']}%27&pageSize=2"
    first = api.get(base)
    assert first.status == 200 and first.json['totalPages'] == 3
    links = _links(first.headers['link'])
    assert set(links) == {'first', 'next', 'last'}
    assert links['next'].startswith('/api/tasks?') and 'page=1' in links['next'] and 'pageSize=2' in links['next']
    assert 'page=2' in links['last']
    middle = api.get(links['next'])
    assert middle.status == 200 and middle.json['number'] == 1
    links = _links(middle.headers['link'])
    assert set(links) == {'first', 'prev', 'next', 'last'} and 'page=0' in links['prev']
    last = api.get(links['last'])
    assert last.json['last'] is True and set(_links(last.headers['link'])) == {'first', 'prev', 'last'}
    seen = [t['title'] for page in (first, middle, last) for t in page.json['content']]
    assert sorted(seen) == [f'T{i}' for i in range(5)]


def test_the_sdk_s_links_number_pages_from_one(api, org_id):
    project = _project(api, org_id)
    for i in range(3):
        assert api.post('/api/tasks', {'title': f'S{i}', 'projectId': project['id']}).status == 201
    r = api.get(f"/api/tasks?filter=projectId%3D%3D%27{project['id']}%27&pageSize=2&page=1",
                key=None, headers={'x-access-token': ADMIN_KEY})
    links = _links(r.headers['link'])
    assert 'page=1' in links['first'] and 'page=2' in links['next'] and 'page=2' in links['last']


def test_an_empty_list_links_its_only_page(api):
    r = api.get(f"/api/tasks?filter=title%3D%3D%27{uuid.uuid4().hex}%27")
    links = _links(r.headers['link'])
    assert set(links) == {'first', 'last'} and 'page=0' in links['first'] and 'page=0' in links['last']


def test_the_link_header_is_described_on_every_list_answer(api):
    doc = api.get('/v3/api-docs', key=None).json
    lists = [op for item in doc['paths'].values() for op in item.values()
             if isinstance(op, dict) and any(p.get('name') == 'pageSize' for p in op.get('parameters', []))]
    assert len(lists) > 40
    assert all('Link' in op['responses']['200']['headers'] for op in lists)


def test_a_task_group_s_history_links_its_pages_too(api, org_id):
    project = _project(api, org_id)
    group = api.post('/api/task-groups', {'name': 'G', 'projectId': project['id']})
    assert group.status == 201, group.json
    r = api.get(f"/api/task-groups/{group.json['id']}/history?pageSize=5")
    assert r.status == 200 and set(_links(r.headers['link'])) == {'first', 'last'}
    assert api.get(f"/api/task-groups/{group.json['id']}/history?pagesize=5").status == 400
