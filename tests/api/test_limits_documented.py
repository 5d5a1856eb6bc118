"""What the API document and the MCP tools say about limits is what the API enforces: both
read chalicelib/core/limits.py."""
from __future__ import annotations

from chalicelib.core import limits


def _param(doc, path, method, name):
    return next(p for p in doc['paths'][path][method]['parameters'] if p.get('name') == name)['schema']


def test_the_page_limits_the_document_states_are_enforced(api, org_id):
    doc = api.get('/v3/api-docs', key=None).json
    page_size = _param(doc, '/api/projects', 'get', 'pageSize')
    assert (page_size['maximum'], page_size['default']) == (limits.MAX_PAGE_SIZE, limits.DEFAULT_PAGE_SIZE)
    assert _param(doc, '/api/projects', 'get', 'page')['maximum'] == limits.MAX_PAGE
    assert api.get(f'/api/projects?pageSize={limits.MAX_PAGE_SIZE}').status == 200
    too_many = api.get(f'/api/projects?pageSize={limits.MAX_PAGE_SIZE + 1}')
    assert too_many.status == 400 and too_many.json['status'] == 400
    assert api.get('/api/projects').json['size'] == limits.DEFAULT_PAGE_SIZE


def test_the_ui_event_batch_limit_the_document_states_is_enforced(api, org_id):
    doc = api.get('/v3/api-docs', key=None).json
    body = doc['paths']['/api/events/ui/batch']['post']['requestBody']['content']['application/json']['schema']
    if '$ref' in body:
        body = doc['components']['schemas'][body['$ref'].rsplit('/', 1)[-1]]
    assert body['properties']['events']['maxItems'] == limits.MAX_UI_EVENTS
    events = [{'kind': 'ui.clicked'}] * (limits.MAX_UI_EVENTS + 1)
    reply = api.post('/api/events/ui/batch', {'organizationId': org_id, 'events': events})
    assert reply.status == 400 and str(limits.MAX_UI_EVENTS) in reply.json['message']


def test_the_mcp_tools_state_the_same_page_limit():
    from chalicelib.features.mcp import tools
    for tool in tools.TOOLS:
        page_size = tool.input_schema.get('properties', {}).get('pageSize')
        if page_size is not None:
            assert page_size['maximum'] == limits.MAX_PAGE_SIZE, tool.name
            assert page_size['default'] == limits.MCP_DEFAULT_PAGE_SIZE, tool.name


def test_the_page_image_limits_the_document_states_are_enforced(api, org_id):
    doc = api.get('/v3/api-docs', key=None).json
    path = '/api/document-families/{id}/pages/{page}/image'
    dpi = _param(doc, path, 'get', 'dpi')
    assert (dpi['minimum'], dpi['maximum'], dpi['default']) == (
        limits.PAGE_IMAGE_MIN_DPI, limits.PAGE_IMAGE_MAX_DPI, limits.PAGE_IMAGE_DEFAULT_DPI)
    words = doc['paths']['/api/document-families/{id}/pages/{page}/words']['get']['responses']['200']
    schema = words['content']['application/json']['schema']
    assert schema['properties']['words']['maxItems'] == limits.MAX_PAGE_WORDS
    for value in (limits.PAGE_IMAGE_MIN_DPI - 1, limits.PAGE_IMAGE_MAX_DPI + 1):
        r = api.get(f'/api/document-families/00000000-0000-4000-8000-000000000000/pages/1/image?dpi={value}')
        assert r.status == 400 and f'{limits.PAGE_IMAGE_MIN_DPI} to {limits.PAGE_IMAGE_MAX_DPI}' in r.json['message']
