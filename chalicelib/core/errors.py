"""The one exception hierarchy of the API, mapped once to {"error", "message", "status"}.

Services raise these; the HTTP middleware (chalicelib/front/middleware.py) turns them into
responses. They know nothing of the web framework: chalicelib/front/chalice_adapter.py lets
them through Chalice to the middleware, and core/last_resort.py maps every other exception.
"""
from __future__ import annotations

from http import HTTPStatus
from typing import Any


class ApiError(Exception):
    status = 500

    def __init__(self, message: str, *, status: int | None = None,
                 headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.message = message
        self.headers = headers or {}
        self.extra = extra

    @property
    def error(self) -> str:
        return reason(self.status)

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, **self.extra)


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401

    def __init__(self, message: str = 'A valid credential is required', **kw: Any) -> None:
        kw.setdefault('headers', {'WWW-Authenticate': 'Bearer, ApiKey header="x-api-key", Basic realm="platform"'})
        super().__init__(message, **kw)


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class MethodNotAllowed(ApiError):
    status = 405


class Conflict(ApiError):
    status = 409


class PayloadTooLarge(ApiError):
    status = 413


class UnsupportedMediaType(ApiError):
    status = 415


class TooManyRequests(ApiError):
    status = 429


class ServiceUnavailable(ApiError):
    """A dependency (the table, the identity provider, the gateway) cannot answer now: the
    request did nothing that sticks and may be sent again after ``Retry-After`` seconds."""
    status = 503

    def __init__(self, message: str = 'The service is busy; retry shortly', *, retry_after: int = 2,
                 **kw: Any) -> None:
        kw.setdefault('headers', {'Retry-After': str(retry_after)})
        super().__init__(message, **kw)


# Error codes of an AWS service that cannot answer now (throttled, failing): the same call may
# succeed a moment later. The one list: store/ retries these, the last resorts answer 503.
# DynamoDB, S3 (whose HEAD errors carry no body: botocore reports the status as the code), SQS,
# EventBridge, Secrets Manager, API Gateway.
AWS_UNAVAILABLE_CODES = frozenset({
    'ThrottlingError', 'ThrottlingException', 'Throttling', 'ProvisionedThroughputExceeded',
    'ProvisionedThroughputExceededException', 'RequestLimitExceeded', 'InternalServerError',
    'InternalFailure', 'InternalError', 'ServiceUnavailable', 'SlowDown', 'RequestTimeout',
    'TransactionInProgressException', '500', '503', 'RequestThrottled', 'InternalException',
    'InternalServiceError', 'TooManyRequestsException', 'ServiceUnavailableException'})


def aws_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` is an AWS dependency failing to answer now (throttled, failing, timed out,
    unreachable), not an error of the request. pynamodb keeps botocore's error as ``cause``."""
    from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError  # noqa: PLC0415 - lazy
    cause = getattr(exc, 'cause', None) or exc
    if isinstance(cause, ClientError):
        return cause.response.get('Error', {}).get('Code') in AWS_UNAVAILABLE_CODES
    # timeouts, lost connections: the answer did not come (a parameter botocore refused is a bug)
    return isinstance(cause, BotoCoreError) and not isinstance(cause, ParamValidationError)


class DependencyUnavailable(ServiceUnavailable):
    """What a last resort answers (middleware, MCP tools) for an AWS failure no store function
    turned into its own 503: a throttled, failing or silent dependency is never a 500."""

    def __init__(self) -> None:
        super().__init__('A service the API depends on is busy or not answering; retry shortly', retry_after=2)


def reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return 'Error'


def error_body(status: int, message: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {'error': reason(status), 'message': message, 'status': status}
    body.update(extra)
    return body
