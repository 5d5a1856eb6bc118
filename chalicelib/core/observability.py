"""Logs, metrics and traces, on aws-lambda-powertools.

**Logs.** Every record of the application's loggers is one JSON line from Powertools' Logger
(service ``POWERTOOLS_SERVICE_NAME``, default ``platform-api``). Chalice's own logger has the
same name (it logs the traceback of a view that raised), and every module logs through a
child of it (``logging.getLogger('platform-api.<area>')``), so nothing escapes the format.
Each line carries the context of the work it belongs to, kept in a context variable (threads
of the local server and Lambda invocations do not mix):

  request_id       API Gateway's ``requestContext.requestId``, or one generated locally (the
                   API answers it as ``X-Request-Id``);
  correlation_id   the request id of the request that started the work: the same as
                   request_id for a request, carried in SQS messages and outbox events into the
                   worker and the stream handler;
  route, method, organization_id, user_id  when known.

The middleware writes one ``request`` line per request (status, duration_ms). Lines never carry
a credential: headers are never logged, and every formatted line (tracebacks included) passes
``redact``, which replaces API keys, bearer/basic credentials and JWT-shaped strings. Client
addresses are never logged (the UI-event code stores only their HMAC).

**Metrics** (CloudWatch EMF through Powertools, namespace ``METRICS_NAMESPACE``) are written
only when ``METRICS_ENABLED`` is true (the deployed stages); locally ``count`` does nothing.

**Tracing** (X-Ray through Powertools' Tracer) only when ``TRACING_ENABLED`` (the deployed
stages): creating a Tracer imports aws_xray_sdk (~210 ms even when disabled, FIELD-NOTES), so it
is created on first use and never when off. requirements.txt ships the SDK (Lambda's runtime does
not); should it be missing or fail anyway, tracing turns itself off with one warning and the
request goes on (issue 38: it once answered every request with a 500). Its cold-start cost is
measured in bench/README.md "The Lambda package".

Cold start: Powertools is imported on the first log line or request (~45 ms), not by
``import app``.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import re
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from chalicelib.core.config import get_config

SERVICE_LOGGER = 'platform-api'   # = Chalice's app_name: its logger is this one
CONTEXT_KEYS = ('request_id', 'correlation_id', 'route', 'method', 'organization_id', 'user_id')

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar('work', default=None)
_lock = threading.Lock()
_logger: Any = None
_tracer: Any = None

_REDACTIONS = (
    (re.compile(r'pk_[A-Za-z0-9_\-]{6,}'), 'pk_[redacted]'),
    (re.compile(r'(?i)\b(bearer|basic)(\s+|%20)[A-Za-z0-9._~+/=\-]{6,}'), r'\1 [redacted]'),
    (re.compile(r'eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*'), '[redacted-jwt]'),
)


def redact(text: str) -> str:
    """``text`` with anything shaped like a credential replaced."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


class _Stdout:
    """sys.stdout as it is at each write (Lambda ships stdout to CloudWatch; tests capture it)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


def get_logger(area: str) -> logging.Logger:
    """The logger of one area of the code (a child of the service logger)."""
    return logging.getLogger(f'{SERVICE_LOGGER}.{area}')


# ----------------------------------------------------------------------------- context

def new_id() -> str:
    return str(uuid.uuid4())


@contextlib.contextmanager
def work(*, request_id: str | None = None, correlation_id: str | None = None, **fields: Any) -> Iterator[dict]:
    """Run a unit of work (a request, a queue message, a stream batch) under its context."""
    setup()
    request_id = request_id or new_id()
    context = {'request_id': request_id, 'correlation_id': correlation_id or request_id,
               **{k: v for k, v in fields.items() if v is not None}}
    token = _context.set(context)
    try:
        yield context
    finally:
        _context.reset(token)


def annotate(**fields: Any) -> None:
    """Add what became known while working (the organization, the user) to the context."""
    context = _context.get()
    if context is not None:
        context.update({k: v for k, v in fields.items() if v is not None})


def current() -> dict[str, Any]:
    return dict(_context.get() or {})


def correlation_id() -> str | None:
    """What asynchronous work started now should carry (SQS message attribute, outbox item)."""
    return (_context.get() or {}).get('correlation_id')


# ----------------------------------------------------------------------------- logging

class _ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_context.get() or {}).items():
            if key in CONTEXT_KEYS and not hasattr(record, key):
                setattr(record, key, value)
        return True


def setup() -> logging.Logger:
    """The service's Powertools Logger, created once; attaches its JSON handler to every
    application logger (all children of the service logger)."""
    global _logger
    if _logger is not None:
        return _logger
    with _lock:
        if _logger is None:
            # lazy: Powertools' logging costs ~45 ms of import; `import app` must not pay it
            from aws_lambda_powertools import Logger  # noqa: PLC0415
            from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter  # noqa: PLC0415

            class RedactingFormatter(LambdaPowertoolsFormatter):
                def format(self, record: logging.LogRecord) -> str:
                    return redact(super().format(record))

            cfg = get_config()
            logger = Logger(service=cfg.service_name, level=cfg.log_level, stream=_Stdout(), utc=True,
                            logger_formatter=RedactingFormatter(utc=True))
            service_logger = logging.getLogger(SERVICE_LOGGER)
            if logger.name != SERVICE_LOGGER:   # a custom service name: route ours there too
                service_logger.handlers = list(logging.getLogger(logger.name).handlers)
                service_logger.setLevel(cfg.log_level)
                service_logger.propagate = False
            for handler in service_logger.handlers:
                if not any(isinstance(f, _ContextFilter) for f in handler.filters):
                    handler.addFilter(_ContextFilter())
            _logger = logger
    return _logger


def log_request(*, status: int, duration_ms: float) -> None:
    """The one line per request."""
    setup()
    get_logger('request').info('request', extra={'status': status, 'duration_ms': round(duration_ms, 2)})


# ----------------------------------------------------------------------------- metrics

def count(name: str, value: float = 1, **dimensions: str) -> None:
    """Add ``value`` to the metric ``name`` (EMF) with these dimensions; no-op unless enabled."""
    cfg = get_config()
    if not cfg.metrics_enabled:
        return
    from aws_lambda_powertools.metrics import MetricUnit, single_metric  # noqa: PLC0415 - lazy: only when enabled
    with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=cfg.metrics_namespace) as metric:
        metric.add_dimension(name='service', value=cfg.service_name)
        for key, dim in dimensions.items():
            metric.add_dimension(name=key, value=str(dim))


# ----------------------------------------------------------------------------- tracing

_tracing_off_reason: str | None = None   # set once tracing has been found unable to work


def _tracing_failed(reason: str) -> None:
    """Tracing stops for this process with one warning; requests go on untraced."""
    global _tracing_off_reason
    if _tracing_off_reason is None:
        _tracing_off_reason = reason
        get_logger('tracing').warning('tracing is off for this process: %s', reason)


def _reset_tracing() -> None:
    """Forget the tracer and any failure (tests that switch tracing on and off)."""
    global _tracer, _tracing_off_reason
    _tracer = None
    _tracing_off_reason = None


def _get_tracer() -> Any:
    """Powertools' Tracer, created on first use; None when it cannot be (aws_xray_sdk missing)."""
    global _tracer
    if _tracer is None and _tracing_off_reason is None:
        with _lock:
            if _tracer is None and _tracing_off_reason is None:
                try:
                    from aws_lambda_powertools import Tracer  # noqa: PLC0415 - lazy: aws_xray_sdk, ~210 ms
                    _tracer = Tracer(service=get_config().service_name)   # patches botocore: AWS calls are subsegments
                except ImportError as exc:
                    _tracing_failed(f'{exc} (TRACING_ENABLED=true needs aws-xray-sdk: requirements.txt)')
    return _tracer


@contextlib.contextmanager
def trace(name: str, **annotations: str) -> Iterator[None]:
    """A traced subsegment (X-Ray) when tracing is enabled; nothing otherwise. Tracing never
    fails the work it traces: a tracer that cannot load or open a subsegment turns tracing off
    with one warning (issue 38), and errors of the work pass through unchanged."""
    if not get_config().tracing_enabled or _tracing_off_reason is not None:
        yield
        return
    manager = None
    try:
        tracer = _get_tracer()
        if tracer is not None:
            manager = tracer.provider.in_subsegment(f'## {name}')
            subsegment = manager.__enter__()
            if subsegment is not None:   # None: no segment to attach to (the SDK logged it)
                for key, value in annotations.items():
                    if value is not None:
                        subsegment.put_annotation(key=key, value=str(value))
    except Exception as exc:  # noqa: BLE001 - tracing is best effort; the request is not
        _tracing_failed(f'{type(exc).__name__}: {exc}')
        if manager is not None:
            with contextlib.suppress(Exception):
                manager.__exit__(None, None, None)
        manager = None
    if manager is None:
        yield
        return
    try:
        yield
    except BaseException as exc:
        with contextlib.suppress(BaseException):   # the subsegment records it; the caller gets it as it was
            manager.__exit__(type(exc), exc, exc.__traceback__)
        raise
    try:
        manager.__exit__(None, None, None)
    except Exception as exc:  # noqa: BLE001 - closing a subsegment must not fail finished work
        _tracing_failed(f'{type(exc).__name__}: {exc}')
