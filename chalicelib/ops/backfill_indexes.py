"""Key and count the records written before equality indexes existed.

    python -m chalicelib.ops.backfill_indexes [--state FILE] [--page-size N]

Reads the whole table (an operator tool: Scan is fine here). For every listed entity of a
family that declares ``indexed`` fields and is not yet marked counted (``ixv``), one
transaction sets its index keys, marks it and adds it to its values' counters, on condition
that it is still the version read and still unmarked. A marked entity lacking the key of a slot
declared since it was written (a field added to ``indexed``) gets that key and that value's
count the same way, on condition that it is still the version read and the slot still unkeyed
(``extended``). Hence:

* idempotent: a marked record is skipped, a second run changes nothing;
* safe beside live traffic: a record written meanwhile by the API is keyed and counted by that
  write (it only moves counters of values it knows were counted), so the condition fails and
  the record is skipped, never counted twice;
* resumable: the Scan position is saved to ``--state`` after every page, and a run started
  with the same file continues from there (without one, it starts over, which is harmless).
"""
from __future__ import annotations

from pathlib import Path

from chalicelib import features  # noqa: F401 - installs the family hooks, as the app does
from chalicelib.kernel import records
from chalicelib.kernel.registry import BY_PATH
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict
from chalicelib.ops import scan


def backfill(*, state: Path | None = None, page_size: int = 500, out=print) -> dict[str, int]:
    totals = {'scanned': 0, 'keyed': 0, 'extended': 0, 'skipped': 0}
    def report() -> None:
        out(f"scanned {totals['scanned']}, keyed {totals['keyed']}, extended {totals['extended']}, "
            f"skipped {totals['skipped']}")

    for items in scan.pages(state, page_size, report):
        for item in items:
            totals['scanned'] += 1
            family = BY_PATH.get(item.kind or '')
            if family is None or not family.indexed or item.sk != table.ENTITY_SK or item.tpk is None \
                    or item.data is None:
                continue
            data = item.data.as_dict()
            item_id = item.pk.split('#', 1)[1]
            owner = records.tenant(family, item.org)
            values = records.indexed_values(family, data)
            if item.ixv is not None:   # counted: only slots declared since it was written are new
                values = {slot: nv for slot, nv in values.items() if getattr(item, f'x{slot}', None) is None}
                if not values:
                    continue
            keys = {slot: table.spread_pk(table.value_pk(family.path, owner, name, value), item_id)
                    for slot, (name, value) in values.items()}
            ops = [repo.key_values(item, int(item.seq or 0), keys) if item.ixv is None
                   else repo.key_new_values(item, int(item.seq or 0), keys)]
            checked = records._checked_fields()   # a checked counter keeps its narrow shards
            ops += [repo.move_counter_at(table.value_counter_pk(family.path, owner, name, value), 1,
                                         checked=(family.path, name) in checked)
                    for name, value in values.values()]
            try:
                repo.commit(ops)
                totals['keyed' if item.ixv is None else 'extended'] += 1
            except WriteConflict:
                totals['skipped'] += 1   # written meanwhile (keyed by that write) or already done
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = scan.parser(__doc__)
    args = parser.parse_args(argv)
    backfill(state=args.state, page_size=args.page_size)


if __name__ == '__main__':
    main()
