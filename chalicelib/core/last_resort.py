"""The one last-resort mapping: any exception nothing else answered, as the error a client gets.

Both front doors use it: the REST middleware (chalicelib/front/middleware.py) and the MCP
connector's tool calls (chalicelib/features/mcp/protocol.py). An ``ApiError`` is itself; an AWS
dependency that is throttled, failing or not answering is a 503 with Retry-After (issue 16:
under faults, never a 500); anything else a 500 naming the request id, with no detail of the
failure. The last two are logged with the traceback. See docs/api/conventions.md "Errors".
"""
from __future__ import annotations

from chalicelib.core import errors, observability

log = observability.get_logger('errors')


def answer(exc: BaseException, where: str = 'request', request_id: str | None = None) -> errors.ApiError:
    if isinstance(exc, errors.ApiError):
        return exc
    request_id = request_id or observability.current().get('request_id') or '-'
    if errors.aws_unavailable(exc):
        log.warning('%s: a dependency failed, request %s', where, request_id, exc_info=exc)
        return errors.DependencyUnavailable()
    log.error('%s: unhandled error, request %s', where, request_id, exc_info=exc)
    return errors.ApiError(f'An internal error occurred (request {request_id})', status=500)
