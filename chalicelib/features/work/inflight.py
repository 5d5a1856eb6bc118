"""The per-organization in-flight cap of the worker (issue 50; docs/operations/worker.md "Fairness
between organizations"): before a message of organization O is worked, it takes one of O's
``cap`` slots; a message that finds them all taken is not worked now (features/work/worker.py
``handle_admitted`` sends it again, delayed). So one organization's long messages (OCR ranges,
big documents) cannot take every invocation of the worker or the OCR function: SQS fair queues
deliver the other organizations' messages first, and the cap keeps invocations free to work them.

| item | pk                          | sk      | attributes                                   |
|------|-----------------------------|---------|----------------------------------------------|
| slot | ``INFLIGHT#{queue}#{org}``  | ``s00`` | ``holder`` (message id), ``exp`` (epoch ms), ``ttl`` |

* One small item per slot, not a counter: a counter (``ADD inflight 1`` if ``inflight < cap``)
  is lost for good when its holder crashes before the decrement; a slot item carries its own
  expiry (``exp``: the end of the holder's invocation plus a margin; Lambda cannot work a
  message longer), so a crashed holder's slot is free again once its invocation would have
  ended, with no clean-up job. DynamoDB's TTL (``ttl``, an hour later) deletes the items left.
* Taking a slot: one conditional PutItem on the slot the message id hashes to (free, expired, or
  already this message's: a redelivery); only when that one is taken, one strongly consistent
  Query of the organization's slots (``cap`` items of ~100 bytes: 1 RCU) and a PutItem on a
  free one. Releasing: one DeleteItem conditional on the holder. Per message worked under the
  cap: 2 writes (2 WCU); a message over the cap: 1 failed conditional put (1 WCU) + 1 Query.
* The slots of one organization are ``cap`` items of one partition key; organizations (and the
  two queues) never share one, so the cap's writes spread as the organizations do.
"""
from __future__ import annotations

import time
import zlib

from chalicelib.kernel.store.model import client, table_name

KIND = 'inflight-slot'
TTL_SECONDS = 3600        # the items DynamoDB deletes later (the expiry itself is ``exp``)
MARGIN_SECONDS = 5.0      # a slot outlives its holder's invocation by this much


def _pk(queue: str, organization: str) -> str:
    return f'INFLIGHT#{queue}#{organization}'


def _sk(index: int) -> str:
    return f's{index:02d}'


def _now_ms() -> int:
    return int(time.time() * 1000)


def _put(pk: str, index: int, holder: str, seconds: float) -> bool:
    now = _now_ms()
    try:
        client().put_item(
            TableName=table_name(),
            Item={'pk': {'S': pk}, 'sk': {'S': _sk(index)}, 'kind': {'S': KIND}, 'holder': {'S': holder},
                  'exp': {'N': str(now + int(seconds * 1000))},
                  'ttl': {'N': str(now // 1000 + int(seconds) + TTL_SECONDS)}},
            ConditionExpression='attribute_not_exists(pk) OR #exp < :now OR holder = :me',
            ExpressionAttributeNames={'#exp': 'exp'},
            ExpressionAttributeValues={':now': {'N': str(now)}, ':me': {'S': holder}})
    except client().exceptions.ConditionalCheckFailedException:
        return False
    return True


def held(queue: str, organization: str, cap: int) -> dict[int, str]:
    """The organization's live slots (index -> holder) below ``cap``: one consistent Query."""
    answer = client().query(TableName=table_name(), ConsistentRead=True,
                            KeyConditionExpression='pk = :pk',
                            ExpressionAttributeValues={':pk': {'S': _pk(queue, organization)}})
    now = _now_ms()
    out: dict[int, str] = {}
    for item in answer.get('Items', []):
        index = int(item['sk']['S'][1:])
        if index < cap and int(item['exp']['N']) >= now:
            out[index] = item['holder']['S']
    return out


def take(queue: str, organization: str, holder: str, *, cap: int, seconds: float) -> int | None:
    """One of the organization's ``cap`` slots for ``holder`` (a message id) for ``seconds`` (the
    worker: its invocation's time left plus ``MARGIN_SECONDS``): its index, or None when all are
    held (module docstring)."""
    pk = _pk(queue, organization)
    first = zlib.crc32(holder.encode()) % cap
    if _put(pk, first, holder, seconds):
        return first
    for _ in range(3):   # a free slot found, then taken by another holder first: look again
        taken = held(queue, organization, cap)
        free = [i for i in range(cap) if i not in taken and i != first]
        if not free:
            return None
        index = free[zlib.crc32(holder.encode()) % len(free)]
        if _put(pk, index, holder, seconds):
            return index
    return None


def release(queue: str, organization: str, index: int, holder: str) -> None:
    """Give the slot back (only if ``holder`` still has it: an expired slot may be another's)."""
    try:
        client().delete_item(TableName=table_name(),
                             Key={'pk': {'S': _pk(queue, organization)}, 'sk': {'S': _sk(index)}},
                             ConditionExpression='holder = :me', ExpressionAttributeValues={':me': {'S': holder}})
    except client().exceptions.ConditionalCheckFailedException:
        pass
