"""The parse stage's page-range bookkeeping: small expiring items, one per range of one run
(features/parsing/fanout.py; docs/scale.md "The document path"). The storage module of the
fan-out: the only place of the parsing feature that names the table's keys.

| item         | pk              | sk          | attributes                                       |
|--------------|-----------------|-------------|--------------------------------------------------|
| range done   | ``PARSE#{run}`` | ``r{0000}`` | ``kind`` ``parse-range``, ``rd`` (JSON), ``ttl`` |
| run closed   | ``PARSE#{run}`` | ``closed``  | ``kind`` ``parse-range``, ``rd`` (why), ``ttl``  |

``rd`` of a range: ``{first, last, parts: [[from, to, nodes, bytes, textChars, ocr, seconds]], warnings}``
or ``{first, last, failed: reason}``.

* A range's item is put once, ``attribute_not_exists(pk)``: the delivery that puts it is the
  one whose outcome counts (a duplicate's put fails and it does nothing more).
* ``closed`` is put once too, by the delivery that saw every range done (or a range failed for
  good): that delivery alone wakes the stage, and a range message arriving after it reads nothing.
* Why items and not a counter: a counter is ONE item every range of the document updates (a hot
  key: K ranges finishing together conflict and retry); here every range writes its own item
  (1 WCU, never contended) and the "all done?" question is one strongly consistent Query of the
  run's own partition (at most ``FanOut.max_ranges`` items of ~200 bytes: a few RCU). Each
  run is its own partition key, so documents never share a hot key; items expire after
  ``TTL_SECONDS`` (no clean-up writes).
"""
from __future__ import annotations

import json
import time
from typing import Any

from chalicelib.kernel.store.model import client, table_name

KIND = 'parse-range'
TTL_SECONDS = 7 * 86400
CLOSED = 'closed'


def _pk(run: str) -> str:
    return f'PARSE#{run}'


def _sk(index: int) -> str:
    return f'r{index:04d}'


def _item(run: str, sk: str, record: dict[str, Any]) -> dict[str, Any]:
    return {'pk': {'S': _pk(run)}, 'sk': {'S': sk}, 'kind': {'S': KIND},
            'rd': {'S': json.dumps(record, separators=(',', ':'))},
            'ttl': {'N': str(int(time.time()) + TTL_SECONDS)}}


def _put_once(item: dict[str, Any]) -> bool:
    try:
        client().put_item(TableName=table_name(), Item=item, ConditionExpression='attribute_not_exists(pk)')
    except client().exceptions.ConditionalCheckFailedException:
        return False
    return True


def status(run: str, index: int) -> tuple[bool, bool]:
    """(the run is closed, range ``index`` is done): one strongly consistent BatchGetItem."""
    keys = [{'pk': {'S': _pk(run)}, 'sk': {'S': CLOSED}}, {'pk': {'S': _pk(run)}, 'sk': {'S': _sk(index)}}]
    request = {table_name(): {'Keys': keys, 'ConsistentRead': True, 'ProjectionExpression': 'sk'}}
    found: set[str] = set()
    for _ in range(5):
        answer = client().batch_get_item(RequestItems=request)
        found |= {i['sk']['S'] for i in answer.get('Responses', {}).get(table_name(), [])}
        request = answer.get('UnprocessedKeys') or {}
        if not request:
            break
    return CLOSED in found, _sk(index) in found


def mark(run: str, index: int, record: dict[str, Any]) -> bool:
    """Range ``index`` done (or failed: ``record['failed']``); False when it was already."""
    return _put_once(_item(run, _sk(index), record))


def close(run: str, why: str) -> bool:
    """The run's ranges are all done (or one failed for good); True for the one call that closed it."""
    return _put_once(_item(run, CLOSED, {'why': why}))


def ranges(run: str) -> dict[int, dict[str, Any]]:
    """Every range recorded for ``run`` (index -> record): one strongly consistent Query (paged)."""
    out: dict[int, dict[str, Any]] = {}
    args: dict[str, Any] = {'TableName': table_name(), 'ConsistentRead': True,
                            'KeyConditionExpression': 'pk = :pk AND begins_with(sk, :r)',
                            'ExpressionAttributeValues': {':pk': {'S': _pk(run)}, ':r': {'S': 'r'}}}
    while True:
        answer = client().query(**args)
        for item in answer.get('Items', []):
            out[int(item['sk']['S'][1:])] = json.loads(item['rd']['S'])
        if not answer.get('LastEvaluatedKey'):
            return out
        args['ExclusiveStartKey'] = answer['LastEvaluatedKey']
