"""Move document families' label NAMES to label ids (issue 40; docs/api/documents.md "Labels").

    python -m chalicelib.ops.migrate_labels [--dry-run] [--create-missing] [--state FILE] [--page-size N]

Before issue 40 a SCRIPT step of an assistant's pipeline stored the label names it was given
(``labels: ['invoice']``) while ``POST /api/batch-update`` stored label ids, so one family could
hold both (``['invoice', '<id of invoice>']``). A family now holds ids only, as the SDK expects.
This command reads the whole table (an operator tool: Scan is fine here), page by page, and for
each document family holding a value that is not a UUID (a name):

* a name that exactly one label of the family's organization has becomes that label's id;
* a name no label has stays as it is and is reported (``unknown``), unless ``--create-missing``:
  then the label is created in the organization (as the platform's service) and its id used;
* a name several labels have stays and is reported (``ambiguous``): rename one, run again;
* values kept once, in their order (a name and its id collapse into the id).

The family is rewritten through the same write as any update (kernel/records.py: conditional on
its changeSequence, which moves by one, with its ``document-families.updated`` event); the lock
of a locked family does not apply (the labels are the same, only their spelling changes). A
family written meanwhile fails its condition and is counted ``skipped``: run again.

Hence idempotent (a family holding ids only is left alone; a second run changes nothing),
safe beside live traffic, and resumable: the Scan position is saved to ``--state`` after every
page; a run started with the same file continues from there. ``--dry-run`` writes nothing and
counts what it would do.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from chalicelib.core.clock import now_iso
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.kernel import records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict
from chalicelib.ops import scan

FAMILIES = 'document-families'


def _is_id(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


class _Labels:
    """The label names of each organization, read once per organization per run."""

    def __init__(self, *, create: bool, dry_run: bool) -> None:
        self.create, self.dry_run = create, dry_run
        self._by_org: dict[str, dict[str, list[str]]] = {}

    def names(self, org: str) -> dict[str, list[str]]:
        if org not in self._by_org:
            by_name: dict[str, list[str]] = {}
            for label in table.query_tenant('labels', org):
                by_name.setdefault(str(label.get('name')), []).append(label['id'])
            self._by_org[org] = by_name
        return self._by_org[org]

    def resolve(self, org: str, name: str, totals: dict[str, int]) -> str | None:
        named = self.names(org).get(name) or []
        if len(named) == 1:
            return named[0]
        if named:
            totals['ambiguous'] += 1
            return None
        if not self.create:
            totals['unknown'] += 1
            return None
        totals['created'] += 1
        if self.dry_run:
            return f'(new label {name})'
        from chalicelib.kernel import crud  # noqa: PLC0415 - lazy: only --create-missing writes labels
        label = crud.create('labels', {'name': name, 'organizationId': org}, SERVICE)
        self.names(org)[name] = [label['id']]
        return label['id']


def migrated_labels(stored, labels: _Labels, totals: dict[str, int]) -> list[str] | None:
    """The family's labels as ids, or None when nothing changes."""
    held = stored.data.get('labels')
    if not isinstance(held, list) or all(_is_id(x) for x in held):
        return None
    out = []
    for value in held:
        if not _is_id(value):
            value = labels.resolve(stored.org or '', str(value), totals) or value
        out.append(value)
    out = list(dict.fromkeys(out))
    return out if out != held else None


def migrate(*, state: Path | None = None, page_size: int = 500, create_missing: bool = False,
            dry_run: bool = False, out=print) -> dict[str, int]:
    totals = {'scanned': 0, 'families': 0, 'migrated': 0, 'skipped': 0, 'unknown': 0, 'ambiguous': 0,
              'created': 0}
    labels = _Labels(create=create_missing, dry_run=dry_run)
    fam = family_of(FAMILIES)
    def report() -> None:
        out(', '.join(f'{k} {v}' for k, v in totals.items()))

    for items in scan.pages(state, page_size, report):
        for item in items:
            totals['scanned'] += 1
            if item.sk != table.ENTITY_SK or item.kind != FAMILIES:
                continue
            stored = table.stored_from(item)
            if stored is None:
                continue
            totals['families'] += 1
            new_labels = migrated_labels(stored, labels, totals)
            if new_labels is None:
                continue
            if dry_run:
                totals['migrated'] += 1
                continue
            new = {**stored.data, 'labels': new_labels, 'updatedOn': now_iso(), 'changeSequence': stored.seq + 1}
            try:
                records.commit(records.update_ops(fam, new, stored, principal=SERVICE))
                totals['migrated'] += 1
            except WriteConflict:
                totals['skipped'] += 1   # written meanwhile: the next run sees the new version
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = scan.parser(__doc__)
    parser.add_argument('--create-missing', action='store_true',
                        help='create a label for a name no label of the organization has')
    parser.add_argument('--dry-run', action='store_true', help='write nothing; count what would be done')
    args = parser.parse_args(argv)
    migrate(state=args.state, page_size=args.page_size, create_missing=args.create_missing, dry_run=args.dry_run)


if __name__ == '__main__':
    main()
