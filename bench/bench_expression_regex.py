"""Regular expressions of JSONata expressions: Python's re (the library's default engine) against
RE2 (core/expression_regex.py), for the hostile pattern and a normal $match (bench/README.md,
"Expressions: regular expressions on RE2"). Run: PYTHONPATH=. .venv/bin/python bench/bench_expression_regex.py"""
from __future__ import annotations

import re
import statistics
import time

from chalicelib.core import expression_regex


def _time(fn, repeat: int = 1) -> float:
    runs = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - began)
    return statistics.median(runs)


def main() -> None:
    hostile_re = re.compile('(a+)+$')
    for n in (20, 22, 24):
        text = 'a' * n + 'b'
        print(f'hostile, Python re, {n} a + b: {_time(lambda text=text: hostile_re.search(text)) * 1000:,.0f} ms')
    hostile = expression_regex.compile_pattern('(a+)+$')
    for n in (24, 10_000, 1_000_000):
        text = 'a' * n + 'b'
        print(f'hostile, RE2, {n:,} a + b: {_time(lambda text=text: hostile.search(text), 5) * 1000:,.2f} ms')
    normal = r'([A-Z]{3})-(\d{4})-(\d+)'
    text = 'Invoice INV-2026-0042 for order ORD-2025-77, ref ABC-1234-5 ' * 20
    plain = re.compile(normal)
    on_re2 = expression_regex.compile_pattern(normal)
    rounds = 2000
    t_re = _time(lambda: [list(plain.finditer(text)) for _ in range(rounds)], 3) / rounds
    t_re2 = _time(lambda: [list(on_re2.finditer(text)) for _ in range(rounds)], 3) / rounds
    print(f'normal $match over {len(text):,} characters (60 matches): '
          f're {t_re * 1e6:,.0f} us, RE2 {t_re2 * 1e6:,.0f} us')
    short = 'INV-2026-0042'
    t_re = _time(lambda: [list(plain.finditer(short)) for _ in range(20000)], 3) / 20000
    t_re2 = _time(lambda: [list(on_re2.finditer(short)) for _ in range(20000)], 3) / 20000
    print(f'normal $match over {len(short)} characters (1 match): re {t_re * 1e6:,.1f} us, RE2 {t_re2 * 1e6:,.1f} us')
    from chalicelib.core.expressions import evaluate
    t_eval = _time(lambda: [evaluate(r"$match(ref, /([A-Z]{3})-(\d{4})-(\d+)/)", {'ref': short}) for _ in range(2000)],
                   3) / 2000
    print(f'evaluate("$match(ref, ...)") with the library, RE2: {t_eval * 1e6:,.0f} us per evaluation')


if __name__ == '__main__':
    main()
