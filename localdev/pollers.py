"""`make run`'s stand-ins for Lambda's event sources: the same handlers of app.py, invoked in
process with the payloads AWS sends (also used by the tests).

* **queue poller** (Lambda's SQS event source mapping): ReceiveMessage on the activity queue
  (in `make run`: received ahead and handed out round-robin across message groups, i.e.
  organizations, as SQS fair queues deliver them: localdev/fair.py; up to 10 messages; no long
  poll: the local moto server answers one request at a time, so a waiting receive would hold
  every other call; an empty receive waits 0.2 s before the next),
  one SQS event of them to ``activity_start_worker``, then DeleteMessage of every message not
  in the answer's ``batchItemFailures``; those come back after the queue's visibility timeout
  and, after maxReceiveCount receives, SQS moves them to the dead-letter queue (moto applies
  the redrive policy as AWS does).
* **scheduler** (EventBridge's ``rate(1 minute)`` rule): a Scheduled Event to
  ``scheduled_jobs`` every ``SCHEDULER_TICK_SECONDS`` (default 60).
* **outbox drain** (Lambda's DynamoDB stream event source mapping): the table's stream, read
  from moto with GetRecords on every shard, in order, each batch as a DynamoDB stream event to
  ``outbox_publisher``; a batch item failure re-reads from the failed record, as Lambda does.
  The batch size and batching window are the event source's own (app.py ``outbox_publisher``):
  records read wait until the batch is full or the first of them has waited the window.
  Why the stream rather than polling outbox items through an index: it is what runs on AWS
  (the same records, in the same wire format, through the same handler), and an index of
  outbox items would cost every write on AWS an index write that only local runs use.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from localdev.fair import FairBuffer, group_of

STREAMS_ENDPOINT = 'https://streams.dynamodb.{region}.amazonaws.com'   # moto's in-process host
WINDOW_POLL_SECONDS = 0.1   # how often a poller holding records for a batching window reads again
FAIR_WORKERS = 2            # make run's in-process workers of each fair queue (one organization holds at most one)


def function_timeout() -> float:
    """The functions' timeout, as Lambda gives it (``lambda_timeout`` of .chalice/config.json;
    ``WORKER_TIMEOUT_SECONDS`` overrides it, for tests that want a short invocation)."""
    import json
    import os
    from pathlib import Path
    if os.environ.get('WORKER_TIMEOUT_SECONDS'):
        return float(os.environ['WORKER_TIMEOUT_SECONDS'])
    config = Path(__file__).resolve().parents[1] / '.chalice' / 'config.json'
    return float(json.loads(config.read_text()).get('lambda_timeout', 29))


class _Context:
    """What handlers may read of a Lambda context: one per invocation, its clock started when the
    invocation is, as Lambda's is."""
    function_name = 'local'

    def __init__(self, timeout: float | None = None) -> None:
        self.deadline = time.monotonic() + (function_timeout() if timeout is None else timeout)
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def context() -> _Context:
    """A fresh invocation's context."""
    return _Context()


def _client(service: str, region: str, endpoint_url: str | None):
    import boto3
    return boto3.client(service, region_name=region, endpoint_url=endpoint_url)


# ----------------------------------------------------------------------------- SQS

def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """Lambda's SQS event for messages as ReceiveMessage returned them."""
    records = []
    for m in messages:
        attributes = {k: v for k, v in (m.get('Attributes') or {}).items()}
        records.append({
            'messageId': m['MessageId'], 'receiptHandle': m['ReceiptHandle'], 'body': m['Body'],
            'attributes': attributes, 'md5OfBody': m.get('MD5OfBody', ''),
            'messageAttributes': {name: {'stringValue': a.get('StringValue'), 'binaryValue': a.get('BinaryValue'),
                                         'stringListValues': [], 'binaryListValues': [], 'dataType': a['DataType']}
                                  for name, a in (m.get('MessageAttributes') or {}).items()},
            'eventSource': 'aws:sqs', 'eventSourceARN': queue_arn, 'awsRegion': region})
    return {'Records': records}


class QueuePoller:
    """Lambda's SQS event source for one queue. ``fair``: messages are received ahead into a
    ``FairBuffer`` (localdev/fair.py) and handed out round-robin across message groups (SQS fair
    queues, docs/operations/worker.md "Fairness between organizations"); without it, each poll
    hands the handler what one receive returned, in the queue's order."""

    MAX_RECEIVES_PER_POLL = 20   # a fair poll's receives ahead (10 messages each), before its batch
    # A message received ahead into the buffer is hidden this long (ReceiveMessage's
    # VisibilityTimeout), not the queue's own (30 s; 5 s in the chaos run): held behind a busy
    # group while both workers are busy, it must not come back and be received again, since each
    # receive counts toward the dead-letter queue's maxReceiveCount (5), which AWS's fair queues,
    # holding nothing on the consumer's side, never spend (the chaos run of d2e2264 lost four
    # activity starts so). Handed to a worker, it gets the queue's visibility back (``_fair_batch``).
    HOLD_SECONDS = 300

    def __init__(self, handler: Callable, queue_name: str, *, region: str, endpoint_url: str | None,
                 wait_seconds: int = 0, max_messages: int = 10, timeout: float | None = None,
                 fair: bool = False) -> None:
        self.handler = handler
        self.max_messages = max_messages
        self.timeout = timeout   # the function's timeout, when not the zip functions' (function_timeout)
        self.sqs = _client('sqs', region, endpoint_url)
        self.region = region
        self.url = self.sqs.get_queue_url(QueueName=queue_name)['QueueUrl']
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url,
                                                   AttributeNames=['QueueArn', 'VisibilityTimeout'])['Attributes']
        self.arn = attributes['QueueArn']
        self.visibility = int(attributes.get('VisibilityTimeout') or 30)
        self.wait_seconds = wait_seconds
        self.buffer: FairBuffer | None = None
        if fair:
            self.buffer = FairBuffer(hold_seconds=self.HOLD_SECONDS / 3, clock=time.monotonic)
        self.lock = threading.Lock()          # the buffer, shared by the workers (FAIR_WORKERS)
        self.in_flight: set[str] = set()      # groups with a batch being worked (the cap)

    def _receive(self, count: int, wait_seconds: int, hidden: int | None = None) -> list[dict[str, Any]]:
        hide = {'VisibilityTimeout': hidden} if hidden is not None else {}
        answer = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=count, WaitTimeSeconds=wait_seconds,
                                          AttributeNames=['All'], MessageAttributeNames=['All'], **hide)
        return answer.get('Messages') or []

    def _visibility(self, messages: list[dict[str, Any]], seconds: int) -> set[str]:
        """Set the messages' visibility timeout: the ids SQS refused (their receipt is stale)."""
        lost: set[str] = set()
        for start in range(0, len(messages), 10):
            chunk = messages[start:start + 10]
            answer = self.sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=[
                {'Id': str(n), 'ReceiptHandle': m['ReceiptHandle'], 'VisibilityTimeout': seconds}
                for n, m in enumerate(chunk)])
            lost |= {chunk[int(f['Id'])]['MessageId'] for f in answer.get('Failed') or []}
        return lost

    def give_back(self) -> int:
        """On stop: the messages held ahead made visible again at once (not after ``HOLD_SECONDS``:
        the next `make run` works them without waiting); how many. Best effort: a message whose
        visibility cannot be changed comes back when its hold ends."""
        if self.buffer is None:
            return 0
        with self.lock:
            held = [message for group in self.buffer.groups.values() for message, _ in group.values()]
            self.buffer.forget({m['MessageId'] for m in held})
        try:
            return len(held) - len(self._visibility(held, 0))
        except Exception:  # noqa: BLE001 - stopping: they come back after their hold
            return 0

    def _fair_batch(self, wait_seconds: int) -> list[dict[str, Any]]:
        """Receive ahead (until the queue answers empty, the buffer is full or the poll's receives
        are spent), extend the visibility of messages held long, then the buffer's next batch."""
        buffer = self.buffer
        assert buffer is not None
        for n in range(self.MAX_RECEIVES_PER_POLL):
            if buffer.full:
                break
            got = self._receive(min(10, buffer.room), wait_seconds if n == 0 else 0, hidden=self.HOLD_SECONDS)
            if not got:
                break
            buffer.add(got)
        buffer.forget(self._visibility(buffer.due(), self.HOLD_SECONDS))   # refused: back in the queue
        group, batch = buffer.take(self.in_flight)
        if batch:
            self.in_flight.add(group)
            try:   # worked now: a failure brings it back after the queue's own visibility, as on AWS
                self._visibility(batch, self.visibility)
            except Exception:  # noqa: BLE001 - it stays hidden HOLD_SECONDS: worked all the same, retried later
                pass
        return batch

    def poll_once(self, wait_seconds: int | None = None) -> dict[str, int]:
        """One batch to the handler, then the deletes: {'received', 'failed'} (received: the
        messages of the batch). A fair poller may be called from several threads at once."""
        wait = self.wait_seconds if wait_seconds is None else wait_seconds
        if self.buffer is None:
            return self._handle(self._receive(self.max_messages, wait))
        with self.lock:
            messages = self._fair_batch(wait)
        group = group_of(messages[0]) if messages else None
        try:
            return self._handle(messages)
        finally:
            if group is not None:
                with self.lock:
                    self.in_flight.discard(group)

    def _handle(self, messages: list[dict[str, Any]]) -> dict[str, int]:
        if not messages:
            return {'received': 0, 'failed': 0}
        if self.timeout is not None and self.timeout > 30:
            # a function with a long timeout (the OCR function's 300 s) has a queue whose visibility
            # outlasts it (infra/ocr_function.py: 6 x); the local queues have 30 s, so a message
            # still being read would be handed to a second worker: hidden for as long as it may run
            for message in messages:
                self.sqs.change_message_visibility(QueueUrl=self.url, ReceiptHandle=message['ReceiptHandle'],
                                                   VisibilityTimeout=int(self.timeout) + 30)
        invocation = _Context(self.timeout)
        try:
            result = self.handler(sqs_event(messages, self.arn, self.region), invocation) or {}
            failed = {f['itemIdentifier'] for f in result.get('batchItemFailures') or []}
        except Exception:  # noqa: BLE001 - a handler that raised fails the whole batch, as on Lambda
            failed = {m['MessageId'] for m in messages}
        from chalicelib.core import observability
        with observability.work(request_id=getattr(invocation, 'aws_request_id', None)):
            extra = {'held': len(self.buffer), 'held_full': self.buffer.full} if self.buffer is not None else {}
            observability.get_logger('localdev').info('queue batch', extra={
                'received': len(messages), 'failed': sorted(failed),
                'remaining_ms': invocation.get_remaining_time_in_millis(), **extra})
        done = [m for m in messages if m['MessageId'] not in failed]
        for start in range(0, len(done), 10):
            self.sqs.delete_message_batch(QueueUrl=self.url, Entries=[
                {'Id': str(n), 'ReceiptHandle': m['ReceiptHandle']} for n, m in enumerate(done[start:start + 10])])
        return {'received': len(messages), 'failed': len(failed)}


# ----------------------------------------------------------------------------- schedule

def scheduled_event(region: str, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.utcnow()
    return {'version': '0', 'id': str(uuid.uuid4()), 'detail-type': 'Scheduled Event', 'source': 'aws.events',
            'account': '000000000000', 'time': now.strftime('%Y-%m-%dT%H:%M:%SZ'), 'region': region,
            'resources': [f'arn:aws:events:{region}:000000000000:rule/platform-local-scheduled-jobs'],
            'detail': {}}


# ----------------------------------------------------------------------------- table stream

def enable_stream(table_name: str, *, region: str, endpoint_url: str | None) -> str:
    """Turn on the table's stream (NEW_AND_OLD_IMAGES, as the data stack declares it); its ARN."""
    ddb = _client('dynamodb', region, endpoint_url)
    described = ddb.describe_table(TableName=table_name)['Table']
    if described.get('LatestStreamArn') and (described.get('StreamSpecification') or {}).get('StreamEnabled'):
        return described['LatestStreamArn']
    answer = ddb.update_table(TableName=table_name, StreamSpecification={
        'StreamEnabled': True, 'StreamViewType': 'NEW_AND_OLD_IMAGES'})
    return answer['TableDescription']['LatestStreamArn']


class StreamReader:
    """Reads a table stream from its start (TRIM_HORIZON), shard by shard, like Lambda."""

    def __init__(self, handler: Callable, table_name: str, *, region: str, endpoint_url: str | None,
                 batch_size: int = 100, window_seconds: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.handler = handler
        # the event source's BatchSize and MaximumBatchingWindowInSeconds (app.py): records read
        # wait, per shard, until the batch is full or the first of them has waited the window
        self.window_seconds = window_seconds
        self.clock = clock
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.first_read: dict[str, float] = {}
        self.region = region
        self.arn = enable_stream(table_name, region=region, endpoint_url=endpoint_url)
        self.streams = _client('dynamodbstreams', region, endpoint_url or STREAMS_ENDPOINT.format(region=region))
        self.batch_size = batch_size
        self.iterators: dict[str, str | None] = {}

    def _iterator(self, shard: str, after: str | None = None) -> str:
        kwargs: dict[str, Any] = {'StreamArn': self.arn, 'ShardId': shard}
        if after is None:
            kwargs['ShardIteratorType'] = 'TRIM_HORIZON'
        else:
            kwargs.update(ShardIteratorType='AT_SEQUENCE_NUMBER', SequenceNumber=after)
        return self.streams.get_shard_iterator(**kwargs)['ShardIterator']

    def poll_once(self) -> dict[str, int]:
        """Every shard's next batch to the handler: {'records', 'failed', 'waiting'} (records
        read but held for the batching window, as Lambda holds them)."""
        stats = {'records': 0, 'failed': 0, 'waiting': 0}
        shards = self.streams.describe_stream(StreamArn=self.arn)['StreamDescription']['Shards']
        for shard in shards:
            sid = shard['ShardId']
            if sid not in self.iterators:
                self.iterators[sid] = self._iterator(sid)
            records = self.pending.setdefault(sid, [])
            iterator = self.iterators[sid]
            if iterator is not None and len(records) < self.batch_size:
                answer = self.streams.get_records(ShardIterator=iterator, Limit=self.batch_size - len(records))
                if answer.get('Records') and not records:
                    self.first_read[sid] = self.clock()
                records += answer.get('Records') or []
                self.iterators[sid] = answer.get('NextShardIterator')
            if not records:
                continue
            if len(records) < self.batch_size and self.iterators[sid] is not None and \
                    self.clock() - self.first_read[sid] < self.window_seconds:
                stats['waiting'] += len(records)
                continue
            self.pending[sid] = []
            event = {'Records': [self._lambda_record(r) for r in records]}
            try:
                result = self.handler(event, context()) or {}
                failures = [f['itemIdentifier'] for f in result.get('batchItemFailures') or []]
            except Exception:  # noqa: BLE001 - the whole batch again, as Lambda does
                failures = [records[0]['dynamodb']['SequenceNumber']]
            stats['records'] += len(records)
            if failures:
                stats['failed'] += 1
                self.iterators[sid] = self._iterator(sid, after=min(failures, key=int))
        return stats

    def _lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        change = dict(record['dynamodb'])
        created = change.get('ApproximateCreationDateTime')
        if isinstance(created, datetime):
            change['ApproximateCreationDateTime'] = created.timestamp()
        return {**{k: v for k, v in record.items() if k != 'dynamodb'}, 'dynamodb': change,
                'eventSourceARN': self.arn}


# ----------------------------------------------------------------------------- make run

class Pollers:
    """The loops of `make run` (the queue worker, the OCR queue's worker, the outbox drain, the
    scheduler), on daemon threads; ``stop`` ends them. ``app`` is the app
    module (its handlers ``activity_start_worker``, ``scheduled_jobs``, ``outbox_publisher``)."""

    def __init__(self, app, *, region: str, endpoint_url: str | None, queue_name: str, table_name: str,
                 tick_seconds: float, drain_seconds: float = 0.5, stream_batch_size: int = 100,
                 stream_window_seconds: float = 0.0, ocr_queue_name: str | None = None, workers: int = 1,
                 ocr_handler: Callable | None = None) -> None:
        # workers - 1 more queue workers, each a process of its own (workers.py): pdfium reads one
        # PDF at a time per process, so parallel page ranges need processes, not threads
        self.workers = max(1, workers)
        self.processes: list = []
        self.ocr_queue_name = ocr_queue_name
        # both queues fair across message groups (organizations), as SQS fair queues are on AWS
        self.queue = QueuePoller(app.activity_start_worker, queue_name, region=region, endpoint_url=endpoint_url,
                                 fair=True)
        # the OCR function's queue, through its handler (front/handlers.py ocr_batch), as its
        # container-image Lambda runs it on AWS
        if ocr_handler is None:
            from chalicelib.front import handlers
            ocr_handler = handlers.ocr_batch
        self.ocr = QueuePoller(ocr_handler, ocr_queue_name, region=region,
                               endpoint_url=endpoint_url, fair=True) if ocr_queue_name else None
        self.stream = StreamReader(app.outbox_publisher, table_name, region=region, endpoint_url=endpoint_url,
                                   batch_size=stream_batch_size, window_seconds=stream_window_seconds)
        self.app = app
        self.region = region
        self.tick_seconds = tick_seconds
        self.drain_seconds = drain_seconds
        self._stop = threading.Event()
        # FAIR_WORKERS workers per fair queue: one organization's batches hold at most one
        # (localdev/fair.py), the other serves the rest
        self.threads = [threading.Thread(target=self._loop, args=(self.queue.poll_once, 0.0, 0.2),
                                         name=f'queue-poller-{n}', daemon=True) for n in range(1, FAIR_WORKERS)]
        self.threads += [threading.Thread(target=self._loop, args=(fn, busy, idle), name=name, daemon=True)
                         for name, fn, busy, idle in (('queue-poller', self.queue.poll_once, 0.0, 0.2),
                                                      ('outbox-drain', self.stream.poll_once, 0.0, drain_seconds),
                                                      ('scheduler', self._tick, tick_seconds, tick_seconds))]
        if self.ocr is not None:
            self.threads += [threading.Thread(target=self._loop, args=(self.ocr.poll_once, 0.0, 0.2),
                                              name=f'ocr-poller-{n}', daemon=True) for n in range(FAIR_WORKERS)]

    def _tick(self) -> dict:
        self.app.scheduled_jobs(scheduled_event(self.region), context())
        return {}

    def _loop(self, fn: Callable[[], Any], busy: float, idle: float) -> None:
        """Call ``fn`` again after ``busy`` seconds when it found work, ``idle`` when not."""
        import logging
        log = logging.getLogger('platform-api.localdev')
        while not self._stop.is_set():
            try:
                stats = fn() or {}
                found = stats.get('received') or stats.get('records')
                waiting = stats.get('waiting')
            except Exception as exc:  # noqa: BLE001 - keep polling (moto restarting, chaos...)
                log.warning('%s: %s', threading.current_thread().name, exc)
                found = waiting = False
                self._stop.wait(1.0)
            # records held for the stream's batching window: look again soon, not after idling
            pause = busy if found else (min(idle, WINDOW_POLL_SECONDS) if waiting else idle)
            if pause:
                self._stop.wait(pause)

    def start(self) -> None:
        for thread in self.threads:
            thread.start()
        if self.threads:
            from localdev import workers
            self.processes = [workers.spawn(self.queue_name_of(), self.ocr_queue_name)
                              for _ in range(self.workers - 1)]

    def queue_name_of(self) -> str:
        return self.queue.url.rsplit('/', 1)[-1]

    def stop(self) -> None:
        self._stop.set()
        for process in self.processes:
            process.terminate()
        for thread in self.threads:
            thread.join(timeout=3)
        # the messages held ahead, back to the queue (bounded: a stop never waits on it over 3 s)
        giving = [threading.Thread(target=poller.give_back, name='give-back', daemon=True)
                  for poller in (self.queue, self.ocr) if poller is not None]
        for thread in giving:
            thread.start()
        for thread in giving:
            thread.join(timeout=3)
        for process in self.processes:
            try:
                process.wait(timeout=5)
            except Exception:  # noqa: BLE001 - a worker that does not stop is killed
                process.kill()
