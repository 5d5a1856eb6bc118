"""Tenant fairness on the real local server (issue 50; docs/operations/worker.md "Fairness between
organizations"): organization B's 2-page invoice, upload to parsed document, on an idle
platform (``idleSeconds``) and behind organization A's burst of small text documents
(``busySeconds``): ``--case queued`` (the test's) uploads B once A's triggers are all in the queue
(``streamLagSeconds``: how long the table stream took to publish A's created events after the
burst's last upload), ``--case upload`` right after A's last upload (B's trigger then also waits
for the stream's lag); how many of A's were still unparsed when B's was done.

    PYTHONPATH=. .venv/bin/python bench/bench_tenant_fairness.py [--burst 200] [--case queued|upload]

`make run` (python -m localdev.run) in a child process on loopback, as
tests/integration/test_tenant_fairness.py runs it (its helpers). Prints one JSON line per run.
The figures depend on the machine's load: compare idle and busy of the same run. To measure the
code before a change, run this file from a checkout of that code (a copy of this file and of
the test module in it).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.test_tenant_fairness import (  # noqa: E402
    burst,
    invoice,
    place,
    queued,
    seconds_to_parse,
    unparsed,
)
from tests.live import LiveStack  # noqa: E402

LIMIT_SECONDS = 300   # a busy B not parsed in this long is reported as not parsed


def run_once(count: int, case: str) -> dict:
    live = LiveStack(Path(tempfile.mkdtemp(prefix='fairness-')))
    try:
        a, b = place(live, None), place(live, f'bench-b-{int(time.time() * 1000) % 10**9}')
        pdf = invoice()
        seconds_to_parse(live, b, 'warm.pdf', pdf, 120)
        idle = seconds_to_parse(live, b, 'idle.pdf', pdf, 120)
        started = time.monotonic()
        families = burst(live, a, count)
        uploaded = time.monotonic() - started
        lag = None
        if case == 'queued':   # A's triggers all in the queue first (the test's case)
            lag = queued(live, families, LIMIT_SECONDS)
        busy = seconds_to_parse(live, b, 'busy.pdf', pdf, LIMIT_SECONDS)
        left = unparsed(live, families)
        return {'case': case, 'burst': count, 'idleSeconds': round(idle or -1, 2),
                'burstUploadSeconds': round(uploaded, 1),
                'streamLagSeconds': round(lag, 1) if lag is not None else None,
                'busySeconds': round(busy, 2) if busy is not None else f'> {LIMIT_SECONDS}',
                'ratio': round(busy / idle, 2) if busy and idle else None, 'burstLeftUnparsed': left}
    finally:
        live.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--burst', type=int, default=200)
    parser.add_argument('--runs', type=int, default=1)
    parser.add_argument('--case', choices=('queued', 'upload'), default='queued')
    args = parser.parse_args()
    for _ in range(args.runs):
        print(json.dumps(run_once(args.burst, args.case)), flush=True)


if __name__ == '__main__':
    main()
