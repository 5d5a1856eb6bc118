"""The platform SDK's (``kodexa``) other paths for contract families, served as aliases: the
same views (so the same authentication, permission checks and answers) at the paths the SDK's
platform client builds. Hidden from /v3/api-docs (kernel/http/docs.py leaves ``ROUTES`` out): a
generated client gets each operation once, under its contract path. The SDK paths that map onto
no contract family, and why, are listed in docs/api/clients.md.

Each family declares its aliases (kernel/registry.py ``sdk_segment``, ``listed_under``,
``written_under_project``); today:

  /api/extensionPacks[...], /api/documentFamilies[...]
        every route of extension-packs and document-families under the camelCase name (with the
        organization-slug reads of extension-packs: /api/extensionPacks/{orgSlug}[/{slug}[/{version}]])
  GET  /api/projects/{id}/{assistants|documentStores|dataForms|dataStores}
        that project's records of the family, one page of them (page, pageSize, filter, query,
        sort as on the family's list) as a bare JSON array: the SDK's ProjectResourceEndpoint
        iterates the body (404 when the project is not visible)
  POST /api/projects/{id}/assistants                     create an assistant in that project
  PUT, DELETE /api/projects/{id}/assistants/{assistantId}
        update, delete an assistant of that project (404 when it belongs to another one)
  GET  /api/users/{id}/memberships      that user's memberships, as a bare array (like the above)
  PUT  /api/executions/{executionId}/cancel   cancelExecution (declared in features/tasks/routes.py)
"""
from __future__ import annotations

from typing import Any

from chalice import Blueprint

from chalicelib.core.errors import BadRequest, NotFound
from chalicelib.kernel.http.request import (
    ANY_CONTENT,
    JSON_CONTENT,
    body,
    caller,
    created,
    no_content,
    one_based_pages,
    params,
)
from chalicelib.kernel.http.routes import REGISTERED
from chalicelib.kernel.registry import FAMILIES, Family
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.tenancy import PROJECTS

bp = Blueprint(__name__)

# (alias resource path, method) -> the contract path it serves: left out of /v3/api-docs
ROUTES: dict[tuple[str, str], str] = {}


def alias(path: str, method: str, canonical: str) -> str:
    """Declare ``method path`` an alias of the contract route ``canonical``; returns ``path``."""
    ROUTES[(path, method)] = canonical
    return path


_SDK_SEGMENTS = {f.path: f.sdk_segment for f in FAMILIES if f.sdk_segment}   # family path -> camelCase segment
for _fam, _route, _method, _name, _view, _content in list(REGISTERED):
    if _fam in _SDK_SEGMENTS:
        _aliased = alias(_route.replace(f'/api/{_fam}', f'/api/{_SDK_SEGMENTS[_fam]}', 1), _method, _route)
        bp.route(_aliased, methods=[_method], name=f'{_name}SdkAlias', content_types=_content)(_view)


# ----------------------------------------------------------------------------- nested under a project

def _visible(parent_path: str, parent_id: str) -> dict[str, Any]:
    from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
    return crud.get(parent_path, parent_id, caller())   # 400 not a UUID, 404 unknown or not visible


def _visible_project(project_id: str) -> dict[str, Any]:
    return _visible(PROJECTS, project_id)


def _nested_list(parent_path: str, parent_id: str, family_path: str, field: str) -> list[dict[str, Any]]:
    from chalicelib.kernel import listing  # noqa: PLC0415 - lazy: cold start
    parent = _visible(parent_path, parent_id)
    family = family_of(family_path)
    query = params()
    query['filter'] = [*query.get('filter', []), f"{field} == '{parent['id']}'"]
    page = listing.list_resources(family, listing.parse_request(family, query, one_based=one_based_pages()),
                                  caller())
    return page['content']


def _register_nested_list(parent_path: str, segment: str, family_path: str, field: str) -> None:
    path = alias(f'/api/{parent_path}/{{id}}/{segment}', 'GET', f'/api/{family_path}')

    def view(id):  # noqa: A002 - the parent's id, named as the parent's routes name it
        return _nested_list(parent_path, id, family_path, field)
    parent = family_of(parent_path).entity
    view.__name__ = f'list{parent}{segment[0].upper()}{segment[1:]}SdkAlias'
    bp.route(path, methods=['GET'], name=view.__name__, content_types=ANY_CONTENT)(view)


for _family in FAMILIES:
    for _parent, (_segment, _field) in _family.listed_under.items():
        _register_nested_list(_parent, _segment, _family.path, _field)


def _in_project(project_id: str, payload: dict[str, Any], *, place: bool) -> dict[str, Any]:
    """``payload`` checked against the project of the path (a body naming another project is a
    400) and, with ``place``, put in it."""
    project = payload.get('project')
    named = {payload.get('projectId'), project.get('id') if isinstance(project, dict) else None} - {None}
    if named - {project_id}:
        raise BadRequest('The body names another project than the path')
    if not place:
        return payload
    placed = {k: v for k, v in payload.items() if k != 'project' or v is not None}   # SDK: "project": null
    return {**placed, 'projectId': project_id}


def _of_project(family: Family, project_id: str, record_id: str) -> dict[str, Any]:
    from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
    _visible_project(project_id)
    record = crud.get(family, record_id, caller())
    if record.get('projectId') != project_id:
        raise NotFound(f'{family.entity} not found')
    return record


def _register_project_writes(family: Family) -> None:
    """POST /api/projects/{id}/<segment>, PUT and DELETE /api/projects/{id}/<segment>/{<entity>Id}."""
    segment = family.listed_under[PROJECTS][0]
    entity = family.entity
    item_param = f'{entity[0].lower()}{entity[1:]}Id'
    base, item = f'/api/{PROJECTS}/{{id}}/{segment}', f'/api/{PROJECTS}/{{id}}/{segment}/{{{item_param}}}'
    parent = family_of(PROJECTS).entity

    def create_view(id):  # noqa: A002 - the project's id, named as the project's routes name it
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
        payload = body()
        _visible_project(id)
        return created(crud.create(family, _in_project(id, payload, place=True), caller()))

    def update_view(id, **ids):  # noqa: A002
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
        payload = body()
        _of_project(family, id, ids[item_param])
        return crud.update(family, ids[item_param], _in_project(id, payload, place=False), principal=caller())

    def delete_view(id, **ids):  # noqa: A002
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: cold start
        _of_project(family, id, ids[item_param])
        crud.delete(family, ids[item_param], caller())
        return no_content()

    canonical, canonical_item = f'/api/{family.path}', f'/api/{family.path}/{{{family.id_param}}}'
    for route, method, verb, view, content, target in (
            (base, 'POST', 'create', create_view, JSON_CONTENT, canonical),
            (item, 'PUT', 'update', update_view, JSON_CONTENT, canonical_item),
            (item, 'DELETE', 'delete', delete_view, ANY_CONTENT, canonical_item)):
        view.__name__ = f'{verb}_{parent.lower()}_{entity.lower()}'
        bp.route(alias(route, method, target), methods=[method], name=f'{verb}{parent}{entity}SdkAlias',
                 content_types=content)(view)


for _family in FAMILIES:
    if _family.written_under_project:
        _register_project_writes(_family)
