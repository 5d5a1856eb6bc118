"""OpenAPI metadata that cannot be derived from the route table or the resource registry.

The OpenAPI generator (chalicelib/kernel/http/openapi.py) walks ``app.routes``: registry routes
(/api/{family}...) are described from the registry alone; any other route is described from
the entry declared here under its Chalice view name, and a route with no entry still gets a
sane, generic one (summary from its view name, path parameters, JSON in and out, the usual
errors). Declare an entry next to the route it describes::

    from .docmeta import describe, ref

    @bp.route('/api/tasks/{id}/status', methods=['PUT'], name='setTaskStatus', ...)
    def set_status(id): ...
    describe('setTaskStatus', summary='Change the status of a task',
             request=ref('TaskStatusChange'), responses={200: ref('Task')})

Entry keys (all optional):
  summary, description, tags   as in OpenAPI
  request      schema of the JSON body; None: the operation takes no body
  responses    {status: schema or None (no body)}; 'content' may replace the schema with a full
               OpenAPI content map ({media type: {schema: ...}})
  errors       error statuses the operation answers (400, 401, 403, 404, 409, 415, 429, 503)
  parameters   extra OpenAPI parameter objects (query, header)
  list_of      a list endpoint of that schema: the list query parameters, 200 = a page of it

Each feature declares the texts of its own routes in its routes module (features/*/routes.py;
work's in features/work/route_docs.py); this module holds only the mechanism. Pure data:
imported at app start, so it imports nothing.
"""
from __future__ import annotations

from typing import Any

OPERATIONS: dict[str, dict[str, Any]] = {}   # view name -> entry
SCHEMAS: dict[str, Any] = {}   # extra named component schemas (a dict, or a callable: see derived)

_UNSET: Any = object()


def ref(name: str) -> dict[str, str]:
    return {'$ref': f'#/components/schemas/{name}'}


def describe(view_name: str, *, summary: str | None = None, description: str | None = None,
             tags: list[str] | None = None, request: Any = _UNSET,
             responses: dict[int, Any] | None = None, errors: list[int] | None = None,
             parameters: list[dict[str, Any]] | None = None, list_of: str | None = None) -> None:
    entry: dict[str, Any] = {}
    for key, value in (('summary', summary), ('description', description), ('tags', tags),
                       ('responses', responses), ('errors', errors), ('parameters', parameters),
                       ('list_of', list_of)):
        if value is not None:
            entry[key] = value
    if request is not _UNSET:
        entry['request'] = request
    OPERATIONS[view_name] = entry


def derived(name: str, base: str, *, required: list[str], properties: dict[str, Any]) -> dict[str, str]:
    """Declare ``name`` as a copy of the generated schema ``base`` with ``properties`` replaced and
    ``required`` added: one whole schema, never ``allOf: [base, {...}]``, because generators refuse
    to merge a property that is ``nullable`` in one part and not in the other (docs/api/clients.md)."""
    def build(schemas: dict[str, Any]) -> dict[str, Any]:
        out = dict(schemas[base])
        out['properties'] = {**out.get('properties', {}), **properties}
        out['required'] = sorted({*out.get('required', ()), *required})
        return out
    SCHEMAS[name] = build
    return ref(name)


def schema(name: str, definition: dict[str, Any]) -> dict[str, str]:
    """Declare a named component schema; returns a $ref to it."""
    SCHEMAS[name] = definition
    return ref(name)
