"""Tenant fairness on the real local server (issue 50; docs/operations/worker.md "Fairness between
organizations"): organization B's 2-page invoice, from its upload request to its extracted data
readable through the store's data API (its project's assistant runs an EXTRACT step; A's
project has none), on an idle platform (``idle``) and behind organization A's burst of small
text documents (``busy``): ``--case upload`` (the test's) uploads B right after A's last upload,
``--case queued`` once A's created events are all published by the table stream
(``streamLagSeconds``). Each of B's runs says where its time went (seconds from the upload's
request): ``uploaded`` (the upload answered), ``stagesCreated`` (the parse stage's run written
by the worker), ``parsed`` (it ended), ``pipelineCreated`` (the assistant's run), ``extractionEnded``,
``seconds`` (the data readable); and how many of A's were still unparsed when B's was done.

    PYTHONPATH=. .venv/bin/python bench/bench_tenant_fairness.py [--burst 200] [--case upload|queued]

`make run` (python -m localdev.run) in a child process on loopback, as
tests/integration/test_tenant_fairness.py runs it (its helpers); `make load-fairness` runs that test
with the 200-document burst. Prints one JSON line per run. The figures depend on the machine's
load: compare idle and busy of the same run. To measure the code before a change, run this file
from a checkout of that code (a copy of this file and of the test module in it).
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
    extracting_place,
    invoice,
    place,
    queued,
    settle,
    time_to_extract,
    unparsed,
)
from tests.live import LiveStack  # noqa: E402

LIMIT_SECONDS = 300   # a busy B not extracted in this long is reported as not (seconds: null)


def run_once(count: int, case: str) -> dict:
    live = LiveStack(Path(tempfile.mkdtemp(prefix='fairness-')))
    try:
        a, b = place(live, None), extracting_place(live, f'bench-b-{int(time.time() * 1000) % 10**9}')
        pdf = invoice()
        time_to_extract(live, b, 'warm.pdf', pdf, 120)
        settle(live)   # the warm-up's events published: the platform idle
        idle = time_to_extract(live, b, 'idle.pdf', pdf, 120)
        started = time.monotonic()
        families = burst(live, a, count)
        uploaded = time.monotonic() - started
        lag = None
        if case == 'queued':   # A's created events all published first
            lag = queued(live, families, LIMIT_SECONDS)
        busy = time_to_extract(live, b, 'busy.pdf', pdf, LIMIT_SECONDS)
        left = unparsed(live, families)
        for run in (idle, busy):
            run.pop('family', None)
            if run['seconds'] is not None:
                run['seconds'] = round(run['seconds'], 2)
        return {'case': case, 'burst': count, 'idle': idle, 'busy': busy,
                'ratio': round(busy['seconds'] / idle['seconds'], 2) if busy['seconds'] and idle['seconds'] else None,
                'burstUploadSeconds': round(uploaded, 1),
                'streamLagSeconds': round(lag, 1) if lag is not None else None, 'burstLeftUnparsed': left}
    finally:
        live.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--burst', type=int, default=200)
    parser.add_argument('--runs', type=int, default=1)
    parser.add_argument('--case', choices=('upload', 'queued'), default='upload')
    args = parser.parse_args()
    for _ in range(args.runs):
        print(json.dumps(run_once(args.burst, args.case)), flush=True)


if __name__ == '__main__':
    main()
