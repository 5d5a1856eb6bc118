"""Settle the tallies no redelivery came back for (features/events/tally.py; the checker's
``tallies``, docs/operations/invariant-checker.md).

    python -m chalicelib.ops.settle_tallies [--older-than-minutes M] [--page-size N]

Reads the whole table (an operator tool: Scan is fine here) and settles each tally opened more
than ``M`` minutes ago (default 30: longer than any run of the stream handler, so its writer has
ended): the events records that bear its token are counted and the tally closed, in one
transaction (features/events/outbox.py ``settle``). Idempotent: a settled tally is closed, and a
tally settled meanwhile by a redelivery is left as that one counted it.
"""
from __future__ import annotations

import argparse
import time
from typing import Any

from chalicelib.features.events import outbox, tally
from chalicelib.kernel.store import table


def settle_stale(*, older_than_minutes: float = 30, page_size: int = 500, out=print) -> int:
    """Settle every tally older than ``older_than_minutes``; how many were settled."""
    cutoff = time.time() - older_than_minutes * 60
    settled = 0
    start: dict[str, Any] | None = None
    while True:
        items, start = table.scan_page(start, limit=page_size)
        for item in items:
            raw = dict(item.attribute_values)
            if not item.pk.startswith(tally.PREFIX) or not tally.is_open(raw):
                continue
            opened = tally.opened_at(raw)
            if opened is None or opened < cutoff:
                outbox.settle(tally.token_of(item.pk))
                settled += 1
        if start is None:
            out(f'settled {settled} tallies')
            return settled


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--older-than-minutes', type=float, default=30)
    parser.add_argument('--page-size', type=int, default=500)
    args = parser.parse_args(argv)
    settle_stale(older_than_minutes=args.older_than_minutes, page_size=args.page_size)


if __name__ == '__main__':
    main()
