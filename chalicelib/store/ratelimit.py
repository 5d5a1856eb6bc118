"""Rate-limit windows: one item per subject and minute, both windows in ONE UpdateItem.

Item ``RL#{subject}#{minute}`` / ``#``:
  cnt      requests admitted in that minute
  sNN      requests admitted in second NN (00-59) of that minute
  ttl      epoch seconds after which DynamoDB may drop the item (the window is long over)

The update admits and counts the request only when both windows still have room (a condition
on ``cnt`` and ``sNN``), so refused requests do not use up the quota; on refusal DynamoDB
returns the item as it was (ReturnValuesOnConditionCheckFailure), which gives the counts for
the response headers without a second call. Because the counter lives in the table, it holds
across Lambda instances.
"""
from __future__ import annotations

from dataclasses import dataclass

from .model import client, table_name
from .table import ENTITY_SK


@dataclass(frozen=True)
class WindowCounts:
    admitted: bool
    minute: int    # requests admitted in the minute window (including this one when admitted)
    second: int    # requests admitted in the second window (including this one when admitted)


def window_key(subject: str, minute: int) -> str:
    return f'RL#{subject}#{minute}'


def hit(subject: str, *, minute: int, second: int, minute_limit: int, second_limit: int,
        expires_at: int) -> WindowCounts:
    ddb = client()
    second_attr = f's{second:02d}'
    try:
        answer = ddb.update_item(
            TableName=table_name(),
            Key={'pk': {'S': window_key(subject, minute)}, 'sk': {'S': ENTITY_SK}},
            UpdateExpression='ADD #m :one, #s :one SET #t = :ttl',
            ConditionExpression='(attribute_not_exists(#m) OR #m < :mlim) AND '
                                '(attribute_not_exists(#s) OR #s < :slim)',
            ExpressionAttributeNames={'#m': 'cnt', '#s': second_attr, '#t': 'ttl'},
            ExpressionAttributeValues={':one': {'N': '1'}, ':ttl': {'N': str(expires_at)},
                                       ':mlim': {'N': str(minute_limit)}, ':slim': {'N': str(second_limit)}},
            ReturnValues='UPDATED_NEW',
            ReturnValuesOnConditionCheckFailure='ALL_OLD')
    except ddb.exceptions.ConditionalCheckFailedException as exc:
        old = exc.response.get('Item') or {}
        return WindowCounts(False, _number(old.get('cnt')), _number(old.get(second_attr)))
    new = answer.get('Attributes') or {}
    return WindowCounts(True, _number(new.get('cnt')), _number(new.get(second_attr)))


def _number(attr: dict | None) -> int:
    return int(attr['N']) if attr and 'N' in attr else 0
