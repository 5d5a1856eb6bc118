"""`make run`'s work process: the event sources of the functions (localdev/pollers.py ``Pollers``:
the activity queue's and the OCR queue's fair pollers, the outbox drain of the table stream, the
scheduler) in a process of their own, beside the API's (localdev/run.py), and every invocation
of a handler in a process of a pool (``Invocations``), as AWS runs them: the API's Lambda, the
worker's invocations, the OCR function's and the stream publisher's are separate processes on
separate CPUs; none waits for another's Python interpreter lock. Before (issue 50, bench/README.md
"Tenant fairness (issue 50)"), all of them were threads of the API's process: an upload's
request, the two fair workers' batches and the stream handler's publishing took turns on one
interpreter lock, so a quiet organization's upload and steps ran 2-3x slower while another
organization's burst was worked and published, whatever the fair pollers handed out first.

The pool: one process per poller thread that may invoke at once (``FAIR_WORKERS`` per queue, the
outbox drain, the scheduler), so an invocation never waits for a free process; forked from this
process before any of its threads starts and after the handlers' modules are imported
(``WARM``): each process is warm at once and costs no second ``import app``. The poller threads
stay here (receiving ahead, holding, deleting: localdev/fair.py); a batch's event goes to a
process and its answer (``batchItemFailures``) comes back. A process that dies (a reader's crash)
breaks the pool: that invocation fails (its messages come back after the visibility timeout, as a
crashed Lambda's do) and a new pool is forked. Taken from the standard library
(concurrent.futures' process pool), not written here.

The process talks to the same moto server (``AWS_ENDPOINT_URL``, inherited), dies with its parent
(PR_SET_PDEATHSIG, as the moto server and the worker processes do), stops its loops on SIGTERM
(``Pollers.stop``, the extra worker processes stopped; a batch still running in the pool is not
waited for: its messages come back after their visibility timeout, as the daemon threads' did), and
says it is ready on the descriptor named by ``WORK_READY_FD`` (one line: what it runs), so that
`make run` prints "platform API on" only once its work is polling.

    python -m localdev.work   # with the environment of `make run`, which starts it (``spawn``)
"""
from __future__ import annotations

import importlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

READY_FD = 'WORK_READY_FD'
START_SECONDS = 120   # ``import app`` and the queues' look-ups, on a loaded machine
# the modules the handlers import lazily on their first messages (a text PDF's parse and extraction,
# the outbox; listed from sys.modules after tests/integration/test_tenant_fairness.py), imported
# before the pool is forked: no process of it is cold (~1.5 s of imports and clients each otherwise)
WARM = ('chalicelib.front.handlers', 'chalicelib.features.work.worker', 'chalicelib.features.work.pipelines',
        'chalicelib.features.work.executions', 'chalicelib.features.work.schedules',
        'chalicelib.features.parsing.stage', 'chalicelib.features.parsing.fanout', 'chalicelib.features.parsing.kddb',
        'chalicelib.features.parsing.serving', 'chalicelib.features.parsing.readers.pdf',
        'chalicelib.features.parsing.readers.text', 'chalicelib.features.parsing.readers.ocr',
        'chalicelib.features.extraction.service', 'chalicelib.features.extraction.engine',
        'chalicelib.features.extraction.hooks', 'chalicelib.features.extraction.layout_memory',
        'chalicelib.features.events.outbox', 'chalicelib.kernel.listing', 'pypdfium2', 'jsonata', 're2',
        'msgpack', 'sqlite3', 'statistics', 'fractions', 'boto3.s3.transfer', 'pynamodb.transactions',
        'aws_lambda_powertools.utilities.batch', 'aws_lambda_powertools.utilities.data_classes',
        'aws_lambda_powertools.logging', 'aws_lambda_powertools.metrics', 'aws_lambda_powertools.tracing')


def warm() -> None:
    """Import ``WARM`` and make the AWS clients the handlers cache (no request: no connection
    opened, so the forked processes share no socket; each opens its own)."""
    for module in WARM:
        try:
            importlib.import_module(module)
        except ImportError:   # an optional reader's library missing: its first message imports it
            pass
    from chalicelib.features.documents import blobs
    from chalicelib.features.work import store
    from chalicelib.kernel.store import model
    model.client()
    model.boto3_table()
    blobs.client()
    store.sqs()
    store.events_client()

_HANDLERS: dict[str, Callable] = {}   # set before the pool is forked: its processes inherit it


def _child() -> None:
    """In each process of the pool: dies with the work process, however it dies; does not hold
    the ready line's descriptor (its reader waits for that line or for the end of the pipe)."""
    from localdev.run import _die_with_parent
    _die_with_parent()
    if os.environ.get(READY_FD):
        try:
            os.close(int(os.environ[READY_FD]))
        except OSError:
            pass


def _invoke(name: str, event: dict[str, Any], seconds: float) -> Any:
    """One invocation, in a process of the pool: the handler with a context whose clock has the
    seconds the poller's invocation had left."""
    from localdev.pollers import _Context
    try:
        return _HANDLERS[name](event, _Context(seconds))
    except Exception as exc:   # noqa: BLE001 - sent back as a plain error: the handler's own class may
        raise RuntimeError(f'{type(exc).__name__}: {exc}') from None   # not unpickle, which breaks the pool


class Invocations:
    """The pool of processes the pollers' handlers run in (module docstring)."""

    def __init__(self, handlers: dict[str, Callable], processes: int) -> None:
        _HANDLERS.update(handlers)
        self.processes = processes
        self.lock = threading.Lock()
        self.pool = self._fork()

    def _fork(self):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        sys.stdout.flush()   # nothing buffered here is written again by a forked copy
        sys.stderr.flush()
        pool = ProcessPoolExecutor(max_workers=self.processes, mp_context=multiprocessing.get_context('fork'),
                                   initializer=_child)
        pool.submit(int).result()   # a fork pool starts all its processes at the first call: now
        return pool

    def handler(self, name: str) -> Callable[[dict[str, Any], Any], Any]:
        """A stand-in for the handler ``name`` (same call): its invocation runs in the pool."""
        def invoke(event: dict[str, Any], context: Any) -> Any:
            from concurrent.futures.process import BrokenProcessPool
            pool = self.pool
            try:
                return pool.submit(_invoke, name, event, context.get_remaining_time_in_millis() / 1000).result()
            except BrokenProcessPool:
                with self.lock:
                    if self.pool is pool:
                        logging.getLogger('platform-api.localdev').warning(
                            'a process of the work pool died: its invocation failed, a new pool is forked')
                        self.pool = self._fork()
                raise
        return invoke

    def stop(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class _Handlers:
    """What ``Pollers`` reads of the app module, each handler through the pool."""

    def __init__(self, invocations: Invocations) -> None:
        self.activity_start_worker = invocations.handler('activity_start_worker')
        self.outbox_publisher = invocations.handler('outbox_publisher')
        self.scheduled_jobs = invocations.handler('scheduled_jobs')
        self.ocr_batch = invocations.handler('ocr_batch')


def spawn(workers: int, ocr_queue_name: str | None) -> tuple[subprocess.Popen, str]:
    """Start the work process and wait until it polls: (the process, its line for the console)."""
    from localdev.run import _die_with_parent
    read, write = os.pipe()
    env = {**os.environ, READY_FD: str(write), 'LOCAL_WORKERS': str(workers),
           'LOCAL_OCR_QUEUE': ocr_queue_name or ''}
    proc = subprocess.Popen([sys.executable, '-m', 'localdev.work'], cwd=str(Path(__file__).resolve().parent.parent),
                            env=env, pass_fds=(write,),
                            preexec_fn=_die_with_parent)  # noqa: PLW1509 - before any thread of the child starts
    os.close(write)
    line = b''
    with os.fdopen(read, 'rb') as ready:
        timer = threading.Timer(START_SECONDS, proc.kill)   # a child that hangs: its EOF ends the read
        timer.start()
        try:
            line = ready.readline()
        finally:
            timer.cancel()
    if not line:
        proc.kill()
        raise SystemExit(f'the work process did not start (exit {proc.wait()})')
    return proc, line.decode().strip()


def main() -> None:
    import app as handlers  # the module: its event handlers are module-level functions
    from chalicelib.core.config import get_config
    from chalicelib.front import handlers as front
    from localdev.pollers import FAIR_WORKERS, Pollers
    warm()
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a Ctrl-C reaches `make run`, which stops this process
    cfg = get_config()
    ocr_queue = os.environ.get('LOCAL_OCR_QUEUE') or None
    # before any thread starts and before this process makes an AWS client (the pool shares none)
    invocations = Invocations({'activity_start_worker': handlers.activity_start_worker,
                               'outbox_publisher': handlers.outbox_publisher,
                               'scheduled_jobs': handlers.scheduled_jobs, 'ocr_batch': front.ocr_batch},
                              FAIR_WORKERS * (2 if ocr_queue else 1) + 2)
    pool = _Handlers(invocations)
    stream = next(s for s in handlers.app.event_sources if s.name == 'outbox_publisher')   # its batch settings
    pollers = Pollers(pool, region=cfg.region, endpoint_url=cfg.endpoint_url,
                      queue_name=cfg.activity_queue_name, table_name=cfg.table_name,
                      tick_seconds=float(os.environ.get('SCHEDULER_TICK_SECONDS') or 60),
                      stream_batch_size=stream.batch_size,
                      stream_window_seconds=stream.maximum_batching_window_in_seconds,
                      ocr_queue_name=ocr_queue, workers=int(os.environ.get('LOCAL_WORKERS') or 1),
                      ocr_handler=pool.ocr_batch)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pollers.start()
    line = (f'work (on): queue poller on {cfg.activity_queue_name}'
            + (f' and {pollers.workers - 1} more worker process(es) (LOCAL_WORKERS={pollers.workers})'
               if pollers.workers > 1 else '')
            + (f' and {pollers.ocr_queue_name} (OCR)' if pollers.ocr else '') + ', '
            f'scheduler every {pollers.tick_seconds:g} s (SCHEDULER_TICK_SECONDS), outbox drained from the '
            f'table stream; in the work process {os.getpid()}, handlers in a pool of {invocations.processes} '
            'processes (localdev/work.py)')
    fd = os.environ.get(READY_FD)
    if fd:
        with os.fdopen(int(fd), 'w') as ready:
            ready.write(line + '\n')
    try:
        while not stop.wait(1.0):
            pass
    finally:
        pollers.stop()
        invocations.stop()
    # without waiting for a batch still running in the pool (the in-process pollers' daemon threads
    # were not waited for either): its processes get SIGTERM as this one ends (``_child``), and its
    # messages come back after their visibility timeout
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == '__main__':
    main()
