"""`make run`: moto server on loopback (unless AWS_ENDPOINT_URL points elsewhere), AWS
resources, bootstrap admin, then the API on http://127.0.0.1:${PORT:-8000}. Ctrl-C stops all.

The CHAOS_* variables reach the moto server through its environment, except CHAOS_RATE: the
server starts with chaos off so that creating the resources and the bootstrap admin cannot
fail, and the rate is switched on (``POST /_chaos``, counters reset) just before the API
serves.

One `make run` per folder (docs/operations/local-state.md "One server per folder"): ``hold_folder``
takes an exclusive lock on ``<folder>/run.lock`` before anything starts, held until the last
process that may save the state (this one, then its moto server, which inherits the lock) ends."""
from __future__ import annotations

import faulthandler
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from localdev import chaos

ROOT = Path(__file__).resolve().parent.parent
SHUTDOWN_SECONDS = 20   # the longest a Ctrl-C may take (pollers 3 x 3 s, margin) before moto's stop
MOTO_STOP_SECONDS = 60  # the moto server saves its state on SIGTERM (localdev/moto_server.py SavedState)
MOTO_START_SECONDS = 120   # the moto server loads its saved state before it answers
STATE_FILE = 'moto-state.pickle'
LOCK_FILE = 'run.lock'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the moto server's process, before exec (Linux): SIGTERM when this process dies, however
    it dies. A `make run` killed with -9 (a test's teardown, the OOM killer) cannot stop its moto
    server itself, and orphaned servers piled up on the test machine. (Called before any thread
    starts, so preexec_fn is safe here.)"""
    try:
        import ctypes  # noqa: PLC0415 - only in the child, only on Linux
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass   # not Linux: the finally of main() still stops it on a normal exit


def local_dir() -> Path:
    """Where `make run` keeps its files: LOCAL_STATE_DIR, else .local/ (git-ignored)."""
    local = Path(os.environ.get('LOCAL_STATE_DIR') or ROOT / '.local')
    local.mkdir(parents=True, exist_ok=True)
    return local


def hold_folder(local: Path, port: int) -> int:
    """Lock ``local`` for this run, or stop with the reason: a second server on the same folder
    would load the same saved state and the last to save would silently drop what the other
    acknowledged (docs/operations/local-state.md "One server per folder"). The lock is
    ``flock`` on ``run.lock``, an open file description the kernel releases when the last process
    holding it ends, however it ends (no stale lock to clean up after a kill -9); the moto server
    inherits it (``start_moto``), so the lock lasts until its final save on SIGTERM is written.
    Returns the descriptor, to be kept open for the life of the process."""
    import fcntl  # noqa: PLC0415 - POSIX only, and only `make run` needs it
    path = local / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + MOTO_STOP_SECONDS
    said = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:   # BlockingIOError: another process holds it
            holder = os.pread(fd, 200, 0).decode(errors='replace').split()
        if len(holder) >= 2 and not _alive(holder[0]) and time.monotonic() < deadline:
            # that run is gone (killed): only its moto server's last save holds the lock still
            if not said:
                print(f'waiting for the last save of the stopped run (pid {holder[0]}) in {local}', flush=True)
                said = True
            time.sleep(0.2)
            continue
        os.close(fd)
        who = f' (pid {holder[0]}, API on port {holder[1]})' if len(holder) >= 2 else ''
        raise SystemExit(
            f'another `make run`{who} is using {local}: two servers on one saved state would '
            f'lose each other\'s writes. Stop it first (Ctrl-C), or give this one its own folder: '
            f'LOCAL_STATE_DIR=/some/other/dir PORT={port} make run '
            '(docs/operations/local-state.md)')
    os.ftruncate(fd, 0)
    os.pwrite(fd, f'{os.getpid()} {port}\n'.encode(), 0)
    return fd


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (ValueError, OSError):
        return True   # not ours to signal (PermissionError), or unreadable: assume it runs
    return True


def state_file() -> Path | None:
    """The moto server's saved data (docs/operations/local-state.md), None when not kept
    (LOCAL_PERSIST=off). FRESH=1 deletes it first: the run starts empty."""
    if os.environ.get('LOCAL_PERSIST', 'on').lower() in ('0', 'off', 'false', 'no'):
        return None
    path = local_dir() / STATE_FILE
    if os.environ.get('FRESH', '').lower() in ('1', 'on', 'true', 'yes') and path.exists():
        path.unlink()
        print(f'FRESH: {path} deleted, starting empty', flush=True)
    return path


def start_moto(keep_fds: tuple[int, ...] = ()) -> tuple[subprocess.Popen, str]:
    """The local moto server; ``keep_fds`` (the folder's lock, ``hold_folder``) stay open in it."""
    port = int(os.environ.get('MOTO_PORT') or _free_port())
    env = {**os.environ, 'CHAOS_RATE': '0'}  # set-up runs clean; see switch_on_chaos
    state = state_file()
    log_path = local_dir() / 'moto-server.log'
    command = [sys.executable, '-m', 'localdev.moto_server', '-H', '127.0.0.1', '-p', str(port)]
    if state is not None:
        command += ['--state', str(state)]
    started = time.monotonic()
    with open(log_path, 'wb') as log:   # its errors (an unreadable state file) for the reader
        # its own session: a Ctrl-C (SIGINT to the terminal's process group) reaches only this
        # process, which stops the API and the pollers first, then sends SIGTERM: moto saves last
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log,
                                preexec_fn=_die_with_parent, start_new_session=True)
    url = f'http://127.0.0.1:{port}'
    import urllib.request
    deadline = time.time() + MOTO_START_SECONDS
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f'{url}/moto-api/', timeout=1)
            if state is not None:
                kept = f'loaded from {state}' if state.exists() else f'kept in {state}'
                print(f'local data {kept} (moto up in {time.monotonic() - started:.1f} s; '
                      'FRESH=1 starts empty)', flush=True)
            return proc, url
        except Exception:  # noqa: BLE001 - not up yet
            if proc.poll() is not None:
                tail = log_path.read_text(errors='replace').strip().splitlines()[-3:]
                hint = f'; FRESH=1 discards {state} and starts empty' if state is not None else ''
                raise SystemExit(f'moto server failed to start: {" / ".join(tail)}{hint}') from None
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f'moto server did not start within {MOTO_START_SECONDS} s')


def chaos_settings() -> chaos.Settings:
    """The CHAOS_* settings, checked before anything starts."""
    try:
        return chaos.settings_from_env(os.environ)
    except ValueError as err:
        raise SystemExit(f'bad CHAOS_* setting: {err}') from None


def switch_on_chaos(endpoint_url: str, rate: float) -> str:
    """Switch the moto server's chaos on at ``rate`` from a clean count; the line to print."""
    chaos.remote_configure(endpoint_url, rate=rate)
    settings = chaos.remote_reset(endpoint_url)['settings']
    return (f'chaos: {settings["rate"]:g} of calls to {",".join(settings["services"])} faulted '
            f'({",".join(settings["kinds"])}; slow answers {settings["slowSeconds"]:g} s; '
            f'CHAOS_SEED={settings["seed"]}); counters at {endpoint_url}/_chaos')


def prepare_environment(keep_fds: tuple[int, ...] = ()) -> subprocess.Popen | None:
    os.environ.setdefault('AWS_DEFAULT_REGION', 'us-east-1')
    moto = None
    if not os.environ.get('AWS_ENDPOINT_URL'):
        os.environ.setdefault('AWS_ACCESS_KEY_ID', 'local')
        os.environ.setdefault('AWS_SECRET_ACCESS_KEY', 'local')
        moto, url = start_moto(keep_fds)
        os.environ['AWS_ENDPOINT_URL'] = url
    return moto


def create_resources() -> None:
    import boto3

    from chalicelib.core.config import get_config
    from chalicelib.kernel.store.table import ensure_table
    cfg = get_config()
    ensure_table()
    # what exists is only read (a restart over saved state changes nothing: no save follows it)
    s3 = boto3.client('s3', region_name=cfg.region, endpoint_url=cfg.endpoint_url)
    try:
        s3.head_bucket(Bucket=cfg.bucket_name)
    except s3.exceptions.ClientError:
        try:
            s3.create_bucket(Bucket=cfg.bucket_name)
        except s3.exceptions.BucketAlreadyOwnedByYou:
            pass
    sqs = boto3.client('sqs', region_name=cfg.region, endpoint_url=cfg.endpoint_url)
    import json
    queues = [cfg.activity_queue_name]
    if cfg.ocr_queue_name:   # the OCR function's queue (features/parsing/stage.py), with its own DLQ
        queues.append(cfg.ocr_queue_name)
    for queue in queues:
        names = {url.rsplit('/', 1)[-1] for url in sqs.list_queues(QueueNamePrefix=queue).get('QueueUrls', [])}
        if {queue, f'{queue}-dlq'} <= names:
            continue
        dlq = sqs.create_queue(QueueName=f'{queue}-dlq')['QueueUrl']
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=['QueueArn'])['Attributes']['QueueArn']
        sqs.create_queue(QueueName=queue, Attributes={
            'RedrivePolicy': json.dumps({'deadLetterTargetArn': dlq_arn, 'maxReceiveCount': '5'}),
            'VisibilityTimeout': os.environ.get('QUEUE_VISIBILITY_TIMEOUT') or '30'})
    events = boto3.client('events', region_name=cfg.region, endpoint_url=cfg.endpoint_url)
    if not any(b['Name'] == cfg.event_bus_name for b in events.list_event_buses().get('EventBuses', [])):
        events.create_event_bus(Name=cfg.event_bus_name)
    from localdev.pollers import enable_stream
    enable_stream(cfg.table_name, region=cfg.region, endpoint_url=cfg.endpoint_url)


def local_workers() -> int:
    """``LOCAL_WORKERS``: ``off`` (none: starts stay PENDING), ``on`` (the default: 1, the pollers of
    the work process, localdev/work.py), or a number N of queue workers (N - 1 processes besides
    them, localdev/workers.py: a big document's page ranges read in parallel;
    docs/operations/worker.md "Local workers")."""
    raw = os.environ.get('LOCAL_WORKERS', 'on').strip().lower()
    if raw.isdigit() and int(raw) > 0:
        return min(int(raw), 32)
    return 1


def main() -> None:
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    rate = chaos_settings().rate
    # before anything reads or deletes (FRESH=1) the folder's files: one server per folder
    lock = hold_folder(local_dir(), int(os.environ.get('PORT') or 8000))
    # the MCP connector is on locally, its resource the local URL (MCP_ENABLED=false turns it off)
    os.environ.setdefault('MCP_ENABLED', 'true')
    os.environ.setdefault('MCP_PUBLIC_URL', f"http://127.0.0.1:{int(os.environ.get('PORT') or 8000)}/mcp")
    if not os.environ.get('PLATFORM_ADMIN_API_KEY'):   # an unknown key's 401 names the file (before get_config)
        os.environ.setdefault('LOCAL_ADMIN_KEY_FILE', str(local_dir() / 'admin-api-key'))
    moto = prepare_environment((lock,))
    try:
        create_resources()
        from chalicelib.features.identity.bootstrap import bootstrap
        result = bootstrap(api_key=os.environ.get('PLATFORM_ADMIN_API_KEY') or None)
        key_file = local_dir() / 'admin-api-key'
        if result['apiKey'] and not os.environ.get('PLATFORM_ADMIN_API_KEY'):
            key_file.write_text(result['apiKey'] + '\n')
            key_file.chmod(0o600)
            print(f'admin API key (shown once, also in {key_file}): {result["apiKey"]}')
        elif os.environ.get('PLATFORM_ADMIN_API_KEY'):
            print('admin API key: the value of PLATFORM_ADMIN_API_KEY')
        elif key_file.exists():
            print(f'admin key of the last run kept (in {key_file})', flush=True)
        else:
            print(f'the saved data has an admin key but {key_file} is gone: `make run FRESH=1` starts over '
                  'with a new one', flush=True)
        from app import app
        from chalicelib.core.config import get_config
        from localdev.server import serve
        port = int(os.environ.get('PORT') or 8000)
        server = serve(app, '127.0.0.1', port)
        cfg = get_config()
        # the worker, the scheduler and the outbox publisher, as Lambda would run them (pollers.py),
        # in a process of their own (localdev/work.py: on AWS none shares the API's CPU).
        # LOCAL_OCR_WORKER=off: the OCR queue's messages wait for another consumer (the OCR image's
        # rehearsal, tests/integration/test_ocr_image.py, hands them to the image as Lambda would)
        ocr_off = os.environ.get('LOCAL_OCR_WORKER', 'on').lower() in ('0', 'off', 'false', 'no')
        work = None
        if os.environ.get('LOCAL_WORKERS', 'on').lower() in ('0', 'off', 'false', 'no'):
            print('work (off): starts stay PENDING (LOCAL_WORKERS=off)', flush=True)   # the fuzz run uses it
        else:
            from localdev import work as work_process
            work, line = work_process.spawn(local_workers(), None if ocr_off else cfg.ocr_queue_name or None)
            print(line, flush=True)
        if rate and moto is not None:
            print(switch_on_chaos(os.environ['AWS_ENDPOINT_URL'], rate), flush=True)
        elif rate:
            print('chaos: CHAOS_RATE ignored, no local moto server (AWS_ENDPOINT_URL is set); '
                  'switch it with POST /_chaos on that server', flush=True)
        print(f'platform API on http://127.0.0.1:{port}  (storage: {os.environ["AWS_ENDPOINT_URL"]})', flush=True)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        # SIGINT stops the server however it was started: a shell starts a background job
        # (`make run &`, a CI script's `... &`) with SIGINT ignored, and Python then never turns
        # it into KeyboardInterrupt (the Ctrl-C test hung for 60 s in such a run)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            # Ctrl-C ends the process within SHUTDOWN_SECONDS whatever a thread is doing: past it,
            # every thread's stack goes to stderr (the cause, for the next reader) and the process
            # exits
            faulthandler.dump_traceback_later(SHUTDOWN_SECONDS, exit=True)
            if work is not None:   # its loops and its pool stop before moto saves (localdev/work.py)
                work.terminate()
                try:
                    work.wait(timeout=SHUTDOWN_SECONDS - 5)
                except subprocess.TimeoutExpired:
                    work.kill()
            server.server_close()
    finally:
        if moto is not None:
            faulthandler.cancel_dump_traceback_later()   # its own limit: it saves the state first
            moto.terminate()
            try:
                moto.wait(timeout=MOTO_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                moto.kill()


if __name__ == '__main__':
    main()
