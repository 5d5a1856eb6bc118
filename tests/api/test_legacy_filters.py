"""The legacy filter spelling `field: 'value'` (= `field == 'value'`), as the platform's Python
SDK sends it (find_by_slug, org.projects.list()), and `x.id` on a reference as the reference's
id field (it pins the list like `xId` does)."""
from __future__ import annotations

from urllib.parse import quote

from tests.conftest import make_org


def _ids(api, path: str, *filters: str) -> list[str]:
    query = '&'.join(f'filter={quote(f)}' for f in filters)
    r = api.get(f'{path}?{query}&pageSize=100')
    assert r.status == 200, r.json
    return sorted(item['id'] for item in r.json['content'])


def test_colon_is_equality(api, org_id):
    assert _ids(api, '/api/organizations', "slug: 'default'") == [org_id]
    assert _ids(api, '/api/organizations', "slug: 'no-such-org'") == []
    assert _ids(api, '/api/organizations', "slug:'default'") == _ids(api, '/api/organizations', "slug == 'default'")


def test_reference_id_path_is_the_reference_field(api, org_id):
    other = make_org(api)
    mine = api.post('/api/projects', {'name': 'mine', 'organizationId': org_id}).json
    theirs = api.post('/api/projects', {'name': 'theirs', 'organizationId': other['id']}).json
    assert _ids(api, '/api/projects', f"organization.id: '{other['id']}'") == [theirs['id']]
    assert mine['id'] in _ids(api, '/api/projects', f"organization.id: '{org_id}'")
    assert _ids(api, '/api/projects', f"organization.id: '{org_id}'") == \
        _ids(api, '/api/projects', f"organizationId == '{org_id}'")
    task = api.post('/api/tasks', {'projectId': theirs['id'], 'title': 't'}).json
    assert _ids(api, '/api/tasks', f"id: '{task['id']}'", f"project.id: '{theirs['id']}'") == [task['id']]


def test_a_colon_without_a_value_is_a_clear_400(api):
    r = api.get(f"/api/organizations?filter={quote('slug:')}")
    assert r.status == 400 and 'filter' in r.json['message']
