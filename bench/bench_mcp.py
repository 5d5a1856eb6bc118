"""MCP tool call overhead: ``tools/call get_task`` against ``GET /api/tasks/{id}`` on the same
server, measured in the same run (target: the tool call within 1.2x of the REST read).

    PYTHONPATH=. .venv/bin/python bench/bench_mcp.py            # ~1 min
    BENCH_CALLS=300 PYTHONPATH=. .venv/bin/python bench/bench_mcp.py

The app is served on a loopback port by the `make run` front door (localdev/server.py) with moto
in process, MCP enabled; the caller is a MEMBER with an API key. Both requests do the same AWS
work (authenticate: one BatchGetItem; rate limit: one UpdateItem; the organization's status and
the task: two GetItems), so the difference is the JSON-RPC layer: parsing, the tool's argument
check, the mcp_types result models and the doubled JSON (structuredContent and its text).

Rows, interleaved round by round over one keep-alive connection each (p50 and p90 in ms):

  GET /api/tasks/{id} (floor)         the REST read
  POST /mcp tools/call get_task       the same read as an MCP tool call (2025-11-25 header)
  SDK ClientSession.call_tool         the official client's round trip (its own request models,
                                      output-schema validation): what an MCP client sees, for
                                      reference, measured after the two rows above

The first /mcp call of a process imports mcp_types (~0.25 s): warmed up before timing, and shown
as its own line. Figures, never pass/fail.
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CALLS = int(os.environ.get('BENCH_CALLS', '300'))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _stats(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[max(0, int(len(xs) * 0.9) - 1)]


def main() -> None:
    os.environ.pop('AWS_ENDPOINT_URL', None)
    port = _free_port()
    os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',
                      TABLE_NAME='platform-bench', RATE_LIMIT_PER_MINUTE='1000000',
                      RATE_LIMIT_BURST_PER_SECOND='1000000', MCP_ENABLED='true',
                      MCP_PUBLIC_URL=f'http://127.0.0.1:{port}/mcp', LOG_LEVEL='WARNING')
    import logging
    logging.getLogger('werkzeug').setLevel(logging.ERROR)
    from moto import mock_aws
    with mock_aws():
        _run(port)


def _run(port: int) -> None:
    import requests

    from chalicelib.features.identity.bootstrap import bootstrap
    from chalicelib.features.identity.service import create_api_key
    admin_key = 'pk_bench-admin-key'
    boot = bootstrap(api_key=admin_key)
    from app import app
    from localdev.server import serve
    server = serve(app, '127.0.0.1', port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f'http://127.0.0.1:{port}'
    admin = requests.Session()
    admin.headers.update({'x-api-key': admin_key, 'content-type': 'application/json'})
    org = boot['organizationId']
    project = admin.post(f'{base}/api/projects', json={'name': 'Bench', 'organizationId': org}).json()
    user = admin.post(f'{base}/api/users', json={'email': 'bench-member@example.com'}).json()
    admin.post(f'{base}/api/memberships', json={'organizationId': org, 'userId': user['id'], 'role': 'MEMBER'})
    key = create_api_key(user['id'], user['email'], 'bench')['key']
    admin.post(f'{base}/api/task-statuses', json={'organizationId': org, 'label': 'Open', 'slug': 'open'})
    task = admin.post(f'{base}/api/tasks', json={'projectId': project['id'], 'title': 'benchmark task',
                                                  'description': 'x' * 200, 'statusSlug': 'open'}).json()

    rest, rpc = requests.Session(), requests.Session()
    for s in (rest, rpc):
        s.headers.update({'x-api-key': key, 'content-type': 'application/json'})
    rpc.headers.update({'accept': 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25'})
    call = {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call',
            'params': {'name': 'get_task', 'arguments': {'taskId': task['id']}}}

    def get():
        r = rest.get(f"{base}/api/tasks/{task['id']}")
        assert r.status_code == 200, r.text

    def tool():
        r = rpc.post(f'{base}/mcp', data=json.dumps(call))
        assert r.status_code == 200 and r.json()['result']['structuredContent']['id'] == task['id'], r.text

    started = time.perf_counter()
    tool()
    first = (time.perf_counter() - started) * 1000
    for _ in range(20):
        get()
        tool()
    times: dict[str, list[float]] = {'GET /api/tasks/{id} (floor)': [], 'POST /mcp tools/call get_task': []}
    for _ in range(CALLS):
        for name, fn in zip(times, (get, tool), strict=True):
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1000)
    times['SDK ClientSession.call_tool'] = _sdk_times(base, key, task['id'])
    server.shutdown()

    floor = _stats(times['GET /api/tasks/{id} (floor)'])[0]
    print(f'{CALLS} calls each, interleaved, one keep-alive connection per row; moto in process')
    print(f"{'row':<34}{'p50 ms':>9}{'p90 ms':>9}{'x floor':>9}")
    for name, xs in times.items():
        p50, p90 = _stats(xs)
        print(f'{name:<34}{p50:>9.2f}{p90:>9.2f}{p50 / floor:>9.2f}')
    ratio = _stats(times['POST /mcp tools/call get_task'])[0] / floor
    print(f'median GET {floor:.2f} ms, median tools/call {_stats(times["POST /mcp tools/call get_task"])[0]:.2f} ms, '
          f'ratio {ratio:.2f} (target <= 1.20)')
    print(f'first /mcp call of the process (imports mcp_types): {first:.0f} ms')


def _sdk_times(base: str, key: str, task_id: str) -> list[float]:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    out: list[float] = []

    async def go():
        async with create_mcp_http_client(headers={'x-api-key': key}) as http, \
                streamable_http_client(f'{base}/mcp', http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            for i in range(20 + CALLS):
                t0 = time.perf_counter()
                result = await session.call_tool('get_task', {'taskId': task_id})
                if i >= 20:
                    out.append((time.perf_counter() - t0) * 1000)
                assert not result.is_error
    anyio.run(go)
    return out


if __name__ == '__main__':
    main()
