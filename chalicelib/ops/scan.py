"""The whole-table Scan the operator commands share (migrate_scale, migrate_labels,
backfill_indexes): an operator tool, never a request path, so Scan is fine here.

Page by page; after each page the caller processed, the Scan position is saved to the state
file, so a run started with the same file continues where the last one stopped (a finished scan
leaves ``null`` there: the next run starts over). docs/operations/index-backfill.md.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from chalicelib.kernel.store import table


def pages(state: Path | None, page_size: int, report: Callable[[], None]) -> Iterator[list[Any]]:
    """The table's items, a page at a time; once the caller is done with a page its position is
    saved to ``state``, then ``report`` says how far the run got (an interrupted report leaves
    the position saved)."""
    start: dict[str, Any] | None = json.loads(state.read_text()) if state and state.exists() else None
    while True:
        items, start = table.scan_page(start, limit=page_size)
        yield items
        if state is not None:
            state.write_text(json.dumps(start) if start else 'null')
        report()
        if start is None:
            return


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A command's parser with the scan's two options (``--state``, ``--page-size``)."""
    out = argparse.ArgumentParser(description=(doc or '').split('\n\n')[0])
    out.add_argument('--state', type=Path, help='file keeping the scan position (resume with the same file)')
    out.add_argument('--page-size', type=int, default=500)
    return out
