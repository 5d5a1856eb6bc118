"""Organization secrets in AWS Secrets Manager (moto locally), read by name, cached briefly.

Naming (infra/names.py): an organization's secret NAME is the Secrets Manager secret
``{ORG_SECRETS_PREFIX}{orgId}/{NAME}``, e.g. ``platform/prod/org/<orgId>/STRIPE_KEY``. The
prefix comes from the stage's configuration and is the only one the functions' IAM reaches;
the organization id is always the caller's record's organization, never a client's say, so one
organization can never name another's secret (a NAME such as ``../x`` is a literal string to
Secrets Manager, and features/bridges/shapes.py refuses it anyway).

Reads are cached in the process for ``ORG_SECRET_CACHE_SECONDS`` (default 30 s, at most
``CACHE_ENTRIES`` secrets): a bridge called in a loop reads its secret once, and a rotated
value is picked up within that time. A secret that does not exist is not cached (creating it
takes effect at once).

Values never leave this module except as the return value of ``read_org_secret``: nothing here
logs, error messages name secrets but never hold values, and while a Secrets Manager call is in
flight the DEBUG logging of botocore, urllib3 and moto (which prints request and response
bodies) is suppressed for this thread (``_Quiet``), so a process logging at DEBUG still never
writes a value.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from functools import lru_cache

from chalicelib.core.config import get_config
from chalicelib.kernel.store.endpoints import watched

CACHE_ENTRIES = 512
CONNECT_TIMEOUT = 2
READ_TIMEOUT = 5
MAX_ATTEMPTS = 3
# Loggers (and their children) that print AWS request/response bodies at DEBUG.
_NOISY = ('botocore', 'boto3', 'urllib3', 'moto', 's3transfer')
_MISSING_CODES = frozenset({'ResourceNotFoundException'})
_MARKED_FOR_DELETION = 'InvalidRequestException'


class SecretUnavailable(Exception):
    """Secrets Manager could not answer (throttled, failing, access denied): the secret may
    exist. The message names the secret and the error code, never a value."""


def secret_id(org_id: str, name: str) -> str:
    return f'{get_config().org_secrets_prefix}{org_id}/{name}'


# ----------------------------------------------------------------------------- client

@lru_cache(maxsize=1)
def _client():
    import boto3  # noqa: PLC0415 - lazy: only calls that use a secret need Secrets Manager
    from botocore.config import Config  # noqa: PLC0415 - lazy, with boto3
    cfg = get_config()
    return watched(boto3.client('secretsmanager', region_name=cfg.region, endpoint_url=cfg.endpoint_url,
                        config=Config(connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
                                      retries={'max_attempts': MAX_ATTEMPTS, 'mode': 'standard'})))


def reset() -> None:
    """Forget the client and every cached value (tests change the environment)."""
    _client.cache_clear()
    _cache.clear()


# ----------------------------------------------------------------------------- quiet logging

_quiet: contextvars.ContextVar[bool] = contextvars.ContextVar('secrets_quiet', default=False)


class _Quiet(logging.Filter):
    """Drops the records of AWS client loggers while this thread is inside a secrets call."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _quiet.get()


_FILTER = _Quiet()
_filtered: set[str] = set()
_filter_lock = threading.Lock()


def _install_filter() -> None:
    """A logging filter sees only its own logger's records, so it goes on every logger of the
    noisy libraries that exists (they are created at import; this runs on every call, and is a
    dictionary walk when nothing is new)."""
    names = [name for name in list(logging.Logger.manager.loggerDict)
             if name not in _filtered and name.split('.', 1)[0] in _NOISY]
    if not names:
        return
    with _filter_lock:
        for name in names:
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)
            _filtered.add(name)


@contextlib.contextmanager
def _quietly() -> Iterator[None]:
    _install_filter()
    token = _quiet.set(True)
    try:
        yield
    finally:
        _quiet.reset(token)
        _install_filter()   # loggers the call itself created (modules imported lazily)


# ----------------------------------------------------------------------------- cache

class _Cache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: OrderedDict[str, tuple[float, str]] = OrderedDict()

    def get(self, key: str) -> str | None:
        with self._lock:
            entry = self._values.get(key)
            if entry is None:
                return None
            if entry[0] <= time.monotonic():
                del self._values[key]
                return None
            return entry[1]

    def put(self, key: str, value: str, seconds: float) -> None:
        if seconds <= 0:
            return
        with self._lock:
            self._values[key] = (time.monotonic() + seconds, value)
            self._values.move_to_end(key)
            while len(self._values) > CACHE_ENTRIES:
                self._values.popitem(last=False)

    def drop(self, key: str) -> None:
        with self._lock:
            self._values.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


_cache = _Cache()


# ----------------------------------------------------------------------------- operations

def _code(exc: Exception) -> str:
    response = getattr(exc, 'response', None) or {}
    return str(response.get('Error', {}).get('Code') or type(exc).__name__)


def read_org_secret(org_id: str, name: str) -> str | None:
    """The text value of the organization's secret NAME; None when it does not exist (or is
    scheduled for deletion, or holds binary data only). ``SecretUnavailable`` when Secrets
    Manager cannot say."""
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415 - lazy, with boto3
    key = secret_id(org_id, name)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    try:
        with _quietly():
            answer = _client().get_secret_value(SecretId=key)
    except ClientError as exc:
        code = _code(exc)
        if code in _MISSING_CODES or code == _MARKED_FOR_DELETION:
            return None
        raise SecretUnavailable(f'secret {name} could not be read ({code})') from None
    except BotoCoreError as exc:
        raise SecretUnavailable(f'secret {name} could not be read ({type(exc).__name__})') from None
    value = answer.get('SecretString')
    if not isinstance(value, str):
        return None
    _cache.put(key, value, get_config().secret_cache_seconds)
    return value


def put_org_secret(org_id: str, name: str, value: str) -> None:
    """Create the secret, or store a new value for it (operators and tests; the API has no
    route that writes secrets)."""
    from botocore.exceptions import ClientError  # noqa: PLC0415 - lazy, with boto3
    key = secret_id(org_id, name)
    client = _client()
    with _quietly():
        try:
            client.create_secret(Name=key, SecretString=value)
        except ClientError as exc:
            if _code(exc) != 'ResourceExistsException':
                raise SecretUnavailable(f'secret {name} could not be written ({_code(exc)})') from None
            client.put_secret_value(SecretId=key, SecretString=value)
    _cache.drop(key)
