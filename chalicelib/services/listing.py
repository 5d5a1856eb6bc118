"""Generic list endpoint: filter, query, sort and paging over one tenant's index, never a Scan.

Plans, cheapest first:
  index walk   no filter and no query text, one tenant, sorted by createdOn / updatedOn /
               the family's name field (or unsorted = createdOn): walk the KEYS_ONLY index up
               to the page, BatchGet the page, totalElements from the sharded counter.
  tenant read  anything else: Query the tenant's (or the pinned project's) ALL-projection
               index with the part of the filter DynamoDB can express as FilterExpression,
               finish the filter, text query and sort in memory, slice the page.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from chalicelib.core.errors import BadRequest
from chalicelib.core.principal import Principal, current
from chalicelib.domain.registry import Family, family as family_of
from chalicelib.store import repository as repo
from chalicelib.store import table

from . import access
from .hooks import hook_for

MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 10
MAX_PAGE = 1_000_000
SORTABLE_TYPES = {'string', 'bool', 'int', 'number', 'datetime'}
INDEXED_SORTS = {'createdOn': 'by_created', 'updatedOn': 'by_updated'}


@dataclass
class ListRequest:
    page: int
    size: int
    sort: list[tuple[str, bool]]        # (field, descending)
    query: str | None
    filters: list[str]
    summary: bool = False


def _int_param(params: dict[str, list[str]], name: str, default: int, low: int, high: int) -> int:
    values = params.get(name) or []
    if not values or values[-1] == '':
        return default
    try:
        value = int(values[-1])
    except ValueError:
        raise BadRequest(f"Query parameter '{name}' must be an integer") from None
    if not low <= value <= high:
        raise BadRequest(f"Query parameter '{name}' must be between {low} and {high}")
    return value


def parse_sort(family: Family, specs: list[str]) -> list[tuple[str, bool]]:
    out: list[tuple[str, bool]] = []
    for spec in specs:
        for part in spec.split(';'):
            part = part.strip()
            if not part:
                continue
            name, _, direction = part.partition(':')
            if ',' in name and not direction:  # Spring style "name,desc"
                name, _, direction = name.partition(',')
            name, direction = name.strip(), (direction.strip().lower() or 'asc')
            spec_field = family.fields.get(name)
            if spec_field is None or spec_field.type not in SORTABLE_TYPES:
                raise BadRequest(f"Cannot sort {family.path} by '{name}'")
            if direction not in ('asc', 'desc'):
                raise BadRequest(f"Sort direction for '{name}' must be asc or desc")
            out.append((name, direction == 'desc'))
    return out


def parse_request(family: Family, params: dict[str, list[str]]) -> ListRequest:
    query = (params.get('query') or [''])[-1].strip()
    return ListRequest(
        page=_int_param(params, 'page', 0, 0, MAX_PAGE),
        size=_int_param(params, 'pageSize', DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE),
        sort=parse_sort(family, params.get('sort') or []),
        query=None if query in ('', '*') else query.lower(),
        filters=[f for f in (params.get('filter') or []) if f.strip()],
        summary=_view(params),
    )


def _view(params: dict[str, list[str]]) -> bool:
    view = (params.get('view') or [''])[-1]
    if view not in ('', 'summary', 'full'):
        raise BadRequest("Query parameter 'view' must be 'summary' (or omitted)")
    return view == 'summary'


def list_resources(path: str, params: dict[str, list[str]]) -> dict[str, Any]:
    family = family_of(path)
    req = parse_request(family, params)
    page = _list(family, current(), req)
    if req.summary and family.summary_omit:
        page['content'] = [{k: v for k, v in i.items() if k not in family.summary_omit} for i in page['content']]
    return page


def _list(family: Family, principal: Principal, req: ListRequest) -> dict[str, Any]:
    plan = _filter_plan(family, req.filters)
    tenants = _tenants(family, principal, plan)
    if tenants is None:  # the filter pins a tenant the caller cannot see
        return envelope([], 0, req)
    if isinstance(tenants, list) and len(tenants) == 1 and plan.is_empty and req.query is None:
        walked = _index_walk(family, tenants[0], req)
        if walked is not None:
            return walked
    from .filtering import RelatedRecords
    plan.bind(RelatedRecords(family, tenants if isinstance(tenants, list) else principal.org_ids))
    items, pushed_down = _read_candidates(family, principal, tenants, plan)
    items = [i for i in items if plan.matches(i, pushed_down) and _text_match(family, i, req.query)]
    items.sort(key=_sort_key(family, req.sort))
    start = req.page * req.size
    return envelope(items[start:start + req.size], len(items), req)


def envelope(content: list[dict[str, Any]], total: int, req: ListRequest) -> dict[str, Any]:
    pages = math.ceil(total / req.size) if total else 0
    return {'content': content, 'totalPages': pages, 'totalElements': total, 'number': req.page,
            'size': req.size, 'first': req.page == 0, 'last': req.page >= pages - 1,
            'numberOfElements': len(content)}


# ----------------------------------------------------------------------------- tenants

def _tenants(family: Family, principal: Principal, plan) -> list[str] | str | None:
    """Tenant partitions to read, or 'members'/'member-orgs' for the two visibility-shaped lists."""
    if family.scope == 'global':
        if family.path == 'organizations' and not principal.platform_admin:
            return 'member-orgs'
        if family.path == 'users' and not principal.platform_admin:
            return 'members'
        return ['ALL']
    pinned = plan.pinned('organizationId')
    if pinned is not None:
        return [pinned] if access.can_see_org(principal, pinned) else None
    return principal.org_ids


def _index_walk(family: Family, tenant: str, req: ListRequest) -> dict[str, Any] | None:
    if len(req.sort) > 1:
        return None
    name, desc = req.sort[0] if req.sort else ('createdOn', False)
    if name in INDEXED_SORTS:
        index = getattr(table.configure(), INDEXED_SORTS[name])
    elif name == family.name_field and family.fields[name].type == 'string':
        index = table.configure().by_name
    else:
        return None
    want = (req.page + 1) * req.size
    total = repo.count(family.path, tenant)
    if req.page * req.size >= total:
        return envelope([], total, req)
    keys = [k.pk.split('#', 1)[1] for k in index.query(
        table.tenant_pk(family.path, tenant), scan_index_forward=not desc, limit=want,
        page_size=min(want, 2000))]
    page_ids = keys[req.page * req.size:want]
    found = repo.batch_get((family.path, i) for i in page_ids)
    return envelope([found[i].data for i in page_ids if i in found], total, req)


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _query_index(index: str, key_attr: str, key: str, condition) -> list[dict[str, Any]]:
    from boto3.dynamodb.conditions import Key
    kwargs: dict[str, Any] = {'IndexName': index, 'KeyConditionExpression': Key(key_attr).eq(key)}
    if condition is not None:
        kwargs['FilterExpression'] = condition
    out: list[dict[str, Any]] = []
    tbl = table.boto3_table()
    while True:
        page = tbl.query(**kwargs)
        out.extend(_plain(i['data']) for i in page.get('Items', []) if 'data' in i)
        if 'LastEvaluatedKey' not in page:
            return out
        kwargs['ExclusiveStartKey'] = page['LastEvaluatedKey']


def _read_candidates(family: Family, principal: Principal, tenants, plan) -> tuple[list[dict[str, Any]], bool]:
    """(candidate items, whether the DynamoDB part of the filter was applied to them)."""
    if tenants == 'member-orgs':
        return [s.data for s in repo.batch_get(('organizations', o) for o in principal.org_ids).values()], False
    if tenants == 'members':
        user_ids = set()
        for org in principal.org_ids:
            user_ids.update(m['userId'] for m in _query_index(
                'tenant_all', 'tpk', table.tenant_pk('memberships', org), None))
        user_ids.add(principal.user_id)
        return [s.data for s in repo.batch_get(('users', u) for u in user_ids).values()], False
    project = plan.pinned('projectId') if family.scope == 'project' else None
    if project is not None:
        items = _query_index('by_parent', 'ppk', f'{family.path}#P#{project}', plan.condition)
        return [i for i in items if i.get('organizationId') in tenants or principal.platform_admin], True
    out: list[dict[str, Any]] = []
    for tenant in tenants:
        out.extend(_query_index('tenant_all', 'tpk', table.tenant_pk(family.path, tenant), plan.condition))
    return out, True


# ----------------------------------------------------------------------------- matching and order

def _text_match(family: Family, item: dict[str, Any], query: str | None) -> bool:
    if query is None:
        return True
    return any(isinstance(item.get(f), str) and query in item[f].lower() for f in family.searchable)


def _sort_key(family: Family, sort: list[tuple[str, bool]]):
    """Missing values first (ascending), strings case-insensitively, ties broken by id; the same
    order as the by_name/by_created/by_updated indexes."""
    def value_key(v: Any):
        if v is None:
            return (0, 0)
        if isinstance(v, str):
            return (1, v.lower())
        if isinstance(v, bool):
            return (1, int(v))
        return (1, v)

    order = sort or [('createdOn', False)]

    def key(item: dict[str, Any]):
        parts = []
        for name, desc in order:
            parts.append(_Reverse(value_key(item.get(name))) if desc else value_key(item.get(name)))
        tie_desc = order[0][1] if len(order) == 1 else False
        parts.append(_Reverse(item['id']) if tie_desc else item['id'])
        return tuple(parts)
    return key


class _Reverse:
    __slots__ = ('value',)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: '_Reverse') -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and other.value == self.value


def _filter_plan(family: Family, filters: list[str]):
    from .filtering import plan_for
    return plan_for(family, filters)
