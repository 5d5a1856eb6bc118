"""The user's ACL item: who may do what, and the reads that authenticate a request.

The access model's own storage (kernel/access.py reads it; the identity feature writes keys and
subjects into it, features/identity/credentials.py, and counts requests beside it,
features/identity/gate.py). The item ``users#{userId}`` / ``ACL`` holds:

* ``acl_{orgId}`` = the user's role in that organization, one per active membership, written in
  the same transaction as the membership (``acl_put``, ``acl_delete``; an invitation writes none);
* ``sub`` = the identity-provider subject bound on first bearer sign-in;
* ``key_{hash}`` = a live API key's expiry (epoch seconds; ``NEVER`` for a key without one).

``read`` is the request's ONE strongly consistent BatchGetItem of the user, their ACL item and
whatever else the request will read (issue 17), ``read_async`` the same on a small thread pool
(botocore clients are thread-safe); ``orgs_of`` one GetItem of the ACL item.

Split out of the store's old gate and credentials modules when the rate limiter and the API
keys moved into features/identity/ (gate.py, credentials.py; issue 40): these parts are the
kernel's.
"""
from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pynamodb.expressions.operand import Path

from chalicelib.kernel.store.model import Item, client, configure, table_name
from chalicelib.kernel.store.repository import Op, update_item
from chalicelib.kernel.store.table import ENTITY_SK, Stored, entity_pk, stored_from
from chalicelib.kernel.tenancy import USERS

ACL_SK = 'ACL'
KEY_ATTR = 'key_'
ACL_ATTR = 'acl_'
NEVER = 9_999_999_999          # the expiry of a key that has none (year 2286)
SUBJECT_ATTR = 'sub'


def acl_key(user_id: str) -> dict[str, Any]:
    return {'pk': {'S': entity_pk(USERS, user_id)}, 'sk': {'S': ACL_SK}}


def _number(attr: dict | None) -> int:
    return int(attr['N']) if attr and 'N' in attr else 0


# ----------------------------------------------------------------------------- reads

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
class Access:
    """What a user's ACL item says (raw attributes): roles, bound subject, live keys."""
    roles: dict[str, str] = field(default_factory=dict)
    subject: str | None = None
    keys: dict[str, int] = field(default_factory=dict)    # key hash -> expiry (epoch seconds)

    @classmethod
    def of(cls, item: dict[str, Any] | None) -> Access:
        item = item or {}
        return cls(roles={n[len(ACL_ATTR):]: v['S'] for n, v in item.items() if n.startswith(ACL_ATTR) and 'S' in v},
                   subject=(item.get('sub') or {}).get('S'),
                   keys={n[len(KEY_ATTR):]: _number(v) for n, v in item.items() if n.startswith(KEY_ATTR)})


@dataclass
class Reads:
    """Items read in one go: the user and their ACL item, entities by (family, id), ACL items
    of other users by id."""
    user: dict[str, Any] | None = None           # the user record (None: missing or deleted)
    user_found: bool = False
    access: Access = field(default_factory=Access)
    entities: dict[tuple[str, str], Stored | None] = field(default_factory=dict)
    acls: dict[str, Access] = field(default_factory=dict)


def read_async(user_id: str | None, entities: Iterable[tuple[str, str]] = ()) -> Future:
    """``read`` on the pool: the future's result is a ``Reads``."""
    wanted = list(dict.fromkeys(entities))
    client()   # created here, once: two threads creating it at once would each build one
    # in the request's context: a slow read is noted on its budget (core/budget.py), as on this thread
    return _executor().submit(contextvars.copy_context().run, read, user_id, wanted)


def read(user_id: str | None, entities: Iterable[tuple[str, str]] = (), acls: Iterable[str] = ()) -> Reads:
    """ONE strongly consistent BatchGetItem (100 keys at most; more keys, more calls) of the user
    item and ACL item of ``user_id``, ``entities`` and the ACL items of the users ``acls``."""
    wanted = list(dict.fromkeys(entities))
    acl_users = list(dict.fromkeys(([user_id] if user_id is not None else []) + list(acls)))
    keys = []
    if user_id is not None:
        keys.append((entity_pk(USERS, user_id), ENTITY_SK))
    keys += [(entity_pk(f, i), ENTITY_SK) for f, i in wanted]
    keys += [(entity_pk(USERS, u), ACL_SK) for u in acl_users]
    keys = list(dict.fromkeys(keys))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    name = table_name()
    for start in range(0, len(keys), 100):
        request = {name: {'Keys': [{'pk': {'S': pk}, 'sk': {'S': sk}} for pk, sk in keys[start:start + 100]],
                          'ConsistentRead': True}}
        for _ in range(5):   # unprocessed keys come back under throttling: ask again
            answer = client().batch_get_item(RequestItems=request)
            for raw in answer.get('Responses', {}).get(name, []):
                found[(raw['pk']['S'], raw['sk']['S'])] = raw
            request = answer.get('UnprocessedKeys') or {}
            if not request:
                break
        else:
            raise RuntimeError('the request reads could not be completed (throttled)')
    out = Reads()
    if user_id is not None:
        raw = found.get((entity_pk(USERS, user_id), ENTITY_SK))
        stored = stored_from(Item.from_raw_data(raw)) if raw is not None else None
        out.user_found = stored is not None
        out.user = stored.data if stored is not None else None
        out.access = Access.of(found.get((entity_pk(USERS, user_id), ACL_SK)))
    for f, i in wanted:
        raw = found.get((entity_pk(f, i), ENTITY_SK))
        out.entities[(f, i)] = stored_from(Item.from_raw_data(raw)) if raw is not None else None
    for u in acl_users:
        out.acls[u] = Access.of(found.get((entity_pk(USERS, u), ACL_SK)))
    return out


def raw_items(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Items by (pk, sk) with every attribute as stored (the invariant checker reads the ACL
    and gate items' counters, which the model does not declare): BatchGetItem, 100 a call."""
    wanted = list(dict.fromkeys(keys))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    name = table_name()
    for start in range(0, len(wanted), 100):
        request = {name: {'Keys': [{'pk': {'S': pk}, 'sk': {'S': sk}} for pk, sk in wanted[start:start + 100]],
                          'ConsistentRead': True}}
        while request:
            answer = client().batch_get_item(RequestItems=request)
            for raw in answer.get('Responses', {}).get(name, []):
                found[(raw['pk']['S'], raw['sk']['S'])] = raw
            request = answer.get('UnprocessedKeys') or {}
    return found


# ----------------------------------------------------------------------------- the roles

def acl_put(user_id: str, org_id: str, role: str) -> Op:
    """Transaction operation: the user holds ``role`` in ``org_id``."""
    model = configure()
    return update_item(entity_pk(USERS, user_id), ACL_SK,
                       [model.kind.set('acl'), Path(f'{ACL_ATTR}{org_id}').set(role)], what='acl')


def acl_delete(user_id: str, org_id: str) -> Op:
    """Transaction operation: the user no longer holds a role in ``org_id``."""
    return update_item(entity_pk(USERS, user_id), ACL_SK, [Path(f'{ACL_ATTR}{org_id}').remove()], what='acl')


def acl_delete_all(user_id: str, org_ids) -> Op:
    """Transaction operation: the user no longer holds a role in any of ``org_ids`` (one update of
    the ACL item: a transaction may touch it once)."""
    return update_item(entity_pk(USERS, user_id), ACL_SK,
                       [Path(f'{ACL_ATTR}{org_id}').remove() for org_id in sorted(org_ids)], what='acl')


def member_check(user_id: str, org_id: str, **tag: Any) -> Op:
    """Transaction condition: the user holds a role (an active membership) in ``org_id``."""
    return Op('check', model_key=(entity_pk(USERS, user_id), ACL_SK),
              condition=Path(f'{ACL_ATTR}{org_id}').exists(), tag={'what': 'reference', **tag})


def orgs_of(user_id: str) -> set[str]:
    """The organizations a user holds an active membership of (the ACL item: one GetItem)."""
    answer = client().get_item(TableName=configure().Meta.table_name, ConsistentRead=True,
                               Key={'pk': {'S': entity_pk(USERS, user_id)}, 'sk': {'S': ACL_SK}})
    item = answer.get('Item') or {}
    return {name[len(ACL_ATTR):] for name, value in item.items() if name.startswith(ACL_ATTR) and 'S' in value}
