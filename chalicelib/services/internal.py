"""Server-to-server callers: the internal activity-start route trusts a service token
(``INTERNAL_SERVICE_TOKEN``), compared in constant time, instead of user credentials."""
from __future__ import annotations

from typing import Mapping

from chalicelib.core.config import get_config
from chalicelib.core.errors import Unauthorized
from chalicelib.core.principal import Principal
from chalicelib.core.secrets import same

SERVICE_USER = '00000000-0000-0000-0000-000000000000'


def authenticate_service(headers: Mapping[str, str]) -> Principal:
    expected = get_config().internal_service_token
    auth = headers.get('authorization') or ''
    token = headers.get('x-service-token') or (auth[7:].strip() if auth.lower().startswith('bearer ') else None)
    if not expected or not same(token, expected):
        raise Unauthorized('A valid service token is required')
    return Principal(user_id=SERVICE_USER, email='service@internal', platform_admin=True,
                     credential='service', rate_key='service')
