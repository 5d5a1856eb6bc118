"""The OpenAPI 3.0.3 document of the running API (served at GET /v3/api-docs).

Generated, never written by hand, from the same declarations that serve requests:
  * the route table (``app.routes``: path -> method -> RouteEntry): every route appears, and
    only those; operation ids are the Chalice view names;
  * the resource registry (kernel/registry.py FAMILIES, kernel/fields.py ENUMS): three schemas
    per family (<Entity>, <Entity>CreateRequest, <Entity>UpdateRequest) and the named enums;
  * the authentication policy of each route (kernel/http/policy.py);
  * metadata declared next to non-registry routes (kernel/http/docmeta.py), with a generic fallback.

This module imports nothing from the HTTP layer: the caller (kernel/http/docs.py) hands it the routes,
the view-name index of registry operations and the policy lookup.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from chalicelib.core.limits import DEFAULT_PAGE_SIZE, MAX_PAGE, MAX_PAGE_SIZE
from chalicelib.kernel.embeds import embeds_of
from chalicelib.kernel.fields import ENUMS, Field
from chalicelib.kernel.models import MAX_STRING, always_present, embedded_family
from chalicelib.kernel.registry import FAMILIES, OWNERSHIP_FIELDS, Family
from chalicelib.kernel.shapes import SHAPES

OPENAPI_VERSION = '3.0.3'
API_VERSION = '8.0.0'

RATE_LIMIT_HEADERS = ('X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset')

# Error statuses per registry operation.
REGISTRY_ERRORS = {
    'list': (400, 401, 403, 429, 503),
    'get': (400, 401, 403, 404, 429, 503),
    'sequence': (400, 401, 403, 404, 429, 503),
    'create': (400, 401, 403, 409, 413, 415, 429, 503),
    'update': (400, 401, 403, 404, 409, 413, 415, 429, 503),
    'delete': (400, 401, 403, 404, 409, 429, 503),
}
# Error statuses of a route without declared metadata, by method.
GENERIC_ERRORS = {
    'GET': (400, 401, 403, 404, 429, 503),
    'DELETE': (400, 401, 403, 404, 409, 429, 503),
}
GENERIC_WRITE_ERRORS = (400, 401, 403, 404, 409, 413, 415, 429, 503)
def registry_note(family: Family, op: str) -> str | None:
    """What a registry operation adds to the generic rules: its family's declaration (``notes``,
    kernel/registry.py), and the organization-slug list page of a family with such paths."""
    if op == 'get' and family.org_slug_paths:
        return ('A path segment that is not a UUID is an organization slug: that organization\'s list page '
                '(the list parameters apply). See also /api/' + family.path + '/{id}/{slug}.')
    return family.notes.get(op)


ERROR_RESPONSES = {
    400: ('BadRequest', 'Invalid request body or parameters'),
    401: ('Unauthorized', 'Missing or invalid credential'),
    403: ('Forbidden', 'Authenticated but not permitted'),
    404: ('NotFound', 'No resource with the given id'),
    409: ('Conflict', 'Stale changeSequence (the body carries the current one) or uniqueness violation'),
    413: ('PayloadTooLarge', 'Request body too large: a JSON body over 350,000 bytes (the API), any body over '
                             'the front door\'s 10 MB (answered before the API runs: on AWS without rate-limit '
                             'headers)'),
    415: ('UnsupportedMediaType', 'The request body is not declared application/json (no Content-Type, or another '
                                  'type): send it as JSON with Content-Type: application/json'),
    422: ('UnprocessableEntity', 'The request is well formed but its work cannot be done: the work budget ran out '
                                 '(docs/api/limits.md), or the stored input cannot be read (a page image of a file '
                                 'that cannot be drawn)'),
    429: ('TooManyRequests', 'Rate limit exceeded'),
    501: ('NotImplemented', 'This deployment cannot do it (a page image of an image file where the API carries no '
                            'image decoder: docs/api/documents.md "Page images and words")'),
    502: ('BadGateway', 'An upstream (service bridge) could not be reached or did not answer in HTTP'),
    503: ('ServiceUnavailable', 'A dependency cannot answer now (the database stays throttled, the rate limiter '
                                'cannot count a write, the identity provider cannot be reached); nothing was '
                                'changed: retry after Retry-After seconds'),
    504: ('GatewayTimeout', 'An upstream (service bridge) did not answer within the deadline'),
}

SCOPE_TEXT = {
    'global': 'Platform-wide.',
    'org': 'Owned by one organization (organizationId).',
    'project': 'Owned by one project (projectId); its organization is the project\'s.',
}

_STATUS_TEXT = {200: 'Success', 201: 'Created', 202: 'Accepted', 204: 'No content'}

OPS = ('list', 'get', 'create', 'update', 'delete', 'sequence')


def _ref(name: str, kind: str = 'schemas') -> dict[str, str]:
    return {'$ref': f'#/components/{kind}/{name}'}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if '$ref' in schema:
        return {'allOf': [schema], 'nullable': True}
    if not schema:  # any: null is already a value of {}
        return schema
    return {**schema, 'nullable': True}


def _humanize(name: str) -> str:
    words = re.sub(r'(?<=[a-z0-9])(?=[A-Z])', ' ', name).split()
    return ' '.join([words[0].capitalize(), *(w.lower() for w in words[1:])]) if words else name


# ----------------------------------------------------------------------------- schemas

class _Schemas:
    def __init__(self, families: Iterable[Family]) -> None:
        self.families = tuple(families)

    def field(self, f: Field, request: bool) -> dict[str, Any]:
        """A field's schema. In request bodies every field that is not required accepts null
        (not given on create, cleared on update: kernel/references.py)."""
        if f.enum:
            schema: dict[str, Any] = _ref(f.enum)
        elif f.shape and f.type == 'array':  # endpoints: an array of ServiceBridgeEndpoint, ...
            schema = {'type': 'array', 'items': _ref(f.shape)}
        elif f.shape:
            schema = _ref(f.shape)
        elif embedded_family(f) is not None:  # documentStatus holds a DocumentStatus, ...
            schema = _ref(embedded_family(f).entity)
        else:
            schema = self._plain(f, request)
        return _nullable(schema) if f.nullable or (request and not f.required) else schema

    @staticmethod
    def reference_objects(fam: Family, ownership: bool) -> dict[str, Any]:
        """``x: {id, ...}`` accepted instead of ``xId`` (kernel/references.py)."""
        out = {}
        for name, (id_field, target) in fam.references.items():
            if name in fam.writable or (id_field in OWNERSHIP_FIELDS and not ownership):
                continue
            out[name] = {
                'type': 'object', 'nullable': True, 'required': ['id'], 'additionalProperties': True,
                'properties': {'id': {'type': 'string', 'format': 'uuid'}},
                'description': f'the referenced {target} record by its id, instead of {id_field} (other keys '
                               f'are ignored; both sent and different: 400)'}
        return out

    @staticmethod
    def embedded(fam: Family) -> dict[str, Any]:
        """References embedded in responses (kernel/embeds.py)."""
        from chalicelib.kernel.registry import family as family_of  # noqa: PLC0415
        return {name: {'allOf': [_ref(family_of(target).entity)], 'nullable': True,
                       'description': f'the record {id_field} names, as its own GET shows it (heavy fields left '
                                      f'out); only {{"id"}} when the caller may not see it; absent when '
                                      f'{id_field} is, or names a record that no longer exists'}
                for name, (id_field, target) in embeds_of(fam.path).items()}

    @staticmethod
    def _plain(f: Field, request: bool) -> dict[str, Any]:
        text: dict[str, Any] = {'type': 'string'}
        if request:
            text['maxLength'] = MAX_STRING
        if f.type == 'string':
            if f.ref:
                return {'type': 'string', 'format': 'uuid'}
            if request and f.name == 'email':  # checked by the users hook
                return {'type': 'string', 'format': 'email', 'maxLength': 254}
            return dict(text)
        return {
            'bool': {'type': 'boolean'},
            'int': {'type': 'integer', 'format': 'int32'},
            'number': {'type': 'number'},
            'datetime': {'type': 'string', 'format': 'date-time'},
            'object': {'type': 'object', 'additionalProperties': True},
            'any': {},
            'strings': {'type': 'array', 'items': text},
            'array': {'type': 'array', 'items': {}},
        }[f.type]

    def entity(self, fam: Family) -> dict[str, Any]:
        fields = fam.fields
        always = list(always_present(fam))
        props = {name: self._with_default(f, self.field(f, request=False)) for name, f in fields.items()}
        props['id'] = {'type': 'string', 'format': 'uuid', 'description': 'server-generated'}
        props['uuid'] = {'type': 'string', 'description': 'secondary identifier, server-generated'}
        props['changeSequence'] = {'type': 'integer', 'format': 'int32',
                                   'description': 'optimistic-locking token; never written directly'}
        props.update(self.embedded(fam))
        return {'type': 'object', 'description': f'{fam.entity}. {SCOPE_TEXT[fam.scope]}',
                'required': [n for n in always if n in props], 'properties': props}

    def create_request(self, fam: Family) -> dict[str, Any]:
        props: dict[str, Any] = {}
        required: list[str] = []
        if fam.scope == 'org':
            props['organizationId'] = {
                'type': 'string', 'format': 'uuid', 'nullable': True,
                'description': 'owning organization; defaults to the caller\'s only organization'}
        if fam.scope == 'project':
            props['projectId'] = {'type': 'string', 'format': 'uuid', 'description': 'owning project'}
            required.append('projectId')
        for name, f in fam.writable.items():
            props[name] = self._with_default(f, self.field(f, request=True))
            if f.required:
                required.append(name)
        props.update(self.reference_objects(fam, ownership=True))
        out: dict[str, Any] = {'type': 'object', 'description': f'Body of a {fam.entity} create (null for a '
                               'field that is not required means "not given").',
                               'properties': props}
        if required:
            out['required'] = required
        return out

    def update_request(self, fam: Family) -> dict[str, Any]:
        identity = set(fam.unique) if fam.scope == 'global' else set()  # organization slug: never null
        props = {name: self.field(replace(f, required=True) if name in identity else f, request=True)
                 for name, f in fam.writable.items() if name not in OWNERSHIP_FIELDS}
        props.update(self.reference_objects(fam, ownership=False))
        props['changeSequence'] = {
            'type': 'integer', 'format': 'int32', 'nullable': True,
            'description': 'optimistic locking: when not null, must equal the stored value (else 409)'}
        return {'type': 'object',
                'description': f'Body of a {fam.entity} update: omitted fields keep their value, '
                               'null clears a field that is not required (back to its default, or absent).',
                'properties': props}

    @staticmethod
    def _with_default(f: Field, schema: dict[str, Any]) -> dict[str, Any]:
        if f.has_default and '$ref' not in schema:
            return {**schema, 'default': f.default}
        if f.has_default:
            return {'allOf': [schema], 'default': f.default}
        return schema

    def components(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for fam in self.families:
            out[fam.entity] = self.entity(fam)
            if not getattr(fam, 'read_only', False):  # written by the server only: no request bodies
                out[f'{fam.entity}CreateRequest'] = self.create_request(fam)
                out[f'{fam.entity}UpdateRequest'] = self.update_request(fam)
        for name, values in ENUMS.items():
            out[name] = {'type': 'string', 'enum': list(values)}
        for name, shape in SHAPES.items():
            out[name] = shape.schema
        out['Error'] = {
            'type': 'object', 'required': ['error', 'message', 'status'],
            'properties': {
                'error': {'type': 'string', 'description': 'the HTTP reason phrase'},
                'message': {'type': 'string'},
                'status': {'type': 'integer', 'description': 'the HTTP status'},
                'unknown': {'type': 'array', 'items': {'type': 'string'},
                            'description': 'a 400 for names the endpoint does not know: those body fields or '
                                           'query parameters (docs/api/conventions.md)'},
            },
        }
        out['ConflictError'] = {'allOf': [_ref('Error'), {
            'type': 'object',
            'properties': {'changeSequence': {
                'type': 'integer', 'format': 'int32',
                'description': 'the current change sequence (stale changeSequence only)'}},
        }]}
        return out


# ----------------------------------------------------------------------------- operations

PAGE_FIELDS = ('content', 'totalPages', 'totalElements', 'number', 'size', 'first', 'last', 'numberOfElements')


def page_name(entity: str) -> str:
    return f'{entity}Page'


def page_schema(entity: str) -> dict[str, Any]:
    """``<Entity>Page``: one page of a list of ``entity``, a whole schema of its own. Never
    ``allOf: [Page, {content: ...}]``: generators merge such a shared base into one model for every
    list, typed as the first family they meet (docs/api/clients.md)."""
    return {
        'type': 'object', 'description': f'One page of a list of {entity}.',
        'required': list(PAGE_FIELDS),
        'properties': {
            'content': {'type': 'array', 'items': _ref(entity)},
            'totalPages': {'type': 'integer'},
            'totalElements': {'type': 'integer'},
            'number': {'type': 'integer', 'description': 'the page number, counted as the request\'s '
                                                        'page parameter (see page)'},
            'size': {'type': 'integer', 'description': 'page size'},
            'first': {'type': 'boolean'},
            'last': {'type': 'boolean'},
            'numberOfElements': {'type': 'integer', 'description': 'elements on this page'},
        },
    }


def _page_of(entity: str) -> dict[str, Any]:
    return _ref(page_name(entity))


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {'application/json': {'schema': schema}}


def _list_parameters(fam: Family | None = None) -> list[dict[str, Any]]:
    extra = []
    omit = getattr(fam, 'summary_omit', ()) if fam is not None else ()
    if omit:
        extra.append({'name': 'view', 'in': 'query', 'required': False,
                      'description': f'summary: leave out the heavy fields ({", ".join(omit)}); full (default): all. '
                                     f'Both views answer the same page schema: the heavy fields are optional '
                                     f'in it, and simply absent from a summary page (docs/api/clients.md)',
                      'schema': {'type': 'string', 'enum': ['summary', 'full']}})
    return extra + [
        {'name': 'page', 'in': 'query', 'required': False,
         'description': 'zero-based page number; requests authenticated with the legacy x-access-token header '
                        '(the platform\'s SDK and CLI) number pages from 1 (0 and 1 are then both the first page, '
                        'and the envelope\'s number counts from 1)',
         'schema': {'type': 'integer', 'minimum': 0, 'maximum': MAX_PAGE, 'default': 0}},
        {'name': 'pageSize', 'in': 'query', 'required': False,
         'schema': {'type': 'integer', 'minimum': 1, 'maximum': MAX_PAGE_SIZE, 'default': DEFAULT_PAGE_SIZE}},
        {'name': 'filter', 'in': 'query', 'required': False, 'style': 'form', 'explode': True,
         'description': "filter expression, e.g. name == 'x' and not(active == false); may repeat (all must hold)",
         'schema': {'type': 'array', 'items': {'type': 'string'}}},
        {'name': 'query', 'in': 'query', 'required': False,
         'description': 'free-text search over the searchable fields (name, description, title, ...; a document '
                        'family\'s path and file name)',
         'schema': {'type': 'string'}},
        {'name': 'sort', 'in': 'query', 'required': False,
         'description': 'field:direction pairs separated by ";"; direction asc (default) or desc',
         'schema': {'type': 'string'}},
    ]


def _path_parameter(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = {'type': 'string'}
    if name == 'id' or name.endswith('Id'):
        schema['format'] = 'uuid'
    return {'name': name, 'in': 'path', 'required': True, 'schema': schema}


def _registry_operation(fam: Family, op: str) -> dict[str, Any]:
    entity = fam.entity
    noun = _humanize(entity).lower()
    article = 'an' if noun[0] in 'aeiou' else 'a'
    summary = {
        'list': f'List {fam.path.replace("-", " ")}',
        'get': f'Get {article} {noun}',
        'create': f'Create {article} {noun}',
        'update': f'Update {article} {noun}',
        'delete': f'Delete {article} {noun}',
        'sequence': f'Current change sequence of {article} {noun}',
    }[op]
    out: dict[str, Any] = {'summary': summary, 'tags': [fam.path]}
    if op == 'list':
        out['parameters'] = _list_parameters(fam)
        out['paged'] = True
        out['responses'] = {200: ('A page of ' + fam.path.replace('-', ' '), _page_of(entity))}
    elif op == 'get':
        out['responses'] = {200: (entity, _ref(entity))}
    elif op == 'create':
        out['request'] = _ref(f'{entity}CreateRequest')
        out['responses'] = {201: (f'The created {entity}', _ref(entity))}
    elif op == 'update':
        out['request'] = _ref(f'{entity}UpdateRequest')
        out['responses'] = {200: (f'The updated {entity}', _ref(entity))}
    elif op == 'delete':
        out['responses'] = {204: ('Deleted', None)}
        if fam.soft_delete:
            out['description'] = 'Soft delete: the record is marked deleted and no longer listed or found.'
    elif op == 'sequence':
        out['description'] = 'For comparison with changeSequence before an update.'
        out['responses'] = {200: ('The current change sequence',
                                  {'type': 'integer', 'format': 'int32'})}
    note = registry_note(fam, op)
    if note:
        out['description'] = f"{out.get('description', '')} {note}".strip()
    out['errors'] = REGISTRY_ERRORS[op]
    return out


def _generic_operation(view_name: str, path: str, method: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    segments = [s for s in path.split('/') if s and not s.startswith('{') and s != 'api']
    out: dict[str, Any] = {'summary': meta.get('summary') or _humanize(view_name),
                           'tags': list(meta.get('tags') or segments[:1] or ['default'])}
    if meta.get('description'):
        out['description'] = meta['description']
    if meta.get('list_of'):  # a list endpoint: the list parameters and a page of that schema
        out['parameters'] = _list_parameters()
        out['paged'] = True
        meta = {'responses': {200: _page_of(meta['list_of'])}, **meta}
    if meta.get('parameters'):
        out['parameters'] = out.get('parameters', []) + list(meta['parameters'])
    if 'request' in meta:
        out['request'] = meta['request']
    elif method in ('POST', 'PUT', 'PATCH'):
        out['request'] = {'type': 'object', 'additionalProperties': True}
    if 'responses' in meta:
        out['responses'] = {int(k): (_STATUS_TEXT.get(int(k), 'Success'), v) for k, v in meta['responses'].items()}
    else:
        ok: Any = ('Success', {})
        out['responses'] = {
            'GET': {200: ok}, 'POST': {200: ok, 201: ('Created', {})}, 'PUT': {200: ok},
            'PATCH': {200: ok}, 'DELETE': {204: ('Deleted', None)},
        }.get(method, {200: ok})
    if 'errors' in meta:
        out['errors'] = tuple(meta['errors'])
    else:
        out['errors'] = GENERIC_ERRORS.get(method, GENERIC_WRITE_ERRORS)
    return out


LINK_HEADER = {'description': 'RFC 8288 links to the first, prev, next and last pages: this request with only '
                              '`page` changed (docs/api/conventions.md "Lists")', 'schema': {'type': 'string'}}


def _rate_headers() -> dict[str, Any]:
    return {name: _ref(name, 'headers') for name in RATE_LIMIT_HEADERS}


def _render_operation(desc: dict[str, Any], op_id: str, path: str, method: str, route,
                      mode: str, operation_ids: set[str]) -> dict[str, Any]:
    operation: dict[str, Any] = {'operationId': op_id, 'summary': desc['summary'], 'tags': desc['tags']}
    if desc.get('description'):
        operation['description'] = desc['description']
    declared = {p['name']: p for p in desc.get('parameters', []) if p.get('in') == 'path'}
    parameters = [declared.get(a) or _path_parameter(a) for a in route.view_args]
    parameters += [p for p in desc.get('parameters', []) if p.get('in') != 'path']
    if parameters:
        operation['parameters'] = parameters
    body = desc.get('request')
    if body is not None:
        types = [t for t in (route.content_types or ['application/json']) if t != '*/*'] or ['application/json']
        operation['requestBody'] = {'required': True,
                                    'content': {t: {'schema': body} for t in types}}
    responses: dict[str, Any] = {}
    for status, (text, schema) in sorted(desc['responses'].items()):
        response: dict[str, Any] = {'description': text, 'headers': _rate_headers()}
        if desc.get('paged') and status == 200:
            response['headers']['Link'] = LINK_HEADER
        if isinstance(schema, dict) and set(schema) == {'content'}:  # a full content map (non-JSON bodies)
            response['content'] = schema['content']
        elif schema is not None:
            response['content'] = _json(schema)
        links = {name: link for name, link in desc.get('links', {}).get(status, {}).items()
                 if link['operationId'] in operation_ids}
        if links:
            response['links'] = links
        responses[str(status)] = response
    errors = desc['errors']
    if mode == 'public':
        errors = [e for e in errors if e not in (401, 403)]
    for status in sorted(errors):
        responses[str(status)] = _ref(ERROR_RESPONSES[status][0], 'responses')
    operation['responses'] = responses
    if mode == 'public':
        operation['security'] = []
    elif mode == 'service':
        operation['security'] = [{'ServiceToken': []}]
    return operation


def _error_responses() -> dict[str, Any]:
    out = {}
    for status, (name, text) in ERROR_RESPONSES.items():
        schema = _ref('ConflictError' if status == 409 else 'Error')
        response: dict[str, Any] = {'description': text, 'content': _json(schema)}
        if status != 413:
            response['headers'] = _rate_headers()
        if status == 401:
            response['headers'] = {**response['headers'], 'WWW-Authenticate': {
                'description': 'the accepted authentication schemes', 'schema': {'type': 'string'}}}
        if status in (429, 503):
            response['headers'] = {**response['headers'], 'Retry-After': {
                'description': 'seconds until the refusing window reopens' if status == 429
                else 'seconds to wait before sending the request again', 'required': True,
                'schema': {'type': 'integer'}}}
        out[name] = response
    return out


def _header_components(rate_headers_required: bool) -> dict[str, Any]:
    texts = {
        'X-RateLimit-Limit': 'requests allowed per minute for this credential',
        'X-RateLimit-Remaining': 'requests left in the current window',
        'X-RateLimit-Reset': 'when the window resets, in epoch seconds',
    }
    return {name: {'description': text, 'required': rate_headers_required,
                   'schema': {'type': 'integer'}} for name, text in texts.items()}


# ----------------------------------------------------------------------------- the document

def registry_index(operation_name: Callable[[Family, str], str],
                   families: Iterable[Family] = FAMILIES) -> dict[str, tuple[Family, str]]:
    """View name -> (family, operation) of every registry route."""
    return {operation_name(fam, op): (fam, op) for fam in families for op in OPS}


def build(routes: Mapping[str, Mapping[str, Any]], index: Mapping[str, tuple[Family, str]],
          policy_of: Callable[[str], str], operations: Mapping[str, Mapping[str, Any]],
          extra_schemas: Mapping[str, Any], servers: list[dict[str, str]] | None = None,
          rate_headers_required: bool = True, families: Iterable[Family] = FAMILIES) -> dict[str, Any]:
    """The document. ``routes`` is ``app.routes``; ``index`` maps registry view names to their
    (family, op); ``policy_of`` is api/policy.of; ``operations``/``extra_schemas`` come from
    kernel/http/docmeta.py (a callable schema is derived from the generated ones: it gets the
    schemas built so far). ``servers`` depend on the request (kernel/http/docs.py): an empty list
    here is filled in per request."""
    families = tuple(families)
    schemas = _Schemas(families).components()
    for name, definition in extra_schemas.items():
        schemas.setdefault(name, definition(schemas) if callable(definition) else definition)
    listed = [fam.entity for fam in families] + [m['list_of'] for m in operations.values() if m.get('list_of')]
    for entity in listed:
        schemas.setdefault(page_name(entity), page_schema(entity))

    view_counts: dict[str, int] = {}
    for methods in routes.values():
        for entry in methods.values():
            view_counts[entry.view_name] = view_counts.get(entry.view_name, 0) + 1

    operation_ids = {entry.view_name for methods in routes.values() for entry in methods.values()
                     if view_counts[entry.view_name] == 1}
    # Operations on one record, by the record's item path: /api/tasks/{id} -> setTaskStatus, ...
    under_item: dict[str, list[tuple[str, str]]] = {}
    for path, methods in routes.items():
        for entry in methods.values():
            if entry.view_args and view_counts[entry.view_name] == 1:
                item = path[:path.index('}') + 1]
                under_item.setdefault(item, []).append((entry.view_name, entry.view_args[0]))
    paths: dict[str, Any] = {}
    tags: dict[str, str] = {}
    for path in sorted(routes):
        item: dict[str, Any] = {}
        for method in sorted(routes[path]):
            route = routes[path][method]
            name = route.view_name
            op_id = name if view_counts[name] == 1 else f'{name}{method.capitalize()}'
            if name in index:
                fam, op = index[name]
                desc = _registry_operation(fam, op)
                if op == 'create':
                    desc['links'] = {201: {
                        target: {'operationId': target, 'parameters': {param: '$response.body#/id'},
                                 'description': f'the created {fam.entity}'}
                        for target, param in under_item.get(f'{path}/{{{getattr(fam, "id_param", "id")}}}', [])}}
                tags.setdefault(fam.path, f'{fam.entity}: {SCOPE_TEXT[fam.scope]}')
            else:
                desc = _generic_operation(name, path, method, operations.get(name, {}))
            for tag in desc['tags']:
                tags.setdefault(tag, '')
            item[method.lower()] = _render_operation(desc, op_id, path, method, route, policy_of(path),
                                                     operation_ids)
        paths[path] = item

    return {
        'openapi': OPENAPI_VERSION,
        'info': {
            'title': 'Document Processing Platform API',
            'version': API_VERSION,
            'description': ('Multi-tenant HTTP/JSON API for document processing, AI assistants, '
                            'knowledge management and workflow orchestration. Generated from the '
                            'running service\'s route table and resource registry. API keys: '
                            '`POST /api/account/me/api-keys` with a key you hold. Running locally '
                            '(`make run`), the platform admin\'s key is in `.local/admin-api-key` of the '
                            'checkout (printed once at the first start, kept across restarts): paste it '
                            'into Authorize, ApiKeyAuth. Reference pages: docs/api/ in the repository.'),
        },
        'servers': list(servers or []),
        'security': [{'ApiKeyAuth': []}, {'BearerAuth': []}, {'BasicAuth': []}],
        'tags': [{'name': n, **({'description': d} if d else {})} for n, d in sorted(tags.items())],
        'paths': paths,
        'components': {
            'schemas': schemas,
            'responses': _error_responses(),
            'headers': _header_components(rate_headers_required),
            'securitySchemes': {
                'ApiKeyAuth': {'type': 'apiKey', 'in': 'header', 'name': 'x-api-key',
                               'description': 'an API key (POST /api/account/me/api-keys); locally, '
                                              '`make run` writes the admin\'s to .local/admin-api-key'},
                'BearerAuth': {'type': 'http', 'scheme': 'bearer', 'bearerFormat': 'JWT',
                               'description': 'a JWT from the identity provider'},
                'BasicAuth': {'type': 'http', 'scheme': 'basic'},
                'ServiceToken': {'type': 'apiKey', 'in': 'header', 'name': 'x-service-token',
                                 'description': 'server-to-server routes only'},
            },
        },
    }
