"""REST routes of every registered family: /api/{family}[/{id}[/sequence]].

Routes are generated from the registry, so every family gets exactly the same behaviour;
each view is one call into the services."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.domain.registry import FAMILIES, Family

from .http import ANY_CONTENT, JSON_CONTENT, created, no_content, params, raw_body

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
    path = family.path
    base, item = f'/api/{path}', f'/api/{path}/{{{family.id_param}}}'

    def list_view():
        from chalicelib.services.listing import list_resources
        return list_resources(path, params())

    def get_view(**ids):
        from chalicelib.services.resources import get
        return get(path, ids[family.id_param])

    def create_view():
        from chalicelib.services.resources import create
        return created(create(path, raw_body()))

    def update_view(**ids):
        from chalicelib.services.resources import update
        return update(path, ids[family.id_param], raw_body())

    def delete_view(**ids):
        from chalicelib.services.resources import delete
        delete(path, ids[family.id_param])
        return no_content()

    def sequence_view(**ids):
        from chalicelib.services.resources import sequence
        return sequence(path, ids[family.id_param])

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
