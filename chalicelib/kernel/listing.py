"""Generic list endpoint: filter, query, sort and paging over one tenant's index, never a Scan.

Which records a list covers: those of the caller's organizations (global families: all, or
the visibility-shaped lists of organizations and users). A SUSPENDED organization's records are
left out of its members' lists (the organization itself and its members' user records too);
a list pinned to it (``organizationId == ...``, or a project of it) is 403 "organization
suspended", like any other request naming it (kernel/access.py). Platform admins see all.
A top-level ``organizationId == '<id>'`` or (project-scoped families) ``projectId == '<id>'``
conjunct *pins* the list to that organization / that project's organization, which a platform
admin may do for any organization. A pin that is not a canonical id matches nothing (no stored id looks like it).

Plans, cheapest first:
  index walk   no filter (or only an organizationId pin) and no query text, one tenant,
               sorted by createdOn / updatedOn / the family's name field (or unsorted =
               createdOn): walk the KEYS_ONLY index up to the page, BatchGet only the page,
               totalElements from the sharded counter. Cost: O(page * size) keys + size items.
  value index  a top-level ``field == 'v'`` (or ``field =in= (...)``, up to MAX_IN_VALUES
               values) on a field the family declares ``indexed``: the value's partition of an
               equality index (one per tenant and value, in createdOn order; kernel/store/table.py
               walk_value; a ``name_keyed`` family's name, events' eventType: its run of by_name,
               walk_name). Alone (an organizationId pin aside), sorted by createdOn (or
               unsorted), with no query text: walk the keys up to the page, merge the partitions
               in sort order, BatchGet only the page; totalElements from the per-value counters.
               Cost: O(page * size) keys + size items per partition, whatever the tenant's size.
               With other conditions, a query or another sort (updatedOn included: no value
               index is kept in updatedOn order, docs/scale.md "Value indexes by createdOn
               only"): read the value's entries (keys, then the items) and finish in memory.
               Cost: the records holding the value.
  tenant read  anything else: the tenant's (or the pinned project's) keys from a KEYS_ONLY
               index (by_created, parent_keys), then its records (BatchGetItem), filter,
               text query and sort in memory, slice the page. Cost: the whole tenant (or
               project) is read; other sorts are always done this way. No index projects
               records (a write then moves keys only: docs/scale.md "Projections"), so no
               filter is decided inside DynamoDB.

Order (the same in memory and in the by_name/by_created/by_updated indexes): missing, null
and empty values first, strings case-insensitively (table.name_sort_key's normalisation),
numbers numerically, false before true, ties broken by id ascending; a single ``desc`` sort
reverses the whole order, ties included; with several sort fields ties stay ascending. A
``name_keyed`` family (events) sorted by its name alone breaks ties by the exact name (its
hash), then createdOn, then id: the order of its name key (``_sort_key``).

Text query (``query``): the ``~~`` match of the filter language over the family's searchable
fields (case-insensitive substring; with ``*`` a whole-value wildcard match), its name field
among them (a document family's ``path``, also matched by its file name); ``*`` or empty means
no query.
"""
from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

from chalicelib.core import budget
from chalicelib.core.errors import BadRequest
from chalicelib.core.limits import DEFAULT_PAGE_SIZE, MAX_PAGE, MAX_PAGE_SIZE
from chalicelib.core.principal import Principal
from chalicelib.kernel import access, embedding
from chalicelib.kernel.filtering import FilterPlan, RelatedRecords, plan_for
from chalicelib.kernel.hooks import hook_for
from chalicelib.kernel.query import And, Compare, Not, Or, evaluate
from chalicelib.kernel.registry import Family
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.tenancy import ORGANIZATIONS, PROJECTS, USERS

SORTABLE_TYPES = {'string', 'bool', 'int', 'number', 'datetime'}
INDEXED_SORTS = ('createdOn', 'updatedOn')
MAX_IN_VALUES = 5            # =in= on an indexed field is served from the index up to this many values
MAX_VALUE_PARTITIONS = 20    # tenants x values merged for one page
_INTEGER = re.compile(r'-?[0-9]{1,12}')


@dataclass
class ListRequest:
    """A list request as parsed values (``parse_request`` builds one from query parameters)."""
    page: int = 0
    size: int = DEFAULT_PAGE_SIZE
    sort: list[tuple[str, bool]] = field(default_factory=list)   # (field, descending)
    query: str | None = None
    filters: list[str] = field(default_factory=list)
    summary: bool = False
    # pages numbered from 1 (page 0 is the first page too; ``number`` counts from 1): requests
    # authenticated with the legacy x-access-token header, as the platform's SDK and CLI send them
    one_based: bool = False


def _int_param(params: dict[str, list[str]], name: str, default: int, low: int, high: int) -> int:
    values = params.get(name) or []
    if not values or values[-1] == '':
        return default
    if not _INTEGER.fullmatch(values[-1]):  # int() would also take ' 1', '+1', '1_0', '١'
        raise BadRequest(f"Query parameter '{name}' must be an integer")
    value = int(values[-1])
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


# The query parameters of every list endpoint (anything else: 400, kernel/http/request.py
# ``check_params``; docs/api/conventions.md "Unknown fields and parameters")
PARAMETERS = frozenset({'page', 'pageSize', 'filter', 'query', 'sort', 'view'})


def parse_request(family: Family, params: dict[str, list[str]], *, one_based: bool = False) -> ListRequest:
    """``one_based``: the client numbers pages from 1 (``page`` 0 and 1 are both the first page;
    the envelope's ``number`` counts from 1 too)."""
    query = (params.get('query') or [''])[-1].strip()
    if one_based and '%' in query:
        # the platform SDK's component and project lists percent-encode query once more than HTTP
        # does ('*' arrives as '%2A'): decode that layer for its (x-access-token) requests only
        query = unquote(query).strip()
    if not query.strip('*'):  # '*' (or '**', ...) means everything, like an empty query
        query = ''
    page = _int_param(params, 'page', 0, 0, MAX_PAGE)
    return ListRequest(
        page=max(page - 1, 0) if one_based else page,
        one_based=one_based,
        size=_int_param(params, 'pageSize', DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE),
        sort=parse_sort(family, params.get('sort') or []),
        query=query or None,
        filters=[f for f in (params.get('filter') or []) if f.strip()],
        summary=_view(params),
    )


def _view(params: dict[str, list[str]]) -> bool:
    view = (params.get('view') or [''])[-1]
    if view not in ('', 'summary', 'full'):
        raise BadRequest(f"Query parameter 'view' must be 'summary' (heavy fields left out) or 'full' "
                         f"(every field, the default), not '{view[:40]}'")
    return view == 'summary'


def list_resources(family: Family | str, req: ListRequest, principal: Principal) -> dict[str, Any]:
    """One page of the records of ``family`` the caller may see."""
    family = family_of(family) if isinstance(family, str) else family
    page = _list(family, principal, req)
    if req.summary and family.summary_omit:
        page['content'] = [{k: v for k, v in i.items() if k not in family.summary_omit} for i in page['content']]
    page['content'] = embedding.embed_page(family, page['content'], principal)
    if req.one_based:
        page['number'] = req.page + 1
    return page


def _list(family: Family, principal: Principal, req: ListRequest) -> dict[str, Any]:
    plan = plan_for(family, [*req.filters, *hook_for(family).list_filters(family, principal)])
    tenants, project = _tenants(family, principal, plan)
    if tenants is None:  # the filter pins a tenant the caller cannot see, or no id at all
        return envelope([], 0, req)
    if (isinstance(tenants, list) and len(tenants) == 1 and req.query is None and project is None
            and (plan.is_empty or plan.only_pins('organizationId'))):
        walked = _index_walk(family, tenants[0], req)
        if walked is not None:
            return walked
    plan.bind(RelatedRecords(family, tenants if isinstance(tenants, list) else principal.org_ids, principal))
    if isinstance(tenants, list) and family.indexed:
        served = _value_index(family, tenants, plan, req)
        if served is not None:
            return served
    items = _read_candidates(family, principal, tenants, project=project)
    items = _matching(family, items, plan, req.query)
    items.sort(key=_sort_key(family, req.sort))
    start = req.page * req.size
    return envelope(items[start:start + req.size], len(items), req)


def _matching(family: Family, items: list[dict[str, Any]], plan: FilterPlan,
              query: str | None) -> list[dict[str, Any]]:
    """The items the filter and the search keep, checking the request's time budget as it goes
    (core/budget.py: a 422 naming how far it got, docs/api/limits.md)."""
    kept = []
    for n, item in enumerate(items):
        if n % 256 == 0:
            budget.check(f'filtering {len(items):,} {family.path} in memory stopped after {n:,}; '
                         'narrow the filter (an indexed field, a project)')
        if plan.matches(item) and _text_match(family, item, query):
            kept.append(item)
    return kept


def envelope(content: list[dict[str, Any]], total: int, req: ListRequest) -> dict[str, Any]:
    pages = math.ceil(total / req.size) if total else 0
    return {'content': content, 'totalPages': pages, 'totalElements': total, 'number': req.page,
            'size': req.size, 'first': req.page == 0, 'last': req.page >= pages - 1,
            'numberOfElements': len(content)}


# ----------------------------------------------------------------------------- tenants

def _is_id(value: str) -> bool:
    """Ids are canonical (lower-case, hyphenated) UUID text; nothing else can be a stored id."""
    try:
        return str(uuid.UUID(value)) == value
    except (ValueError, AttributeError, TypeError):
        return False


def _tenants(family: Family, principal: Principal, plan: FilterPlan) -> tuple[list[str] | str | None, str | None]:
    """(tenant partitions to read, or 'members'/'member-orgs' for the two visibility-shaped
    lists, or None for "nothing can match"; the pinned project id, if any)."""
    if family.scope == 'global':
        if family.path == ORGANIZATIONS and not principal.platform_admin:
            return 'member-orgs', None
        if family.path == USERS and not principal.platform_admin:
            return 'members', None
        return ['ALL'], None
    pinned_org = plan.pinned('organizationId')
    pinned_project = plan.pinned('projectId') if family.scope == 'project' else None
    # A pin that is no canonical id equals no stored value; it also never reaches a key
    # condition (a partition key value is at most 2048 bytes: a long one would be a 500).
    if any(p is not None and not _is_id(p) for p in (pinned_org, pinned_project)):
        return None, None
    if pinned_project is None:
        referred = _referenced_org(family, plan)
        if referred is _NOTHING or (referred is not None and pinned_org not in (None, referred)):
            return None, None
        pinned_org = referred if referred is not None else pinned_org
    if pinned_project is not None:
        project = table.get(PROJECTS, pinned_project, consistent=False)
        if project is not None:
            if (pinned_org is not None and pinned_org != project.org) or not access.can_see_org(principal, project.org):
                return None, None
            access.require_active(principal, project.org)
            return [project.org], pinned_project
        # no such project: records still naming it (if any) are found by the tenant read
    if pinned_org is not None:
        if not access.can_see_org(principal, pinned_org):
            return None, None
        access.require_active(principal, pinned_org)
        return [pinned_org], None
    return access.usable_orgs(principal, principal.org_ids), None


_NOTHING = object()   # "no record can match" (``_referenced_org``)


def _referenced_org(family: Family, plan: FilterPlan):
    """The organization of the record a top-level ``field == '<id>'`` on an indexed reference
    field names (the record the filter asks for the dependents of: a document family's
    executions, content objects, data objects, exceptions, deltas); None when no such conjunct
    pins the list, or the record is not found (deleted: the records that go with it may not all
    have gone yet, and are found in the caller's organizations' value indexes, ``_value_index``);
    ``_NOTHING`` when the value is no id and the field is the family's ``deleted_with`` (a
    reference holds an id: nothing can hold it).

    A reference names a record of the writer's own organization (kernel/crud.py
    ``reference_ops``: another organization's record is refused), so the records holding the
    value all live in that record's organization: the list reads that one tenant's value index,
    flat in the tenant's size *and* in the number of organizations the caller belongs to
    (without the pin, a caller in more than MAX_VALUE_PARTITIONS organizations read every one
    of them whole). One GetItem of the record's keys and organization. Where the pin leads is
    decided as for an ``organizationId`` pin: an organization the caller cannot see matches
    nothing, a suspended one is 403. docs/api/conventions.md "Lists"."""
    found = _reference_equality(family, plan)
    if found is None:
        return None
    name, value = found
    target = family_of(family.fields[name].ref)
    if not _is_id(value):
        return _NOTHING if name == family.deleted_with else None
    return table.org_of(target.path, value)


def _reference_equality(family: Family, plan: FilterPlan) -> tuple[str, str] | None:
    """(field, id) of the top-level ``==`` on an indexed reference field to an organization's or
    a project's record, the family's ``deleted_with`` field first; None when there is none."""
    if plan.is_empty or not family.indexed:
        return None
    found = []
    for name in family.indexed:
        spec = family.fields.get(name)
        if spec is None or not spec.ref or family_of(spec.ref).scope == 'global':
            continue
        value = plan.pinned(name)
        if value is not None:
            found.append((name != family.deleted_with, name, value))
    return min(found)[1:] if found else None


def _index_walk(family: Family, tenant: str, req: ListRequest) -> dict[str, Any] | None:
    if len(req.sort) > 1:
        return None
    name, desc = req.sort[0] if req.sort else ('createdOn', False)
    if name in INDEXED_SORTS:
        order = name
    elif name == family.name_field and family.fields[name].type == 'string':
        order = 'name'
    else:
        return None
    want = (req.page + 1) * req.size
    total = table.count(family.path, tenant)
    if req.page * req.size >= total:
        return envelope([], total, req)
    page_ids = table.walk_index(family.path, tenant, order=order, descending=desc, limit=want,
                                sparse_updated=family.sparse_updated)
    page_ids = page_ids[req.page * req.size:want]
    found = table.batch_get((family.path, i) for i in page_ids)
    return envelope([found[i].data for i in page_ids if i in found], total, req)


def _indexed_equality(family: Family, plan: FilterPlan) -> tuple[int, str, tuple[str, ...], list] | None:
    """(slot, field, values, the other top-level conjuncts) of the top-level equality on an
    indexed field the list reads, or None: the one on the family's ``deleted_with`` field if
    there is one (it selects one record's dependents, a document family's few hundred at most,
    where another, a store's open exceptions, may hold the whole tenant), else the first."""
    if plan.is_empty or not family.indexed:
        return None
    leaves = list(plan.node.items) if isinstance(plan.node, And) else [plan.node]
    order = sorted(range(len(leaves)), key=lambda n: not (
        isinstance(leaves[n], Compare) and '.'.join(leaves[n].path) == family.deleted_with))
    for position in order:
        leaf = leaves[position]
        if not isinstance(leaf, Compare) or leaf.op not in ('==', '=in='):
            continue
        name = '.'.join(leaf.path)
        if name not in family.indexed or (leaf.target is not None and leaf.target.kind != 'field'):
            continue
        values = (leaf.value,) if leaf.op == '==' else tuple(leaf.value)
        if values and len(values) <= MAX_IN_VALUES and all(isinstance(v, str) for v in values):
            return family.slot_of(name), name, tuple(dict.fromkeys(values)), \
                leaves[:position] + leaves[position + 1:]
    return None


def _value_index(family: Family, tenants: list[str], plan: FilterPlan, req: ListRequest) -> dict[str, Any] | None:
    """The page from the equality index of an indexed field, or None when it cannot serve it."""
    found = _indexed_equality(family, plan)
    if found is None:
        return None
    slot, name, values, others = found
    values, others = _decide_on_the_value(name, values, others)
    if not values:
        return envelope([], 0, req)
    parts = [(tenant, value) for tenant in tenants for value in values if value]
    if len(parts) > MAX_VALUE_PARTITIONS and name != family.deleted_with:
        # (a deleted_with value names a record of one organization, ``_referenced_org``: more
        # partitions only when that record is gone, and its last dependents are few or none)
        return None
    order, desc = req.sort[0] if req.sort else ('createdOn', False)
    exact = (req.query is None and len(req.sort) <= 1 and order == 'createdOn'
             and all(_is_pin(leaf, 'organizationId') for leaf in others))
    if exact:
        total = table.count_values(family.path, list(parts), name)
        start, want = req.page * req.size, (req.page + 1) * req.size
        if start >= total:
            return envelope([], total, req)
        keys: list[tuple[str, str]] = []
        for tenant, value in parts:
            keys += _walk_value(family, tenant, slot, name, value, descending=desc, limit=want)
        keys.sort(reverse=desc)   # '{instant}#{id}': text order is (instant, id), as the list's order
        page_ids = [id_ for _, id_ in keys[start:want]]
        records = table.batch_get((family.path, i) for i in page_ids)
        held = {value for _, value in parts}   # a name key can only start like another's (table.walk_name)
        return envelope([records[i].data for i in page_ids if i in records and records[i].data.get(name) in held],
                        total, req)
    ids = [id_ for tenant, value in parts for _, id_ in _walk_value(
        family, tenant, slot, name, value, descending=False, limit=None)]
    items = table.records_of(family.path, ids)   # parallel waves, the budget checked between them
    items = _matching(family, items, plan, req.query)
    items.sort(key=_sort_key(family, req.sort))
    start = req.page * req.size
    return envelope(items[start:start + req.size], len(items), req)


def _walk_value(family: Family, tenant: str, slot: int, name: str, value: str, *, descending: bool,
                limit: int | None) -> list[tuple[str, str]]:
    """(``{createdOn}#{id}``, id) of the records holding ``value``, in createdOn order: from the
    field's x{slot} index, or for the name of a ``name_keyed`` family (events) from by_name.

    A name_keyed family's records written before it was (docs/operations/deploy.md "Index
    changes") still have their x{slot} key, and an old name key, until ``python -m
    chalicelib.ops.migrate_scale`` moves them: both are read, in the same round, and merged
    (the checker's ``sorted-keys`` reports any left; once none is, the x{slot} read can go)."""
    if not (family.name_keyed and name == family.name_field):
        return table.walk_value(family.path, tenant, slot=slot, field_name=name, value=value,
                                descending=descending, limit=limit)
    return table.walk_name(family.path, tenant, value=value, descending=descending, limit=limit,
                           legacy=(slot, name))


def _paths(node) -> set[tuple[str, ...]]:
    if isinstance(node, (And, Or)):
        return set().union(*(_paths(item) for item in node.items))
    if isinstance(node, Not):
        return _paths(node.item)
    return {node.path}


def _decide_on_the_value(name: str, values: tuple[str, ...], others: list) -> tuple[tuple[str, ...], list]:
    """Conjuncts that name only the indexed field are decided by its value alone (a hook's
    ``not(eventType =like= 'ui.*')`` beside ``eventType == 'tasks.updated'``): true for a value,
    they are implied; false, that value matches nothing. The rest stay conditions."""
    path = tuple(name.split('.'))
    decided = [leaf for leaf in others if _paths(leaf) == {path}]
    if not decided:
        return values, others

    def record(value: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
        return out
    kept = tuple(v for v in values if all(evaluate(leaf, record(v)) for leaf in decided))
    return kept, [leaf for leaf in others if leaf not in decided]


def _is_pin(leaf, name: str) -> bool:
    return isinstance(leaf, Compare) and leaf.op == '==' and leaf.path == (name,) and isinstance(leaf.value, str)


def _read_candidates(family: Family, principal: Principal, tenants, *,
                     project: str | None) -> list[dict[str, Any]]:
    """Every record the list may cover (the filter is decided on them afterwards)."""
    if tenants == 'member-orgs':
        orgs = table.batch_get((ORGANIZATIONS, o) for o in principal.org_ids).values()
        return [s.data for s in orgs if s.data.get('organizationStatus') != access.SUSPENDED]
    if tenants == 'members':
        user_ids = {principal.user_id}
        for org in access.usable_orgs(principal, principal.org_ids):
            user_ids |= table.member_user_ids(org)
        return [s.data for s in table.batch_get((USERS, u) for u in user_ids).values()]
    if project is not None:
        return [i for i in table.query_project(family.path, project) if i.get('organizationId') in tenants]
    return [item for tenant in tenants for item in table.query_tenant(family.path, tenant)]


# ----------------------------------------------------------------------------- matching and order

def _text_match(family: Family, item: dict[str, Any], query: str | None) -> bool:
    """``query`` as the filter language's ``~~`` on any searchable field; a name field holding a
    path (``inbox/invoice-7.pdf``) also matches by its last segment, the file name, so
    ``query=invoice*`` finds it as ``query=inbox/*`` does."""
    if query is None:
        return True
    if any(evaluate(Compare((name,), '~~', query), item) for name in family.searchable):
        return True
    named = item.get(family.name_field)
    return isinstance(named, str) and '/' in named and \
        evaluate(Compare(('fileName',), '~~', query), {'fileName': named.rsplit('/', 1)[1]})


def _value_key(v: Any, *, keyed: bool = False) -> tuple:
    """Missing/null/empty first; then false < true < numbers < text (a field holds one kind;
    the ranks only keep a stray value from raising); text as table.name_sort_key orders it
    (``keyed``: a name_keyed family's name, with the hash of its exact text)."""
    if v is None or v == '' or isinstance(v, (dict, list)):
        return (0,)
    if isinstance(v, bool):
        return (1, 0, int(v))
    if isinstance(v, (int, float, Decimal)):
        return (1, 1, v)
    return (1, 2, table.name_prefix(v) if keyed else table.name_sort_key(v, ''))


def _sort_key(family: Family, sort: list[tuple[str, bool]]):
    """Missing values first (ascending), strings case-insensitively, ties broken by id; the same
    order as the by_name/by_created/by_updated indexes (module docstring). A list of a
    ``name_keyed`` family (events) sorted by its name alone breaks ties as its name key does: by
    the exact name, then createdOn, then id (table.name_sort_key; docs/api/conventions.md)."""
    order = sort or [('createdOn', False)]
    tie_desc = order[0][1] if len(order) == 1 else False
    by_key = family.name_keyed and len(order) == 1 and order[0][0] == family.name_field

    def key(item: dict[str, Any]):
        parts = []
        for name, desc in order:
            value = _value_key(item.get(name), keyed=by_key)
            parts.append(_Reverse(value) if desc else value)
        if by_key:
            created = item.get('createdOn') or ''
            parts.append(_Reverse(created) if tie_desc else created)
        parts.append(_Reverse(item['id']) if tie_desc else item['id'])
        return tuple(parts)
    return key


class _Reverse:
    __slots__ = ('value',)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Reverse) -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Reverse) and other.value == self.value

