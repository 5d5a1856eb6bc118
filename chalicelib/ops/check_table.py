"""The table's invariants, checked by reading all of it (an operator tool: Scan is fine here).

    python -m chalicelib.ops.check_table [--json] [--only NAME[,...]] [--skip NAME[,...]] [--page-size N]
                                         [--settle-seconds S] [--stuck-minutes M] [--outbox-minutes M]
    make check-data

A Scan of a live table is not a snapshot: a write landing between two pages (the stream
handler recording an event, say) can show a record without its counter move, or the reverse.
So when the first read finds violations, the table is read again ``--settle-seconds`` later
(default 2; 0 reads once) and only violations found both times (same check, same item) are
reported; the others are counted as settled (writes in flight during the read).

Exit status 0 when every check passes, 1 on any violation (2 for bad arguments). The report
names each violation's check, the item it is about and what is wrong, grouped by check, and
ends with what was read (items per kind) and what was not checked (item kinds no check knows).

Built-in checks (each a function registered with ``@check``):

* ``unique-values``: every uniqueness item (``UQ#...``) names a live record that holds that
  value; every live record holding a value of a unique field has its uniqueness item, naming it.
* ``family-counters``: each tenant's record counter (the sum of its ``CNT#{family}#{tenant}``
  shards) equals the listed records of that family in that tenant.
* ``value-counters``: each per-value counter of an equality index
  (``CNT#{family}#{tenant}#{field}={value}``) equals the listed, counted (``ixv``) records
  holding that value.
* ``membership-counts``: each organization's ``MEMBERS#{orgId}`` equals its memberships.
* ``child-counts``: each parent's guard shards (``GUARD#...``) and legacy child counter (``KIDS#...``,
  kernel/parents.py) equal its
  live children.
* ``index-keys``: a listed record's index partition keys (``tpk``, a project's ``ppk``, the
  slots ``x{n}``) name its own tenant and project, in the shard its id picks or in shard 0
  (kernel/store/table.py INDEX_SHARDS).
* ``orphans``: a live record whose organization or project is gone (or soft-deleted).
* ``references``: a live record whose reference field (``>family`` in the registry) names a
  record that does not exist (audit records of read-only families excepted: the history of a
  deleted task group is kept on purpose) (deleted after the reference was written: deletes do not look for
  referrers; see docs/reliability.md).

Extending it: a module in ``chalicelib/ops/checks/`` (any name) is imported before a run; its
functions decorated with ``@check('name')`` take the ``Snapshot`` (every item of the table,
indexed for lookups: ``entity(family, id)``, ``live(family)``, ``items_with_prefix('OUTBOX#')``,
``row.raw`` for attributes this module does not know) and yield ``Violation``s. Checks that need
another store (S3 objects of document families, SQS messages of activities) call
``chalicelib.kernel.store`` functions from there; a threshold is declared with ``option(name, default,
help)`` (the flag ``--{name}``, read from ``OPTIONS``). Nothing in this file changes for a new check.
"""
from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from chalicelib import features  # noqa: F401 - installs the family hooks, as the app does
from chalicelib.kernel import parents, records
from chalicelib.kernel.registry import BY_PATH, FAMILIES
from chalicelib.kernel.store import table

# ----------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Violation:
    check: str
    key: str        # the item (or counter) the violation is about
    message: str


CheckFn = Callable[['Snapshot'], Iterable[Violation]]
CHECKS: dict[str, CheckFn] = {}
OPTIONS: dict[str, float] = {}        # values of the checks' thresholds (``option``), by name
_DEFAULTS: dict[str, tuple[float, str]] = {}


def option(name: str, default: float, help_: str) -> None:
    """Declare a threshold of an extension check: the command's flag ``--{name}`` (a number),
    its value read from ``OPTIONS[name]`` when the check runs."""
    _DEFAULTS[name] = (default, help_)
    OPTIONS.setdefault(name, default)


def check(name: str) -> Callable[[CheckFn], CheckFn]:
    """Register a check under ``name`` (unique); its Violations are reported under that name."""
    def register(fn: CheckFn) -> CheckFn:
        if name in CHECKS and CHECKS[name] is not fn:
            raise ValueError(f'check {name!r} registered twice')
        CHECKS[name] = fn
        return fn
    return register


def load_extensions() -> None:
    """Import every module of chalicelib/ops/checks/ (their ``@check`` functions register)."""
    from chalicelib.ops import checks  # noqa: PLC0415 - the package of extension modules
    for info in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f'{checks.__name__}.{info.name}')


# ----------------------------------------------------------------------------- the snapshot


@dataclass
class Row:
    """One item of the table: the attributes every check uses, and all of them in ``raw``."""
    pk: str
    sk: str
    kind: str | None
    data: dict[str, Any] | None
    seq: int | None
    org: str | None
    tpk: str | None
    cnt: int | None
    ref: str | None
    ixv: int | None
    slots: dict[int, str]
    raw: dict[str, Any] = field(repr=False)

    @property
    def is_entity(self) -> bool:
        return self.sk == table.ENTITY_SK and self.kind in BY_PATH and self.data is not None

    @property
    def listed(self) -> bool:
        """In its lists: not soft-deleted."""
        return self.tpk is not None and not (self.data or {}).get('deleted')


def _row(item: Any) -> Row:
    values = dict(item.attribute_values)
    data = values.get('data')
    if data is not None and hasattr(data, 'as_dict'):
        data = table.plain(data.as_dict())
    num = (lambda v: int(v) if v is not None else None)
    # a counter's partitions (table.counter_partition_pk) are read as the counter they make up
    return Row(pk=table.counter_base_pk(values.get('pk', '')), sk=values.get('sk', ''), kind=values.get('kind'),
               data=data,
               seq=num(values.get('seq')), org=values.get('org'), tpk=values.get('tpk'), cnt=num(values.get('cnt')),
               ref=values.get('ref'), ixv=num(values.get('ixv')),
               slots={n: values[f'x{n}'] for n in range(1, 6) if values.get(f'x{n}') is not None}, raw=values)


class Snapshot:
    """Every item of the table (read once), with the lookups checks share."""

    def __init__(self, rows: Iterable[Row]) -> None:
        self.rows: list[Row] = list(rows)
        self.entities: dict[tuple[str, str], Row] = {}
        self._by_family: dict[str, list[Row]] = defaultdict(list)
        for row in self.rows:
            if row.is_entity:
                rid = row.pk.split('#', 1)[1]
                self.entities[(row.kind, rid)] = row
                self._by_family[row.kind].append(row)
        self.claimed: set[int] = set()   # ids of rows some check understood (the rest: "not checked")

    def entity(self, family: str, id_: str) -> Row | None:
        return self.entities.get((family, id_))

    def live_entity(self, family: str, id_: str) -> Row | None:
        row = self.entity(family, id_)
        return row if row is not None and row.listed else None

    def live(self, family: str) -> list[Row]:
        return [r for r in self._by_family.get(family, []) if r.listed]

    def all_of(self, family: str) -> list[Row]:
        return list(self._by_family.get(family, []))

    def items_with_prefix(self, prefix: str, *, claim: bool = True) -> list[Row]:
        """Items whose key starts with ``prefix``; ``claim``: they count as checked in the report."""
        found = [r for r in self.rows if r.pk.startswith(prefix)]
        if claim:
            self.claim(found)
        return found

    def claim(self, rows: Iterable[Row]) -> None:
        self.claimed.update(id(r) for r in rows)

    def unclaimed_kinds(self) -> Counter:
        out: Counter = Counter()
        for row in self.rows:
            if id(row) not in self.claimed and not row.is_entity:
                out[_kind_of(row)] += 1
        return out


def _kind_of(row: Row) -> str:
    head = row.pk.split('#', 1)[0]
    return f'{head}#… sk={row.sk}' if head.upper() == head else f'{head}#… sk={row.sk} kind={row.kind}'


def read_table(page_size: int = 500) -> Snapshot:
    rows: list[Row] = []
    start = None
    while True:
        items, start = table.scan_page(start, limit=page_size)
        rows.extend(_row(item) for item in items)
        if start is None:
            return Snapshot(rows)


def _sums(rows: Iterable[Row]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for row in rows:
        out[row.pk] += row.cnt or 0
    return out


# ----------------------------------------------------------------------------- built-in checks


def _record_key(row: Row) -> str:
    return row.pk


@check('unique-values')
def unique_values(snap: Snapshot) -> Iterator[Violation]:
    known = {(f.path, name) for f in FAMILIES for name in f.unique}
    uniques = [row for row in snap.items_with_prefix('UQ#', claim=False)
               if tuple(row.pk.split('#', 4)[1:4:2]) in known]   # UQ#{family}#{scope}#{field}#{value}
    snap.claim(uniques)   # others (e.g. identity-provider subjects of users) are not this check's
    by_key = {row.pk: row for row in uniques}
    expected: dict[str, str] = {}
    for family in FAMILIES:
        if not family.unique:
            continue
        for row in snap.live(family.path):
            scope = records.unique_scope(family, row.data, row.org)
            for name in family.unique:
                if row.data.get(name) is None:
                    continue
                key = table.unique_key(family.path, scope=scope, field_name=name, value=row.data[name])
                expected[key] = row.data['id']
                held = by_key.get(key)
                if held is None:
                    yield Violation('unique-values', row.pk,
                                    f'{family.entity} holds {name}={row.data[name]!r} without its uniqueness item')
                elif held.ref != row.data['id']:
                    yield Violation('unique-values', row.pk,
                                    f'{family.entity} holds {name}={row.data[name]!r} but its uniqueness item '
                                    f'names {held.ref}')
    for key, row in by_key.items():
        if key in expected:
            continue
        family = key.split('#', 2)[1] if key.count('#') >= 2 else '?'
        owner = snap.entity(family, row.ref or '')
        why = 'no such record' if owner is None else ('the record is deleted' if not owner.listed
                                                      else 'the record holds another value')
        yield Violation('unique-values', key, f'uniqueness item without its entity ({family} {row.ref}: {why})')


def _counter_family(pk: str) -> str:
    return pk[len('CNT#'):].split('#', 1)[0]


def _known_counters(snap: Snapshot) -> list[Row]:
    counters = [r for r in snap.items_with_prefix('CNT#', claim=False) if _counter_family(r.pk) in BY_PATH]
    snap.claim(counters)
    return counters


@check('family-counters')
def family_counters(snap: Snapshot) -> Iterator[Violation]:
    counters = _known_counters(snap)
    actual = _sums(r for r in counters if r.pk.count('#') == 2)
    expected: dict[str, int] = defaultdict(int)
    for family in FAMILIES:
        for row in snap.live(family.path):
            expected['CNT#' + table.index_base_pk(row.tpk)] += 1   # tpk is spread (table.INDEX_SHARDS)
    for key in sorted(set(actual) | set(expected)):
        if actual.get(key, 0) != expected.get(key, 0):
            yield Violation('family-counters', key,
                            f'counter says {actual.get(key, 0)}, the tenant holds {expected.get(key, 0)} records')


@check('value-counters')
def value_counters(snap: Snapshot) -> Iterator[Violation]:
    counters = _known_counters(snap)
    # CNT#{family}#{tenant}#{field}={value}; not other sub-counters (a document store's #bytes: store-bytes)
    actual = _sums(r for r in counters if r.pk.count('#') >= 3 and '=' in r.pk.split('#', 3)[3])
    expected: dict[str, int] = defaultdict(int)
    for family in FAMILIES:
        if not family.indexed:
            continue
        owner_rows = snap.live(family.path)
        for row in owner_rows:
            if row.ixv is None:
                continue   # written before equality indexes: counted by backfill_indexes
            owner = records.tenant(family, row.org)
            for slot, (name, value) in records.indexed_values(family, row.data).items():
                key = table.value_pk(family.path, owner, name, value)
                keyed_by_name = family.name_keyed and name == family.name_field and slot not in row.slots
                if not keyed_by_name and table.index_base_pk(row.slots.get(slot) or '') != key:   # any shard
                    yield Violation('value-counters', row.pk,
                                    f'index slot x{slot} is {row.slots.get(slot)!r}, expected {key!r}')
                expected['CNT#' + key] += 1
    for key in sorted(set(actual) | set(expected)):
        if actual.get(key, 0) != expected.get(key, 0):
            yield Violation('value-counters', key,
                            f'counter says {actual.get(key, 0)}, {expected.get(key, 0)} records hold the value')


@check('membership-counts')
def membership_counts(snap: Snapshot) -> Iterator[Violation]:
    actual = _sums(snap.items_with_prefix('MEMBERS#'))
    expected: dict[str, int] = defaultdict(int)
    for row in snap.live('memberships'):
        expected[table.members_pk(row.org)] += 1
    for key in sorted(set(actual) | set(expected)):
        if actual.get(key, 0) != expected.get(key, 0):
            yield Violation('membership-counts', key,
                            f'count says {actual.get(key, 0)}, the organization has {expected.get(key, 0)} memberships')


@check('child-counts')
def child_counts(snap: Snapshot) -> Iterator[Violation]:
    """Per shard: a child counts in the guard shard of its id, or (written before guards, no
    ``gv``) in its legacy child counter's shard (kernel/parents.py)."""
    actual: dict[str, int] = defaultdict(int)
    for row in snap.items_with_prefix(parents.KIDS_PREFIX):
        actual[f'{row.pk} shard {row.sk}'] += row.cnt or 0
    for row in snap.items_with_prefix(parents.GUARD_PREFIX):
        if row.cnt:
            actual[row.pk] += row.cnt
        if row.raw.get('dead') is not None and row.ref and \
                time.time() - parents.closed_at(row.ref) > parents.CLOSING_SECONDS:
            family, parent_id = row.pk[len(parents.GUARD_PREFIX):].rsplit('#', 1)[0].split('#', 1)
            if snap.live_entity(family, parent_id) is not None:
                yield Violation('child-counts', row.pk, f'closed ahead by a delete of {family} {parent_id} that '
                                                        'stopped midway (the next create landing here reopens it)')
    expected: dict[str, int] = defaultdict(int)
    for family in FAMILIES:
        for row in snap.live(family.path):
            if row.raw.get('gv') is not None:
                for key in parents.guards(family, row.data, version=int(row.raw['gv'])):
                    expected[key] += 1
                continue
            for key in parents.counted_parents(family, row.data):
                expected[f'{key} shard {parents.shard_of(row.data["id"])}'] += 1
    for key in sorted(set(actual) | set(expected)):
        if actual.get(key, 0) != expected.get(key, 0):
            yield Violation('child-counts', key,
                            f'child counter says {actual.get(key, 0)}, the parent holds {expected.get(key, 0)} records')


@check('index-keys')
def index_keys(snap: Snapshot) -> Iterator[Violation]:
    """A listed record's index partition keys name its own tenant, project and values, in the
    shard its id picks or in shard 0 (written before keys were spread; migrate_scale moves it):
    kernel/store/table.py INDEX_SHARDS, docs/scale.md "Index partitions"."""
    for family in FAMILIES:
        for row in snap.live(family.path):
            id_ = row.data['id']
            wanted = {'tpk': table.tenant_pk(family.path, records.tenant(family, row.org))}
            if family.scope == 'project' and row.data.get('projectId'):
                wanted['ppk'] = table.project_pk(family.path, row.data['projectId'])
            for name, base in wanted.items():
                found = row.raw.get(name)
                spread = table.spread_pk(base, id_)
                if found not in (base, spread):
                    yield Violation('index-keys', row.pk, f'{name} is {found!r}, expected {spread!r} (or {base!r})')
            for slot, key in row.slots.items():
                base = table.index_base_pk(key)
                if key not in (base, table.spread_pk(base, id_)):
                    yield Violation('index-keys', row.pk, f'index slot x{slot} {key!r} is in a shard its id does '
                                                          f'not pick ({table.spread_pk(base, id_)!r})')


@check('sorted-keys')
def sorted_keys(snap: Snapshot) -> Iterator[Violation]:
    """A listed record of a ``sparse_updated`` family (events) has the createdOn and updatedOn
    keys of its version (kernel/store/table.py ``sorted_keys``): none for updatedOn while never
    changed, both once changed, its createdOn key marked; else it is listed twice, or not at
    all, in updatedOn order. A record of a ``name_keyed`` family (events) has the name key of
    its name and createdOn (kernel/records.py ``name_key``) and no x{slot} key for its name;
    else its eventType-filtered lists read the legacy index (kernel/store/table.py
    ``walk_name``). ``python -m chalicelib.ops.migrate_scale`` sets them all."""
    for family in FAMILIES:
        if not (family.sparse_updated or family.name_keyed):
            continue
        for row in snap.live(family.path):
            if not row.data.get('createdOn'):
                continue
            if family.sparse_updated:
                csk, usk = table.sorted_keys(row.data, sparse_updated=True, seq=row.seq or 0)
                found = (row.raw.get('csk'), row.raw.get('usk'))
                if found != (csk, usk):
                    yield Violation('sorted-keys', row.pk, f'csk/usk are {found!r}, expected {(csk, usk)!r} '
                                                           f'(version {row.seq})')
            if family.name_keyed:
                nsk = records.name_key(family, row.data)
                slot = family.slot_of(family.name_field)
                if row.raw.get('nsk') != nsk or slot in row.slots:
                    yield Violation('sorted-keys', row.pk, f'name key {row.raw.get("nsk")!r}, expected {nsk!r}'
                                                           + (f'; x{slot} still set' if slot in row.slots else ''))


@check('orphans')
def orphans(snap: Snapshot) -> Iterator[Violation]:
    for family in FAMILIES:
        if family.scope == 'global':
            continue
        for row in snap.live(family.path):
            org = row.data.get('organizationId')
            if family.path != 'organizations' and not family.log and \
                    (not org or snap.live_entity('organizations', org) is None):
                yield Violation('orphans', row.pk, f'{family.entity} of organization {org}, which is gone')
            if row.org != org:
                yield Violation('orphans', row.pk, f'{family.entity} is keyed to organization {row.org} '
                                                   f'but names {org}')
            if family.scope == 'project':
                project = row.data.get('projectId')
                if not project or snap.live_entity('projects', project) is None:
                    yield Violation('orphans', row.pk, f'{family.entity} of project {project}, which is gone')


@check('references')
def references(snap: Snapshot) -> Iterator[Violation]:
    for family in FAMILIES:
        refs = [(name, spec.ref) for name, spec in family.writable.items() if spec.ref]
        if not refs or family.read_only:
            continue   # read-only families are audit records (task-group history): they outlive what they name
        for row in snap.live(family.path):
            for name, target in refs:
                value = row.data.get(name)
                if isinstance(value, str) and value and snap.live_entity(target, value) is None:
                    yield Violation('references', row.pk,
                                    f'{family.entity}.{name} refers to a missing {BY_PATH[target].entity} {value}')


# ----------------------------------------------------------------------------- running


def run(snapshot: Snapshot | None = None, only: Iterable[str] | None = None) -> tuple[list[Violation], Snapshot]:
    load_extensions()
    snap = snapshot if snapshot is not None else read_table()
    names = list(CHECKS) if only is None else list(only)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f'unknown checks {unknown}; known: {sorted(CHECKS)}')
    out: list[Violation] = []
    for name in names:
        out.extend(CHECKS[name](snap))
    return out, snap


def run_settled(only: Iterable[str] | None = None, *, page_size: int = 500,
                settle_seconds: float = 2.0) -> tuple[list[Violation], Snapshot, list[Violation]]:
    """(violations found in two reads ``settle_seconds`` apart, the last read, violations of the
    first read that were gone in the second): see the module docstring."""
    violations, snap = run(read_table(page_size), only)
    if not violations or settle_seconds <= 0:
        return violations, snap, []
    time.sleep(settle_seconds)
    again, snap = run(read_table(page_size), only)
    first = {(v.check, v.key) for v in violations}
    second = {(v.check, v.key) for v in again}
    return [v for v in again if (v.check, v.key) in first], snap, \
        [v for v in violations if (v.check, v.key) not in second]


def report(violations: list[Violation], snap: Snapshot, names: Iterable[str],
           settled: Iterable[Violation] = ()) -> str:
    lines = []
    by_check: dict[str, list[Violation]] = defaultdict(list)
    for v in violations:
        by_check[v.check].append(v)
    for name in names:
        found = by_check.get(name, [])
        lines.append(f'{"FAIL" if found else "ok  "} {name}: {len(found)} violation(s)')
        lines += [f'       {v.key}: {v.message}' for v in found[:200]]
        if len(found) > 200:
            lines.append(f'       ... and {len(found) - 200} more')
    kinds = Counter(row.kind for row in snap.rows if row.is_entity)
    lines.append(f'read {len(snap.rows)} items; records: ' +
                 (', '.join(f'{k} {n}' for k, n in sorted(kinds.items())) or 'none'))
    settled = list(settled)
    if settled:
        lines.append(f'settled between two reads (writes in flight, not counted): {len(settled)}: ' +
                     '; '.join(f'{v.check} {v.key}' for v in settled[:5]))
    unclaimed = snap.unclaimed_kinds()
    if unclaimed:
        lines.append('not checked (no check knows these items): ' +
                     ', '.join(f'{k} x{n}' for k, n in sorted(unclaimed.items())))
    lines.append(f'{len(violations)} violation(s)')
    return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m chalicelib.ops.check_table', description=__doc__.split('\n')[0])
    parser.add_argument('--json', action='store_true', help='print the violations as JSON')
    parser.add_argument('--only', help='comma-separated check names')
    parser.add_argument('--skip', help='comma-separated check names not to run')
    parser.add_argument('--page-size', type=int, default=500)
    parser.add_argument('--settle-seconds', type=float, default=2.0,
                        help='read again this long after a read that found violations; report those found '
                             'both times (default 2; 0: one read)')
    load_extensions()
    for name, (default, help_) in sorted(_DEFAULTS.items()):
        parser.add_argument(f'--{name}', type=float, default=default, help=f'{help_} (default {default:g})')
    args = parser.parse_args(argv)
    for name in _DEFAULTS:
        OPTIONS[name] = getattr(args, name.replace('-', '_'))
    only = [n.strip() for n in args.only.split(',') if n.strip()] if args.only else None
    if args.skip:
        skip = {n.strip() for n in args.skip.split(',') if n.strip()}
        if skip - set(CHECKS):
            parser.error(f'unknown checks {sorted(skip - set(CHECKS))}; known: {sorted(CHECKS)}')
        only = [n for n in (only or list(CHECKS)) if n not in skip]
    try:
        violations, snap, settled = run_settled(only, page_size=args.page_size, settle_seconds=args.settle_seconds)
    except ValueError as err:
        parser.error(str(err))
    names = only if only is not None else list(CHECKS)
    if args.json:
        print(json.dumps({'violations': [v.__dict__ for v in violations], 'checks': names,
                          'items': len(snap.rows), 'settled': [v.__dict__ for v in settled]}, indent=1))
    else:
        print(report(violations, snap, names, settled))
    return 1 if violations else 0


if __name__ == '__main__':
    # Run as `python -m`, this file is the module __main__, while the extension modules register
    # their checks in chalicelib.ops.check_table (a second copy): run that copy's main.
    from chalicelib.ops import check_table  # noqa: PLC0415 - see above
    sys.exit(check_table.main())
