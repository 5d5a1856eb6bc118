"""Named shapes of structured field values: what a registry field declared as
``endpoints:array(ServiceBridgeEndpoint)`` or ``baseUrl:string(ServiceBridgeBaseUrl)`` holds.

A shape is declared once here and used three ways:
  * validation on write (kernel/models.py runs ``check`` on the value, or on each element of an
    array field, then ``check_all`` on the whole array);
  * the OpenAPI document (kernel/http/openapi.py publishes ``schema`` as a named component and
    refers to it from the family's schemas), so clients see the structure, not a free object;
  * examples (``examples``: valid values, for tests that build valid bodies).

``check`` receives a value that already has the field's base type (a str, a dict, one element
of a list) and returns the value to store, or raises ValueError with a message fit for a 400.
Pure data and functions: imported by the registry at cold start, so nothing heavy here.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib.kernel.shapes import bridges, steps, taxons
from chalicelib.kernel.shapes import schedule as schedule_expr


@dataclass(frozen=True)
class Shape:
    name: str
    schema: dict[str, Any]
    examples: tuple[Any, ...]
    check: Callable[[Any], Any]
    check_all: Callable[[list[Any]], None] | None = None


def _ref(name: str) -> dict[str, str]:
    return {'$ref': f'#/components/schemas/{name}'}


_HEADERS_TEXT = (
    'HTTP headers sent on every call, name -> value. A value may interpolate secrets of the '
    "bridge's organization as ${secrets.NAME}, resolved from AWS Secrets Manager at call time and "
    'never returned, logged or stored (a GET returns the template). A header configured as an '
    'object with secretRef is refused (400 naming the header). Host, Content-Length, '
    'Transfer-Encoding, Connection and other hop headers are set by the platform.')

SHAPES: dict[str, Shape] = {s.name: s for s in (
    Shape(
        name='ServiceBridgeBaseUrl',
        schema={'type': 'string', 'format': 'uri', 'maxLength': bridges.MAX_URL,
                # printable ASCII; the authority without / ? # @, the path without ? #
                'pattern': ('^[Hh][Tt][Tt][Pp][Ss]?://[\\x21-\\x22\\x24-\\x2e\\x30-\\x3e\\x41-\\x7e]+'
                            '(/[\\x21-\\x22\\x24-\\x3e\\x40-\\x7e]*)?$'),
                'description': 'Absolute http(s) URL the endpoint paths are appended to: no '
                               'credentials, query or fragment. Calls go through the egress fence '
                               '(internal addresses are refused at call time).'},
        # RFC 5737 documentation addresses: the egress fence refuses them before any lookup, so
        # a test that calls a bridge built from an example can never send a packet anywhere.
        examples=('https://192.0.2.10/v1', 'http://198.51.100.7:8080'),
        check=bridges.check_base_url,
    ),
    Shape(
        name='ServiceBridgeHeaders',
        schema={'type': 'object', 'maxProperties': bridges.MAX_HEADERS, 'description': _HEADERS_TEXT,
                'additionalProperties': {'type': 'string', 'maxLength': bridges.MAX_HEADER_VALUE}},
        examples=(bridges.EXAMPLE_HEADERS, {'Accept': 'application/json'}),
        check=bridges.check_headers,
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
                    'required': {'type': 'array', 'maxItems': bridges.MAX_REQUIRED, 'uniqueItems': True,
                                 'items': {'type': 'string', 'minLength': 1}},
                    'properties': {'type': 'object', 'additionalProperties': True},
                }},
        examples=(bridges.EXAMPLE_ENDPOINT['requestSchema'],),
        check=bridges.check_request_schema,
    ),
    Shape(
        name='ServiceBridgeEndpoint',
        schema={'type': 'object', 'required': ['name'], 'additionalProperties': False,
                'description': 'One callable operation of a bridge: the proxy calls `method` on '
                               'baseUrl + path.',
                'properties': {
                    'name': {'type': 'string', 'pattern': '^[A-Za-z0-9][A-Za-z0-9_.~-]{0,99}$',
                             'description': 'unique in the bridge (ignoring case); the proxy path segment'},
                    'method': {'allOf': [_ref('ServiceBridgeMethod')], 'default': 'GET'},
                    'path': {'type': 'string', 'maxLength': bridges.MAX_URL, 'default': '',
                             'pattern': '^(/[\\x21-\\x22\\x24-\\x7e]*)?$',
                             'description': 'appended to baseUrl; empty or starting with /'},
                    'description': {'type': 'string'},
                    'requestSchema': _ref('ServiceBridgeRequestSchema'),
                    'defaultHeaders': {'allOf': [_ref('ServiceBridgeHeaders')],
                                       'description': "added to (and overriding) the bridge's defaultHeaders"},
                }},
        examples=(bridges.EXAMPLE_ENDPOINT,
                  {'name': 'create-ticket', 'method': 'POST', 'path': '/tickets', 'defaultHeaders': {}}),
        check=bridges.check_endpoint,
        check_all=bridges.check_endpoints,
    ),
    # activity plans (kernel/shapes/steps.py; docs/api/work.md)
    Shape(
        name='ExecutionPolicy',
        schema=steps.POLICY_SCHEMA,
        examples=(steps.DEFAULT_POLICY,),
        check=lambda value: steps.check_policy(value, 'executionPolicy') and value,
    ),
    Shape(
        name='ScheduleExpression',
        schema={'type': 'string', 'maxLength': 256,
                'description': 'EventBridge schedule: rate(N minute|minutes|hour|hours|day|days) or '
                               'cron(minutes hours day-of-month month day-of-week year), UTC, exactly one '
                               'of day-of-month / day-of-week ?, day-of-week 1-7 (1 = Sunday) or SUN-SAT.'},
        examples=('rate(5 minutes)', 'cron(0 8 ? * MON-FRI *)'),
        check=schedule_expr.check,
    ),
    Shape(
        name='PipelineStep',
        schema={**steps.STEP_SCHEMA, 'properties': {**steps.STEP_SCHEMA['properties'],
                                                     'executionPolicy': _ref('ExecutionPolicy')}},
        examples=steps.EXAMPLE_STEPS,
        check=steps.check_step,
        check_all=steps.check_steps,
    ),
    # extraction (kernel/shapes/taxons.py; docs/api/extraction.md)
    Shape(name='Taxon', schema=taxons.TAXON_SCHEMA, examples=taxons.EXAMPLE_TAXONS, check=taxons.check_taxon),
    Shape(name='DataAttribute', schema=taxons.ATTRIBUTE_SCHEMA, examples=taxons.EXAMPLE_ATTRIBUTES,
          check=taxons.check_attribute),
)}

SHAPE_NAMES = frozenset(SHAPES)
