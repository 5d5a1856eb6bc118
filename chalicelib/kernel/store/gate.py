"""The request gate: authentication and rate accounting in ONE UpdateItem, and the reads a
request needs issued concurrently with it.

The gate item is the user's ACL item (``users#{userId}`` / ``ACL``, kernel/store/credentials.py). Next
to the roles (``acl_{orgId}``) and the bound identity-provider subject (``sub``) it carries:

| attribute          | what                                                                 |
|--------------------|----------------------------------------------------------------------|
| ``key_{sha256}``   | one per live API key: its expiry in epoch seconds (``NEVER`` when it |
|                    | has none); written and removed in the key's own transaction          |
| ``rm``             | the minute (epoch seconds // 60) the counters below belong to        |
| ``ru``             | the user's requests admitted in that minute (all keys and tokens)    |
| ``rsNN``           | the user's requests in second NN of that minute                      |
| ``rk_{cred}``      | requests through one credential in that minute (an API key's hash    |
|                    | prefix, or ``jwt`` for the user's bearer tokens)                     |
| ``rk_{cred}_NN``   | the same, in second NN                                               |

One request = one ``UpdateItem`` that ADDs 1 to its four counters, on condition that the
credential is live (``key_{hash} > now``: the key exists and has not expired; or ``sub`` equals
the token's subject) and that the counters are this minute's (``rm = minute``), returning the
whole item (``ALL_NEW``): the roles come back with the counts. So a revoked key, a removed
membership or a changed role is seen by the very next request (the key's and the membership's
transactions write this item), and a request whose credential is not live counts nothing.

* The condition fails because the minute moved on (``ALL_OLD`` says so): one more UpdateItem
  starts the minute (SET the four counters to 1, REMOVE the last minute's): once per user and
  minute.
* The counts are over a limit: the request is refused and its four counters are given back by
  a compensating ``ADD -1`` (so refused requests use up no quota, as before; between the two
  calls a concurrent request of the same user may see the count one higher).
* A key written before this item carried keys (no ``key_`` attribute yet) is checked against
  its key record and its attribute added (``heal_key``: a transaction conditioned on the key
  record still existing, so a revocation in between wins).

Errors other than the condition are not caught here: features/identity/service.py decides (the limiter
fails closed for writes). Concurrent reads run on a small thread pool (``read_async``); botocore
clients are thread-safe.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from chalicelib.kernel.store.model import Item, client, table_name
from chalicelib.kernel.store.table import ENTITY_SK, Stored, entity_pk, stored_from

ACL_SK = 'ACL'
KEY_ATTR = 'key_'
NEVER = 9_999_999_999          # the expiry of a key that has none (year 2286)
_COUNTER = re.compile(r'^(ru|rs\d\d|rk_.+)$')
_SAFE = re.compile(r'[^A-Za-z0-9_-]')
MAX_REMOVE = 250                # stale counter names removed per UpdateItem (expression size)


@dataclass
class GateAnswer:
    """What the gate item said: roles, subject, counts after this request (``admitted``) or as
    they were (refused)."""
    admitted: bool
    roles: dict[str, str]
    subject: str | None
    user_minute: int
    user_second: int
    key_minute: int
    key_second: int
    item: dict[str, Any] = field(repr=False, default_factory=dict)


class CredentialNotLive(Exception):
    """The gate item has no such live key (or subject): nothing was counted."""

    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__('credential not live')
        self.item = item or {}


def acl_key(user_id: str) -> dict[str, Any]:
    return {'pk': {'S': entity_pk('users', user_id)}, 'sk': {'S': ACL_SK}}


def credential_name(rate_key: str) -> str:
    return _SAFE.sub('_', rate_key)[:80]


def _number(attr: dict | None) -> int:
    return int(attr['N']) if attr and 'N' in attr else 0


def roles_of(item: dict[str, Any]) -> dict[str, str]:
    return {name[4:]: value['S'] for name, value in item.items() if name.startswith('acl_') and 'S' in value}


def pass_gate(user_id: str, *, rate_key: str, key_hash: str | None = None, subject: str | None = None,
              now: int, minute: int, second: int, limits) -> GateAnswer:
    """Authenticate and count one request in one UpdateItem (module docstring). Raises
    ``CredentialNotLive`` when the key or subject is not on the item."""
    ddb = client()
    cred = credential_name(rate_key)
    names = {'#u': 'ru', '#us': f'rs{second:02d}', '#k': f'rk_{cred}', '#ks': f'rk_{cred}_{second:02d}', '#m': 'rm'}
    values: dict[str, Any] = {':one': {'N': '1'}, ':m': {'N': str(minute)}}
    if key_hash is not None:
        names['#g'] = f'{KEY_ATTR}{key_hash}'
        values[':g'] = {'N': str(now)}
        gate = '#g > :g'
    else:
        names['#g'] = 'sub'
        values[':g'] = {'S': subject or ''}
        gate = '#g = :g'
    for _ in range(3):
        try:
            item = ddb.update_item(
                TableName=table_name(), Key=acl_key(user_id),
                UpdateExpression='ADD #u :one, #us :one, #k :one, #ks :one',
                ConditionExpression=f'{gate} AND #m = :m',
                ExpressionAttributeNames=names, ExpressionAttributeValues=values,
                ReturnValues='ALL_NEW', ReturnValuesOnConditionCheckFailure='ALL_OLD')['Attributes']
        except ddb.exceptions.ConditionalCheckFailedException as exc:
            old = exc.response.get('Item') or {}
            if not _live(old, names['#g'], values[':g'], key_hash is not None):
                raise CredentialNotLive(old) from None
            stored_minute = _number(old.get('rm'))
            if stored_minute > minute:          # another instance's clock is ahead: count there
                values[':m'] = {'N': str(stored_minute)}
                continue
            item = _start_minute(user_id, old, names, values, gate)
            if item is None:
                continue                        # another request started it first: count again
        return _answer(item, names, limits)
    raise CredentialNotLive(None)   # the minute kept moving under us: refuse rather than loop


def _live(item: dict[str, Any], name: str, expected: dict[str, str], is_key: bool) -> bool:
    attr = item.get(name)
    if attr is None:
        return False
    if is_key:
        return int(attr.get('N', '0')) > int(expected['N'])
    return attr.get('S') == expected['S']


def _start_minute(user_id: str, old: dict[str, Any], names: dict[str, str], values: dict[str, Any],
                  gate: str) -> dict[str, Any] | None:
    ddb = client()
    setting = {names[n] for n in ('#u', '#us', '#k', '#ks')}
    stale = [n for n in old if _COUNTER.match(n) and n not in setting]
    while len(stale) > MAX_REMOVE:   # a busy minute of many keys: clear it in steps first
        chunk, stale = stale[:MAX_REMOVE], stale[MAX_REMOVE:]
        ddb.update_item(TableName=table_name(), Key=acl_key(user_id),
                        UpdateExpression='REMOVE ' + ', '.join(f'#x{i}' for i in range(len(chunk))),
                        ExpressionAttributeNames={f'#x{i}': n for i, n in enumerate(chunk)})
    remove = {f'#x{i}': n for i, n in enumerate(stale)}
    expression = 'SET #m = :m, #u = :one, #us = :one, #k = :one, #ks = :one'
    if remove:
        expression += ' REMOVE ' + ', '.join(remove)
    try:
        return ddb.update_item(
            TableName=table_name(), Key=acl_key(user_id), UpdateExpression=expression,
            ConditionExpression=f'{gate} AND (attribute_not_exists(#m) OR #m < :m)',
            ExpressionAttributeNames={**names, **remove}, ExpressionAttributeValues=values,
            ReturnValues='ALL_NEW')['Attributes']
    except ddb.exceptions.ConditionalCheckFailedException:
        return None


def _answer(item: dict[str, Any], names: dict[str, str], limits) -> GateAnswer:
    counts = [_number(item.get(names[n])) for n in ('#u', '#us', '#k', '#ks')]
    caps = (limits.user_minute, limits.user_second, limits.key_minute, limits.key_second)
    admitted = all(n <= cap for n, cap in zip(counts, caps, strict=True))
    if not admitted:
        counts = [n - 1 for n in counts]
    return GateAnswer(admitted, roles_of(item), (item.get('sub') or {}).get('S'), *counts, item=item)


def give_back(user_id: str, rate_key: str, *, minute: int, second: int) -> None:
    """Undo the counting of a refused request (the minute's counters only; never raises)."""
    cred = credential_name(rate_key)
    try:
        client().update_item(
            TableName=table_name(), Key=acl_key(user_id),
            UpdateExpression='ADD #u :minus, #us :minus, #k :minus, #ks :minus',
            ConditionExpression='#m = :m',
            ExpressionAttributeNames={'#u': 'ru', '#us': f'rs{second:02d}', '#k': f'rk_{cred}',
                                      '#ks': f'rk_{cred}_{second:02d}', '#m': 'rm'},
            ExpressionAttributeValues={':minus': {'N': '-1'}, ':m': {'N': str(minute)}})
    except Exception:  # noqa: BLE001, S110 - best effort: the minute ends anyway
        pass


def take(user_id: str, rate_key: str, n: int, *, minute: int, second: int, limits) -> int:
    """Count up to ``n`` more requests of an admitted request's caller in this minute and second
    (an MCP JSON-RPC batch's calls past its first: features/identity/ratelimit.py ``count_more``)
    -> how many were counted: as many as all four windows still allow, in ONE conditional
    UpdateItem (``ADD k`` on condition each counter is at most its limit - k; on a race the
    counts the condition saw decide a smaller k). Nothing is counted past a limit."""
    ddb = client()
    cred = credential_name(rate_key)
    names = {'#u': 'ru', '#us': f'rs{second:02d}', '#k': f'rk_{cred}', '#ks': f'rk_{cred}_{second:02d}', '#m': 'rm'}
    caps = {'#u': limits.user_minute, '#us': limits.user_second, '#k': limits.key_minute, '#ks': limits.key_second}
    want = n
    for _ in range(4):
        if want <= 0:
            return 0
        values = {':k': {'N': str(want)}, ':m': {'N': str(minute)}}
        conditions = ['#m = :m']
        for i, (name, cap) in enumerate(caps.items()):
            values[f':c{i}'] = {'N': str(cap - want)}
            conditions.append(f'(attribute_not_exists({name}) OR {name} <= :c{i})')
        try:
            ddb.update_item(TableName=table_name(), Key=acl_key(user_id),
                            UpdateExpression='ADD #u :k, #us :k, #k :k, #ks :k',
                            ConditionExpression=' AND '.join(conditions),
                            ExpressionAttributeNames=names, ExpressionAttributeValues=values,
                            ReturnValuesOnConditionCheckFailure='ALL_OLD')
            return want
        except ddb.exceptions.ConditionalCheckFailedException as exc:
            old = exc.response.get('Item') or {}
            if _number(old.get('rm')) != minute:
                return 0                        # the minute moved on: the next request starts it
            want = min(want, *(cap - _number(old.get(names[name])) for name, cap in caps.items()))
    return 0


# ----------------------------------------------------------------------------- concurrent reads

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix='gate-read')
    return _pool


@dataclass
class Reads:
    """Items read concurrently with the gate: the user, entities by (family, id)."""
    user: dict[str, Any] | None = None           # the user record (None: missing or deleted)
    user_found: bool = False
    entities: dict[tuple[str, str], Stored | None] = field(default_factory=dict)


def read_async(user_id: str | None, entities: Iterable[tuple[str, str]] = ()) -> Future:
    """Start one strongly consistent BatchGetItem of the user item and ``entities`` on the pool;
    the future's result is a ``Reads``."""
    wanted = list(dict.fromkeys(entities))
    client()   # created here, once: two threads creating it at once would each build one
    return _executor().submit(_read, user_id, wanted)


def _read(user_id: str | None, wanted: list[tuple[str, str]]) -> Reads:
    keys = []
    if user_id is not None:
        keys.append((entity_pk('users', user_id), ENTITY_SK))
    keys += [(entity_pk(f, i), ENTITY_SK) for f, i in wanted]
    keys = list(dict.fromkeys(keys))
    found: dict[str, dict[str, Any]] = {}
    name = table_name()
    request = {name: {'Keys': [{'pk': {'S': pk}, 'sk': {'S': sk}} for pk, sk in keys], 'ConsistentRead': True}}
    for _ in range(5):   # unprocessed keys come back under throttling: ask again
        answer = client().batch_get_item(RequestItems=request)
        for raw in answer.get('Responses', {}).get(name, []):
            found[raw['pk']['S']] = raw
        request = answer.get('UnprocessedKeys') or {}
        if not request:
            break
    else:
        raise RuntimeError('the request reads could not be completed (throttled)')
    out = Reads()
    if user_id is not None:
        raw = found.get(entity_pk('users', user_id))
        stored = stored_from(Item.from_raw_data(raw)) if raw is not None else None
        out.user_found = stored is not None
        out.user = stored.data if stored is not None else None
    for f, i in wanted:
        raw = found.get(entity_pk(f, i))
        out.entities[(f, i)] = stored_from(Item.from_raw_data(raw)) if raw is not None else None
    return out
