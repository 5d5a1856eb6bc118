"""Helpers of the service-bridge tests (tests/api/test_bridges_*.py): configuration changes
that take effect between requests, and bridges made through the API.

Those tests install the network guard of tests/netguard.py for every test (nothing can reach
beyond loopback) and call upstreams on 127.0.0.1 that the egress fence reaches only through
``BRIDGE_EGRESS_PRIVATE_HOST_ALLOWLIST``: a name (``upstream.test``) that the guard's resolver
answers with 127.0.0.1 and that the allowlist names."""
from __future__ import annotations

from typing import Any

import pytest

UPSTREAM_HOST = 'upstream.test'


def configure(monkeypatch: pytest.MonkeyPatch, **env: str | None) -> None:
    """Set (or with None, remove) environment variables and re-read the configuration now:
    chalice's test client swaps os.environ while it serves a request."""
    from chalicelib.core.config import get_config, reset_config
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    reset_config()
    get_config()


def endpoint(name: str, path: str = '/echo', method: str = 'GET', required: list[str] | None = None,
             headers: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {'name': name, 'method': method, 'path': path, 'defaultHeaders': headers or {}}
    if required is not None:
        out['requestSchema'] = {'type': 'object', 'required': required, 'properties': {}}
    return out


def make_bridge(api, project_id: str, base_url: str, endpoints: list[dict[str, Any]],
                **extra: Any) -> dict[str, Any]:
    body = {'projectId': project_id, 'name': extra.pop('name', 'bridge'), 'baseUrl': base_url,
            'endpoints': endpoints, **extra}
    r = api.post('/api/service-bridges', body)
    assert r.status == 201, r.json
    return r.json


def project(api, org_id: str, name: str = 'p') -> dict[str, Any]:
    r = api.post('/api/projects', {'name': name, 'organizationId': org_id})
    assert r.status == 201, r.json
    return r.json
