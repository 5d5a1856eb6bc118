"""AWS access of work orchestration: the activity queue (SQS), the event bus (EventBridge), and
the table items that are not records:

| item          | pk                       | sk                          | notes                       |
|---------------|--------------------------|-----------------------------|-----------------------------|
| schedule entry| ``SCHED#{jobId}``        | ``#``                       | kind ``schedule``, below    |
| activity work | ``ACTWORK#{activityId}`` | ``remaining`` / ``failed``  | ``cnt``                     |

* schedule entry: ``tpk`` = ``SCHED#DUE``, ``csk`` = ``{nextRunOn}#{jobId}``, ``ref`` = job id:
  the due jobs are one Query of by_created (KEYS_ONLY) with ``csk <= now``; present only while
  the job is active and has a next run.
* activity work: executions of the activity not yet ended / ended failing the activity; moved
  in the transaction of each end (features/work/executions.py).

Services name what they want (``send_messages``, ``put_events``, ``due_jobs``...), never a
client or a key.
"""
from __future__ import annotations

import json
import time
from functools import lru_cache
from typing import Any

from chalicelib.core.config import get_config
from chalicelib.kernel.store.endpoints import watched
from chalicelib.kernel.store.model import configure
from chalicelib.kernel.store.repository import Op
from chalicelib.kernel.store.table import ENTITY_SK

SCHEDULE_PARTITION = 'SCHED#DUE'
PUT_EVENTS_BATCH = 10
SEND_BATCH = 10
MAX_GROUP_ID = 128   # SQS: a MessageGroupId is at most 128 characters


# ----------------------------------------------------------------------------- clients

def _client(service: str):
    import boto3  # noqa: PLC0415 - lazy: only the work paths need SQS / EventBridge
    from botocore.config import Config  # noqa: PLC0415
    cfg = get_config()
    return watched(boto3.client(service, region_name=cfg.region, endpoint_url=cfg.endpoint_url,
                        config=Config(connect_timeout=2, read_timeout=cfg.read_timeout(8),
                                      retries={'max_attempts': 3, 'mode': 'standard'})))


@lru_cache(maxsize=1)
def sqs():
    return _client('sqs')


@lru_cache(maxsize=1)
def events_client():
    return _client('events')


@lru_cache(maxsize=4)
def queue_url(name: str | None = None) -> str:
    return sqs().get_queue_url(QueueName=name or get_config().activity_queue_name)['QueueUrl']


def reset() -> None:
    """Forget clients and URLs (tests change the environment between cases)."""
    sqs.cache_clear()
    events_client.cache_clear()
    queue_url.cache_clear()


class SendFailed(Exception):
    """The queue did not take a message (throttled, failing, missing)."""


def send_messages(messages: list[tuple[dict[str, Any], int]], *, correlation_id: str | None = None,
                  queue: str | None = None, group: str | None = None) -> None:
    """Send (body, delay seconds) messages to the activity queue (``queue='ocr'``: the OCR
    function's, OCR_QUEUE_NAME), in batches of 10; any that SQS refuses raise ``SendFailed``
    (after the client's own retries). ``group``: the organization the work is for, sent as the
    message's ``MessageGroupId``: on AWS the standard queues are SQS fair queues, which keep one
    group's backlog from raising the others' dwell time; `make run`'s pollers pick messages
    round-robin across groups the same way (localdev/fair.py; docs/operations/worker.md
    "Fairness between organizations")."""
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415 - lazy, with boto3
    attributes = {'correlationId': {'DataType': 'String', 'StringValue': correlation_id}} if correlation_id else {}
    grouped = {'MessageGroupId': group[:MAX_GROUP_ID]} if group else {}
    try:
        url = queue_url(get_config().ocr_queue_name if queue == 'ocr' else None)
        for start in range(0, len(messages), SEND_BATCH):
            chunk = messages[start:start + SEND_BATCH]
            if len(chunk) == 1:
                body, delay = chunk[0]
                sqs().send_message(QueueUrl=url, MessageBody=json.dumps(body), DelaySeconds=delay,
                                   MessageAttributes=attributes, **grouped)
                continue
            answer = sqs().send_message_batch(QueueUrl=url, Entries=[
                {'Id': str(n), 'MessageBody': json.dumps(body), 'DelaySeconds': delay,
                 'MessageAttributes': attributes, **grouped} for n, (body, delay) in enumerate(chunk)])
            if answer.get('Failed'):
                raise SendFailed(answer['Failed'][0].get('Code', 'failed'))
    except (BotoCoreError, ClientError) as exc:
        raise SendFailed(type(exc).__name__) from None


def put_events(entries: list[dict[str, Any]], *, attempts: int = 3) -> list[dict[str, Any]]:
    """PutEvents in batches of 10 on the configured bus; entries EventBridge refuses are sent
    again (up to ``attempts`` times). Returns the entries that still failed."""
    bus = get_config().event_bus_name
    pending = [{**entry, 'EventBusName': bus} for entry in entries]
    for attempt in range(attempts):
        failed: list[dict[str, Any]] = []
        for start in range(0, len(pending), PUT_EVENTS_BATCH):
            chunk = pending[start:start + PUT_EVENTS_BATCH]
            answer = events_client().put_events(Entries=chunk)
            if answer.get('FailedEntryCount'):
                failed += [entry for entry, result in zip(chunk, answer['Entries'], strict=False)
                           if result.get('ErrorCode')]
        if not failed:
            return []
        pending = failed
        time.sleep(0.05 * 2 ** attempt)
    return pending


# ----------------------------------------------------------------------------- schedules

def schedule_ops(job_id: str, next_run_on: str | None) -> list[Op]:
    """Index entry of a scheduled job: present (due at ``next_run_on``) or removed (None)."""
    model = configure()
    if next_run_on is None:
        return [Op('delete', item=model(f'SCHED#{job_id}', ENTITY_SK), tag={'what': 'schedule'})]
    item = model(f'SCHED#{job_id}', ENTITY_SK, kind='schedule', tpk=SCHEDULE_PARTITION,
                 csk=f'{next_run_on}#{job_id}', ref=job_id)
    return [Op('put', item=item, condition=None, tag={'what': 'schedule'})]


def due_jobs(now_iso: str, limit: int = 100) -> list[tuple[str, str]]:
    """(job id, nextRunOn) of the active jobs due at ``now_iso``, oldest first (one Query of a
    KEYS_ONLY index; eventually consistent: a job changed a moment ago is re-read by its claim)."""
    model = configure()
    out = []
    for key in model.by_created.query(SCHEDULE_PARTITION, model.csk <= f'{now_iso}#~', limit=limit,
                                      page_size=limit):
        run_on, job_id = key.csk.rsplit('#', 1)
        out.append((job_id, run_on))
    return out


# ----------------------------------------------------------------------------- activity work counters

def _work_pk(activity_id: str) -> str:
    return f'ACTWORK#{activity_id}'


def work_move(activity_id: str, which: str, amount: int) -> Op:
    """Move the activity's ``remaining`` or ``failed`` count (in the caller's transaction)."""
    model = configure()
    return Op('add', item=model(_work_pk(activity_id), which), amount=amount, tag={'what': 'counter'})


def work_delete_ops(activity_id: str) -> list[Op]:
    """Remove the activity's work counters (its delete's transaction: features/work/activities.py)."""
    model = configure()
    return [Op('delete', item=model(_work_pk(activity_id), which), tag={'what': 'counter'})
            for which in ('remaining', 'failed')]


def work_counts(activity_id: str) -> dict[str, int]:
    """{'remaining': n, 'failed': n} of an activity (one strongly consistent Query)."""
    model = configure()
    out = {'remaining': 0, 'failed': 0}
    for item in model.query(_work_pk(activity_id), consistent_read=True):
        out[item.sk] = int(item.cnt or 0)
    return out
