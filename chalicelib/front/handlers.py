"""The event front doors: thin adapters from Lambda event payloads to services, each unit of
work under its log context (core/observability.py: request_id, correlation_id).

* ``sqs_batch``: the activity-queue worker. Powertools' BatchProcessor runs each message
  through features/work/worker.py ``handle_admitted`` (its organization's in-flight cap, the
  message's ``MessageGroupId``), then ``handle_message`` (every message type: activity starts,
  document processing, and every execution's steps through the one engine, features/work/engine.py)
  and answers ``{"batchItemFailures": [...]}``
  (partial batch response: only the failed messages come back; after the queue's
  maxReceiveCount one lands in the dead-letter queue). A message's correlation id is its
  ``correlationId`` attribute (the request that queued it); its request id is the message id.
  The batch runs against the invocation's deadline (``context.get_remaining_time_in_millis()``,
  ``DEFAULT_TIMEOUT_SECONDS`` without a context): a message it has no time left for is not
  started and comes back as a batch item failure (docs/operations/worker.md).
* ``ocr_batch``: the OCR function's queue (its container image has Tesseract): the same batch
  handling as ``sqs_batch``, its messages' pages without a text layer read by OCR
  (features/parsing/stage.py ``ocr_function``).
* ``stream_batch``: the table stream. The outbox events of the batch's INSERT records are
  published together (features/events/outbox.py); the first that failed is reported by its
  SequenceNumber, so the stream hands it (and what follows) back.
* ``schedule_tick``: the scheduled-jobs tick (features/work/schedules.py).

``make run`` (localdev/pollers.py) calls these same functions with the payloads AWS sends.
Heavy imports happen inside the functions: the worker's cold start is ``import app`` plus
this module.
"""
from __future__ import annotations

import time
from typing import Any

from chalicelib.core import observability
from chalicelib.core.config import get_config

log = observability.get_logger('worker')

DEFAULT_TIMEOUT_SECONDS = 29.0   # the functions' timeout (.chalice/config.json lambda_timeout)


def deadline_of(context: Any) -> float:
    """The invocation's end as a ``time.monotonic()`` instant, from the Lambda context."""
    remaining = getattr(context, 'get_remaining_time_in_millis', None)
    seconds = remaining() / 1000.0 if callable(remaining) else DEFAULT_TIMEOUT_SECONDS
    return time.monotonic() + seconds


def sqs_batch(event: dict[str, Any], context: Any = None, *, queue: str | None = None) -> dict[str, Any]:
    """``queue``: None for the activity queue, ``'ocr'`` for the OCR function's (its in-flight cap)."""
    # lazy: Powertools' batch utility and the services load on the first message, not at import
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType  # noqa: PLC0415

    from chalicelib.features.work import worker  # noqa: PLC0415 - lazy: the worker's modules

    deadline = deadline_of(context)

    def record_handler(record) -> None:
        attributes = record.message_attributes or {}
        correlation = (attributes.get('correlationId') or {}).get('stringValue')
        with observability.work(request_id=record.message_id, correlation_id=correlation):
            try:
                # the message's organization is its group (features/work/store.py send_messages)
                outcome = worker.handle_admitted(record.body, organization=record.attributes.message_group_id,
                                                 holder=record.message_id, queue=queue, deadline=deadline)
            except worker.Deferred as exc:   # not started: redelivered, as a batch item failure
                log.info('message deferred', extra={'message_id': record.message_id, 'reason': str(exc)[:300]})
                observability.count('WorkerMessages', outcome='deferred')
                raise
            except Exception as exc:
                log.warning('message failed', extra={'message_id': record.message_id,
                                                     'receive_count': record.attributes.approximate_receive_count,
                                                     'reason': f'{type(exc).__name__}: {exc}'[:300]})
                observability.count('WorkerMessages', outcome='failed')
                if int(record.attributes.approximate_receive_count or 0) >= get_config().activity_max_receive_count:
                    # SQS moves it to the dead-letter queue now (its redrive policy): say so, count it
                    log.error('message goes to the dead-letter queue', extra={'message_id': record.message_id})
                    observability.count('DlqSends')
                raise
            log.info('message processed', extra={'message_id': record.message_id, 'outcome': outcome})
            observability.count('WorkerMessages', outcome='processed')

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    with processor(records=event.get('Records') or [], handler=record_handler, lambda_context=context):
        processor.process()
    return processor.response()


def ocr_batch(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """The OCR function's handler (its own queue, OCR_QUEUE_NAME): the parse stage's messages the
    zip worker handed over because a page needs OCR, run by the same engine as ``sqs_batch``."""
    from chalicelib.features.parsing import stage as parsing  # noqa: PLC0415 - lazy: cold start
    with parsing.ocr_function():
        return sqs_batch(event, context, queue='ocr')


def stream_batch(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    from chalicelib.features.events import outbox  # noqa: PLC0415 - lazy
    records = event.get('Records') or []
    with observability.work(correlation_id=outbox.correlation_of(records)):
        failed = outbox.handle_stream(records)
    return {'batchItemFailures': [{'itemIdentifier': sequence} for sequence in failed[:1]]}


def schedule_tick(event: dict[str, Any] | None = None, context: Any = None) -> dict[str, int]:
    from chalicelib.features.work import schedules  # noqa: PLC0415 - lazy
    with observability.work(request_id=(event or {}).get('id')):
        stats = schedules.tick()
        if stats['due']:
            log.info('scheduler tick', extra=stats)
    return stats
