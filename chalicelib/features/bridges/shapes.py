"""Service bridges as data: the shape of a bridge's base URL, endpoints and header templates,
and the ``${secrets.NAME}`` template language of header values.

Pure functions (no I/O, no pydantic): the write path validates a bridge with them (through the
named shapes at the end of this module, ``SHAPES``, which the bridges' declarations.py installs
into the kernel (kernel/shapes.py) and /v3/api-docs publishes), and the call path
(features/bridges/proxy.py) reads the same rules back: which secrets a header needs, how a value is
rendered once they are known, which endpoint a name selects.

A bridge::

    {"baseUrl": "https://api.example.com/v1",
     "defaultHeaders": {"Authorization": "Bearer ${secrets.EXAMPLE_TOKEN}"},
     "endpoints": [{"name": "lookup", "method": "GET", "path": "/customers",
                    "requestSchema": {"required": ["customerId"], "properties": {...}},
                    "defaultHeaders": {"Accept": "application/json"}}],
     "agentCallable": false}

Rules (each refusal is a ``ValueError`` whose message names the offending header, endpoint or
field, never a header value):

* ``baseUrl``: an absolute http or https URL with a host, no credentials (``user:pass@``), no
  query or fragment, ASCII without spaces or control characters, no ``${`` (secrets go in
  headers).
* endpoints: at most ``MAX_ENDPOINTS``; ``name`` unique ignoring case, of
  ``[A-Za-z0-9][A-Za-z0-9_.~-]*`` (it is a URL path segment of the proxy); ``method`` one of
  ``METHODS`` (default GET); ``path`` empty or starting with ``/`` (it is appended to
  ``baseUrl``: anything else could change the host, as ``.evil.example`` would); an optional
  ``requestSchema`` whose ``required`` is a list of distinct field names and ``properties`` an
  object; endpoint-level ``defaultHeaders``.
* headers: at most ``MAX_HEADERS`` per map, names are HTTP tokens that the platform does not
  set itself (Host, Content-Length, ...), values are strings of printable Latin-1 (what HTTP
  carries) in which the only interpolation is ``${secrets.NAME}``. A value configured as an
  object with ``secretRef`` (an older way of naming a secret) is refused, naming the header.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from chalicelib.kernel.shapes import Shape, ref

METHODS = ('GET', 'POST', 'PUT', 'PATCH', 'DELETE')
MAX_ENDPOINTS = 100
MAX_HEADERS = 50
MAX_HEADER_VALUE = 8192
MAX_URL = 2048
MAX_REQUIRED = 100
MAX_SECRET_NAME = 256

ENDPOINT_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.~-]{0,99}')
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
SECRET_NAME = re.compile(r'[A-Za-z0-9_+=.@-]+(?:/[A-Za-z0-9_+=.@-]+)*')
_TEMPLATE = re.compile(r'\$\{([^}]*)\}')
_SECRET_TEMPLATE = re.compile(r'secrets\.(.+)')
_UNPRINTABLE = re.compile(r'[\x00-\x08\x0a-\x1f\x7f]')
_URL_UNSAFE = re.compile(r'[\x00-\x20\x7f]')
# Set by the platform on every outbound request (core/egress.py), or meaningless across a hop.
RESERVED_HEADERS = frozenset({'host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive',
                              'proxy-connection', 'te', 'trailer', 'upgrade', 'expect'})
ENDPOINT_KEYS = frozenset({'name', 'method', 'path', 'description', 'requestSchema', 'defaultHeaders'})


# ----------------------------------------------------------------------------- base URL

def check_base_url(value: str) -> str:
    if len(value) > MAX_URL:
        raise ValueError(f'must be at most {MAX_URL} characters')
    if _URL_UNSAFE.search(value):
        raise ValueError('must not contain spaces or control characters')
    if not value.isascii():
        raise ValueError('must be ASCII: percent-encode other characters (an IDN host in its xn-- form)')
    if '${' in value:
        raise ValueError('cannot hold ${...}: secrets go in defaultHeaders as ${secrets.NAME}')
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise ValueError('must be an http or https URL (it cannot be parsed)') from None
    if parts.scheme.lower() not in ('http', 'https'):
        raise ValueError('must be an http or https URL')
    if '@' in parts.netloc:
        raise ValueError('must not carry credentials (user@host): put secrets in defaultHeaders '
                         'as ${secrets.NAME}')
    if not parts.hostname:
        raise ValueError('must name a host')
    if parts.query or parts.fragment or value.endswith(('?', '#')):
        raise ValueError('must not have a query or a fragment (endpoint paths and the proxy '
                         'query string are appended to it)')
    return value


def join_url(base_url: str, path: str) -> str:
    """``baseUrl`` + an endpoint's ``path`` (which is empty or starts with ``/``)."""
    if path.startswith('/') and base_url.endswith('/'):
        return base_url + path[1:]
    return base_url + path


# ----------------------------------------------------------------------------- header templates

def template_secrets(value: str) -> list[str]:
    """The secret names ``${secrets.NAME}`` of a header value, in order (ValueError for any
    other ``${...}``)."""
    names = []
    for match in _TEMPLATE.finditer(value):
        secret = _SECRET_TEMPLATE.fullmatch(match.group(1))
        if secret is None:
            raise ValueError('only ${secrets.NAME} can be interpolated')
        names.append(check_secret_name(secret.group(1)))
    if '${' in _TEMPLATE.sub('', value):
        raise ValueError('has an unterminated ${')
    return names


def check_secret_name(name: str) -> str:
    if len(name) > MAX_SECRET_NAME or not SECRET_NAME.fullmatch(name) or \
            any(part in ('.', '..') for part in name.split('/')):
        raise ValueError(f'{name[:80]!r} is not a valid secret name (letters, digits and _+=.@- '
                         f'in /-separated parts, at most {MAX_SECRET_NAME} characters)')
    return name


def render(value: str, secret: Callable[[str], str]) -> str:
    """A header value with every ``${secrets.NAME}`` replaced by ``secret(NAME)``."""
    return _TEMPLATE.sub(lambda m: secret(m.group(1)[len('secrets.'):]), value)


def check_headers(value: Mapping[str, Any], where: str = '') -> dict[str, str]:
    """A header map of a bridge or endpoint (``where`` prefixes messages: "endpoint 'x': ")."""
    if len(value) > MAX_HEADERS:
        raise ValueError(f'{where}at most {MAX_HEADERS} default headers')
    seen: set[str] = set()
    for name, header in value.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            raise ValueError(f'{where}{str(name)[:100]!r} is not a valid header name')
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"{where}header '{name}' is set by the platform and cannot be configured")
        if name.lower() in seen:
            raise ValueError(f"{where}header '{name}' appears more than once")
        seen.add(name.lower())
        check_header_value(name, header, where)
    return dict(value)


def check_header_value(name: str, value: Any, where: str = '') -> None:
    if isinstance(value, dict) and 'secretRef' in value:
        raise ValueError(f"{where}header '{name}' is configured with secretRef, which is not "
                         'supported: write ${secrets.NAME} in its value instead')
    if not isinstance(value, str):
        raise ValueError(f"{where}header '{name}' must have a string value")
    if len(value) > MAX_HEADER_VALUE:
        raise ValueError(f"{where}header '{name}' has a value longer than {MAX_HEADER_VALUE} characters")
    if _UNPRINTABLE.search(value) or not _latin1(value):
        raise ValueError(f"{where}header '{name}' has a value with control characters or characters "
                         'HTTP headers cannot carry (printable Latin-1 only)')
    try:
        template_secrets(value)
    except ValueError as exc:
        raise ValueError(f"{where}header '{name}': {exc}") from None


def secret_ref_headers(headers: Any) -> list[str]:
    """Names of the headers of a stored map configured with ``secretRef`` (refused on call too:
    a record stored before the rule, or written around the API, must not be sent)."""
    if not isinstance(headers, Mapping):
        return []
    return [str(name) for name, value in headers.items() if isinstance(value, Mapping) and 'secretRef' in value]


def _latin1(text: str) -> bool:
    try:
        text.encode('latin-1')
    except UnicodeEncodeError:
        return False
    return True


def header_value_ok(value: str) -> bool:
    """Can a rendered header value (secrets included) go on the wire?"""
    return len(value) <= 4 * MAX_HEADER_VALUE and not _UNPRINTABLE.search(value) and _latin1(value)


# ----------------------------------------------------------------------------- endpoints

def check_endpoint(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError('each endpoint must be an object')
    name = value.get('name')
    if not isinstance(name, str) or not ENDPOINT_NAME.fullmatch(name):
        raise ValueError('each endpoint needs a name of letters, digits and _.~- (at most 100, '
                         'starting with a letter or digit)')
    where = f"endpoint '{name}': "
    unknown = sorted(set(value) - ENDPOINT_KEYS)
    if unknown:
        raise ValueError(f"{where}unknown field '{unknown[0][:60]}' (known: {', '.join(sorted(ENDPOINT_KEYS))})")
    out: dict[str, Any] = {'name': name}
    method = value.get('method', 'GET')
    if method not in METHODS:
        raise ValueError(f"{where}method must be one of {', '.join(METHODS)}")
    out['method'] = method
    path = value.get('path', '')
    if not isinstance(path, str):
        raise ValueError(f'{where}path must be a string')
    if path and not path.startswith('/'):
        raise ValueError(f"{where}path must be empty or start with '/' (it is appended to baseUrl)")
    if len(path) > MAX_URL or _URL_UNSAFE.search(path) or '#' in path or '${' in path or not path.isascii():
        raise ValueError(f'{where}path must be at most {MAX_URL} ASCII characters without spaces, control '
                         'characters, # or ${ (percent-encode others)')
    out['path'] = path
    if 'description' in value:
        if not isinstance(value['description'], str):
            raise ValueError(f'{where}description must be a string')
        out['description'] = value['description']
    if 'requestSchema' in value:
        out['requestSchema'] = check_request_schema(value['requestSchema'], where)
    headers = value.get('defaultHeaders', {})
    if not isinstance(headers, dict):
        raise ValueError(f'{where}defaultHeaders must be an object')
    out['defaultHeaders'] = check_headers(headers, where)
    return out


def check_request_schema(value: Any, where: str = '') -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f'{where}requestSchema must be an object')
    if 'type' in value and value['type'] != 'object':
        raise ValueError(f"{where}requestSchema.type must be 'object'")
    required = value.get('required', [])
    if not isinstance(required, list) or len(required) > MAX_REQUIRED or \
            not all(isinstance(r, str) and r for r in required):
        raise ValueError(f'{where}requestSchema.required must be a list of at most {MAX_REQUIRED} '
                         'field names')
    if len(set(required)) != len(required):
        raise ValueError(f'{where}requestSchema.required names a field twice')
    if 'properties' in value and not isinstance(value['properties'], dict):
        raise ValueError(f'{where}requestSchema.properties must be an object')
    return value


def check_endpoints(values: list[Any]) -> None:
    """Rules across a bridge's endpoints (each was checked by ``check_endpoint``)."""
    if len(values) > MAX_ENDPOINTS:
        raise ValueError(f'a bridge has at most {MAX_ENDPOINTS} endpoints')
    seen: dict[str, str] = {}
    for endpoint in values:
        folded = endpoint['name'].lower()
        if folded in seen:
            raise ValueError(f"duplicate endpoint name '{endpoint['name']}'")
        seen[folded] = endpoint['name']


def endpoint_names(bridge: Mapping[str, Any]) -> list[str]:
    return [str(e.get('name')) for e in _endpoints(bridge)]


def select_endpoint(bridge: Mapping[str, Any], name: str | None) -> dict[str, Any]:
    """The endpoint ``name`` selects (exact match); no name selects the only endpoint of a
    single-endpoint bridge. ValueError (listing the names) otherwise."""
    endpoints = _endpoints(bridge)
    listed = ', '.join(repr(n) for n in endpoint_names(bridge)) or 'none'
    if name is None:
        if len(endpoints) == 1:
            return endpoints[0]
        raise ValueError(f'name an endpoint: this bridge has {len(endpoints)} endpoints ({listed})')
    for endpoint in endpoints:
        if endpoint.get('name') == name:
            return endpoint
    raise ValueError(f"unknown endpoint {name[:100]!r}: this bridge's endpoints are {listed}")


def _endpoints(bridge: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [e for e in (bridge.get('endpoints') or []) if isinstance(e, dict)]


def missing_required(endpoint: Mapping[str, Any], body: Any, query: Mapping[str, Iterable[str]]) -> list[str]:
    """Required fields of the endpoint's requestSchema present in neither the JSON body (an
    object) nor the query string. Presence counts: "", 0 and false satisfy; null does not."""
    schema = endpoint.get('requestSchema')
    required = (schema.get('required') or []) if isinstance(schema, dict) else []
    fields = body if isinstance(body, dict) else {}
    return [name for name in required
            if not (fields.get(name) is not None or name in query)]


# ----------------------------------------------------------------------------- examples

EXAMPLE_ENDPOINT = {
    'name': 'lookup', 'method': 'GET', 'path': '/customers',
    'requestSchema': {'type': 'object', 'required': ['customerId'],
                      'properties': {'customerId': {'type': 'string'}}},
    'defaultHeaders': {'Accept': 'application/json'},
}
EXAMPLE_HEADERS = {'Authorization': 'Bearer ${secrets.EXAMPLE_TOKEN}'}


# ----------------------------------------------------------------------------- the named shapes

_HEADERS_TEXT = (
    'HTTP headers sent on every call, name -> value. A value may interpolate secrets of the '
    "bridge's organization as ${secrets.NAME}, resolved from AWS Secrets Manager at call time and "
    'never returned, logged or stored (a GET returns the template). A header configured as an '
    'object with secretRef is refused (400 naming the header). Host, Content-Length, '
    'Transfer-Encoding, Connection and other hop headers are set by the platform.')

SHAPES = (
    Shape(
        name='ServiceBridgeBaseUrl',
        schema={'type': 'string', 'format': 'uri', 'maxLength': MAX_URL,
                # printable ASCII; the authority without / ? # @, the path without ? #
                'pattern': ('^[Hh][Tt][Tt][Pp][Ss]?://[\\x21-\\x22\\x24-\\x2e\\x30-\\x3e\\x41-\\x7e]+'
                            '(/[\\x21-\\x22\\x24-\\x3e\\x40-\\x7e]*)?$'),
                'description': 'Absolute http(s) URL the endpoint paths are appended to: no '
                               'credentials, query or fragment. Calls go through the egress fence '
                               '(internal addresses are refused at call time).'},
        # RFC 5737 documentation addresses: the egress fence refuses them before any lookup, so
        # a test that calls a bridge built from an example can never send a packet anywhere.
        examples=('https://192.0.2.10/v1', 'http://198.51.100.7:8080'),
        check=check_base_url,
    ),
    Shape(
        name='ServiceBridgeHeaders',
        schema={'type': 'object', 'maxProperties': MAX_HEADERS, 'description': _HEADERS_TEXT,
                'additionalProperties': {'type': 'string', 'maxLength': MAX_HEADER_VALUE}},
        examples=(EXAMPLE_HEADERS, {'Accept': 'application/json'}),
        check=check_headers,
    ),
    Shape(
        name='ServiceBridgeRequestSchema',
        schema={'type': 'object', 'additionalProperties': True,
                'description': 'JSON-Schema-like description of what a call sends. `required` '
                               'fields missing from both the JSON body and the query string make '
                               'the proxy answer 200 [] without contacting the upstream (presence '
                               'counts: "", 0 and false satisfy; null does not). Other keywords '
                               'are kept as documentation.',
                'properties': {
                    'type': {'type': 'string', 'enum': ['object']},
                    'required': {'type': 'array', 'maxItems': MAX_REQUIRED, 'uniqueItems': True,
                                 'items': {'type': 'string', 'minLength': 1}},
                    'properties': {'type': 'object', 'additionalProperties': True},
                }},
        examples=(EXAMPLE_ENDPOINT['requestSchema'],),
        check=check_request_schema,
    ),
    Shape(
        name='ServiceBridgeEndpoint',
        schema={'type': 'object', 'required': ['name'], 'additionalProperties': False,
                'description': 'One callable operation of a bridge: the proxy calls `method` on '
                               'baseUrl + path.',
                'properties': {
                    'name': {'type': 'string', 'pattern': '^[A-Za-z0-9][A-Za-z0-9_.~-]{0,99}$',
                             'description': 'unique in the bridge (ignoring case); the proxy path segment'},
                    'method': {'allOf': [ref('ServiceBridgeMethod')], 'default': 'GET'},
                    'path': {'type': 'string', 'maxLength': MAX_URL, 'default': '',
                             'pattern': '^(/[\\x21-\\x22\\x24-\\x7e]*)?$',
                             'description': 'appended to baseUrl; empty or starting with /'},
                    'description': {'type': 'string'},
                    'requestSchema': ref('ServiceBridgeRequestSchema'),
                    'defaultHeaders': {'allOf': [ref('ServiceBridgeHeaders')],
                                       'description': "added to (and overriding) the bridge's defaultHeaders"},
                }},
        examples=(EXAMPLE_ENDPOINT,
                  {'name': 'create-ticket', 'method': 'POST', 'path': '/tickets', 'defaultHeaders': {}}),
        check=check_endpoint,
        check_all=check_endpoints,
    ),
)
