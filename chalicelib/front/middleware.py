"""The one HTTP middleware: authenticate, count the request against the rate limit, run the
view, and shape every error as {"error", "message", "status"} (ours, and the ones Chalice
itself produces: 405, 415, 500). Every response carries the X-RateLimit-* headers and
X-Request-Id. No stack trace ever reaches a client; unexpected errors are logged with the
request id, and an AWS dependency that is throttled, failing or silent is a 503, never a
500. Each request runs in its own observability context (core/observability.py): one
JSON log line per request, a Requests metric, a trace subsegment when tracing is on."""
from __future__ import annotations

import time

from chalice import Response

from chalicelib.core import budget, last_resort, observability
from chalicelib.core.config import get_config
from chalicelib.core.errors import ApiError, error_body
from chalicelib.core.principal import set_current
from chalicelib.front import chalice_adapter
from chalicelib.kernel.http import policy
from chalicelib.kernel.http.request import SEND_JSON

log = observability.get_logger('http')


def _error_response(status: int, message: str, headers: dict[str, str] | None = None, **extra) -> Response:
    return Response(body=error_body(status, message, **extra), status_code=status,
                    headers={'Content-Type': 'application/json', **(headers or {})})


def _translate_chalice_error(response: Response, request_id: str) -> Response:
    """Chalice answers some errors itself with {"Code", "Message"}: reshape them. Its 500 is an
    exception a view raised (Chalice catches those before middleware sees them, and logs the
    traceback): the answer names the request id, and so does our log line."""
    if response.status_code < 400 or not isinstance(response.body, dict) or 'Code' not in response.body:
        return response
    status = response.status_code
    message = str(response.body.get('Message', ''))
    if status == 415:   # a body of another type on a JSON route (every non-JSON route takes any type)
        message = f'{message}: {SEND_JSON}'
    if status >= 500:
        log.error('unhandled error in a view, request %s (traceback above)', request_id)
        message = f'An internal error occurred (request {request_id})'
    headers = {k: v for k, v in (response.headers or {}).items() if k.lower() != 'content-type'}
    return _error_response(status, message, headers)


def _admit(event, mode: str, route: str | None):
    """Authenticate the caller and count the request -> (principal, rate-limit decision).

    A user's request is admitted by features/identity/admission.py: one UpdateItem counts it
    (features/identity/gate.py) while one BatchGetItem reads, concurrently, what authenticates it (the
    user's record and ACL item) and, for a GET by id, the record itself. A request without a valid credential,
    and a public route, is answered without touching the counters (headers still state the
    limit): counting them would turn every garbage request into a DynamoDB write; floods of
    those are for the gateway's throttling to absorb (infra/usage_plan.py). When the counters
    cannot be reached, a write is refused with 503 and a read is counted in memory
    (features/identity/ratelimit.py)."""
    # lazy: the services load pynamodb; `import app` must not (cold start)
    from chalicelib.features.identity import (  # noqa: PLC0415
        admission,
        ratelimit,
        service_token,  # noqa: PLC0415 - lazy: cold start
    )
    try:
        if mode == 'user':
            return admission.admit(event.headers, event.method, reads=_reads(event, route))
        if mode == 'mcp':
            from chalicelib.features.mcp import auth as mcp_auth  # noqa: PLC0415 - lazy: cold start
            return mcp_auth.admit(event.headers, event.method)
        if mode == 'service':
            return service_token.authenticate_service(event.headers), ratelimit.untracked()
        return None, ratelimit.untracked()   # public route
    except ratelimit.Refused as exc:
        raise _Refused(exc, exc.decision) from None
    except ratelimit.LimiterUnavailable as exc:
        raise _Refused(exc, exc.decision) from None
    except ApiError as exc:
        raise _Refused(exc, ratelimit.untracked()) from None


_GET_BY_ID: dict[str, tuple[str, str]] = {}


def _reads(event, route: str | None) -> list[tuple[str, str]]:
    """What the view will read by key, to read it with the admission: a GET by id's record."""
    if event.method != 'GET' or not route:
        return []
    if not _GET_BY_ID:
        from chalicelib.kernel.registry import FAMILIES  # noqa: PLC0415 - lazy: cold start
        _GET_BY_ID.update({f'/api/{f.path}/{{{f.id_param}}}': (f.path, f.id_param) for f in FAMILIES})
    found = _GET_BY_ID.get(route)
    if found is None:
        return []
    id_ = (event.uri_params or {}).get(found[1])
    return [(found[0], id_)] if id_ else []


class _Refused(Exception):
    def __init__(self, error: ApiError, decision) -> None:
        super().__init__(error.message)
        self.error = error
        self.decision = decision


def install(app) -> None:
    chalice_adapter.install()   # a view's exceptions reach this middleware (the one Chalice patch)

    @app.middleware('http')
    def platform_middleware(event, get_response):
        request_id = response = None
        try:
            context = event.context or {}
            route = context.get('resourcePath')
            started = time.perf_counter()
            # API Gateway's request id when there is one (it is what its access logs show)
            with observability.work(request_id=context.get('requestId'), route=route, method=event.method) as work:
                request_id = work['request_id']
                with observability.trace(f'{event.method} {route}', route=route):
                    response = _handle(event, get_response, route, request_id)
                response.headers['X-Request-Id'] = request_id
                observability.log_request(status=response.status_code,
                                          duration_ms=(time.perf_counter() - started) * 1000)
                observability.count('Requests', route=route or 'unknown',
                                    statusClass=f'{response.status_code // 100}xx')
                if response.status_code == 429:
                    observability.count('Throttled', route=route or 'unknown')
        except Exception as exc:  # noqa: BLE001 - a failure around the view's own mapping (issue 38)
            response = _outside_failure(exc, request_id or (event.context or {}).get('requestId'), response)
        return response


def _outside_failure(exc: Exception, request_id: str | None, response: Response | None) -> Response:
    """A failure outside ``_handle``'s mapping: opening the request's context (logging, tracing),
    or accounting for it afterwards. Before a response exists it is the contract's 500 naming
    the request id; after, the response stands (the view's work is done) and the failure is only
    logged. Either way the answer carries X-Request-Id."""
    request_id = request_id or observability.new_id()
    if response is None:
        try:
            error = last_resort.answer(chalice_adapter.unwrap(exc), request_id=request_id)
        except Exception:  # noqa: BLE001 - the mapping itself failed: the plainest answer
            error = ApiError(f'An internal error occurred (request {request_id})', status=500)
        response = _error_response(error.status, error.message, error.headers, **error.extra)
        try:
            from chalicelib.features.identity.ratelimit import untracked  # noqa: PLC0415 - lazy: cold start
            response.headers.update(untracked().headers())
        except Exception:  # noqa: BLE001 - the limit's headers are a courtesy here
            pass
    else:
        log.error('request %s: failed after its response was made', request_id, exc_info=exc)
    response.headers['X-Request-Id'] = request_id
    return response


def _handle(event, get_response, route: str | None, request_id: str) -> Response:
    decision = None
    # one time budget per request (core/budget.py): loops that grow with the input check it
    context = getattr(event, 'lambda_context', None)
    deadline = budget.start(budget.for_request(context, get_config().request_budget_seconds),
                            ceiling=budget.for_request(context, budget.GATEWAY_SECONDS))
    try:
        principal, decision = _admit(event, policy.of(route), route)
        if principal is not None:
            observability.annotate(user_id=principal.user_id, organization_id=principal.default_org)
        set_current(principal)
        response = get_response(event)
    except _Refused as refused:
        decision = refused.decision
        exc = refused.error
        response = _error_response(exc.status, exc.message, exc.headers, **exc.extra)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: ours, 503 for AWS, else a bare 500
        error = last_resort.answer(chalice_adapter.unwrap(exc), request_id=request_id)
        response = _error_response(error.status, error.message, error.headers, **error.extra)
    finally:
        set_current(None)
        budget.end(deadline)
    response = _translate_chalice_error(response, request_id)
    if decision is None:  # failed before the limiter could answer: still say what the limit is
        from chalicelib.features.identity.ratelimit import untracked  # noqa: PLC0415 - lazy: cold start
        decision = untracked()
    response.headers.update(decision.headers())
    return response
