"""Work orchestration in tests: the activity queue, its DLQ and the event bus in moto, and the
app's event handlers driven with real payloads (localdev/pollers.py: receive, invoke, delete;
the table stream read with GetRecords)."""
from __future__ import annotations

import json
import time
from typing import Any

DLQ_MAX_RECEIVES = 3   # tests: a poison message reaches the DLQ after 3 receives (AWS stack: 5)


def create_resources() -> None:
    """Queue + DLQ (visibility 0: a failed message is visible again at once) and the bus, made in
    moto's backends directly (inside mock_aws): what CreateQueue and CreateEventBus would leave,
    without two boto3 clients (each with a session decoding botocore's endpoint table) and four
    calls through moto's HTTP layer per test, most of a test's setup before. The app's own
    calls still go through boto3 and moto's HTTP layer."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.events.models import events_backends
    from moto.sqs.models import sqs_backends

    from chalicelib.core.config import get_config
    from chalicelib.features.work import store as work_store
    cfg = get_config()
    work_store.reset()
    sqs = sqs_backends[DEFAULT_ACCOUNT_ID][cfg.region]
    dlq = sqs.create_queue(f'{cfg.activity_queue_name}-dlq')
    sqs.create_queue(cfg.activity_queue_name, VisibilityTimeout='0', RedrivePolicy=json.dumps(
        {'deadLetterTargetArn': dlq.queue_arn, 'maxReceiveCount': str(DLQ_MAX_RECEIVES)}))
    ocr_dlq = sqs.create_queue(f'{cfg.ocr_queue_name}-dlq')
    sqs.create_queue(cfg.ocr_queue_name, VisibilityTimeout='0', RedrivePolicy=json.dumps(
        {'deadLetterTargetArn': ocr_dlq.queue_arn, 'maxReceiveCount': str(DLQ_MAX_RECEIVES)}))
    events_backends[DEFAULT_ACCOUNT_ID][cfg.region].create_event_bus(name=cfg.event_bus_name)


class Work:
    def __init__(self) -> None:
        import app
        from chalicelib.core.config import get_config
        from localdev.pollers import QueuePoller, StreamReader
        cfg = get_config()
        self.app = app
        self.cfg = cfg
        self.queue = QueuePoller(app.activity_start_worker, cfg.activity_queue_name, region=cfg.region,
                                 endpoint_url=None, wait_seconds=0)
        self.stream = StreamReader(app.outbox_publisher, cfg.table_name, region=cfg.region, endpoint_url=None)
        from chalicelib.front import handlers
        self.ocr = QueuePoller(handlers.ocr_batch, cfg.ocr_queue_name, region=cfg.region, endpoint_url=None,
                               wait_seconds=0)
        self.sqs = self.queue.sqs
        self.dlq_url = self.sqs.get_queue_url(QueueName=f'{cfg.activity_queue_name}-dlq')['QueueUrl']

    def drain(self, seconds: float = 5.0) -> int:
        """Poll until the queue is empty (delayed messages included) or ``seconds`` pass;
        messages received."""
        received = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got = self.queue.poll_once(wait_seconds=0)['received'] + self.ocr.poll_once(wait_seconds=0)['received']
            received += got
            if got == 0:
                if self.depth() == 0 and self.depth(self.ocr.url) == 0:
                    break
                time.sleep(0.1)
        return received

    def depth(self, url: str | None = None) -> int:
        attrs = self.sqs.get_queue_attributes(QueueUrl=url or self.queue.url, AttributeNames=[
            'ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible',
            'ApproximateNumberOfMessagesDelayed'])['Attributes']
        return sum(int(v) for v in attrs.values())

    def send(self, body: Any) -> str:
        text = body if isinstance(body, str) else json.dumps(body)
        return self.sqs.send_message(QueueUrl=self.queue.url, MessageBody=text)['MessageId']

    def publish_outbox(self) -> int:
        total = 0
        while True:
            got = self.stream.poll_once()['records']
            total += got
            if not got:
                return total

    def tick(self):
        from localdev.pollers import context, scheduled_event
        return self.app.scheduled_jobs(scheduled_event(self.cfg.region), context())
