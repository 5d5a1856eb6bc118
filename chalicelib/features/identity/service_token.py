"""Server-to-server callers: the internal routes (features/work/internal_routes.py) trust a service token
(``INTERNAL_SERVICE_TOKEN``), compared in constant time, instead of user credentials.

The service caller acts for the platform (it may write in any organization) and skips the
caller-facing activity-start permission; what it may do is limited by the routes marked
'service' (chalicelib/features/work/internal_routes.py), and each of those checks what the contract asks.
It is not rate limited (no ``rate_key``): it is our own back end.
"""
from __future__ import annotations

from collections.abc import Mapping

from chalicelib.core.config import get_config
from chalicelib.core.errors import Unauthorized
from chalicelib.core.principal import Principal
from chalicelib.core.secrets import same

SERVICE_USER = '00000000-0000-0000-0000-000000000000'
SERVICE = Principal(user_id=SERVICE_USER, email='service@internal', platform_admin=True,
                    credential='service', rate_key='')


def authenticate_service(headers: Mapping[str, str]) -> Principal:
    expected = get_config().internal_service_token
    auth = headers.get('authorization') or ''
    token = headers.get('x-service-token') or (auth[7:].strip() if auth.lower().startswith('bearer ') else None)
    if not expected or not same(token, expected):
        raise Unauthorized('A valid service token is required')
    return SERVICE

