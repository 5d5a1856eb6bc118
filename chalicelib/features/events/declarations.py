"""The events feature's families, declared: each one's fields, references, indexes, hook and
rules (kernel/registry.py ``Family``), installed into the kernel by chalicelib/features/__init__.py.

The organization's log of domain and UI events (outbox.py, ui_events.py).
"""
from __future__ import annotations

from chalicelib.kernel.registry import declare

FAMILIES = (
    declare('events', 'Event', 'org',
        'name description eventType! source payload:object occurredOn:datetime? userEmail clientIpHash',
        name_field='eventType', hook='events',
        indexed={'eventType': 1}, sparse_updated=True, name_keyed=True,
        log=True, publishes=False),
)
