"""Who may call the MCP connector, checked by the HTTP middleware before the view runs (the
route's policy is ``mcp``, kernel/http/policy.py), so the rate limiter counts MCP calls like any other.

- Disabled (``MCP_ENABLED`` unset): 404, as if the route did not exist.
- ``Origin`` present and not allowed: 403. Allowed are the origin of ``MCP_PUBLIC_URL`` and
  those listed in ``MCP_ALLOWED_ORIGINS`` (browsers send it; a DNS-rebinding page cannot pass).
- No credential: 401 with ``WWW-Authenticate: Bearer resource_metadata="<metadata URL>"``
  (RFC 9728 section 5.1) so an MCP client finds the authorization server and signs in there
  (dynamic client registration and PKCE happen at the identity provider, not here).
- A bearer JWT must name this resource (``MCP_PUBLIC_URL``) in its ``aud``: a token minted for
  the REST API or anything else is 401 (no token passthrough). Then the usual subject binding
  (features/identity/service.py).
- ``x-api-key`` (and ``Bearer pk_...``, Basic) work as for REST: programmatic clients.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from chalicelib.core.config import Config, get_config
from chalicelib.core.errors import Forbidden, NotFound, Unauthorized
from chalicelib.core.principal import Principal
from chalicelib.features.identity import admission

METADATA_PATH = '/.well-known/oauth-protected-resource'
SCOPES = ('mcp:tools',)


def enabled() -> Config:
    cfg = get_config()
    if not cfg.mcp_enabled:
        raise NotFound('Not found')
    return cfg


def resource(cfg: Config) -> str:
    """The resource identifier: ``MCP_PUBLIC_URL``, else the API's public URL + /mcp (with neither
    configured, the historical default host: tokens must then name it, so a deployment sets one)."""
    return cfg.mcp_public_url or (cfg.public_url or 'https://api.example.com') + '/mcp'


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f'{parts.scheme}://{parts.netloc}'.lower()


def metadata_url(cfg: Config) -> str:
    """RFC 9728 section 3.1: the well-known path inserted between host and the resource's path."""
    res = resource(cfg)
    path = urlsplit(res).path.rstrip('/')
    return _origin(res) + METADATA_PATH + path


def metadata(cfg: Config) -> dict:
    """The protected resource metadata document (RFC 9728 section 2)."""
    doc = {'resource': resource(cfg), 'bearer_methods_supported': ['header'],
           'scopes_supported': list(SCOPES), 'resource_name': 'Platform MCP tool connector',
           'authorization_servers': [cfg.jwt_issuer] if cfg.jwt_issuer else []}
    return doc


def check_origin(headers: Mapping[str, str], cfg: Config) -> None:
    origin = headers.get('origin')
    if origin is None:
        return
    allowed = {_origin(resource(cfg)), *cfg.mcp_allowed_origins}
    if origin.strip().rstrip('/').lower() not in allowed:
        raise Forbidden('Origin not allowed')


def challenge(cfg: Config, message: str, *, error: str | None = None) -> Unauthorized:
    value = f'Bearer resource_metadata="{metadata_url(cfg)}"'
    if error:
        value = f'Bearer error="{error}", resource_metadata="{metadata_url(cfg)}"'
    return Unauthorized(message, headers={'WWW-Authenticate': value})


def admit(headers: Mapping[str, str], method: str) -> tuple[Principal, Any]:
    """Authenticate and count an MCP request on the REST path (features/identity/admission.py: one gate
    UpdateItem), with this resource as the audience a bearer JWT must name; any credential
    failure is the RFC 9728 challenge."""
    cfg = enabled()
    check_origin(headers, cfg)
    key = (headers.get('x-api-key') or headers.get('x-access-token') or '').strip()
    authorization = (headers.get('authorization') or '').strip()
    if not key and not authorization:
        raise challenge(cfg, 'A credential is required: a bearer token for this resource (see the '
                             'resource_metadata of WWW-Authenticate) or an API key in x-api-key')
    try:
        return admission.admit(headers, method, audience=resource(cfg))
    except Unauthorized as exc:
        raise challenge(cfg, exc.message, error='invalid_token') from None
