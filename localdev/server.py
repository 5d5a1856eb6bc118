"""A local HTTP front door for the Chalice app (what API Gateway is in AWS).

Built on Chalice's own LocalGateway (same route matching and Lambda event shape as
``chalice local``), with what a local run needs that ``chalice local`` lacks:
  * JSON error bodies for unknown routes (404) and malformed requests, never HTML;
  * request lines up to 1 MiB (long filters), not http.server's 64 KiB;
  * TCP_NODELAY and a threaded server, so keep-alive clients are not held ~40 ms a request.
"""
from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from chalice.config import Config
from chalice.local import LocalChalice, LocalGateway, LocalGatewayException

MAX_REQUEST_LINE = 1024 * 1024
MAX_BODY = 10 * 1024 * 1024


def _json_error(status: int, message: str) -> bytes:
    from chalicelib.core.errors import error_body
    return json.dumps(error_body(status, message)).encode()


def _door_headers() -> dict[str, str]:
    """What every answer carries (README "A five-minute tour"), also those this front door gives
    before the app (unknown route, oversized body, bad request line): a request id and the
    rate-limit headers of a request not counted (features/identity/ratelimit.py ``untracked``)."""
    from chalicelib.core.observability import new_id
    from chalicelib.features.identity.ratelimit import untracked
    return {'X-Request-Id': new_id(), **untracked().headers()}


def make_handler(app):
    if not isinstance(app, LocalChalice):  # thread-local current_request, as chalice local does
        app.__class__ = LocalChalice
    gateway = LocalGateway(app, Config(chalice_stage='dev', user_provided_params={'lambda_timeout': 60}))

    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'
        server_version = 'platform-api'
        sys_version = ''

        def setup(self):
            super().setup()
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, fmt, *args):  # quiet: one line per request is noise under load
            pass

        def handle_one_request(self):
            try:
                self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE + 1)
                if len(self.raw_requestline) > MAX_REQUEST_LINE:
                    self.requestline, self.request_version, self.command = '', 'HTTP/1.1', ''
                    self._send(414, {}, _json_error(414, 'Request line too long'))
                    self.close_connection = True
                    return
                if not self.raw_requestline:
                    self.close_connection = True
                    return
                if not self.parse_request():
                    return
                self._dispatch()
                self.wfile.flush()
            except (TimeoutError, ConnectionError):
                self.close_connection = True

        def send_error(self, code, message=None, explain=None):
            self._send(code, {}, _json_error(code, message or explain or 'Bad request'))
            self.close_connection = True

        def _send(self, status, headers, body: bytes | None):
            self.send_response(status)
            headers = {k: v for k, v in headers.items() if k.lower() not in ('content-length', 'connection')}
            if not any(k.lower() == 'x-request-id' for k in headers):   # answered here, not by the app
                headers.update(_door_headers())
            headers.setdefault('Content-Type', 'application/json')
            for name, value in headers.items():
                for v in (value if isinstance(value, list) else [value]):
                    self.send_header(name, str(v))
            payload = b'' if (body is None or self.command == 'HEAD') else body
            self.send_header('Content-Length', str(len(body or b'')))
            self.end_headers()
            if payload:
                self.wfile.write(payload)

        def _dispatch(self):
            length = self.headers.get('Content-Length')
            try:
                size = int(length) if length else 0
            except ValueError:
                return self.send_error(400, 'Invalid Content-Length')
            if size < 0 or size > MAX_BODY:
                self.close_connection = True
                return self._send(413, {}, _json_error(413, f'Request body larger than {MAX_BODY} bytes'))
            body = self.rfile.read(size) if size else None
            headers = {k: v for k, v in self.headers.items()}
            path = self.path
            try:
                gateway.event_converter.create_lambda_event(self.command, path, headers, body)
            except ValueError:
                return self._send(404, {}, _json_error(404, f'No route for {self.command} {path.split("?")[0]}'))
            try:
                response = gateway.handle_request(self.command, path, headers, body)
            except LocalGatewayException as exc:
                return self._send(exc.CODE, {}, _json_error(exc.CODE, 'Request refused by the gateway'))
            except Exception:  # noqa: BLE001
                return self._send(500, {}, _json_error(500, 'An internal error occurred'))
            out_headers = dict(response.get('headers') or {})
            out_headers.update(response.get('multiValueHeaders') or {})
            raw = response.get('body')
            if response.get('isBase64Encoded'):
                import base64
                raw = base64.b64decode(raw)
            if isinstance(raw, str):
                raw = raw.encode('utf-8')
            self._send(response['statusCode'], out_headers, raw)

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _dispatch

        def __getattr__(self, name):
            if name.startswith('do_'):  # any other method (TRACE, CONNECT, made-up ones)
                return lambda: self._send(405, {}, _json_error(405, f'Method {self.command} not allowed'))
            raise AttributeError(name)

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def serve(app, host: str = '127.0.0.1', port: int = 8000) -> Server:
    server = Server((host, port), make_handler(app))
    return server


def serve_in_thread(app, host: str = '127.0.0.1', port: int = 0) -> tuple[Server, threading.Thread]:
    server = serve(app, host, port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread
