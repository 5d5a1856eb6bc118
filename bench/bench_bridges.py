"""Service bridge call overhead: the proxy's code path and the egress fence against a direct
`requests` call to the same loopback upstream, measured in the same run.

    PYTHONPATH=. .venv/bin/python bench/bench_bridges.py            # ~1 min
    BENCH_CALLS=200 PYTHONPATH=. .venv/bin/python bench/bench_bridges.py

The upstream is an http.server in its own process on 127.0.0.1 (a small JSON answer), reachable
through BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST=127.0.0.1. Rows, interleaved round by round so
drift hits them alike (p50 and p90 in ms, ratio of the p50 to the floor's p50):

  requests.get (floor)          a direct call: new connection each time, as the fence does
  requests.Session keep-alive   for reference: a pooled connection, which the fence never reuses
                                (a pooled connection would carry an address checked for another call)
  egress.request                the fence alone: parse, classify, pin, one connection, read capped
  bridges.call_endpoint         the proxy's service: endpoint selection, permission, required
                                fields, headers, the fence, the answer (what BRIDGE_CALL steps run)
  ... with a ${secrets.X}       the same with one secret header (cache hit) and the echo scrub

Then the whole route in process (chalice's test client, moto): GET /api/service-bridges/{id}
(authentication, rate limit, one GetItem: the platform's floor) against GET .../proxy/{name}
(the same plus the call), with the AWS calls each makes. Figures, never pass/fail.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CALLS = int(os.environ.get('BENCH_CALLS', '400'))
ROUTE_CALLS = int(os.environ.get('BENCH_ROUTE_CALLS', '150'))

UPSTREAM = r'''
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY = json.dumps({"customer": {"id": "c-1", "name": "Acme", "tier": "gold"}, "items": list(range(20))}).encode()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def setup(self):
        super().setup()   # headers and body go out as separate writes: no Nagle delay on keep-alive
        import socket
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    def log_message(self, *a):
        pass
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

class Server(ThreadingHTTPServer):
    daemon_threads = True
    def server_bind(self):
        import socketserver
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]

server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
'''


def _percentiles(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[max(0, int(len(xs) * 0.9) - 1)]


def _interleaved(rows: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in rows}
    for fn in rows.values():   # warm up: imports, TLS context, first connection
        for _ in range(5):
            fn()
    for _ in range(rounds):
        for name, fn in rows.items():
            t = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t) * 1000)
    return times


def _print(title: str, times: dict[str, list[float]], floor: str, extra: dict[str, str] | None = None) -> None:
    print(f'\n{title}')
    print(f'{"row":34}{"p50 ms":>9}{"p90 ms":>9}{"x floor p50":>13}  {"":<1}')
    base = _percentiles(times[floor])[0]
    for name, xs in times.items():
        p50, p90 = _percentiles(xs)
        note = (extra or {}).get(name, '')
        print(f'{name:34}{p50:9.3f}{p90:9.3f}{p50 / base:12.2f}x  {note}')


def main() -> None:
    os.environ.pop('AWS_ENDPOINT_URL', None)
    os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='x', AWS_SECRET_ACCESS_KEY='x',
                      RATE_LIMIT_PER_MINUTE='100000000', RATE_LIMIT_BURST_PER_SECOND='100000000',
                      BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST='127.0.0.1', CLIENT_IP_HASH_KEY='bench',
                      ORG_SECRET_CACHE_SECONDS='3600',
                      LOG_LEVEL='WARNING')   # no request line per call on stdout (both route rows alike)
    upstream = subprocess.Popen([sys.executable, '-c', UPSTREAM], stdout=subprocess.PIPE, text=True)
    try:
        port = int(upstream.stdout.readline())
        run(f'http://127.0.0.1:{port}')
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)


def run(base: str) -> None:
    import requests
    from moto import mock_aws

    from chalicelib.core import egress
    from chalicelib.features.bridges import proxy as bridges
    from chalicelib.features.bridges import secrets
    from chalicelib.features.identity.bootstrap import SYSTEM

    url = f'{base}/customers?id=c-1'
    bridge = {'id': 'b', 'organizationId': 'o', 'projectId': 'p', 'baseUrl': base, 'defaultHeaders': {},
              'endpoints': [{'name': 'lookup', 'method': 'GET', 'path': '/customers', 'defaultHeaders': {},
                             'requestSchema': {'required': ['id']}}]}
    with_secret = {**bridge, 'defaultHeaders': {'Authorization': 'Bearer ${secrets.TOKEN}'}}
    query = {'id': ['c-1']}
    session = requests.Session()
    with mock_aws():
        secrets.put_org_secret('o', 'TOKEN', 'sk_bench_' + 'x' * 32)
        assert secrets.read_org_secret('o', 'TOKEN')
    # moto's mock also intercepts requests: the rows run outside it, the secret from the cache
    rows = {
        'requests.get (floor)': lambda: requests.get(url, timeout=30).content,
        'requests.Session keep-alive': lambda: session.get(url, timeout=30).content,
        'egress.request': lambda: egress.request('GET', url),
        'bridges.call_endpoint': lambda: bridges.call_endpoint(bridge, 'lookup', query=query, principal=SYSTEM),
        '... with a ${secrets.X} header': lambda: bridges.call_endpoint(with_secret, 'lookup', query=query,
                                                                      principal=SYSTEM),
    }
    check = bridges.call_endpoint(bridge, 'lookup', query=query, principal=SYSTEM)
    assert check.status == 200 and check.value()['customer']['id'] == 'c-1', check
    times = _interleaved(rows, CALLS)
    _print(f'Bridge call overhead, loopback upstream, {CALLS} calls per row (interleaved)', times,
           'requests.get (floor)')
    session.close()
    route(base)


def route(base: str) -> None:
    from moto import mock_aws

    from bench.counting import count_calls
    with mock_aws():
        from chalice.test import Client

        from app import app
        from chalicelib.features.identity.bootstrap import bootstrap
        bootstrap(api_key='bench-key')
        hdr = {'x-api-key': 'bench-key', 'content-type': 'application/json'}
        with Client(app) as c:
            project = json.loads(c.http.post('/api/projects', headers=hdr, body=json.dumps({'name': 'p'})).body)
            made = c.http.post('/api/service-bridges', headers=hdr, body=json.dumps({
                'projectId': project['id'], 'name': 'b', 'baseUrl': base,
                'endpoints': [{'name': 'lookup', 'path': '/customers', 'requestSchema': {'required': ['id']}}]}))
            bridge = json.loads(made.body)
            rows = {
                'GET /api/service-bridges/{id}': lambda: c.http.get(f"/api/service-bridges/{bridge['id']}",
                                                                    headers=hdr),
                'GET .../proxy/lookup?id=c-1': lambda: c.http.get(
                    f"/api/service-bridges/{bridge['id']}/proxy/lookup?id=c-1", headers=hdr),
                'GET .../proxy/lookup (no id: [])': lambda: c.http.get(
                    f"/api/service-bridges/{bridge['id']}/proxy/lookup", headers=hdr),
            }
            answer = rows['GET .../proxy/lookup?id=c-1']()
            assert answer.status_code == 200 and json.loads(answer.body)['customer']['id'] == 'c-1', answer.body
            notes = {}
            for name, fn in rows.items():
                with count_calls() as calls:
                    fn()
                notes[name] = 'AWS calls: ' + ', '.join(f'{k} {v}' for k, v in sorted(calls.items()))
            times = _interleaved(rows, ROUTE_CALLS)
    _print(f'The whole route, in process under moto, {ROUTE_CALLS} calls per row', times,
           'GET /api/service-bridges/{id}', notes)


if __name__ == '__main__':
    main()
