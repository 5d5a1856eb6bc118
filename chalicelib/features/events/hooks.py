"""Events: the rules of UI telemetry events (``eventType`` ``ui.*``) within the shared family.

The ``events`` family holds domain events (``<family>.<action>``, written by the outbox of
issue 12) and UI events (``ui.*``, written only by ``POST /api/events/ui/batch``,
features/events/ui_events.py). Everything below applies to ``ui.*`` events only; for any other event
this hook answers None and the generic rules decide.

* Reading: a UI event is visible to the MANAGE users of its organization (and platform
  admins) only, by id (others get 404) and in lists (a filter is added for callers who do not
  manage every organization they belong to).
* Writing: the generic routes never create a ``ui.*`` event (400: the batch route stamps the
  user and hashes the address, a plain create would not), never turn an event into one, and
  never change one (403: telemetry is a record of what happened). Deleting one is the generic
  delete, so only those who can see it can.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core.errors import BadRequest, Forbidden
from chalicelib.core.principal import Principal
from chalicelib.kernel import access
from chalicelib.kernel.hooks import Hook

UI_PREFIX = 'ui.'
READ_UI = 'organization:manage'


def is_ui(data: dict[str, Any]) -> bool:
    return str(data.get('eventType') or '').startswith(UI_PREFIX)


def can_read_ui(principal: Principal, org_id: str | None) -> bool:
    return principal.platform_admin or access.has(principal, org_id, READ_UI)


class EventHook(Hook):
    guards = None   # a UI event may not be changed at all: the stored record decides, field by field

    def visible(self, family, principal, stored):
        if is_ui(stored.data):
            return access.can_see_org(principal, stored.org) and can_read_ui(principal, stored.org)
        return None

    def list_filters(self, family, principal):
        if principal.platform_admin:
            return []
        managed = [org for org in principal.org_ids if can_read_ui(principal, org)]
        if len(managed) == len(principal.org_ids):
            return []
        hide = "not(eventType =like= 'ui.*')"
        if not managed:
            return [hide]
        return [f"{hide} or organizationId =in= ({', '.join(repr(org) for org in managed)})"]

    def before_create(self, family, principal, data, body):
        if is_ui(data):
            raise BadRequest("eventType 'ui.*' is reserved for UI events: send them to POST /api/events/ui/batch")

    def before_update(self, family, principal, new, stored):
        if is_ui(stored.data):
            raise Forbidden('UI events cannot be changed (they can be deleted)')
        if is_ui(new):
            raise BadRequest("eventType 'ui.*' is reserved for UI events: send them to POST /api/events/ui/batch")


HOOK = EventHook()
