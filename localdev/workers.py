"""`make run`'s extra queue workers (``LOCAL_WORKERS=N``, docs/operations/worker.md "Local
workers"): N - 1 processes besides the work process's pollers (pollers.py, work.py), each receiving ONE message
at a time from the activity queue and the OCR queue in turn and handing it to the same handlers
Lambda runs (``activity_start_worker``, front/handlers.py ``ocr_batch``), so a big document's page
ranges (features/parsing/fanout.py) are read in parallel as on AWS, where each range is an
invocation of its own. An OCR-queue message gets the OCR function's clock (300 s, as its
container-image Lambda has), an activity-queue message the zip functions' (pollers.py).

Processes, not threads: pdfium (the PDF reader) is not thread-safe, and the GIL would serialise
the readers anyway. Each worker talks to the same moto server (``AWS_ENDPOINT_URL``, inherited)
and dies with its parent (PR_SET_PDEATHSIG, as the moto server does: localdev/run.py).

    python -m localdev.workers QUEUE [OCR_QUEUE]
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

IDLE_SECONDS = 0.2   # an empty receive on both queues waits this long (no long poll: pollers.py)
OCR_TIMEOUT_SECONDS = 300   # the OCR function's timeout (infra/ocr_function.py TIMEOUT_SECONDS): its invocations' clock


def spawn(queue_name: str, ocr_queue_name: str | None) -> subprocess.Popen:
    from localdev.run import _die_with_parent
    args = [sys.executable, '-m', 'localdev.workers', queue_name] + ([ocr_queue_name] if ocr_queue_name else [])
    return subprocess.Popen(args, cwd=str(Path(__file__).resolve().parent.parent), env=dict(os.environ),
                            preexec_fn=_die_with_parent)  # noqa: PLW1509 - before any thread of the child starts


def main(argv: list[str]) -> None:
    import app as handlers
    from chalicelib.core.config import get_config
    from chalicelib.front import handlers as front
    from localdev.pollers import QueuePoller
    cfg = get_config()
    pollers = [QueuePoller(handlers.activity_start_worker, argv[0], region=cfg.region,
                           endpoint_url=cfg.endpoint_url, max_messages=1)]
    if len(argv) > 1:
        pollers.append(QueuePoller(front.ocr_batch, argv[1], region=cfg.region, endpoint_url=cfg.endpoint_url,
                                   max_messages=1, timeout=OCR_TIMEOUT_SECONDS))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.is_set():
        found = 0
        for poller in pollers:
            try:
                found += poller.poll_once()['received']
            except Exception:  # noqa: BLE001 - keep polling (moto restarting, chaos...), as pollers.py does
                stop.wait(1.0)
        if not found:
            stop.wait(IDLE_SECONDS)


if __name__ == '__main__':
    main(sys.argv[1:])
