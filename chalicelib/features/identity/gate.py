"""The request gate: rate accounting in small items that expire, and the reads that authenticate
a request issued concurrently with the count (docs/scale.md, "Rate gate").

**Counts.** One item per user and minute counts the four windows of the limits
(features/identity/ratelimit.py):

| pk                    | sk        | attributes                                                    |
|-----------------------|-----------|---------------------------------------------------------------|
| ``RATE#{userId}``     | ``M#{m}`` | ``kind`` = ``gate``, ``ttl`` = end of minute m + ``GRACE``,  |
|                       |           | ``u`` the user's requests in minute m (all credentials),     |
|                       |           | ``uNN`` the user's requests in second NN of it,              |
|                       |           | ``c_{cred}`` one credential's requests in minute m,          |
|                       |           | ``cNN_{cred}`` the same in second NN                         |

``m`` is epoch seconds // 60, ``cred`` a short name of the credential (``credential_name``: 8
hex digits of an API key's hash, or ``jwt`` for the user's bearer tokens). A request is ONE
UpdateItem that ADDs its weight to its four counters on condition that none would pass its
limit: a refused request writes nothing (``ALL_OLD`` says which window is full), so nothing is
given back and only admitted requests add attributes. The next minute is another item: nothing
is ever cleaned up, the table's TTL removes old minutes. So the item's size is bounded by what
the user may do in a minute: at most 1 + 60 + credentials + min(admitted requests,
credentials x 60) counters (docs/scale.md gives the bytes), and the user's ACL item
(kernel/store/acl.py) holds only roles, the bound subject and live keys: its size
depends on memberships and keys, never on traffic.

**Authentication** reads, concurrently with the count and in ONE strongly consistent
BatchGetItem, the user's record, their ACL item (live keys ``key_{hash}`` with their expiry,
``sub``, roles ``acl_{org}``) and whatever else the request will read (kernel/store/acl.py
``read_async``). A
credential that turns out not to be live had its request counted: it is given back
(``give_back``). Since counting before knowing would let made-up credentials naming a user
write that user's item, features/identity/admission.py only counts concurrently for a credential
this process has seen pass already; any other is authenticated first.

**Before this layout** the counters were attributes of the ACL item (``rm``, ``ru``, ``rsNN``,
``rk_{cred}``, ``rk_{cred}_NN``) cleared by a REMOVE of up to 250 names each minute. They are
ignored now; ``legacy_cleanup_ops`` gives the UpdateItem that removes them from one ACL item
(the migration command calls it; the invariant checker reports items still holding them).

The reads (``read``, ``read_async`` on a small thread pool: botocore clients are thread-safe)
are the kernel's, kernel/store/acl.py: the generic GET by id reads ahead with them too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chalicelib.kernel.store.model import client, table_name

GATE_PREFIX = 'RATE#'
GATE_KIND = 'gate'
MINUTE_SK = 'M#'
GRACE = 120                    # seconds a minute's item outlives its minute (clock skew between instances)
CRED_HEX = 8                    # hex digits of a key's hash naming its counters (docs/scale.md)
_SAFE = re.compile(r'[^A-Za-z0-9]')
# the counters of the ACL item before this layout (legacy_cleanup_ops)
LEGACY_COUNTER = re.compile(r'^(rm|ru|rs\d\d|rk_.+)$')
_COUNTER = re.compile(r'^(u|u\d\d|c_[A-Za-z0-9]+|c\d\d_[A-Za-z0-9]+)$')
_USER_SECOND = re.compile(r'^u\d\d$')
_CRED_SECOND = re.compile(r'^c\d\d_(.+)$')


@dataclass(frozen=True)
class GateAnswer:
    """The four counts after this request (admitted) or as they were (refused)."""
    admitted: bool
    user_minute: int
    user_second: int
    key_minute: int
    key_second: int


def gate_pk(user_id: str) -> str:
    return f'{GATE_PREFIX}{user_id}'


def gate_key(user_id: str, minute: int) -> dict[str, Any]:
    return {'pk': {'S': gate_pk(user_id)}, 'sk': {'S': f'{MINUTE_SK}{minute}'}}


def is_gate_key(key: dict[str, Any]) -> bool:
    """Is this (low-level) key a gate item's? (tests and fault rules tell the gate's calls apart)"""
    return str((key.get('pk') or {}).get('S', '')).startswith(GATE_PREFIX)


def credential_name(rate_key: str) -> str:
    """The short name of a credential's counters: ``key-{hash}`` -> the hash's first CRED_HEX
    digits; anything else (``jwt``) its letters and digits."""
    if rate_key.startswith('key-'):
        return _SAFE.sub('', rate_key[4:])[:CRED_HEX]
    return _SAFE.sub('', rate_key)[:CRED_HEX] or 'x'


def _number(attr: dict | None) -> int:
    return int(attr['N']) if attr and 'N' in attr else 0


def _names(cred: str, second: int) -> dict[str, str]:
    return {'#u': 'u', '#us': f'u{second:02d}', '#c': f'c_{cred}', '#cs': f'c{second:02d}_{cred}'}


def count(user_id: str, *, rate_key: str, minute: int, second: int, limits, weight: int = 1) -> GateAnswer:
    """Count ``weight`` requests of a user through one credential in one UpdateItem on the
    minute's item (module docstring). Admitted when no window would pass its limit; a refused
    request writes nothing. Errors (throttling, ...) are the caller's to decide
    (features/identity/ratelimit.py fails closed for writes)."""
    ddb = client()
    names = {**_names(credential_name(rate_key), second), '#k': 'kind', '#t': 'ttl'}
    caps = (limits.user_minute, limits.user_second, limits.key_minute, limits.key_second)
    values: dict[str, Any] = {':n': {'N': str(weight)}, ':kind': {'S': GATE_KIND},
                              ':ttl': {'N': str((minute + 1) * 60 + GRACE)}}
    conditions = []
    for i, (name, cap) in enumerate(zip(('#u', '#us', '#c', '#cs'), caps, strict=True)):
        values[f':cap{i}'] = {'N': str(cap - weight)}     # room for the whole weight
        conditions.append(f'(attribute_not_exists({name}) OR {name} <= :cap{i})')
    try:
        new = ddb.update_item(
            TableName=table_name(), Key=gate_key(user_id, minute),
            UpdateExpression='SET #k = :kind, #t = :ttl ADD #u :n, #us :n, #c :n, #cs :n',
            ConditionExpression=' AND '.join(conditions),
            ExpressionAttributeNames=names, ExpressionAttributeValues=values,
            ReturnValues='UPDATED_NEW', ReturnValuesOnConditionCheckFailure='ALL_OLD')['Attributes']
    except ddb.exceptions.ConditionalCheckFailedException as exc:
        old = exc.response.get('Item') or {}
        return GateAnswer(False, *(_number(old.get(names[n])) for n in ('#u', '#us', '#c', '#cs')))
    return GateAnswer(True, *(_number(new.get(names[n])) for n in ('#u', '#us', '#c', '#cs')))


def give_back(user_id: str, rate_key: str, *, minute: int, second: int, weight: int = 1) -> None:
    """Undo the counting of a request that turned out not to be admissible (its credential was
    not live, its user inactive): never raises, the minute ends anyway."""
    names = _names(credential_name(rate_key), second)
    try:
        client().update_item(
            TableName=table_name(), Key=gate_key(user_id, minute),
            UpdateExpression='ADD #u :minus, #us :minus, #c :minus, #cs :minus',
            ConditionExpression='attribute_exists(#u)', ExpressionAttributeNames=names,
            ExpressionAttributeValues={':minus': {'N': str(-weight)}})
    except Exception:  # noqa: BLE001, S110 - best effort: the minute ends anyway
        pass


def counters_of(item: dict[str, Any]) -> dict[str, int]:
    """The counters of a gate item (raw attributes): name -> count."""
    return {n: _number(v) for n, v in item.items() if _COUNTER.match(n) and 'N' in v}


# ----------------------------------------------------------------------------- the old layout

def legacy_counters(item: dict[str, Any]) -> list[str]:
    """The names of the old rate counters an ACL item (raw attributes) still carries."""
    return sorted(n for n in item if LEGACY_COUNTER.match(n))


def legacy_cleanup_ops(item: dict[str, Any], *, chunk: int = 50) -> list[dict[str, Any]]:
    """``update_item`` keyword arguments (without ``TableName``) that remove the old counters
    from one ACL item (raw attributes, as read), ``chunk`` names per call (moto's expression
    validator overflows on a few hundred). Idempotent: a name already gone is a no-op, and each
    call is conditioned on the item still being the ACL item. Empty when there is nothing to do."""
    stale = legacy_counters(item)
    ops = []
    for start in range(0, len(stale), chunk):
        part = stale[start:start + chunk]
        ops.append({'Key': {'pk': item['pk'], 'sk': item['sk']},
                    'UpdateExpression': 'REMOVE ' + ', '.join(f'#x{i}' for i in range(len(part))),
                    'ConditionExpression': 'attribute_exists(pk)',
                    'ExpressionAttributeNames': {f'#x{i}': n for i, n in enumerate(part)}})
    return ops


def gate_problems(item: dict[str, Any]) -> list[str]:
    """What is wrong with a gate item (raw attributes): counters that do not add up (the
    minute's total is the sum of its seconds and of its credentials; a credential's minute the
    sum of its seconds), a negative count, a ``ttl`` that is not its minute's."""
    problems = []
    sk = item.get('sk', {}).get('S', '')
    try:
        minute = int(sk[len(MINUTE_SK):])
    except ValueError:
        return [f'sort key {sk!r} names no minute']
    if _number(item.get('ttl')) != (minute + 1) * 60 + GRACE:
        problems.append(f"ttl {_number(item.get('ttl'))} is not the end of minute {minute} + {GRACE} s")
    counters = counters_of(item)
    total = counters.get('u', 0)
    seconds = sum(v for n, v in counters.items() if _USER_SECOND.match(n))
    creds = {n[2:]: v for n, v in counters.items() if n.startswith('c_')}
    per_second: dict[str, int] = {}
    for n, v in counters.items():
        matched = _CRED_SECOND.match(n)
        if matched:
            per_second[matched.group(1)] = per_second.get(matched.group(1), 0) + v
    if seconds != total:
        problems.append(f'the user total {total} is not the sum of its seconds ({seconds})')
    if sum(creds.values()) != total:
        problems.append(f'the user total {total} is not the sum of its credentials ({sum(creds.values())})')
    for cred in sorted(set(creds) | set(per_second)):
        if creds.get(cred, 0) != per_second.get(cred, 0):
            problems.append(f'credential {cred}: {creds.get(cred, 0)} in the minute, '
                            f'{per_second.get(cred, 0)} in its seconds')
    negative = sorted(n for n, v in counters.items() if v < 0)
    if negative:
        problems.append(f'negative counts: {", ".join(negative)}')
    return problems
