"""Calling a service bridge: the proxy route, the agent tools and BRIDGE_CALL workflow steps all
come here, and every call leaves through the egress fence (core/egress.py).

One call (``call_endpoint``):

1. the endpoint: the one ``endpoint_name`` names, or the only one of a single-endpoint bridge
   (400 listing the names otherwise, features/bridges/shapes.py ``select_endpoint``);
2. permission: a user needs ``resource:read`` in the bridge's organization to call an endpoint
   declared GET with a GET request, and ``resource:write`` when either is another method (the
   platform's rule that only GET reads; an agent tool call is a write); an agent only
   agent-callable bridges of its own project; the platform's service and system callers anything;
3. a header configured with ``secretRef`` (a record stored around the write rules) is 400
   naming it, as on save;
4. ``requestSchema.required`` fields present in neither the JSON body nor the query string:
   200 ``[]`` at once, the upstream is not contacted (``BridgeResult.called`` is False);
5. headers: the bridge's ``defaultHeaders``, then the endpoint's (which win, names compared
   ignoring case), with every ``${secrets.NAME}`` read from the organization's secrets
   (features/bridges/secrets.py): a missing one is 400 naming it, an unavailable Secrets Manager 503;
6. the declared method on ``baseUrl + path``, with the caller's query string, and the JSON body
   for POST, PUT, PATCH and DELETE endpoints; the caller's own headers are never forwarded;
7. the answer: the upstream status and body (cut at ``BRIDGE_PROXY_MAX_BYTES`` and marked
   truncated), with any secret value the call sent replaced by ``[secret NAME]`` should the
   upstream echo it back. Refusals of the fence are 400 ``service bridge egress denied: ...``
   (``_on_denied`` is the one place that sees them), a dead upstream 502, the deadline
   (``BRIDGE_PROXY_TIMEOUT_SECONDS``, 30 s) 504.

``call_endpoint`` is the entry point for other services (issue 12's BRIDGE_CALL step passes the
bridge record it loaded, parsed values and its principal); ``call`` loads the bridge by id for
the caller first.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import egress, observability
from chalicelib.core.config import get_config
from chalicelib.core.errors import ApiError, BadRequest, Forbidden, NotFound
from chalicelib.core.principal import Principal
from chalicelib.features.bridges import secrets, shapes
from chalicelib.kernel import access, crud

log = observability.get_logger('bridges')

FAMILY = 'service-bridges'
BODY_METHODS = frozenset({'POST', 'PUT', 'PATCH', 'DELETE'})
TRUSTED_CREDENTIALS = frozenset({'service', 'system'})
DEFAULT_ACCEPT = 'application/json, text/*;q=0.9, */*;q=0.5'
MIN_SCRUBBED_SECRET = 6   # shorter values are not scrubbed from answers (they would mangle them)


@dataclass(frozen=True)
class BridgeResult:
    """What a call produced: the upstream's status and body, or (``called`` False) the empty
    answer given without contacting it."""
    status: int
    text: str                 # the body as text (UTF-8, undecodable bytes replaced)
    json_body: bool           # the upstream declared JSON and the whole body arrived
    truncated: bool
    content_type: str         # what the proxy answers with
    called: bool = True
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def value(self) -> Any:
        """The body as a JSON value: parsed JSON, else the text (None when empty)."""
        if not self.text:
            return None
        if self.json_body:
            try:
                return json.loads(self.text)
            except ValueError:
                return self.text
        return self.text

    def tool_result(self) -> dict[str, Any]:
        """``call_service_bridge``'s result: ``{status, ok, body, truncated}``."""
        return {'status': self.status, 'ok': self.ok, 'body': self.value(), 'truncated': self.truncated}


NOT_CALLED = BridgeResult(status=200, text='[]', json_body=True, truncated=False,
                          content_type='application/json', called=False)


def call(bridge_id: str, endpoint_name: str | None, *, query: Mapping[str, list[str]] | None = None,
         body: Any = None, principal: Principal, write: bool = False,
         timeout: float | None = None) -> BridgeResult:
    """The proxy: call an endpoint of the bridge ``bridge_id`` the caller may see (404 otherwise).
    ``write``: the caller's own request is a write (any method but GET)."""
    stored = crud.load_visible(FAMILY, bridge_id, principal)
    if write:
        require_call(principal, stored.data, 'POST')   # before anything about its endpoints is said
    return call_endpoint(stored.data, endpoint_name, query=query, body=body, principal=principal,
                         write=write, timeout=timeout)


def call_endpoint(bridge: Mapping[str, Any], endpoint_name: str | None, *,
                  query: Mapping[str, list[str]] | None = None, body: Any = None,
                  principal: Principal, write: bool = False, timeout: float | None = None) -> BridgeResult:
    """Call one endpoint of a bridge record (see the module docstring for the steps).

    ``query``: parameter -> values; ``body``: a parsed JSON value (None: no body); ``write``: the
    call counts as a write whatever the endpoint's method; ``timeout`` shortens the configured
    deadline (a Lambda with less time left passes what it has)."""
    query = dict(query or {})
    _require_visible(principal, bridge)
    try:
        endpoint = shapes.select_endpoint(bridge, endpoint_name)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    method = str(endpoint.get('method') or 'GET')
    require_call(principal, bridge, 'POST' if write else method)
    refused = shapes.secret_ref_headers(bridge.get('defaultHeaders')) + \
        shapes.secret_ref_headers(endpoint.get('defaultHeaders'))
    if refused:
        raise BadRequest(f"header '{refused[0]}' is configured with secretRef, which is not supported: "
                         'write ${secrets.NAME} in its value instead')
    if shapes.missing_required(endpoint, body, query):
        return NOT_CALLED
    headers, sent_secrets = _headers(bridge, endpoint)
    url = shapes.join_url(str(bridge.get('baseUrl') or ''), str(endpoint.get('path') or ''))
    cfg = get_config()
    deadline = cfg.bridge_timeout_seconds if timeout is None else max(0.001, min(timeout, cfg.bridge_timeout_seconds))
    response = _send(bridge, method, url, headers=headers, query=query,
                     body=body if method in BODY_METHODS else None, timeout=deadline,
                     max_bytes=cfg.bridge_max_bytes)
    return _result(response, sent_secrets)


# ----------------------------------------------------------------------------- permission

def _require_visible(principal: Principal, bridge: Mapping[str, Any]) -> None:
    if principal.credential in TRUSTED_CREDENTIALS:
        return
    if principal.credential == 'agent':
        visible = principal.project_id is not None and bridge.get('projectId') == principal.project_id
    else:
        visible = access.can_see_org(principal, bridge.get('organizationId'))
    if not visible:
        raise NotFound(f"No ServiceBridge with id {bridge.get('id')}")


def require_call(principal: Principal, bridge: Mapping[str, Any], method: str) -> None:
    """May ``principal`` call an endpoint of ``bridge`` declared with ``method``? (403 if not)"""
    if principal.credential in TRUSTED_CREDENTIALS:
        return
    if principal.credential == 'agent':
        if bridge.get('agentCallable') is True and bridge.get('projectId') == principal.project_id:
            return
        raise Forbidden("This bridge is not callable by agents of this project")
    permission = 'resource:read' if method == 'GET' else 'resource:write'
    if not access.has(principal, bridge.get('organizationId'), permission):
        raise Forbidden(f'Permission {permission} is required for this call of the bridge')


# ----------------------------------------------------------------------------- headers and secrets

def _headers(bridge: Mapping[str, Any], endpoint: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(headers to send, secret NAME -> value of every secret they hold)."""
    merged: dict[str, tuple[str, str]] = {}   # lower-case name -> (name, template)
    for source in (bridge.get('defaultHeaders'), endpoint.get('defaultHeaders')):
        for name, value in (source or {}).items():
            merged[str(name).lower()] = (str(name), value)
    org = str(bridge.get('organizationId') or '')
    values: dict[str, str] = {}
    out: dict[str, str] = {}
    for name, template in merged.values():
        try:
            shapes.check_header_value(name, template)
            needed = shapes.template_secrets(template)
        except ValueError as exc:
            raise BadRequest(f'The bridge cannot be called: {exc}') from None
        for secret_name in needed:
            if secret_name not in values:
                values[secret_name] = _secret(org, secret_name)
        rendered = shapes.render(template, values.__getitem__)
        if not shapes.header_value_ok(rendered):
            raise BadRequest(f"header '{name}' cannot be sent: a secret it holds has a line break, a control "
                             'character or a character HTTP headers cannot carry')
        out[name] = rendered
    if 'accept' not in merged:
        out['Accept'] = DEFAULT_ACCEPT
    return out, values


def _secret(org: str, name: str) -> str:
    try:
        value = secrets.read_org_secret(org, name)
    except secrets.SecretUnavailable as exc:
        raise ApiError(f'{exc}; retry later', status=503, headers={'Retry-After': '5'}) from None
    if value is None:
        raise BadRequest(f"secret '{name}' does not exist in this organization")
    return value


# ----------------------------------------------------------------------------- the call

def _send(bridge: Mapping[str, Any], method: str, url: str, *, headers: dict[str, str],
          query: dict[str, list[str]], body: Any, timeout: float, max_bytes: int) -> egress.EgressResponse:
    try:
        return egress.request(method, url, headers=headers, params=query or None, json_body=body,
                              timeout=timeout, max_bytes=max_bytes)
    except egress.EgressDenied as exc:
        _on_denied(bridge, exc)
        raise
    except ValueError as exc:   # what the fence refuses to send; its messages hold no header value
        raise BadRequest(f'The bridge cannot be called: {exc}') from None


def _on_denied(bridge: Mapping[str, Any], exc: egress.EgressDenied) -> None:
    """Every egress refusal of a bridge call passes here, once: one warning line (which bridge,
    why) and the ``EgressDenied`` metric (no bridge dimension: a metric per bridge would be
    unbounded)."""
    log.warning('service bridge egress denied: bridge=%s organization=%s reason=%s',
                bridge.get('id'), bridge.get('organizationId'), exc.reason)
    observability.count('EgressDenied')


def _result(response: egress.EgressResponse, sent_secrets: Mapping[str, str]) -> BridgeResult:
    raw = _scrub(response.body, sent_secrets, response.truncated)
    text = raw.decode('utf-8', 'replace')
    declared = response.headers.get('content-type', '').split(';', 1)[0].strip().lower()
    json_type = declared == 'application/json' or declared.endswith('+json')
    json_body = json_type and not response.truncated
    if json_body:
        content_type = 'application/json'
    elif declared.startswith('text/'):
        content_type = f'{declared}; charset=utf-8'
    else:
        content_type = 'text/plain; charset=utf-8'
    return BridgeResult(status=response.status, text=text, json_body=json_body, truncated=response.truncated,
                        content_type=content_type)


def _scrub(body: bytes, sent_secrets: Mapping[str, str], truncated: bool) -> bytes:
    """Replace the secret values a call sent with ``[secret NAME]`` wherever the upstream echoes
    them (raw, or as escaped inside a JSON string); a cut body loses a trailing partial value."""
    for name, value in sent_secrets.items():
        if len(value) < MIN_SCRUBBED_SECRET:
            continue
        mark = f'[secret {name}]'.encode()
        for form in {value.encode('utf-8'), json.dumps(value)[1:-1].encode('utf-8')}:
            body = body.replace(form, mark)
            if truncated:
                for cut in range(len(form) - 1, 3, -1):
                    if body.endswith(form[:cut]):
                        body = body[:-cut] + mark
                        break
    return body
