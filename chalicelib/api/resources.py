"""REST routes of every registered family: /api/{family}[/{id}[/sequence]].

Routes are generated from the registry, so every family gets exactly the same behaviour;
each view is one call into the services."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.domain.registry import FAMILIES, Family

from .http import ANY_CONTENT, JSON_CONTENT, body, caller, created, no_content, one_based_pages, params

bp = Blueprint(__name__)


# Operation ids the contract fixes where the pattern below would say otherwise.
CONTRACT_NAMES = {('agent-runtimes', 'sequence'): 'getOrchestratorAgentRuntimeSequence'}


def operation_name(family: Family, op: str) -> str:
    """Stable, readable names (also the OpenAPI operation ids): listProjects, getProject, ..."""
    if (family.path, op) in CONTRACT_NAMES:
        return CONTRACT_NAMES[(family.path, op)]
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
        from chalicelib.services import listing  # noqa: PLC0415 - lazy: cold start
        req = listing.parse_request(family, params(), one_based=one_based_pages())
        return listing.list_resources(family, req, caller())

    def get_view(**ids):
        from chalicelib.services import resources  # noqa: PLC0415 - lazy: cold start
        return resources.get(family, ids[family.id_param], caller())

    def create_view():
        from chalicelib.services import resources  # noqa: PLC0415 - lazy: cold start
        return created(resources.create(family, body(), caller()))

    def update_view(**ids):
        from chalicelib.services import resources  # noqa: PLC0415 - lazy: cold start
        return resources.update(family, ids[family.id_param], body(), principal=caller())

    def delete_view(**ids):
        from chalicelib.services import resources  # noqa: PLC0415 - lazy: cold start
        resources.delete(family, ids[family.id_param], caller())
        return no_content()

    def sequence_view(**ids):
        from chalicelib.services import resources  # noqa: PLC0415 - lazy: cold start
        return resources.sequence(family, ids[family.id_param], caller())

    routes = [('list', base, 'GET', list_view, ANY_CONTENT),
              ('get', item, 'GET', get_view, ANY_CONTENT),
              ('sequence', f'{item}/sequence', 'GET', sequence_view, ANY_CONTENT)]
    if not family.read_only:
        routes += [('create', base, 'POST', create_view, JSON_CONTENT),
                   ('update', item, 'PUT', update_view, JSON_CONTENT),
                   ('delete', item, 'DELETE', delete_view, ANY_CONTENT)]
    for op, route, method, view, content in routes:
        bp.route(route, methods=[method], name=operation_name(family, op), content_types=content)(view)


for _family in FAMILIES:
    _register(_family)
