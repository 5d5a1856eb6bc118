"""Checks of the request gate and the credentials it reads (issue 27, features/identity/gate.py).

* ``rate-gate``: every gate item (``RATE#{userId}`` / ``M#{minute}``) is of kind ``gate``,
  expires (``ttl`` = the end of its minute + the grace) and its counters add up (the minute's
  total is the sum of its seconds and of its credentials, each credential's minute the sum of
  its seconds, nothing negative). (Its user may be gone: a request counted while the user was
  deleted is given back, and the item expires.)
* ``acl-items``: a user's ACL item carries no rate counter of the old layout (``rm``, ``ru``,
  ``rsNN``, ``rk_...``: the migration removes them with ``gate.legacy_cleanup_ops``), and every
  live key it names (``key_{hash}``) has its key record (``KEY#{hash}`` in the user's
  partition): a key whose record is gone was revoked, and must not stay live. (A key record
  without ``key_`` is fine: written before the ACL item carried keys, it is added on first use.)

The counters are attributes the table model does not declare: the items are read again raw
(one BatchGetItem per 100), so these checks cost a read of each gate and ACL item more.
"""
from __future__ import annotations

from collections.abc import Iterator

from chalicelib.features.identity import gate
from chalicelib.kernel.store import acl
from chalicelib.ops.check_table import Snapshot, Violation, check


@check('rate-gate')
def rate_gate(snap: Snapshot) -> Iterator[Violation]:
    rows = snap.items_with_prefix(gate.GATE_PREFIX)
    raw = acl.raw_items((r.pk, r.sk) for r in rows)
    for row in rows:
        where = f'{row.pk} {row.sk}'
        if row.kind != gate.GATE_KIND:
            yield Violation('rate-gate', where, f'kind {row.kind!r}, not {gate.GATE_KIND!r}')
        item = raw.get((row.pk, row.sk))
        if item is None:
            continue   # expired between the two reads
        for problem in gate.gate_problems(item):
            yield Violation('rate-gate', where, problem)


@check('acl-items')
def acl_items(snap: Snapshot) -> Iterator[Violation]:
    rows = [r for r in snap.rows if r.sk == acl.ACL_SK and r.pk.startswith('users#')]
    snap.claim(rows)
    keys = {(r.pk, r.sk) for r in snap.rows if r.pk.startswith('users#') and r.sk.startswith('KEY#')}
    snap.claim(r for r in snap.rows if (r.pk, r.sk) in keys)
    raw = acl.raw_items((r.pk, r.sk) for r in rows)
    for row in rows:
        item = raw.get((row.pk, row.sk))
        if item is None:
            continue
        where = f'{row.pk} {row.sk}'
        legacy = gate.legacy_counters(item)
        if legacy:
            yield Violation('acl-items', where, f'{len(legacy)} rate counter(s) of the old layout '
                                                f'({", ".join(legacy[:5])}...): run the migration')
        for name in item:
            if name.startswith(acl.KEY_ATTR) and (row.pk, f'KEY#{name[len(acl.KEY_ATTR):]}') not in keys:
                yield Violation('acl-items', where, f'{name} names a live key without a key record (revoked?)')
