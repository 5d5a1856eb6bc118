"""The health check: does storage answer?"""
from __future__ import annotations

from typing import Any

from chalicelib.core.config import get_config
from chalicelib.core.errors import ApiError
from chalicelib.core.observability import get_logger
from chalicelib.kernel.store import table

log = get_logger('health')


def check() -> dict[str, Any]:
    try:
        table.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "not healthy"; the reason is logged, not shown
        log.warning('health check: storage does not answer (%s)', type(exc).__name__)
        raise ApiError('The service is unavailable', status=503, headers={'Retry-After': '5'}) from None
    return {'status': 'ok', 'version': get_config().app_version}
