"""REST routes of every registered family: /api/{family}[/{id}[/sequence]].

Routes are generated from the registry, so every family gets exactly the same behaviour;
each view is one call into the services."""
from __future__ import annotations

import uuid

from chalice import Blueprint, Response

from chalicelib.kernel.http.docmeta import describe, ref
from chalicelib.kernel.http.request import (
    ANY_CONTENT,
    JSON_CONTENT,
    body,
    caller,
    check_params,
    created,
    no_content,
    one_based_pages,
    page_response,
    params,
    unknown_names,
)
from chalicelib.kernel.registry import FAMILIES, Family

bp = Blueprint(__name__)


# Every route registered here: (family path, route, method, view name, view, content types). The
# platform SDK's aliases (kernel/http/aliases.py) register the same views at their own paths.
REGISTERED: list[tuple[str, str, str, str, object, list[str]]] = []



def operation_name(family: Family, op: str) -> str:
    """Stable, readable names (also the OpenAPI operation ids): listProjects, getProject, ..."""
    if op in family.operation_names:   # the contract's own name (kernel/registry.py)
        return family.operation_names[op]
    plural = ''.join(p.capitalize() for p in family.path.split('-'))
    return {
        'list': f'list{plural}', 'get': f'get{family.entity}', 'create': f'create{family.entity}',
        'update': f'update{family.entity}', 'delete': f'delete{family.entity}',
        'sequence': f'get{family.entity}Sequence',
    }[op]


def _register(family: Family) -> None:
    base, item = f'/api/{family.path}', f'/api/{family.path}/{{{family.id_param}}}'

    # lazy imports below: the services load pynamodb and pydantic; `import app` must not (cold start)
    def list_view():
        from chalicelib.kernel import listing  # noqa: PLC0415 - lazy: cold start
        ignored = check_params(listing.PARAMETERS, f'on GET {base}')
        req = listing.parse_request(family, params(), one_based=one_based_pages())
        return page_response(listing.list_resources(family, req, caller()), ignored)

    def checked_body(creating: bool) -> tuple[dict, dict[str, str]]:
        """The body, its fields checked against the family's (docs/api/conventions.md): what a GET
        answers is accepted, what a client may write is what a refusal lists."""
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
        sent = body()
        return sent, unknown_names('field', sent, crud.known_fields(family), f'in a {family.entity} body',
                                   listed=crud.sendable_fields(family, creating=creating))

    def get_view(**ids):
        if family.org_slug_paths and not _is_uuid(ids[family.id_param]):
            return org_list_view(ids[family.id_param])   # /api/prompts/{orgSlug}: that organization's list
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
        return crud.get(family, ids[family.id_param], caller())

    def org_list_view(org_slug):
        from chalicelib.kernel import listing, org_reads  # noqa: PLC0415 - lazy: cold start
        ignored = check_params(listing.PARAMETERS, f'on GET {base}/{{orgSlug}}')
        req = listing.parse_request(family, params(), one_based=one_based_pages())
        return page_response(org_reads.list_for_organization(family, org_slug, req, caller()), ignored)

    def by_slug_view(id, slug, version=None):  # noqa: A002 - the family's {id} segment holds the org slug
        from chalicelib.kernel import org_reads  # noqa: PLC0415 - lazy: cold start
        return org_reads.get_by_slug(family, id, slug, version, caller())

    def create_view():
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
        sent, ignored = checked_body(creating=True)
        return created(crud.create(family, sent, caller()), ignored)

    def update_view(**ids):
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
        sent, ignored = checked_body(creating=False)
        updated = crud.update(family, ids[family.id_param], sent, principal=caller())
        return Response(body=updated, status_code=200, headers=ignored) if ignored else updated

    def delete_view(**ids):
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
        crud.delete(family, ids[family.id_param], caller())
        return no_content()

    def sequence_view(**ids):
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
        return crud.sequence(family, ids[family.id_param], caller())

    routes = [('list', base, 'GET', list_view, ANY_CONTENT),
              ('get', item, 'GET', get_view, ANY_CONTENT),
              ('sequence', f'{item}/sequence', 'GET', sequence_view, ANY_CONTENT)]
    if not family.read_only:
        routes += [('create', base, 'POST', create_view, JSON_CONTENT),
                   ('update', item, 'PUT', update_view, JSON_CONTENT),
                   ('delete', item, 'DELETE', delete_view, ANY_CONTENT)]
    routes = [(route, method, operation_name(family, op), view, content) for op, route, method, view, content in routes]
    if family.org_slug_paths:   # kernel/org_reads.py
        name = f'get{family.entity}BySlug'
        routes.append((f'{item}/{{slug}}', 'GET', name, by_slug_view, ANY_CONTENT))
        _describe_by_slug(family, name, versioned=False)
        if family.versioned:
            name = f'get{family.entity}BySlugAndVersion'
            routes.append((f'{item}/{{slug}}/{{version}}', 'GET', name, by_slug_view, ANY_CONTENT))
            _describe_by_slug(family, name, versioned=True)
    for route, method, name, view, content in routes:
        bp.route(route, methods=[method], name=name, content_types=content)(view)
        REGISTERED.append((family.path, route, method, name, view, content))


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        return False
    return True


def _describe_by_slug(family: Family, name: str, *, versioned: bool) -> None:
    params = [{'name': 'id', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
               'description': 'the organization\'s slug (this level of the path is the id of the family\'s '
                              'other routes)'},
              {'name': 'slug', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
               'description': f'the {family.entity}\'s slug in that organization'}]
    if versioned:
        params.append({'name': 'version', 'in': 'path', 'required': True, 'schema': {'type': 'string'},
                       'description': 'the version it must have (404 otherwise)'})
    summary = f'Get a {family.entity} by organization slug and slug' + (' and version' if versioned else '')
    describe(name, summary=summary,
             description='Read-only: the same record as the id route, found by slugs (the platform SDK\'s '
                         'addressing). Unknown or invisible organization, slug or version: 404.',
             tags=[family.path], request=None, responses={200: ref(family.entity)},
             errors=[400, 401, 403, 404, 429, 503], parameters=params)


for _family in FAMILIES:
    _register(_family)
