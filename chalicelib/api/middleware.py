"""The one HTTP middleware: authenticate, count the request against the rate limit, run the
view, and shape every error as {"error", "message", "status"} (ours, and the ones Chalice
itself produces: 405, 415, 500). Every response carries the X-RateLimit-* headers.
No stack trace ever reaches a client; unexpected errors are logged with the request id."""
from __future__ import annotations

import json
import logging
import uuid

from chalice import Response

from chalicelib.core.errors import ApiError, Unauthorized, error_body
from chalicelib.core.principal import set_current

from . import policy

log = logging.getLogger('platform')


def _error_response(status: int, message: str, headers: dict[str, str] | None = None, **extra) -> Response:
    return Response(body=error_body(status, message, **extra), status_code=status,
                    headers={'Content-Type': 'application/json', **(headers or {})})


def _translate_chalice_error(response: Response) -> Response:
    """Chalice answers some errors itself with {"Code", "Message"}: reshape them."""
    if response.status_code < 400 or not isinstance(response.body, dict) or 'Code' not in response.body:
        return response
    status = response.status_code
    message = str(response.body.get('Message', ''))
    if status >= 500:
        message = 'An internal error occurred'
    headers = {k: v for k, v in (response.headers or {}).items() if k.lower() != 'content-type'}
    return _error_response(status, message, headers)


def _client_subject(event) -> str:
    from chalicelib.services.ratelimit import client_subject
    identity = (event.context or {}).get('identity') or {}
    return client_subject(identity.get('sourceIp'))


def _admit(event, mode: str):
    """Authenticate the caller and count the request -> (principal, rate-limit decision).

    A request without a valid credential is counted against its client address (so guessing
    keys is throttled too) and answered 401, or 429 once that address is over the limit."""
    from chalicelib.services import ratelimit
    try:
        if mode == 'user':
            from chalicelib.services.identity import authenticate
            principal = authenticate(event.headers)
        elif mode == 'service':
            from chalicelib.services.internal import authenticate_service
            principal = authenticate_service(event.headers)
        else:
            principal = None
    except ApiError as exc:
        decision = ratelimit.check(_client_subject(event))
        if not decision.allowed:
            raise _Refused(decision.error(), decision) from None
        raise _Refused(exc, decision) from None
    if principal is not None and not principal.rate_key:
        return principal, ratelimit.untracked()   # the internal service caller is not limited
    decision = ratelimit.check(principal.rate_key if principal is not None else _client_subject(event))
    if not decision.allowed:
        raise _Refused(decision.error(), decision)
    return principal, decision


class _Refused(Exception):
    def __init__(self, error: ApiError, decision) -> None:
        super().__init__(error.message)
        self.error = error
        self.decision = decision


def install(app) -> None:
    @app.middleware('http')
    def platform_middleware(event, get_response):
        request_id = str(uuid.uuid4())
        decision = None
        try:
            route = (event.context or {}).get('resourcePath')
            principal, decision = _admit(event, policy.of(route))
            set_current(principal)
            response = get_response(event)
        except _Refused as refused:
            decision = refused.decision
            exc = refused.error
            response = _error_response(exc.status, exc.message, exc.headers, **exc.extra)
        except ApiError as exc:
            response = _error_response(exc.status, exc.message, exc.headers, **exc.extra)
        except Exception:  # noqa: BLE001 - the last line of defence: log it, answer a bare 500
            log.exception('unhandled error, request %s', request_id)
            response = _error_response(500, f'An internal error occurred (request {request_id})')
        finally:
            set_current(None)
        response = _translate_chalice_error(response)
        if decision is None:  # failed before the limiter could answer: still say what the limit is
            from chalicelib.services.ratelimit import untracked
            decision = untracked()
        response.headers.update(decision.headers())
        return response
