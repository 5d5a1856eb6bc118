"""Rate-limit windows: one item per user and minute, every counter of the request in ONE UpdateItem.

Item ``RL#{userId}#{minute}`` / ``#``:
  cnt          the user's requests admitted in that minute (all their keys and tokens)
  sNN          the user's requests admitted in second NN (00-59) of that minute
  k_{credId}   requests admitted in that minute through one credential (an API key's id, or
               ``jwt`` for the user's bearer tokens)
  k_{credId}_NN  the same, in second NN
  ttl          epoch seconds after which DynamoDB may drop the item (the window is long over)

The update admits and counts the request only when all four windows still have room (one
condition over the four counters), so refused requests use up no quota; on refusal DynamoDB
returns the item as it was (ReturnValuesOnConditionCheckFailure), which gives the counts for
the response headers and tells which window refused, without a second call. Because the
counters live in the table, they hold across Lambda instances.

One item per user keeps this one call as the per-user ceiling joins the per-key limit, and it is
the shape a later one-call request path can fold into the item authentication reads: the key
item carrying what authorisation needs, counting these windows in the same UpdateItem.

Errors are not caught here: a table that cannot count raises, and services/ratelimit.py decides
what the request gets (it fails closed for writes).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .model import client, table_name
from .table import ENTITY_SK

_SAFE = re.compile(r'[^A-Za-z0-9_-]')


@dataclass(frozen=True)
class WindowCounts:
    admitted: bool
    user_minute: int    # the user's requests in the minute (including this one when admitted)
    user_second: int
    key_minute: int     # the credential's requests in the minute
    key_second: int


@dataclass(frozen=True)
class Limits:
    key_minute: int
    key_second: int
    user_minute: int
    user_second: int


def window_key(user_id: str, minute: int) -> str:
    return f'RL#{user_id}#{minute}'


def hit(user_id: str, credential: str, *, minute: int, second: int, limits: Limits,
        expires_at: int) -> WindowCounts:
    ddb = client()
    cred = _SAFE.sub('_', credential)[:80]
    names = {'#u': 'cnt', '#us': f's{second:02d}', '#k': f'k_{cred}', '#ks': f'k_{cred}_{second:02d}', '#t': 'ttl'}
    condition = ' AND '.join(f'(attribute_not_exists({n}) OR {n} < {v})'
                             for n, v in (('#u', ':ul'), ('#us', ':usl'), ('#k', ':kl'), ('#ks', ':ksl')))
    try:
        answer = ddb.update_item(
            TableName=table_name(),
            Key={'pk': {'S': window_key(user_id, minute)}, 'sk': {'S': ENTITY_SK}},
            UpdateExpression='ADD #u :one, #us :one, #k :one, #ks :one SET #t = :ttl',
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={
                ':one': {'N': '1'}, ':ttl': {'N': str(expires_at)},
                ':ul': {'N': str(limits.user_minute)}, ':usl': {'N': str(limits.user_second)},
                ':kl': {'N': str(limits.key_minute)}, ':ksl': {'N': str(limits.key_second)}},
            ReturnValues='UPDATED_NEW',
            ReturnValuesOnConditionCheckFailure='ALL_OLD')
    except ddb.exceptions.ConditionalCheckFailedException as exc:
        return _counts(False, exc.response.get('Item') or {}, names)
    return _counts(True, answer.get('Attributes') or {}, names)


def _counts(admitted: bool, item: dict, names: dict[str, str]) -> WindowCounts:
    return WindowCounts(admitted, _number(item.get(names['#u'])), _number(item.get(names['#us'])),
                        _number(item.get(names['#k'])), _number(item.get(names['#ks'])))


def _number(attr: dict | None) -> int:
    return int(attr['N']) if attr and 'N' in attr else 0
