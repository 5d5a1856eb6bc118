"""Service bridges: the shapes of baseUrl, endpoints and headers are checked with every write
(features/bridges/shapes.py through the registry's shapes); this hook adds who may point a secret where.

A bridge whose headers interpolate ``${secrets.NAME}`` sends the organization's secret to its
``baseUrl``. Whoever may change that URL or those headers decides where the secret goes, so on
such a bridge creating it, changing its ``baseUrl``, or adding or changing a header that holds a
secret needs ``organization:manage`` (the role that manages the organization's secrets), not
just ``resource:write``. Other changes (names, endpoints without secrets, ``agentCallable``)
follow the generic rule.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.errors import Forbidden
from chalicelib.kernel import access
from chalicelib.kernel.hooks import Hook


def secret_headers(data: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(endpoint name or '', header name lower-cased, template) of every header holding a secret."""
    out: set[tuple[str, str, str]] = set()
    sources = [('', data.get('defaultHeaders'))]
    sources += [(str(e.get('name')), e.get('defaultHeaders')) for e in data.get('endpoints') or []
                if isinstance(e, dict)]
    for where, headers in sources:
        for name, value in (headers or {}).items():
            if isinstance(value, str) and '${secrets.' in value:
                out.add((where, str(name).lower(), value))
    return out


def _require_manage(principal, data: dict[str, Any], what: str) -> None:
    if not access.has(principal, data.get('organizationId'), 'organization:manage'):
        raise Forbidden(f'Permission organization:manage is required to {what} a bridge whose headers hold '
                        'secrets (${secrets.NAME})')


class ServiceBridgeHook(Hook):
    guards = frozenset({'defaultHeaders', 'endpoints', 'baseUrl'})   # secret headers, where they go: MANAGE

    def before_create(self, family, principal, data, body):
        if secret_headers(data):
            _require_manage(principal, data, 'create')

    def before_update(self, family, principal, new, stored):
        held = secret_headers(new)
        if not held:
            return
        if held - secret_headers(stored.data):
            _require_manage(principal, new, 'add or change secret headers of')
        if new.get('baseUrl') != stored.data.get('baseUrl'):
            _require_manage(principal, new, 'change the baseUrl of')


HOOK = ServiceBridgeHook()
