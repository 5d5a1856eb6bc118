"""Bounded work (issue 24): what the bounds cost and what they bought, in process, no AWS.

* delta application: 1,000 deletes at the bottom of a deep chain, the old walk-to-the-root
  rule against the subtree rule (features/documents/deltas.py), on chains short enough for the
  old rule to finish;
* expressions: a small rule through the capped evaluator (core/expressions.py) against the
  library's own entry point, and `$pad('', 30000000)` refused.

    PYTHONPATH=. .venv/bin/python -m bench.bench_bounded_work
"""
from __future__ import annotations

import copy
import statistics
import time
from collections import OrderedDict


def _old_apply(nodes, operations):
    """The delete rule before issue 24: every node walks up to the root, per delete."""
    from chalicelib.features.documents.deltas import _under
    by_id = OrderedDict((n['id'], copy.deepcopy(n)) for n in nodes)
    for op in operations:
        target = op['id']
        gone = {nid for nid in by_id if _under(by_id, nid, target)}
        for nid in gone:
            del by_id[nid]
    return list(by_id.values())


def _chain(depth):
    return [{'id': f'n{i}', 'parentId': f'n{i - 1}' if i else None, 'nodeType': '', 'content': None,
             'index': 0, 'features': {}} for i in range(depth)]


def deltas() -> None:
    from chalicelib.features.documents.deltas import apply
    print('| chain depth | deletes | old rule | subtree rule |')
    print('|---|---|---|---|')
    for depth, deletes in ((500, 20), (1_000, 100), (4_000, 12), (12_000, 1_000)):
        nodes = _chain(depth)
        ops = [{'op': 'delete', 'id': f'n{i}'} for i in range(depth - 1, depth - 1 - deletes, -1)]
        started = time.perf_counter()
        new, dropped = apply(nodes, ops)
        fast = time.perf_counter() - started
        assert len(new) == depth - deletes and not dropped
        if depth * deletes <= 10_000:   # the old rule: (depth x depth x deletes) steps
            started = time.perf_counter()
            assert len(_old_apply(nodes, ops)) == depth - deletes
            old = f'{time.perf_counter() - started:.2f} s'
        else:
            old = 'not run'
        print(f'| {depth:,} | {deletes:,} | {old} | {fast * 1000:.1f} ms |')


def expressions() -> None:
    import jsonata

    from chalicelib.core.expressions import ExpressionError, evaluate
    data = {'total': 30, 'lineItems': [{'amount': 10}, {'amount': 20}]}
    rule = 'total = $sum(lineItems.amount)'
    evaluate(rule, data)
    runs = 2_000

    def timed(fn):
        samples = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(runs):
                fn()
            samples.append((time.perf_counter() - started) / runs * 1e6)
        return statistics.median(samples)
    capped = timed(lambda: evaluate(rule, data))
    plain = timed(lambda: jsonata.Jsonata(rule).evaluate(data))
    print(f'small rule, capped evaluator: {capped:.0f} us; the library alone: {plain:.0f} us')
    started = time.perf_counter()
    try:
        evaluate("$pad('', 30000000)", None)
    except ExpressionError as exc:
        print(f"$pad('', 30000000): refused in {(time.perf_counter() - started) * 1000:.2f} ms ({exc})")


if __name__ == '__main__':
    deltas()
    expressions()
