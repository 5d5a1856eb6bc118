"""Move existing data to the write path of issue 27 (docs/scale.md).

    python -m chalicelib.ops.migrate_scale [--state FILE] [--page-size N]

Reads the whole table (an operator tool: Scan is fine here), page by page:

* **guards**: a live record written before guard shards (no ``gv`` mark) that counts in a
  parent (kernel/parents.py) is moved, in one transaction, from its legacy child counter
  (``KIDS#{parentFamily}#{parentId}``, ADD -1 on its shard) to its guard shard (ADD 1, only
  while the shard is open), and marked ``gv``; on condition that it is still the version read,
  still listed and still unmarked. A record its parent's delete raced is skipped (the guard
  shard is closed: the checker reports it as an orphan, as before).
* **index keys**: a listed entity whose index partition keys (``tpk``, a project's ``ppk``,
  ``x1``..``x5``) were written before they were spread is moved to the shards its id picks
  (kernel/store/table.py INDEX_SHARDS), on condition that it is still the version read. Reads
  ask every shard, the unspread key among them, so lists are right before, during and after.
* **sorted keys of an append-mostly family** (``sparse_updated``: events): a record never
  changed loses its ``usk`` (its ``csk`` serves updatedOn order), a changed one's ``csk`` is
  marked (kernel/store/table.py ``sorted_keys``), on condition that it is still the version read.
  Until then such a record is listed twice in updatedOn order: run this before relying on it.
  A record of a ``name_keyed`` family (events) gets the name key of its name and createdOn and
  loses its name's ``x{slot}`` key (kernel/registry.py ``name_keyed``); until then its
  eventType-filtered lists find it through that slot (kernel/store/table.py ``walk_name``).
* **the rate gate's legacy ACL attributes**: the old per-second counters on each ACL item
  (``users#{id}`` / ``ACL``) are removed, a few names per UpdateItem
  (features/identity/gate.py ``legacy_cleanup_ops``; the gate now counts in expiring items).

Hence:

* idempotent: a marked record is skipped, a second run changes nothing;
* safe beside live traffic: a record updated meanwhile fails its condition and is retried on
  the next run (the count of ``skipped``); its write kept it in its legacy counter, consistently;
* resumable: the Scan position is saved to ``--state`` after every page; a run started with
  the same file continues from there (without one, it starts over, which is harmless).

The legacy counters left at zero stay (a few bytes per parent); the checker counts both.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from chalicelib.kernel import parents, records
from chalicelib.kernel.registry import BY_PATH
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.model import configure
from chalicelib.kernel.store.repository import Op, WriteConflict
from chalicelib.ops import scan

ACL_SK = 'ACL'


def guard_ops(item: Any) -> list[Op]:
    """The transaction moving one legacy-counted record to its guard shards ([] when none)."""
    if item.sk != table.ENTITY_SK or item.kind not in BY_PATH or item.gv is not None or item.tpk is None:
        return []
    stored = table.stored_from(item)
    if stored is None:
        return []
    family = BY_PATH[item.kind]
    counted = parents.counted_in(family, stored.data)
    if not counted:
        return []
    model = configure()
    ops = [Op('update', item=model(item.pk, item.sk), actions=[model.gv.set(parents.GUARD_VERSION)],
              condition=(model.seq == stored.seq) & model.gv.does_not_exist() & model.tpk.exists(),
              tag={'what': 'entity'})]
    for parent_family, parent_id in counted:
        ops.append(repo.move_counter_shard(parents.kids_pk(parent_family, parent_id), parents.shard_of(stored.id), -1))
        ops.append(repo.move_guard(parents.guard_of(parent_family, parent_id, stored.id), 1, what='guard-closed'))
    return ops


def spread_op(item: Any) -> Op | None:
    """The update moving a listed entity's index keys (``tpk``, a project's ``ppk``, ``x1``..``x5``)
    to the shards its id picks (kernel/store/table.py INDEX_SHARDS), only while it is still the
    version read and still listed; None when they are there already (or it is not listed)."""
    if item.sk != table.ENTITY_SK or item.kind not in BY_PATH or item.tpk is None or item.pk.count('#') != 1:
        return None
    id_ = item.pk.split('#', 1)[1]
    model = configure()
    wanted = {'tpk': table.spread_pk(table.index_base_pk(item.tpk), id_)}
    if item.ppk is not None and BY_PATH[item.kind].scope == 'project':
        wanted['ppk'] = table.spread_pk(table.index_base_pk(item.ppk), id_)
    for slot in range(1, 6):
        key = getattr(item, f'x{slot}', None)
        if key is not None:
            wanted[f'x{slot}'] = table.spread_pk(table.index_base_pk(key), id_)
    moves = {name: key for name, key in wanted.items() if getattr(item, name) != key}
    if not moves:
        return None
    return Op('update', item=model(item.pk, item.sk), actions=[getattr(model, n).set(k) for n, k in moves.items()],
              condition=(model.seq == int(item.seq or 0)) & model.tpk.exists(), tag={'what': 'entity'})


def sorted_keys_op(item: Any) -> Op | None:
    """The update giving a listed record of a ``sparse_updated`` family (events) the createdOn
    and updatedOn keys of its version (kernel/store/table.py ``sorted_keys``): a record never
    changed loses its ``usk``, a changed one's ``csk`` gets the CHANGED mark; and a record of a
    ``name_keyed`` family (events) the name key of its name and createdOn (kernel/records.py
    ``name_key``), its name's x{slot} key removed (its index entry goes with it); only while it
    is still the version read. None when they are right already."""
    family = BY_PATH.get(item.kind)
    if item.sk != table.ENTITY_SK or family is None or item.tpk is None or item.data is None \
            or not (family.sparse_updated or family.name_keyed):
        return None
    data = item.data.as_dict()
    if not data.get('createdOn') or not data.get('id'):
        return None
    seq = int(item.seq or 0)
    model = configure()
    actions = []
    if family.sparse_updated:
        csk, usk = table.sorted_keys(data, sparse_updated=True, seq=seq)
        if (item.csk, item.usk) != (csk, usk):
            actions += [model.csk.set(csk), model.usk.set(usk) if usk is not None else model.usk.remove()]
    if family.name_keyed:
        nsk = records.name_key(family, data)
        slot = f'x{family.slot_of(family.name_field)}'
        if item.nsk != nsk:
            actions.append(model.nsk.set(nsk))
        if getattr(item, slot) is not None:
            actions.append(getattr(model, slot).remove())
    if not actions:
        return None
    return Op('update', item=model(item.pk, item.sk), actions=actions,
              condition=(model.seq == seq) & model.tpk.exists(), tag={'what': 'entity'})


def _acl_hook():
    """Removes the old rate counters (``rs..``, ``rk_..``) from one ACL item: they are not model
    attributes, so the item is read raw and ``gate.legacy_cleanup_ops`` says what to remove."""
    from chalicelib.features.identity import gate  # noqa: PLC0415 - operator tool

    def cleanup(item: Any) -> None:
        ddb = gate.client()
        raw = ddb.get_item(TableName=gate.table_name(), Key={'pk': {'S': item.pk}, 'sk': {'S': item.sk}},
                           ConsistentRead=True).get('Item')
        for op in gate.legacy_cleanup_ops(raw or {}):
            ddb.update_item(TableName=gate.table_name(), **op)
    return cleanup


def migrate(*, state: Path | None = None, page_size: int = 500, out=print) -> dict[str, int]:
    totals = {'scanned': 0, 'guarded': 0, 'spread': 0, 'sorted': 0, 'skipped': 0, 'acl': 0}
    acl_hook = _acl_hook()
    def report() -> None:
        out(', '.join(f'{k} {v}' for k, v in totals.items()))

    for items in scan.pages(state, page_size, report):
        for item in items:
            totals['scanned'] += 1
            if item.sk == ACL_SK and item.pk.startswith('users#'):
                acl_hook(item)
                totals['acl'] += 1
                continue
            ops = guard_ops(item)
            if ops:
                try:
                    repo.commit(ops)
                    totals['guarded'] += 1
                except WriteConflict:
                    totals['skipped'] += 1   # changed meanwhile, or its parent is being deleted: next run
                    continue
            for name, op in (('spread', spread_op(item)), ('sorted', sorted_keys_op(item))):
                if op is None:
                    continue
                try:
                    repo.commit([op])
                    totals[name] += 1
                except WriteConflict:
                    totals['skipped'] += 1   # written meanwhile: that write set its keys
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = scan.parser(__doc__)
    args = parser.parse_args(argv)
    migrate(state=args.state, page_size=args.page_size)


if __name__ == '__main__':
    main()
