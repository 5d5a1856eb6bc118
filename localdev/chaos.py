"""Fault injection for the local AWS endpoint: a WSGI middleware around moto's server.

The local stack answers a chosen fraction of AWS calls the way AWS does when it is throttling,
failing or slow, so the API's retries, time budgets and "nothing half-happens" promise can be
exercised on loopback.

Design:

* It is WSGI middleware *outside* ``moto_server.serialized``: an injected error never takes
  the server's one-request-at-a-time lock, and a slow answer sleeps before taking it, so other
  requests keep flowing while one waits.
* Each request's AWS service is told the way moto's dispatcher tells it (X-Amz-Target prefix,
  then the SigV4 credential scope of the Authorization header or of a presigned URL's
  ``X-Amz-Credential``, else S3 by elimination), using headers and the query string only:
  the request body is never read before the decision, so a call that is not faulted costs a few
  microseconds.
* Every counted call draws two numbers from its service's own random stream, seeded with
  ``f"{seed}:{service}"``, whether the service is targeted or not and whatever the rate: the
  first number decides (``< rate``), the second picks the kind. So for one seed the n-th call
  to DynamoDB gets the same decision whatever S3 or SQS calls are interleaved, changing the
  rate or the targeted services at run time does not shift the streams, and a lower rate faults
  a subset of the calls a higher rate faults. Calls arriving concurrently are drawn in arrival
  order, which only a sequential client makes repeatable.
* An injected error is answered here in the service's real wire shape (JSON 1.0/1.1
  ``__type``, S3 REST-XML ``<Error>``, SQS query-protocol ``<ErrorResponse>``) and never
  reaches moto: nothing is written. (The unread request body is discarded by werkzeug's server
  after the answer, so a large upload gets the error, not a connection reset.) A slow answer
  sleeps and then forwards the call: the client has given up by then but moto performs it,
  like an AWS call whose answer was lost (this is what makes a retried non-idempotent call
  meet its own earlier write).
* ``GET /_chaos`` reports the settings and counters, ``POST /_chaos`` changes settings at run
  time, ``POST /_chaos/reset`` zeroes the counters and restarts the random streams from the
  seed. Only loopback callers may use them. (S3 bucket names cannot start with ``_``, so the
  path never shadows a bucket.)
"""
from __future__ import annotations

import json
import math
import random
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

SERVICES = ('dynamodb', 's3', 'sqs', 'events', 'secretsmanager')
DEFAULT_SERVICES = frozenset({'dynamodb', 's3', 'sqs'})
CATEGORIES = ('throttle', 'internal', 'slow')
# A bit over the 8 s read timeout of the DynamoDB clients (chalicelib/kernel/store/table.py), so the
# client times out before the answer comes.
DEFAULT_SLOW_SECONDS = 10.0
CONTROL_PATH = '/_chaos'
SLOW = 'slow'


@dataclass(frozen=True)
class Fault:
    """One kind of injected answer: an AWS error code with its HTTP status and message."""
    code: str
    category: str
    status: int = 200
    message: str = ''
    type_prefix: str = ''  # JSON protocols: what precedes '#' in __type


_DYNAMODB = 'com.amazonaws.dynamodb.v20120810'
_THROTTLED = 'Rate of requests exceeds the allowed throughput.'
FAULTS: dict[str, tuple[Fault, ...]] = {
    'dynamodb': (
        Fault('ProvisionedThroughputExceededException', 'throttle', 400,
              'The level of configured provisioned throughput for the table was exceeded. '
              'Consider increasing your provisioning level with the UpdateTable API.', _DYNAMODB),
        Fault('ThrottlingException', 'throttle', 400, _THROTTLED, _DYNAMODB),
        Fault('InternalServerError', 'internal', 500, 'Internal server error', _DYNAMODB),
        Fault('ServiceUnavailable', 'internal', 503, 'The service is currently unavailable or busy.',
              _DYNAMODB),
    ),
    's3': (
        Fault('SlowDown', 'throttle', 503, 'Please reduce your request rate.'),
        Fault('InternalError', 'internal', 500, 'We encountered an internal error. Please try again.'),
    ),
    'sqs': (
        Fault('RequestThrottled', 'throttle', 400, 'The request was denied due to request throttling.',
              'com.amazonaws.sqs'),
        Fault('ThrottlingException', 'throttle', 400, _THROTTLED, 'com.amazonaws.sqs'),
        Fault('InternalError', 'internal', 500, 'There is an internal problem with SQS. Retry the request.',
              'com.amazonaws.sqs'),
        Fault('ServiceUnavailable', 'internal', 503, 'The service is currently unavailable.',
              'com.amazonaws.sqs'),
    ),
    'events': (
        Fault('ThrottlingException', 'throttle', 400, _THROTTLED),
        Fault('InternalException', 'internal', 500, 'An internal error occurred.'),
    ),
    'secretsmanager': (
        Fault('ThrottlingException', 'throttle', 400, _THROTTLED),
        Fault('InternalServiceError', 'internal', 500, 'An error occurred on the server side.'),
    ),
}
SLOW_FAULT = Fault(SLOW, SLOW)
_JSON_VERSION = {'dynamodb': '1.0', 'sqs': '1.0', 'events': '1.1', 'secretsmanager': '1.1'}
_TARGET_PREFIXES = {'AmazonSQS': 'sqs', 'AWSEvents': 'events', 'secretsmanager': 'secretsmanager'}
_SIGNING_ALIASES = {'eventbridge': 'events'}


@dataclass(frozen=True)
class Settings:
    """What the switch does; ``rate`` 0 means off."""
    rate: float = 0.0
    services: frozenset[str] = DEFAULT_SERVICES
    kinds: frozenset[str] = frozenset(CATEGORIES)
    seed: int = 0
    slow_seconds: float = DEFAULT_SLOW_SECONDS

    def as_json(self) -> dict[str, Any]:
        return {'rate': self.rate, 'services': sorted(self.services), 'kinds': sorted(self.kinds),
                'seed': self.seed, 'slowSeconds': self.slow_seconds}


def _random_seed() -> int:
    return random.SystemRandom().randrange(2 ** 31)


def _number(value: Any, what: str, high: float) -> float:
    """``value`` as a float from 0 to ``high``; strings (from the environment) are parsed."""
    number = math.nan
    if not isinstance(value, bool) and isinstance(value, (int, float, str)):
        try:
            number = float(value)
        except ValueError:
            pass
    if not 0.0 <= number <= high:  # also rejects NaN
        raise ValueError(f'{what} must be a number from 0 to {high:g}, not {value!r}')
    return number


def _rate(value: Any) -> float:
    return _number(value, 'rate', 1.0)


def _seconds(value: Any) -> float:
    return _number(value, 'slow seconds', 3600.0)


def _names(value: Any, allowed: tuple[str, ...], what: str) -> frozenset[str]:
    items = value.split(',') if isinstance(value, str) else value
    if not (isinstance(items, list) and all(isinstance(v, str) for v in items)):
        raise ValueError(f'{what} must be a comma-separated string or a list of strings')
    names = frozenset(v.strip().lower() for v in items if v.strip())
    unknown = names - set(allowed)
    if unknown:
        raise ValueError(f'unknown {what} {sorted(unknown)}; known: {", ".join(allowed)}')
    return names


def _seed(value: Any) -> int:
    if value is None or value == '':
        return _random_seed()
    if not isinstance(value, bool) and isinstance(value, (int, str)):
        try:
            return int(value)
        except ValueError:
            pass
    raise ValueError(f'seed must be an integer, not {value!r}')


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """Settings from CHAOS_RATE, CHAOS_SERVICES, CHAOS_KINDS, CHAOS_SEED, CHAOS_SLOW_SECONDS
    (empty or unset: the default; no seed: a random one). ValueError names a bad value."""
    return Settings(
        rate=_rate(env.get('CHAOS_RATE') or 0),
        services=_names(env['CHAOS_SERVICES'], SERVICES, 'services') if env.get('CHAOS_SERVICES')
        else DEFAULT_SERVICES,
        kinds=_names(env['CHAOS_KINDS'], CATEGORIES, 'kinds') if env.get('CHAOS_KINDS')
        else frozenset(CATEGORIES),
        seed=_seed(env.get('CHAOS_SEED')),
        slow_seconds=_seconds(env.get('CHAOS_SLOW_SECONDS') or DEFAULT_SLOW_SECONDS))


def apply_changes(settings: Settings, changes: Mapping[str, Any]) -> Settings:
    """``settings`` with the keys of a ``POST /_chaos`` body applied (``seed: null``: a new
    random seed). ValueError names a bad key or value."""
    parsers: dict[str, tuple[str, Callable[[Any], Any]]] = {
        'rate': ('rate', _rate),
        'services': ('services', lambda v: _names(v, SERVICES, 'services')),
        'kinds': ('kinds', lambda v: _names(v, CATEGORIES, 'kinds')),
        'seed': ('seed', _seed),
        'slowSeconds': ('slow_seconds', _seconds),
    }
    unknown = set(changes) - set(parsers)
    if unknown:
        raise ValueError(f'unknown settings {sorted(unknown)}; known: {", ".join(parsers)}')
    return replace(settings, **{parsers[k][0]: parsers[k][1](v) for k, v in changes.items()})


def _scope_service(credential: str) -> str | None:
    parts = credential.split('/')
    if len(parts) >= 5 and parts[-1] == 'aws4_request':
        service = parts[-2].lower()
        return _SIGNING_ALIASES.get(service, service)
    return None


def service_of(environ: Mapping[str, Any]) -> str:
    """The AWS service a request is for, as moto's dispatcher decides it, from headers and
    the query string only."""
    target = environ.get('HTTP_X_AMZ_TARGET')
    if target:
        prefix = target.split('.', 1)[0]
        if prefix.startswith('DynamoDBStreams'):
            return 'dynamodbstreams'
        if prefix.startswith('DynamoDB'):
            return 'dynamodb'
        if prefix in _TARGET_PREFIXES:
            return _TARGET_PREFIXES[prefix]
    auth = environ.get('HTTP_AUTHORIZATION')
    if auth:
        words = auth.split(',', 1)[0].split()
        if len(words) == 2 and words[1].startswith('Credential='):
            service = _scope_service(words[1][len('Credential='):])
            if service:
                return service
    query = environ.get('QUERY_STRING') or ''
    if 'X-Amz-Credential=' in query:
        credential = parse_qs(query).get('X-Amz-Credential')
        service = _scope_service(credential[0]) if credential else None
        if service:
            return service
    return 's3'


def error_response(service: str, fault: Fault,
                   environ: Mapping[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    """(status, headers, body) of ``fault`` in ``service``'s wire protocol."""
    request_id = str(uuid.uuid4())
    headers = [('x-chaos-injected', fault.code)]
    if service == 's3':
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{fault.code}</Code>'
                f'<Message>{fault.message}</Message><RequestId>{request_id}</RequestId>'
                f'<HostId>{uuid.uuid4().hex}</HostId></Error>').encode()
        headers += [('Content-Type', 'application/xml'), ('x-amz-request-id', request_id),
                    ('x-amz-id-2', uuid.uuid4().hex)]
        if environ.get('REQUEST_METHOD') == 'HEAD':  # S3 answers HEAD errors with no body
            body = b''
    elif service == 'sqs' and not environ.get('HTTP_X_AMZ_TARGET'):  # query protocol (Action=...)
        fault_type = 'Sender' if fault.status < 500 else 'Receiver'
        body = (f'<?xml version="1.0"?><ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/">'
                f'<Error><Type>{fault_type}</Type><Code>{fault.code}</Code><Message>{fault.message}</Message>'
                f'<Detail/></Error><RequestId>{request_id}</RequestId></ErrorResponse>').encode()
        headers += [('Content-Type', 'text/xml'), ('x-amzn-RequestId', request_id)]
    else:
        error_type = f'{fault.type_prefix}#{fault.code}' if fault.type_prefix else fault.code
        body = json.dumps({'__type': error_type, 'message': fault.message}).encode()
        headers += [('Content-Type', f'application/x-amz-json-{_JSON_VERSION[service]}'),
                    ('x-amzn-RequestId', request_id), ('X-Amzn-ErrorType', fault.code)]
    headers.append(('Content-Length', str(len(body))))
    return fault.status, headers, body


def _status_line(status: int) -> str:
    return f'{status} {HTTPStatus(status).phrase}'


@dataclass
class _Counter:
    calls: int = 0
    injected: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


class Chaos:
    """The middleware. ``Chaos(app, settings)`` is a WSGI app."""

    def __init__(self, app: WSGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self._lock = threading.Lock()
        self._streams: dict[str, random.Random] = {}
        self._counters: dict[str, _Counter] = {}

    # -- state ------------------------------------------------------------------------------
    def reset(self) -> None:
        """Zero the counters and restart every random stream from the seed."""
        with self._lock:
            self._streams.clear()
            self._counters.clear()

    def configure(self, changes: Mapping[str, Any]) -> None:
        """Apply a ``POST /_chaos`` body; a new seed restarts the random streams."""
        with self._lock:
            settings = apply_changes(self.settings, changes)
            if settings.seed != self.settings.seed:
                self._streams.clear()
            self.settings = settings

    def state(self) -> dict[str, Any]:
        with self._lock:
            by_service = {name: {'calls': c.calls, 'injected': c.injected, 'kinds': dict(c.kinds)}
                          for name, c in sorted(self._counters.items())}
            return {'settings': self.settings.as_json(),
                    'calls': sum(c.calls for c in self._counters.values()),
                    'injected': sum(c.injected for c in self._counters.values()),
                    'byService': by_service}

    def draw(self, service: str) -> tuple[Fault | None, Settings]:
        """Count one call to ``service`` and decide its fault (None: forward it untouched)."""
        with self._lock:
            settings = self.settings
            stream = self._streams.get(service)
            if stream is None:
                stream = self._streams[service] = random.Random(f'{settings.seed}:{service}')
            decide, pick = stream.random(), stream.random()
            counter = self._counters.get(service)
            if counter is None:
                counter = self._counters[service] = _Counter()
            counter.calls += 1
            if decide >= settings.rate or service not in settings.services:
                return None, settings
            kinds = [f for f in FAULTS[service] if f.category in settings.kinds]
            if SLOW in settings.kinds:
                kinds.append(SLOW_FAULT)
            if not kinds:
                return None, settings
            fault = kinds[int(pick * len(kinds))]
            counter.injected += 1
            counter.kinds[fault.code] = counter.kinds.get(fault.code, 0) + 1
            return fault, settings

    # -- WSGI -------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get('PATH_INFO', '')
        if path == CONTROL_PATH or path.startswith(CONTROL_PATH + '/'):
            return self._control(environ, start_response)
        if path.startswith('/moto-api'):
            return self.app(environ, start_response)
        service = service_of(environ)
        fault, settings = self.draw(service)
        if fault is None:
            return self.app(environ, start_response)
        if fault is SLOW_FAULT:
            time.sleep(settings.slow_seconds)
            return self.app(environ, start_response)
        status, headers, body = error_response(service, fault, environ)
        start_response(_status_line(status), headers)
        return [body]

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path, method = environ.get('PATH_INFO', ''), environ.get('REQUEST_METHOD', 'GET')
        status, payload = 200, None
        remote = environ.get('REMOTE_ADDR', '')
        if not (remote.startswith('127.') or remote == '::1'):
            status, payload = 403, {'error': 'the chaos switch answers loopback callers only'}
        elif path == CONTROL_PATH + '/reset' and method == 'POST':
            self.reset()
        elif path == CONTROL_PATH and method == 'POST':
            try:
                length = int(environ.get('CONTENT_LENGTH') or 0)
                changes = json.loads(environ['wsgi.input'].read(length) or b'{}')
                if not isinstance(changes, dict):
                    raise ValueError('the body must be a JSON object')  # noqa: TRY004 - a 400 like the others
                self.configure(changes)
            except ValueError as err:  # json.JSONDecodeError is a ValueError
                status, payload = 400, {'error': str(err)}
        elif path == CONTROL_PATH and method == 'GET':
            pass
        elif path in (CONTROL_PATH, CONTROL_PATH + '/reset'):
            status, payload = 405, {'error': f'{method} is not allowed on {path}'}
        else:
            status, payload = 404, {'error': f'no such chaos endpoint: {path}'}
        body = json.dumps(payload if payload is not None else self.state()).encode()
        start_response(_status_line(status), [('Content-Type', 'application/json'),
                                              ('Content-Length', str(len(body)))])
        return [body]


# -- client side: what test fixtures and `make run` call ----------------------------------------
def _request(endpoint_url: str, path: str, body: Mapping[str, Any] | None = None,
             method: str = 'GET') -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(endpoint_url.rstrip('/') + path, data=data, method=method,
                                     headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def remote_state(endpoint_url: str) -> dict[str, Any]:
    """``GET /_chaos`` of the moto server at ``endpoint_url``."""
    return _request(endpoint_url, CONTROL_PATH)


def remote_configure(endpoint_url: str, **changes: Any) -> dict[str, Any]:
    """``POST /_chaos``: e.g. ``remote_configure(url, rate=0.2, services='dynamodb', seed=7)``;
    ``rate=0`` switches chaos off. Raises urllib.error.HTTPError (400) on a bad value."""
    return _request(endpoint_url, CONTROL_PATH, changes, 'POST')


def remote_reset(endpoint_url: str) -> dict[str, Any]:
    """``POST /_chaos/reset``: zero the counters and restart the random streams from the seed."""
    return _request(endpoint_url, CONTROL_PATH + '/reset', {}, 'POST')
