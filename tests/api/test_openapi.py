"""GET /v3/api-docs: the OpenAPI 3.0.3 document, generated from the route table and the
registry, describes exactly the running API; GET /docs renders it with Swagger UI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from chalicelib.kernel.embeds import embeds_of
from chalicelib.kernel.fields import ENUMS
from chalicelib.kernel.registry import COMMON_FIELDS, FAMILIES, OWNERSHIP_FIELDS, SERVER_FIELDS
from tests.support import sample

ROOT = Path(__file__).resolve().parents[2]
COMMON = [f.name for f in COMMON_FIELDS]


@pytest.fixture
def doc(api):
    r = api.get('/v3/api-docs', key=None)
    assert r.status == 200, r.body[:300]
    assert r.headers['content-type'].startswith('application/json')
    return r.json


def _app():
    from app import app
    return app


def _operations(doc):
    for path, item in doc['paths'].items():
        for method, op in item.items():
            yield path, method, op


def _schema(doc, name):
    return doc['components']['schemas'][name]


# ----------------------------------------------------------------------------- the document

def test_document_is_public_and_a_valid_openapi_3_0_3(doc):
    from openapi_spec_validator import validate
    validate(doc)
    assert doc['openapi'] == '3.0.3'
    assert doc['info']['version'] == '8.0.0'


def _servers(api, headers):
    r = api.get('/v3/api-docs', key=None, headers=headers)
    assert r.status == 200
    assert r.headers['vary'] == 'Host, X-Forwarded-Host, X-Forwarded-Proto'
    return [s['url'] for s in r.json['servers']]


def test_servers_start_with_the_origin_the_document_was_requested_from(api, monkeypatch):
    from chalicelib.core.config import reset_config
    monkeypatch.setenv('PUBLIC_API_URL', 'https://platform.example.org/')
    reset_config()
    try:
        local = _servers(api, {'Host': '127.0.0.1:8123'})
        proxied = _servers(api, {'Host': 'internal:9000', 'X-Forwarded-Proto': 'https',
                                 'X-Forwarded-Host': 'api.tenant.example.net, other.example'})
        production = _servers(api, {'Host': 'platform.example.org', 'X-Forwarded-Proto': 'https'})
        monkeypatch.delenv('PUBLIC_API_URL')
        reset_config()
        unset = _servers(api, {'Host': 'localhost:8000'})
    finally:
        reset_config()
    # Swagger UI's "Try it out" calls the first entry: the very server the page came from
    assert local == ['http://127.0.0.1:8123', 'https://platform.example.org']
    assert proxied == ['https://api.tenant.example.net', 'https://platform.example.org']
    assert production == ['https://platform.example.org']     # listed once
    assert unset == ['http://localhost:8000']                   # no production URL configured: none listed
    assert not any('example.com' in url for url in local + unset)


@pytest.mark.parametrize('host', [
    'evil.example"}],"x":{"', 'a b', 'host/path', 'user@host', 'host:99999', 'host:0', 'x' * 300,
    '<script>', 'host:80:80', '-bad-.example', '',
])
def test_a_host_header_that_is_not_host_and_port_is_never_reflected(api, monkeypatch, host):
    from chalicelib.core.config import reset_config
    monkeypatch.setenv('PUBLIC_API_URL', 'https://platform.example.org')
    reset_config()
    try:
        listed = _servers(api, {'Host': host, 'X-Forwarded-Host': host, 'X-Forwarded-Proto': 'javascript'})
    finally:
        reset_config()
    assert listed == ['https://platform.example.org']


def _gateway_event(path, context_path, domain, stage):
    return {
        'resource': path, 'path': path, 'httpMethod': 'GET',
        'headers': {'Host': domain, 'X-Forwarded-Proto': 'https'},
        'multiValueHeaders': {'Host': [domain], 'X-Forwarded-Proto': ['https']},
        'queryStringParameters': None, 'multiValueQueryStringParameters': None,
        'pathParameters': None, 'stageVariables': None, 'body': None, 'isBase64Encoded': False,
        'requestContext': {'resourcePath': path, 'httpMethod': 'GET', 'path': context_path,
                           'stage': stage, 'domainName': domain, 'requestId': 'r-1',
                           'identity': {'sourceIp': '203.0.113.9'}},
    }


@pytest.mark.parametrize('domain, context_path, want', [
    ('abc123.execute-api.eu-west-1.amazonaws.com', '/prod/v3/api-docs',
     'https://abc123.execute-api.eu-west-1.amazonaws.com/prod'),
    ('api.platform.example.org', '/v3/api-docs', 'https://api.platform.example.org'),   # custom domain, root
    ('api.platform.example.org', '/v2/v3/api-docs', 'https://api.platform.example.org/v2'),  # base path mapping
])
def test_behind_api_gateway_the_first_server_is_the_stage_url(platform, monkeypatch, domain, context_path, want):
    from app import app
    from chalicelib.core.config import reset_config
    monkeypatch.delenv('PUBLIC_API_URL', raising=False)
    reset_config()
    try:
        response = app(_gateway_event('/v3/api-docs', context_path, domain, 'prod'), None)
    finally:
        reset_config()
    assert response['statusCode'] == 200, response
    assert [s['url'] for s in json.loads(response['body'])['servers']] == [want]


def test_every_route_of_the_app_is_documented_and_nothing_else(doc):
    from chalicelib.kernel.http import aliases  # the SDK's alias paths: hidden (tests/api/test_sdk_aliases.py)
    routes = {(path, method.lower()) for path, methods in _app().routes.items() for method in methods
              if (path, method) not in aliases.ROUTES}
    documented = {(path, method) for path, method, _ in _operations(doc)}
    assert documented == routes
    assert {'/v3/api-docs', '/docs', '/api/projects', '/api/account/me'} <= {p for p, _ in routes}


def test_operation_ids_are_the_unique_chalice_view_names(doc):
    ids = [op['operationId'] for _, _, op in _operations(doc)]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    views = {(path, method.lower()): entry.view_name
             for path, methods in _app().routes.items() for method, entry in methods.items()}
    for path, method, op in _operations(doc):
        assert op['operationId'] == views[(path, method)]


def test_operation_ids_the_contract_fixes(doc):
    by_id = {op['operationId']: (method.upper(), path) for path, method, op in _operations(doc)}
    expected = {
        'listProjects': ('GET', '/api/projects'), 'createProject': ('POST', '/api/projects'),
        'getProject': ('GET', '/api/projects/{id}'), 'updateProject': ('PUT', '/api/projects/{id}'),
        'deleteProject': ('DELETE', '/api/projects/{id}'),
        'getProjectSequence': ('GET', '/api/projects/{id}/sequence'),
        'getOrchestratorAgentRuntimeSequence': ('GET', '/api/agent-runtimes/{id}/sequence'),
        'updateTaskStatus': ('PUT', '/api/task-statuses/{id}'),
        'getApiDocs': ('GET', '/v3/api-docs'),
        'setTaskStatus': ('PUT', '/api/tasks/{id}/status'),
        'listHistoryForTaskGroup': ('GET', '/api/task-groups/{id}/history'),
        'listTaskGroupHistory': ('GET', '/api/task-group-history'),
        'cancelExecution': ('POST', '/api/executions/{executionId}/cancel'),
    }
    for op_id, where in expected.items():
        assert by_id.get(op_id) == where, op_id
    assert sum(1 for _, _, op in _operations(doc) if op['operationId'] == 'cancelExecution') == 1


# ----------------------------------------------------------------------------- schemas

def test_three_schemas_per_family(doc):
    schemas = doc['components']['schemas']
    for fam in FAMILIES:
        entity = schemas[fam.entity]
        # <Entity>: every field a response may carry; required = always returned
        # plus the embedded references (kernel/embeds.py)
        assert set(entity['properties']) == set(fam.fields) | set(embeds_of(fam.path)), fam.entity
        required = set(entity['required'])
        assert set(COMMON) <= required
        assert {f.name for f in fam.ownership_fields} <= required
        for f in fam.own_fields:
            if f.default is not None and not f.nullable:
                assert f.name in required, (fam.entity, f.name)
            if f.nullable:
                assert f.name not in required
                assert entity['properties'][f.name].get('nullable') is True or \
                    entity['properties'][f.name] == {}, (fam.entity, f.name)
        if fam.read_only:  # written by the server only: no request bodies, no write routes
            assert f'{fam.entity}CreateRequest' not in schemas and f'{fam.entity}UpdateRequest' not in schemas
            continue
        create = schemas[f'{fam.entity}CreateRequest']
        update = schemas[f'{fam.entity}UpdateRequest']
        # <Entity>CreateRequest: no server-generated fields; required = Field.required (+ projectId)
        assert not set(create['properties']) & SERVER_FIELDS, fam.entity
        want = {f.name for f in fam.own_fields if f.required} | ({'projectId'} if fam.scope == 'project' else set())
        assert set(create.get('required', [])) == want, fam.entity
        # <Entity>UpdateRequest: nothing required, keeps changeSequence, no ownership/server fields
        assert 'required' not in update
        assert 'changeSequence' in update['properties']
        assert not set(update['properties']) & (OWNERSHIP_FIELDS | (SERVER_FIELDS - {'changeSequence'}))
        objects = {n for n, (id_field, _) in fam.references.items()
                   if n not in fam.writable and id_field not in OWNERSHIP_FIELDS}   # x: {id} for xId
        assert set(update['properties']) == set(fam.writable) - OWNERSHIP_FIELDS | {'changeSequence'} | objects


def test_field_types(doc):
    org = _schema(doc, 'Organization')['properties']
    assert org['supportAccessExpiresAt'] == {'type': 'string', 'format': 'date-time', 'nullable': True}
    assert org['archived'] == {'type': 'boolean', 'nullable': True}
    assert org['features'] == {'type': 'object', 'additionalProperties': True}
    assert org['organizationStatus'] == {'allOf': [{'$ref': '#/components/schemas/OrganizationStatus'}],
                                         'default': 'ACTIVE'}
    assert org['publicAccess'] == {'type': 'boolean', 'default': False}
    runtime = _schema(doc, 'AgentRuntime')['properties']
    assert runtime['maxConcurrency'] == {'type': 'integer', 'format': 'int32', 'nullable': True}
    assert runtime['environmentVars'] == {}
    assert runtime['subnets'] == {'type': 'string', 'nullable': True}
    assert _schema(doc, 'Team')['properties']['memberIds'] == {'type': 'array', 'items': {'type': 'string'}}
    assert _schema(doc, 'ActivityPlan')['properties']['steps'] == {
        'type': 'array', 'items': {'$ref': '#/components/schemas/PipelineStep'}}
    family = _schema(doc, 'DocumentFamily')['properties']
    assert family['documentStatus'] == {'allOf': [{'$ref': '#/components/schemas/DocumentStatus'}],
                                        'nullable': True}
    assert _schema(doc, 'Agent')['properties']['modelSize'] == {
        'allOf': [{'$ref': '#/components/schemas/WebLlmModelSize'}], 'nullable': True}
    assert _schema(doc, 'Project')['properties']['ownerId'] == {'type': 'string', 'format': 'uuid', 'nullable': True}
    task_status = _schema(doc, 'TaskStatus')
    assert 'statusType' in task_status['required']
    assert 'TODO' not in _schema(doc, 'TaskStatusType')['enum']


def test_every_enumeration_is_a_named_component(doc):
    for name, values in ENUMS.items():
        assert _schema(doc, name) == {'type': 'string', 'enum': list(values)}
    for name in ('TaskStatusType', 'ExecutionStatus', 'ExecutionStatusMessageType', 'SortDirection',
                 'AuditAction', 'ChatMessageRole', 'WebLlmModelSize'):
        assert name in doc['components']['schemas']


def test_page_and_error_bodies(doc):
    schemas = doc['components']['schemas']
    assert 'Page' not in schemas     # no shared base: generators type every list as its first family
    for entity in [fam.entity for fam in FAMILIES] + ['TaskGroupHistory']:
        page = schemas[f'{entity}Page']
        assert 'allOf' not in page
        assert set(page['required']) == {'content', 'totalPages', 'totalElements', 'number', 'size', 'first',
                                         'last', 'numberOfElements'}
        assert page['properties']['content'] == {'type': 'array',
                                                 'items': {'$ref': f'#/components/schemas/{entity}'}}
    error = _schema(doc, 'Error')
    assert set(error['required']) == {'error', 'message', 'status'}
    conflict = _schema(doc, 'ConflictError')
    assert conflict['allOf'][0] == {'$ref': '#/components/schemas/Error'}
    assert 'changeSequence' in conflict['allOf'][1]['properties']
    responses = doc['components']['responses']
    assert responses['Conflict']['content']['application/json']['schema']['$ref'].endswith('/ConflictError')
    assert responses['TooManyRequests']['headers']['Retry-After']['required'] is True


# ----------------------------------------------------------------------------- operations

def _codes(op):
    return {int(c) for c in op['responses']}


def test_registry_operations(doc):
    paths = doc['paths']
    listing = paths['/api/projects']['get']
    assert _codes(listing) == {200, 400, 401, 403, 429, 503}
    params = {p['name']: p for p in listing['parameters']}
    assert params['page']['schema'] == {'type': 'integer', 'minimum': 0, 'maximum': 1_000_000, 'default': 0}
    assert params['pageSize']['schema'] == {'type': 'integer', 'minimum': 1, 'maximum': 100, 'default': 10}
    assert params['filter']['style'] == 'form' and params['filter']['explode'] is True
    assert params['filter']['schema'] == {'type': 'array', 'items': {'type': 'string'}}
    assert params['query']['schema'] == params['sort']['schema'] == {'type': 'string'}
    page = listing['responses']['200']['content']['application/json']['schema']
    assert page == {'$ref': '#/components/schemas/ProjectPage'}
    # every list answers its own family's page, and so does the list_of route of docmeta
    for fam in FAMILIES:
        schema = paths[f'/api/{fam.path}']['get']['responses']['200']['content']['application/json']['schema']
        assert schema == {'$ref': f'#/components/schemas/{fam.entity}Page'}, fam.path
    history = paths['/api/task-groups/{id}/history']['get']['responses']['200']['content']['application/json']
    assert history['schema'] == {'$ref': '#/components/schemas/TaskGroupHistoryPage'}

    item = paths['/api/projects/{id}']
    assert _codes(item['get']) == {200, 400, 401, 403, 404, 429, 503}
    assert _codes(item['put']) == {200, 400, 401, 403, 404, 409, 413, 415, 429, 503}
    assert _codes(item['delete']) == {204, 400, 401, 403, 404, 409, 429, 503}
    assert 'content' not in item['delete']['responses']['204']
    assert item['get']['parameters'] == [
        {'name': 'id', 'in': 'path', 'required': True, 'schema': {'type': 'string', 'format': 'uuid'}}]
    assert item['put']['requestBody']['content']['application/json']['schema'] == {
        '$ref': '#/components/schemas/ProjectUpdateRequest'}

    create = paths['/api/projects']['post']
    assert _codes(create) == {201, 400, 401, 403, 409, 413, 415, 429, 503}
    assert create['requestBody']['content']['application/json']['schema'] == {
        '$ref': '#/components/schemas/ProjectCreateRequest'}
    assert create['responses']['201']['links']['getProject'] == {
        'operationId': 'getProject', 'parameters': {'id': '$response.body#/id'}, 'description': 'the created Project'}

    seq = paths['/api/agent-runtimes/{id}/sequence']['get']
    assert seq['responses']['200']['content']['application/json']['schema'] == {'type': 'integer', 'format': 'int32'}
    assert _codes(seq) == {200, 400, 401, 403, 404, 429, 503}


def test_rate_limit_headers_on_every_response(doc):
    headers = doc['components']['headers']
    assert set(headers) == {'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'}
    for path, method, op in _operations(doc):
        for code, response in op['responses'].items():
            if '$ref' in response:
                response = doc['components']['responses'][response['$ref'].rsplit('/', 1)[1]]
            if code == '413':  # answered by the front door (local server / API Gateway), not the app
                assert 'headers' not in response
                continue
            assert set(headers) <= set(response['headers']), (path, method, code)


def test_security_schemes_global_and_public_routes(doc):
    schemes = doc['components']['securitySchemes']
    assert {k: v for k, v in schemes['ApiKeyAuth'].items() if k != 'description'} == {
        'type': 'apiKey', 'in': 'header', 'name': 'x-api-key'}
    # where a key comes from, and where the local admin's is (issue 41): shown on /docs
    assert 'POST /api/account/me/api-keys' in schemes['ApiKeyAuth']['description']
    assert '.local/admin-api-key' in schemes['ApiKeyAuth']['description']
    assert '.local/admin-api-key' in doc['info']['description'] and 'make run' in doc['info']['description']
    assert 'platform UI' not in json.dumps(doc)
    assert schemes['BearerAuth']['scheme'] == 'bearer' and schemes['BearerAuth']['bearerFormat'] == 'JWT'
    assert schemes['BasicAuth'] == {'type': 'http', 'scheme': 'basic'}
    assert doc['security'] == [{'ApiKeyAuth': []}, {'BearerAuth': []}, {'BasicAuth': []}]
    from chalicelib.kernel.http import policy
    for path, _method, op in _operations(doc):
        if policy.of(path) == 'public':
            assert op['security'] == [], path
            assert not {401, 403} & _codes(op)
        elif policy.of(path) == 'user':
            assert 'security' not in op, path
    for path in ('/v3/api-docs', '/docs', '/docs/swagger-ui.css', '/docs/swagger-ui-bundle.js'):
        assert doc['paths'][path]['get']['security'] == []


def test_route_without_metadata_gets_a_generic_entry():
    from chalice import Blueprint, Chalice

    from chalicelib.kernel.http import docmeta, openapi
    from chalicelib.kernel.http import routes as family_routes
    app = Chalice('t')
    bp = Blueprint('t')

    @bp.route('/api/widgets/{widgetId}/spin', methods=['POST'], name='spinWidget', content_types=['application/json'])
    def spin(widgetId):
        return {}
    app.register_blueprint(bp)
    doc = openapi.build(app.routes, openapi.registry_index(family_routes.operation_name), lambda p: 'user',
                        docmeta.OPERATIONS, docmeta.SCHEMAS, [{'url': 'https://x.example'}])
    op = doc['paths']['/api/widgets/{widgetId}/spin']['post']
    assert op['operationId'] == 'spinWidget'
    assert op['summary'] == 'Spin widget'
    assert op['tags'] == ['widgets']
    assert op['parameters'][0] == {'name': 'widgetId', 'in': 'path', 'required': True,
                                   'schema': {'type': 'string', 'format': 'uuid'}}
    assert 'application/json' in op['requestBody']['content']
    assert {'200', '201', '400', '401', '403', '404', '409', '413', '415', '429', '503'} == set(op['responses'])
    from openapi_spec_validator import validate
    validate(doc)


# ----------------------------------------------------------------------------- the wire matches the document

def _validator(doc, name_or_schema):
    from openapi_schema_validator import OAS30Validator
    from openapi_schema_validator._format import oas30_format_checker
    schema = name_or_schema if isinstance(name_or_schema, dict) else {'$ref': f'#/components/schemas/{name_or_schema}'}
    return OAS30Validator({**schema, 'components': doc['components']}, format_checker=oas30_format_checker)


def _check(doc, schema, instance):
    errors = sorted(_validator(doc, schema).iter_errors(instance), key=str)
    assert not errors, [f'{list(e.absolute_path)}: {e.message}' for e in errors[:5]]


def _minimal_body(api, fam, org_id, made):
    body = {}
    if fam.scope == 'org':
        body['organizationId'] = org_id
    if fam.scope == 'project':
        body['projectId'] = _made(api, 'projects', org_id, made)['id']
    if fam.joins:
        body[fam.joins] = _fresh(api, 'users', org_id, made)['id']
    for f in fam.writable.values():
        if not f.required:
            continue
        if f.ref:
            body[f.name] = (_fresh(api, f.ref, org_id, made) if f.ref == 'users'
                            else _made(api, f.ref, org_id, made))['id']
        elif f.enum:
            body[f.name] = ENUMS[f.enum][-1]
        elif f.name == 'email':
            body[f.name] = f'u-{uuid.uuid4().hex[:10]}@example.com'
        elif f.shape:
            body[f.name] = sample(f)
        else:
            body[f.name] = f'v-{uuid.uuid4().hex[:10]}'
    if 'slug' in fam.writable:
        body['slug'] = f's-{uuid.uuid4().hex[:10]}'
    return body


def _fresh(api, path, org_id, made):
    from chalicelib.kernel.registry import family
    r = api.post(f'/api/{path}', _minimal_body(api, family(path), org_id, made))
    assert r.status == 201, (path, r.json)
    return r.json


def _made(api, path, org_id, made):
    if path not in made:
        made[path] = _fresh(api, path, org_id, made)
    return made[path]


@pytest.mark.slow
def test_responses_of_every_family_conform_to_the_document(api, org_id, doc):
    made: dict = {}
    for fam in FAMILIES:
        entity = fam.entity
        list_op = doc['paths'][f'/api/{fam.path}']['get']
        list_schema = list_op['responses']['200']['content']['application/json']['schema']
        if fam.read_only:
            page = api.get(f'/api/{fam.path}?pageSize=5')
            assert page.status == 200
            _check(doc, list_schema, page.json)
            continue
        created = _fresh(api, fam.path, org_id, made)
        _check(doc, entity, created)
        base = f'/api/{fam.path}/{created["id"]}'
        got = api.get(base)
        assert got.status == 200
        _check(doc, entity, got.json)
        _check(doc, f'{entity}UpdateRequest', got.json)  # a GET body is a valid PUT body
        put = api.put(base, got.json)
        assert put.status == 200, (fam.path, put.json)
        _check(doc, entity, put.json)
        seq = api.get(f'{base}/sequence')
        assert seq.status == 200 and seq.json == put.json['changeSequence']
        page = api.get(f'/api/{fam.path}?pageSize=5')
        assert page.status == 200
        _check(doc, list_schema, page.json)
        stale = api.put(base, {'changeSequence': 0})
        assert stale.status == 409
        _check(doc, 'ConflictError', stale.json)
    for path in ('/api/projects/not-a-uuid', f'/api/projects/{uuid.uuid4()}'):
        r = api.get(path)
        assert r.status in (400, 404)
        _check(doc, 'Error', r.json)
    assert set(api.get('/api/projects').headers) >= {'x-ratelimit-limit', 'x-ratelimit-remaining',
                                                     'x-ratelimit-reset'}


def test_account_routes_conform_to_their_declared_schemas(api, doc):
    me = api.get('/api/account/me')
    assert me.status == 200
    _check(doc, 'Account', me.json)
    key = api.post('/api/account/me/api-keys', {'name': 'ci'})
    assert key.status == 201
    _check(doc, 'CreatedApiKey', key.json)
    keys = api.get('/api/account/me/api-keys')
    _check(doc, doc['paths']['/api/account/me/api-keys']['get']['responses']['200']['content']
           ['application/json']['schema'], keys.json)


# ----------------------------------------------------------------------------- Swagger UI

def test_docs_page_renders_the_document_with_local_assets(api):
    page = api.get('/docs', key=None)
    assert page.status == 200
    assert page.headers['content-type'] == 'text/html; charset=utf-8'
    html = page.body.decode()
    assert 'id="swagger-ui"' in html
    for asset in ('docs/swagger-ui.css', 'docs/swagger-ui-bundle.js', 'docs/swagger-initializer.js'):
        assert asset in html
    assert 'http://' not in html and 'https://' not in html  # no CDN
    init = api.get('/docs/swagger-initializer.js', key=None)
    assert init.status == 200 and "url: 'v3/api-docs'" in init.body.decode()

    css = api.get('/docs/swagger-ui.css', key=None)
    assert css.status == 200 and css.headers['content-type'] == 'text/css; charset=utf-8'
    assert b'.swagger-ui' in css.body
    js = api.get('/docs/swagger-ui-bundle.js', key=None, headers={'accept': '*/*'})
    assert js.status == 200 and js.headers['content-type'] == 'text/javascript; charset=utf-8'
    assert b'SwaggerUIBundle' in js.body and b'sourceMappingURL' not in js.body[-300:]
    assert len(js.body) > 500_000
    assert 'max-age' in js.headers['cache-control']


def test_docs_and_assets_are_text_not_base64_in_the_lambda_response():
    from chalice.test import Client
    with Client(_app()) as client:
        for path in ('/docs/swagger-ui.css', '/v3/api-docs'):
            raw = client.http.request('GET', path, headers={'accept': '*/*'})
            assert raw.status_code == 200
    from chalicelib.kernel.http import docs
    response = docs.swagger_css().to_dict(_app().api.binary_types)
    assert 'isBase64Encoded' not in response and isinstance(response['body'], str)


def test_docs_routes_need_no_credential_but_the_api_does(api):
    assert api.get('/v3/api-docs', key=None).status == 200
    assert api.get('/api/projects', key=None).status == 401


# ----------------------------------------------------------------------------- cold start

def test_importing_the_app_loads_no_generator_or_schema_tooling():
    code = ('import sys, app; heavy = ["chalicelib.kernel.http.openapi", "openapi_spec_validator", '
            '"openapi_schema_validator", "jsonschema", "yaml", "swagger_ui_bundle", "schemathesis"]; '
            'print(json.dumps([m for m in heavy if m in sys.modules]))')
    out = subprocess.run([sys.executable, '-c', 'import json; ' + code], cwd=ROOT, capture_output=True,
                         text=True, env={**os.environ, 'PYTHONPATH': str(ROOT)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_document_is_built_once_per_process(api, monkeypatch):
    from chalicelib.kernel.http import openapi
    api.get('/v3/api-docs', key=None)
    calls = []
    monkeypatch.setattr(openapi, 'build', lambda *a, **k: calls.append(1) or {})
    assert api.get('/v3/api-docs', key=None).status == 200
    assert calls == []


def test_resource_schemes_conform(api, doc):
    r = api.get('/api/resolve/schemes')
    assert r.status == 200
    schema = doc['paths']['/api/resolve/schemes']['get']['responses']['200']['content']['application/json']['schema']
    _check(doc, schema, r.json)
