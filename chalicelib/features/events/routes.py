"""UI telemetry: POST /api/events/ui/batch (features/events/ui_events.py). Domain events and stored
UI events are read through the registry's /api/events routes."""
from __future__ import annotations

from chalice import Blueprint

from chalicelib.kernel.http.request import JSON_CONTENT, body, caller, client_address

bp = Blueprint(__name__)


@bp.route('/api/events/ui/batch', methods=['POST'], name='recordUiEventBatch', content_types=JSON_CONTENT)
def ui_batch():
    from chalicelib.features.events import ui_events  # noqa: PLC0415 - lazy: cold start
    return ui_events.record_batch(body(), principal=caller(), client_address=client_address())
