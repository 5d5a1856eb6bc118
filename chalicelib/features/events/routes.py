"""UI telemetry: POST /api/events/ui/batch (features/events/ui_events.py). Domain events and stored
UI events are read through the registry's /api/events routes."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.core import limits
from chalicelib.kernel.http.docmeta import describe, schema
from chalicelib.kernel.http.request import JSON_CONTENT, body, caller, client_address

bp = Blueprint(__name__)


@bp.route('/api/events/ui/batch', methods=['POST'], name='recordUiEventBatch', content_types=JSON_CONTENT)
def ui_batch():
    from chalicelib.features.events import ui_events  # noqa: PLC0415 - lazy: cold start
    return ui_events.record_batch(body(), principal=caller(), client_address=client_address())


# ----------------------------------------------------------------------------- UI events

describe('recordUiEventBatch', summary='Record a batch of UI events', tags=['events'],
         description=(
             'At most 100 events, every kind starting with ui. (else 400, nothing stored). Stored as events '
             '(eventType = kind, payload, occurredOn, userEmail, clientIpHash: an HMAC of the client address, '
             'never the address) of the caller\'s organization (organizationId, required only for callers of '
             'several organizations), readable by its MANAGE users. Address-like keys and values, keystrokes, '
             'pointer coordinates and scroll positions are dropped from payloads. ui.presence.*, ui.task.* and '
             'ui.task_group.* events are kept only when the organization\'s features.presenceTrackingEnabled is '
             'true (read through a 60 s cache); dropped counts them.'),
         request=schema('UiEventBatch', {
             'type': 'object', 'required': ['events'],
             'properties': {
                 'organizationId': {'type': 'string', 'format': 'uuid'},
                 'events': {'type': 'array', 'maxItems': limits.MAX_UI_EVENTS, 'items': {
                     'type': 'object', 'required': ['kind'],
                     'properties': {
                         'kind': {'type': 'string', 'pattern': '^ui\\.[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$',
                                  'maxLength': limits.MAX_UI_EVENT_KIND},
                         'occurredAt': {'type': 'string', 'format': 'date-time',
                                        'description': 'default: the time of receipt'},
                         'payload': {'type': 'object', 'additionalProperties': True},
                     }}},
             }}),
         responses={200: schema('UiEventBatchResult', {
             'type': 'object', 'required': ['accepted', 'dropped'],
             'properties': {'accepted': {'type': 'integer'}, 'dropped': {'type': 'integer'}}})},
         errors=[400, 401, 413, 415, 429])
