"""The bridges feature's families, declared: each one's fields, references, indexes, hook and
rules (kernel/registry.py ``Family``), installed into the kernel by chalicelib/features/__init__.py.

Service bridges (the proxy behind the egress fence: proxy.py).
"""
from __future__ import annotations

from chalicelib.features.bridges import shapes
from chalicelib.kernel.registry import NAMED_FIELDS, declare

# The named shapes and enumerations its fields name (kernel/shapes.py, kernel/fields.py
# ``install_enums``): a bridge's base URL, headers and endpoints, checked by shapes.py's rules.
SHAPES = shapes.SHAPES
ENUMS = {'ServiceBridgeMethod': shapes.METHODS}

FAMILIES = (
    declare('service-bridges', 'ServiceBridge', 'project',
        f'{NAMED_FIELDS} baseUrl:string(ServiceBridgeBaseUrl)! endpoints:array(ServiceBridgeEndpoint) '
        'defaultHeaders:object(ServiceBridgeHeaders) agentCallable:bool=false', hook='service_bridges'),
)
