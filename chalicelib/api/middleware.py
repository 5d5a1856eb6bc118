"""The one HTTP middleware: authenticate, run the view, and shape every error as
{"error", "message", "status"} (ours, and the ones Chalice itself produces: 405, 415, 500).
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


def install(app) -> None:
    @app.middleware('http')
    def platform_middleware(event, get_response):
        request_id = str(uuid.uuid4())
        try:
            route = (event.context or {}).get('resourcePath')
            mode = policy.of(route)
            if mode == 'user':
                from chalicelib.services.identity import authenticate
                set_current(authenticate(event.headers))
            elif mode == 'service':
                from chalicelib.services.internal import authenticate_service
                set_current(authenticate_service(event.headers))
            response = get_response(event)
        except ApiError as exc:
            response = _error_response(exc.status, exc.message, exc.headers, **exc.extra)
        except Exception:  # noqa: BLE001 - the last line of defence: log it, answer a bare 500
            log.exception('unhandled error, request %s', request_id)
            response = _error_response(500, f'An internal error occurred (request {request_id})')
        finally:
            set_current(None)
        return _translate_chalice_error(response)
