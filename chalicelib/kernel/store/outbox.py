"""Outbox items: the domain event of a write that has no record item to carry it (a delete, a
write of several records), put in the write's own transaction and read back from the table
stream (features/events/outbox.py publishes it). A create or update carries its event on the
record's own item instead (``obx``: kernel/records.py ``outbox_ops``, kernel/unlocked.py).

| item          | pk                 | sk   | notes                                             |
|---------------|--------------------|------|---------------------------------------------------|
| outbox event  | ``EVT#{eventId}``  | ``#``| kind ``outbox``, ``data`` = the event, ``ttl`` 3 days |
"""
from __future__ import annotations

import time
from typing import Any

from chalicelib.kernel.store.model import configure
from chalicelib.kernel.store.repository import Op
from chalicelib.kernel.store.table import ENTITY_SK

OUTBOX_TTL_SECONDS = 3 * 86400


def outbox_op(event: dict[str, Any]) -> Op:
    """The outbox item of one domain event (``event['id']``), put in the write's transaction."""
    model = configure()
    item = model(f'EVT#{event["id"]}', ENTITY_SK, kind='outbox', data=event,
                 ttl=int(time.time()) + OUTBOX_TTL_SECONDS)
    return Op('put', item=item, condition=None, tag={'what': 'outbox'})


def outbox_event(image: dict[str, Any], old_image: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The domain event of a table stream record (DynamoDB JSON images): an outbox item's
    (INSERT), or the ``obx`` event a write put on a record (a transaction's put of the entity,
    kernel/records.py; a one-UpdateItem write, kernel/unlocked.py), when it is new in this
    change. None for anything else."""
    pk = (image.get('pk') or {}).get('S', '')
    if pk.startswith('EVT#') and (image.get('kind') or {}).get('S') == 'outbox':
        raw = image['data']
    elif 'obx' in image and (old_image or {}).get('obx') != image['obx']:
        raw = image['obx']
    else:
        return None
    from boto3.dynamodb.types import TypeDeserializer  # noqa: PLC0415 - lazy, with boto3

    from chalicelib.kernel.store.table import plain  # noqa: PLC0415
    return plain(TypeDeserializer().deserialize(raw))


def record_data(image: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stream image's record body (its ``data`` attribute, DynamoDB JSON), plain; None when it
    has none (features/events/outbox.py reads an update's old and new values from the two)."""
    raw = (image or {}).get('data')
    if not raw:
        return None
    from boto3.dynamodb.types import TypeDeserializer  # noqa: PLC0415 - lazy, with boto3

    from chalicelib.kernel.store.table import plain  # noqa: PLC0415
    return plain(TypeDeserializer().deserialize(raw))
