"""What keeping `make run`'s data costs (docs/operations/local-state.md): the start with N records
saved against an empty start, the save on stop, the file's size.

    PYTHONPATH=. .venv/bin/python bench/bench_local_state.py [--records 10000] [--clients 4]

Starts the real local stack (tests/live.py: `python -m localdev.run`, its moto server saving to
a temporary folder), creates ``--records`` tasks through the API from ``--clients`` threads,
stops it (SIGTERM, as a Ctrl-C does: the moto server saves on its way out), starts it again on
the same folder and times it to its ready line, then reads the tasks' count back. The floor,
same run: the first start, on an empty folder. Loopback only: nothing leaves the machine.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.live import LiveStack  # noqa: E402


def _moto_up(stack: LiveStack) -> float:
    """The seconds the moto server took to answer, loading included (run.py's start line)."""
    for line in stack.output:
        found = re.search(r'moto up in ([0-9.]+) s', line)
        if found:
            return float(found.group(1))
    raise AssertionError('no "moto up" line:\n' + ''.join(stack.output))


def _stop(stack: LiveStack) -> float:
    began = time.monotonic()
    stack.proc.terminate()
    stack.proc.wait(timeout=300)
    return time.monotonic() - began


def _create(state: Path, records: int, clients: int) -> tuple[float, float, list[str]]:
    """``records`` tasks through the API into a fresh ``state`` folder, then a stop: (seconds to
    create, seconds to stop, the tasks' ids)."""
    stack = LiveStack(state, LOCAL_WORKERS='off', LOCAL_PERSIST='on')
    try:
        slug = f'org-{uuid.uuid4().hex[:8]}'
        org = stack.created('/api/organizations', {'name': slug, 'slug': slug})
        project = stack.created('/api/projects', {'name': 'P', 'organizationId': org['id']})
        ids: list[str] = []

        def create(i: int) -> None:
            answer = stack.post('/api/tasks', {'projectId': project['id'], 'title': f'Task {i}',
                                               'description': 'x' * 200})
            assert answer.status == 201, answer
            ids.append(answer.body['id'])

        began = time.monotonic()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(create, range(records)))
        created = time.monotonic() - began
    finally:
        stopped = _stop(stack)
    (state / 'bench-ids.txt').write_text('\n'.join(ids))
    return created, stopped, ids


def _start(state: Path) -> tuple[float, float, LiveStack]:
    """A start on ``state``: (seconds to the ready line, the moto server's own, the stack)."""
    began = time.monotonic()
    stack = LiveStack(state, LOCAL_WORKERS='off', LOCAL_PERSIST='on')
    return time.monotonic() - began, _moto_up(stack), stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--records', type=int, default=10_000)
    parser.add_argument('--clients', type=int, default=4)
    parser.add_argument('--restarts', type=int, default=3, help='starts timed on each folder (medians printed)')
    parser.add_argument('--keep', help='a folder to keep the saved state in (reused when it holds one)')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        state = Path(args.keep) if args.keep else Path(scratch) / 'saved'
        state.mkdir(parents=True, exist_ok=True)
        if (state / 'moto-state.pickle').exists() and (state / 'bench-ids.txt').exists():
            created = stopped = None
            ids = (state / 'bench-ids.txt').read_text().split()
        else:
            created, stopped, ids = _create(state, args.records, args.clients)
        size = (state / 'moto-state.pickle').stat().st_size
        floors, starts, stops = [], [], []
        for n in range(args.restarts):
            empty = Path(scratch) / f'empty-{n}'
            ready, moto, stack = _start(empty)
            floors.append((moto, ready))
            _stop(stack)
            ready, moto, stack = _start(state)
            starts.append((moto, ready))
            try:
                stack.key = (state / 'admin-api-key').read_text().strip()
                for id_ in (ids[0], ids[len(ids) // 2], ids[-1]):   # read back by id after the restart
                    answer = stack.get(f'/api/tasks/{id_}')
                    assert answer.status == 200, answer
            finally:
                stops.append(_stop(stack))
    if created is not None:
        print(f'records created through the API: {len(ids):,} tasks in {created:.0f} s ({args.clients} clients); '
              f'stop with the save: {stopped:.1f} s')
    print(f'saved state: {size / 2 ** 20:.1f} MiB')
    print(f'start (median of {args.restarts})        | moto up (s) | ready line (s)')
    print(f'empty folder (floor)        | {statistics.median(m for m, _ in floors):11.1f} | '
          f'{statistics.median(r for _, r in floors):14.1f}')
    print(f'{len(ids):,} tasks saved         | {statistics.median(m for m, _ in starts):11.1f} | '
          f'{statistics.median(r for _, r in starts):14.1f}')
    print(f'stop after the restart (three reads, a save): median {statistics.median(stops):.1f} s')


if __name__ == '__main__':
    main()
