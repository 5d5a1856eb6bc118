"""How many domain events one stream batch carries under `make run` (docs/scale.md "The decision
the last two goals need"): the events' exact counting costs a tally and its counter moves once
per chunk of a batch, so its share of a write's units is set by this number.

    PYTHONPATH=. .venv/bin/python bench/bench_stream_batches.py [--creates 200] [--clients 8]

Starts the real local stack (tests/live.py: `python -m localdev.run`, its moto server, its
stream poller) on loopback with INFO logs, creates tasks from ``--clients`` threads at once, waits
until the poller has recorded every event, and prints the sizes of the batches that carried
events (the publisher's ``outbox batch`` log line, features/events/outbox.py ``handle_stream``).
Loopback only: nothing leaves the machine.
"""
from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chalicelib.features.events.outbox import RECORD_CHUNK, TALLY_FROM  # noqa: E402
from tests.live import LiveStack  # noqa: E402

# features/events/outbox.py: one tally (put 1, close 2) and two counter shards (2 each) per chunk of
# up to RECORD_CHUNK events
COUNTING_WCU_PER_CHUNK = 1 + 2 + 2 + 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--creates', type=int, default=200)
    parser.add_argument('--clients', type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        stack = LiveStack(Path(state), LOG_LEVEL='INFO')
        try:
            slug = f'org-{uuid.uuid4().hex[:8]}'
            org = stack.created('/api/organizations', {'name': slug, 'slug': slug})
            project = stack.created('/api/projects', {'name': 'P', 'organizationId': org['id']})
            stack.published()
            start = len(stack.output)

            def create(i: int) -> None:
                answer = stack.post('/api/tasks', {'projectId': project['id'], 'title': f'Task {i}',
                                                   'description': 'x' * 200})
                assert answer.status == 201, answer

            began = time.monotonic()
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(create, range(args.creates)))
            took = time.monotonic() - began
            stack.published()
            sizes = [int(m.group(1)) for line in stack.output[start:]
                     if 'outbox batch' in line and (m := re.search(r'"published":\s*(\d+)', line))]
        finally:
            stack.stop()
    print(f'{args.creates} creates from {args.clients} clients in {took:.1f} s ({args.creates / took:.1f}/s)')
    if not sizes:
        print('no batch carried events: is LOG_LEVEL=INFO reaching the output?')
        return
    median = statistics.median(sizes)
    print(f'batches carrying events: {len(sizes)}; events per batch: median {median:g}, '
          f'min {min(sizes)}, max {max(sizes)}')
    per_write = sum(counting_share(n) * n for n in sizes) / sum(sizes)
    print(f"the events' counting share: {per_write:.2f} WCU per write over the run "
          f'({counting_share(median):.2f} at the median batch, {counting_share(RECORD_CHUNK):.2f} at full '
          f'chunks of {RECORD_CHUNK})')


def counting_share(n: float) -> float:
    """WCU per event of counting a batch's ``n`` events exactly, beyond each record's own put
    (features/events/outbox.py ``_record_chunk``): under TALLY_FROM events, one transaction puts
    them (2 each, not 1) and moves the two counters; else a tally per chunk of RECORD_CHUNK."""
    if n < TALLY_FROM:
        return (n * 1 + 2 * 2) / n
    return math.ceil(n / RECORD_CHUNK) * COUNTING_WCU_PER_CHUNK / n


if __name__ == '__main__':
    main()
