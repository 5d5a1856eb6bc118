"""The resource registry: what a family's declaration says (``Family``), and the families installed.

Each feature declares its families, as data, in its own folder (chalicelib/features/*/declarations.py:
fields, references by id and by slug, indexes, embeds, who may write, its hook's name and the
other rules below); chalicelib/features/__init__.py installs them all (``install``) when the
package is first imported, then the hooks they name. The kernel names no family: generic code
(kernel/crud.py for the rules, kernel/http/routes.py for the routes, the OpenAPI generator, the
filter schema) reads the declarations; the few families its tenancy model is built on are named
once, in kernel/tenancy.py. A family with special rules names a hook
(chalicelib/features/hooks.py) instead of copying the CRUD code. Reading the registry before the
install raises ``FamiliesNotInstalled`` (fail closed).

Scopes:
  global   platform-wide (organizations, users, the product catalogue)
  org      owned by one organization (``organizationId``)
  project  owned by one project (``projectId``; its organization is the project's)
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from chalicelib.kernel import shapes as _shapes
from chalicelib.kernel.fields import Field, Retired, install_enums, parse_fields

COMMON_FIELDS = parse_fields('id uuid createdOn:datetime updatedOn:datetime changeSequence:int')
SOFT_DELETE_FIELDS = parse_fields('deleted:bool deleteUserId? deleteUserEmail? deletedDate:datetime?')
# Fields a client never writes: server-generated, ownership, soft-delete state.
SERVER_FIELDS = frozenset({'id', 'uuid', 'createdOn', 'updatedOn', 'changeSequence', 'createdByUserId',
                           'deleted', 'deleteUserId', 'deleteUserEmail', 'deletedDate',
                           'builtIn',        # roles/permissions derived from kernel/access.py
                           'userEmail',      # who did it (history entries, events): stamped by the server
                           'clientIpHash'})  # events: HMAC of the client address (features/events/ui_events.py)
OWNERSHIP_FIELDS = frozenset({'organizationId', 'projectId'})
SEARCH_FIELDS = ('name', 'description', 'searchText')
WRITE_PERMISSIONS = ('resource:write', 'organization:manage', 'platform:admin')   # kernel/access.py
INDEX_SLOTS = 5   # equality-indexed fields per family (each slot is a pair of GSIs: kernel/store/model.py)


@dataclass(frozen=True, eq=False)
class Family:
    path: str
    entity: str
    scope: str
    spec: str
    unique: tuple[str, ...] = ()
    soft_delete: bool = False
    name_field: str = 'name'
    hook: str | None = None
    collections: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (family, fk)
    id_param: str = 'id'             # path parameter name (the contract calls one executionId)
    read_only: bool = False          # written by the server only (history): list and get routes
    summary_omit: tuple[str, ...] = ()  # heavy fields left out of lists with view=summary
    # A reference to a user is checked for membership of the record's organization; this field
    # instead names the user joining it (memberships: its hook decides who may be named).
    joins: str | None = None
    # fields whose equality filters are served from an index, each with its NAMED slot (1..INDEX_SLOTS:
    # the x{slot} attribute and GSI pair its key is stored under; a dotted name is a path into an
    # object field): `field == 'v'` costs the same in any tenant size. Slots are named, never taken
    # from the order of the declaration: reordering it must not move stored keys to other indexes.
    # A name joining fields with '+' (``'dataStoreId+dataDefinitionId'``) indexes the pair: its
    # value is the fields' values joined by '#' (a record lacking one has no key); no filter names
    # it, the feature reads it (table.walk_value, table.value_counts): "which definitions does a
    # store's data hold" is then one counter per (store, definition), whatever the store's size.
    indexed: Mapping[str, int] = field(default_factory=dict)
    # declared fields only the server writes (shown in responses, ignored in request bodies)
    server: tuple[str, ...] = ()
    # An append-mostly family (events): a record never changed has no updatedOn index key, its
    # createdOn key serves updatedOn order (the two are equal); a changed one carries both, its
    # createdOn key marked (kernel/store/table.py CHANGED). One or more index entries fewer per
    # record written (docs/scale.md "Events records").
    sparse_updated: bool = False
    # The name field's equality filters are served from the by_name index, not an x{slot} one
    # (events: ``eventType``): its name key leads with the name, a hash of its exact text and
    # the createdOn key (kernel/store/table.py ``name_sort_key``), so the records holding one
    # name are one run of by_name, in createdOn order. The field stays in ``indexed`` (its
    # values are counted, its slot names where records written before kept their key); the
    # record's x{slot} key is not written. One index entry fewer per record (docs/scale.md
    # "Events records": an events record costs 3 WCU, not 4).
    name_keyed: bool = False
    # Slug references: a field whose value names a record of another family by its unique
    # ``slug``, not its id (tasks' ``statusSlug`` -> a task status of the task's organization).
    # Field -> target family. Checked on every write like an id reference (kernel/references.py
    # ``slug_checks``, called by kernel/crud.py ``reference_ops``): a slug that names no record of
    # the target family in the record's scope is a 400 (contract rule 7).
    slug_refs: Mapping[str, str] = field(default_factory=dict)
    # --- rules the kernel's modules read (before issue 40 each module kept its own list of paths)
    # The permission a write needs (kernel/access.py): 'resource:write' for most families,
    # 'organization:manage' for the Manage area (changing them administers the organization),
    # 'platform:admin' for the platform-wide catalogue (everyone signed in reads it).
    write_needs: str = 'resource:write'
    # Built-in records exist per organization (roles and permissions: kernel/access.py
    # ``builtin_records``); a built-in one is never changed or deleted.
    builtin: bool = False
    # A log family (events): its records count in no parent and never hold their organization
    # (kernel/parents.py); its writes publish no domain event of their own.
    log: bool = False
    # Its writes publish a domain event (kernel/records.py ``domain_event``); False for the
    # events themselves (an event of an event would loop) and audit history.
    publishes: bool = True
    # Its delete refuses (409) while live records name it in a reference field (kernel/referrers.py).
    refuse_delete_if_referred: bool = False
    # An indexed reference field whose record takes this one with it when deleted (a document
    # family's content objects, runs and extracted data: ``documentFamilyId``); the deleted family's
    # hook deletes them (``dependents_of``), the records reached through the field's value index.
    deleted_with: str | None = None
    # Its records are written by background work that read the parent just before (a worker's
    # run of a document family), with no condition on the parent in their write: the parent's
    # delete reads them once more after it committed (features/documents/service.py
    # ``sweep_dependents``). One more walk of the value index per delete, so only where needed.
    swept_after_delete: bool = False
    # Read-only organization-slug paths /api/{family}/{orgSlug}/{slug} (kernel/org_reads.py), and
    # /{version} as well when ``versioned``.
    org_slug_paths: bool = False
    versioned: bool = False
    # References embedded in responses (kernel/embeds.py: names of ``references``), and the fields
    # left out when a record of this family is embedded in another's response.
    embeds: tuple[str, ...] = ()
    heavy: tuple[str, ...] = ()
    # Operation ids the contract fixes where the generic pattern would say otherwise (op -> name).
    operation_names: Mapping[str, str] = field(default_factory=dict)
    # What an operation adds to the generic rules, for the OpenAPI document (op -> text).
    notes: Mapping[str, str] = field(default_factory=dict)
    # The platform SDK's other paths (kernel/http/aliases.py, hidden from /v3/api-docs): every
    # route again under a camelCase segment (/api/documentFamilies/...); GET /api/{parent}/{id}/{segment}
    # listing its records of the parent (parent family -> (segment, the field naming the parent));
    # and, with ``written_under_project``, POST/PUT/DELETE under /api/projects/{id}/{segment}.
    sdk_segment: str | None = None
    listed_under: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    written_under_project: bool = False

    def slot_of(self, name: str) -> int:
        """The equality-index slot of an indexed field (its x{slot} attribute and GSI pair)."""
        return self.indexed[name]

    @cached_property
    def own_fields(self) -> tuple[Field, ...]:
        return parse_fields(self.spec)

    @cached_property
    def ownership_fields(self) -> tuple[Field, ...]:
        if self.scope == 'org':
            return parse_fields('organizationId>organizations')
        if self.scope == 'project':
            return parse_fields('organizationId>organizations projectId!>projects')
        return ()

    @cached_property
    def fields(self) -> dict[str, Field]:
        """Every field a response may carry, by name."""
        out = {f.name: f for f in COMMON_FIELDS}
        out.update({f.name: f for f in self.ownership_fields})
        out['createdByUserId'] = Field('createdByUserId', nullable=True)
        out.update({f.name: f for f in self.own_fields})
        if self.soft_delete:
            out.update({f.name: f for f in SOFT_DELETE_FIELDS})
        return out

    @cached_property
    def writable(self) -> dict[str, Field]:
        """Fields a client may set in a create or update body."""
        return {f.name: f for f in self.own_fields if f.name not in SERVER_FIELDS and f.name not in self.server}

    @cached_property
    def references(self) -> dict[str, tuple[str, str]]:
        """Reference name -> (id field, family): ``project.name`` reads projectId's record."""
        out = {}
        for f in list(self.ownership_fields) + list(self.own_fields):
            if f.ref and f.name.endswith('Id'):
                out[f.name[:-2]] = (f.name, f.ref)
        return out

    @cached_property
    def searchable(self) -> tuple[str, ...]:
        """The fields ``query=`` matches: the usual text fields, and the family's name field
        (a document family's ``path``)."""
        names = (*SEARCH_FIELDS, 'title', self.name_field)
        return tuple(dict.fromkeys(n for n in names if n in self.fields))


def declare(path: str, entity: str, scope: str, spec: str, **kw) -> Family:
    """A family's declaration (each feature declares its own: chalicelib/features/*/declarations.py).
    A family with a ``slug`` field has it unique in its scope unless it says otherwise."""
    if 'unique' not in kw and ' slug' in f' {spec}':
        kw['unique'] = ('slug',)
    return Family(path, entity, scope, spec, **kw)


# Spec fragments many declarations share.
TEXT_FIELDS = 'name description searchText'
NAMED_FIELDS = f'{TEXT_FIELDS} slug'


class FamiliesNotInstalled(RuntimeError):
    """The registry was read before the features installed their declarations (fail closed: an
    empty registry would answer every family "unknown" instead of failing)."""

    def __init__(self) -> None:
        super().__init__('No family is declared yet: import chalicelib.features first '
                         '(it installs every feature\'s declarations: docs/architecture.md "Hooks")')


class _Families(list):
    """Every declared family, in installation order; reading it before ``install`` raises."""

    def _installed(self) -> None:
        if not list.__len__(self):
            raise FamiliesNotInstalled()

    def __iter__(self):
        self._installed()
        return list.__iter__(self)

    def __len__(self) -> int:
        self._installed()
        return list.__len__(self)

    def __getitem__(self, index):
        self._installed()
        return list.__getitem__(self, index)


class _ByPath(dict):
    """Family path -> family; reading it before ``install`` raises."""

    def _installed(self) -> None:
        if not dict.__len__(self):
            raise FamiliesNotInstalled()

    def __getitem__(self, path: str) -> Family:
        self._installed()
        return dict.__getitem__(self, path)

    def __contains__(self, path: object) -> bool:
        self._installed()
        return dict.__contains__(self, path)

    def get(self, path, default=None):
        self._installed()
        return dict.get(self, path, default)

    def __iter__(self):
        self._installed()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._installed()
        return dict.__len__(self)

    def values(self):
        self._installed()
        return dict.values(self)

    def items(self):
        self._installed()
        return dict.items(self)


FAMILIES: list[Family] = _Families()

BY_PATH: dict[str, Family] = _ByPath()

def check_declaration(fam: Family) -> None:
    """Refuse a declaration the storage cannot serve (run on every family at install, not at a
    request): equality-index slots named, distinct and within INDEX_SLOTS; indexable fields;
    references, slug references and embeds naming declared families; a known write permission."""
    if fam.write_needs not in WRITE_PERMISSIONS:
        raise ValueError(f'{fam.path}: write_needs must be one of {WRITE_PERMISSIONS}')
    for f in fam.own_fields:
        if f.ref and f.ref not in BY_PATH:
            raise ValueError(f'{fam.path}: {f.name} refers to a family nobody declares: {f.ref!r}')
    for name in fam.embeds:
        if name not in fam.references:
            raise ValueError(f'{fam.path}: {name!r} is not a reference of the family')
    if not isinstance(fam.indexed, Mapping):
        raise ValueError(f"{fam.path}: indexed must name each field's slot ({{field: slot}})")
    slots = list(fam.indexed.values())
    if len(set(slots)) != len(slots) or not all(isinstance(n, int) and 1 <= n <= INDEX_SLOTS for n in slots):
        raise ValueError(f'{fam.path}: index slots must be distinct numbers 1..{INDEX_SLOTS}: {dict(fam.indexed)}')
    if fam.name_keyed and (fam.name_field not in fam.indexed or fam.fields[fam.name_field].type != 'string'):
        raise ValueError(f'{fam.path}: name_keyed needs its name field {fam.name_field!r} indexed, a string')
    for name, target in fam.slug_refs.items():
        spec = fam.writable.get(name)
        held = BY_PATH.get(target)
        if spec is None or spec.type != 'string' or spec.ref or held is None or 'slug' not in held.unique:
            raise ValueError(f'{fam.path}: slug reference {name!r} must be a writable string naming '
                             f'a family whose slug is unique ({target!r})')
    if fam.deleted_with is not None:
        spec = fam.fields.get(fam.deleted_with)
        if spec is None or not spec.ref or fam.deleted_with not in fam.indexed:
            raise ValueError(f'{fam.path}: deleted_with must name an indexed reference field ({fam.deleted_with!r})')
    for name in fam.indexed:
        if '+' in name:   # a pair of fields (the ``indexed`` comment above)
            if any(fam.fields.get(part) is None or fam.fields[part].type != 'string' for part in name.split('+')):
                raise ValueError(f'{fam.path}: cannot index {name!r}: each joined field must be a string field')
            continue
        head = fam.fields.get(name.split('.')[0])
        if head is None or (head.type not in ('string', 'object') or ('.' in name) != (head.type == 'object')):
            raise ValueError(f'{fam.path}: cannot index {name!r}')


def install(families: list[Family], *, shapes: Iterable[_shapes.Shape] = (),
            enums: Iterable[Mapping[str, tuple[str, ...]]] = (),
            enum_aliases: Iterable[Mapping[str, Mapping[str, str]]] = (),
            enum_retired: Iterable[Mapping[str, Mapping[str, Retired]]] = ()) -> None:
    """Install every feature's declarations (chalicelib/features/__init__.py, once, when the
    package is first imported): the named shapes and enumerations their fields use first
    (kernel/shapes.py, kernel/fields.py: a field naming one nobody declares is refused), then the
    families, each checked, the set checked whole (paths distinct, every reference, slug reference
    and embed naming a declared family). A second install of the same declarations changes
    nothing; different ones raise."""
    merged: dict[str, tuple[str, ...]] = {}
    for declared in enums:
        twice = set(merged) & set(declared)
        if twice:
            raise ValueError(f'an enumeration is declared twice: {sorted(twice)}')
        merged.update(declared)
    aliases: dict[str, dict[str, str]] = {}
    for declared in enum_aliases:
        aliases.update({name: dict(mapping) for name, mapping in declared.items()})
    retired: dict[str, dict[str, Retired]] = {}
    for declared in enum_retired:
        retired.update({name: dict(mapping) for name, mapping in declared.items()})
    _shapes.install(shapes)
    install_enums(merged, aliases, retired)
    if list.__len__(FAMILIES):
        if [f.path for f in list.__iter__(FAMILIES)] != [f.path for f in families]:
            raise ValueError('the families are installed already, with other declarations')
        return
    paths = [f.path for f in families]
    if len(set(paths)) != len(paths):
        raise ValueError(f'a family is declared twice: {sorted(p for p in paths if paths.count(p) > 1)}')
    dict.update(BY_PATH, {f.path: f for f in families})
    list.extend(FAMILIES, families)
    try:
        for fam in families:
            check_declaration(fam)
    except BaseException:
        dict.clear(BY_PATH)
        list.clear(FAMILIES)
        raise


def family(path: str) -> Family:
    return BY_PATH[path]


def dependents_of(path: str) -> list[Family]:
    """The families whose records go with a deleted record of ``path`` (their ``deleted_with``
    field names it), in installation order."""
    return [f for f in FAMILIES if f.deleted_with is not None and f.fields[f.deleted_with].ref == path]
