"""The JSONata adapter: values, bindings, and every failure as an ExpressionError (bounded)."""
from __future__ import annotations

import time

import pytest

from chalicelib.core.expressions import ExpressionError, evaluate


def test_values_and_bindings():
    assert evaluate('$sum(items.price) * $inputs.k', {'items': [{'price': 1}, {'price': 2.5}]},
                    bindings={'inputs': {'k': 2}}) == 7
    assert evaluate('total > 10', {'total': 12}) is True
    assert evaluate('missing', {'a': 1}) is None


@pytest.mark.parametrize('expression, reason', [
    ('$error("bad thing")', 'bad thing'),
    ('../total', ''),                       # a leading ../ is not JSONata: callers resolve it first
    ('(', ''),
    ('', 'empty'),
])
def test_failures_are_expression_errors(expression, reason):
    with pytest.raises(ExpressionError) as caught:
        evaluate(expression, {'total': 1})
    assert str(caught.value).startswith('evaluation error: ') and reason in str(caught.value)


def test_a_runaway_expression_is_stopped_quickly():
    started = time.monotonic()
    with pytest.raises(ExpressionError):
        evaluate('($f := function($n){ $f($n + 1) }; $f(0))', {}, timeout_ms=200)
    with pytest.raises(ExpressionError):
        evaluate('($loop := function($n){ $n > 0 ? $loop($n) : 0 }; $loop(1))', {}, timeout_ms=200)
    assert time.monotonic() - started < 5


def test_jsonata_is_not_loaded_by_the_app():
    import subprocess
    import sys
    code = 'import sys, app; import chalicelib.core.expressions; print("jsonata" in sys.modules)'
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == 'False'


@pytest.mark.parametrize('expression, reason', [
    ("$pad('', 30000000)", '$pad would make a string of 30,000,000 characters'),
    ("$pad('x', -30000000, '#')", '$pad would make a string of 30,000,000 characters'),
    ('[1..100000000]', 'the range [1..100000000] would make an array of 100,000,000 items'),
    ("$join($map([1..600], function($i){ $pad('', 2000, 'x') }))", '$join would make a string of 1,200,000'),
    ("($f := function($s, $n){ $n = 0 ? $s : $f($s & $s, $n - 1) }; $f('abcdefghij', 30))", 'the & operator'),
    ("($f := function($a, $n){ $n = 0 ? $a : $f([$a, $a], $n - 1) }; $f([1], 30))", 'an array of 131,072 items'),
    ("($f := function($a, $n){ $n = 0 ? $a : $f($append($a, $a), $n - 1) }; $f([1], 30))", '$append'),
    ("$replace('aaaaaaaaaa', 'a', $pad('', 200000, 'x'))", '$replace would make a string of 2,000,010'),
    ("($f := function($a, $n){ $n = 0 ? $a : $f({'a': $a, 'b': $a}, $n - 1) }; $string($f(1, 30)))", '$string'),
    ("($f := function($a, $n){ $n = 0 ? $a : $f({'a': $a, 'b': $a}, $n - 1) }; $f(1, 30))",
     'the result is larger than 1,000,000 characters of JSON'),
])
def test_allocations_are_capped_before_they_happen(expression, reason):
    started = time.monotonic()
    with pytest.raises(ExpressionError) as caught:
        evaluate(expression, None)
    assert reason in str(caught.value), str(caught.value)
    assert time.monotonic() - started < 1.5


def test_values_under_the_caps_are_untouched():
    assert evaluate("$length($pad('', 1000000))", None) == 1_000_000
    assert evaluate('$count([1..100000])', None) == 100_000
    assert evaluate("$distinct([1, 2, 2, 3])", None) == [1, 2, 3]
    assert evaluate("$split('a,b,c', ',')", None) == ['a', 'b', 'c']
    assert evaluate("{'a': null}", None) == {'a': None}


def test_an_expression_never_outlives_the_unit_of_works_budget():
    from chalicelib.core import budget
    token = budget.start(0.3)
    try:
        started = time.monotonic()
        with pytest.raises(budget.BudgetExceeded) as caught:
            evaluate('$count($map([1..90000], function($x){ $x * 2 }))', None, timeout_ms=5000)
        assert time.monotonic() - started < 1
        assert 'evaluating an expression' in caught.value.message and caught.value.status == 422
    finally:
        budget.end(token)


def test_after_a_stall_past_both_limits_the_budget_is_named_not_the_expressions_cap():
    """A stall (a loaded host) that outlasts both the expression's own cap, which ended first,
    and the unit's budget: the unit cannot finish, so its 422 is the answer (CI, 2026-11-27)."""
    import jsonata

    from chalicelib.core import budget
    from chalicelib.core.expressions import _Run
    token = budget.start(0.2)
    try:
        run = _Run(timeout_ms=100, max_depth=10)    # its own cap ends before the budget
        time.sleep(0.25)                            # the stall
        with pytest.raises(jsonata.JException):   # how a stop unwinds through the library
            run.check_time()
        assert isinstance(run.stopped, budget.BudgetExceeded)
    finally:
        budget.end(token)
    run = _Run(timeout_ms=50, max_depth=10)         # no unit of work: the cap is the answer
    time.sleep(0.1)
    with pytest.raises(jsonata.JException):   # how a stop unwinds through the library
        run.check_time()
    assert isinstance(run.stopped, ExpressionError) and 'ran longer than 50 ms' in str(run.stopped)


def test_a_stall_between_reading_the_budget_and_the_clock_still_names_the_budget(monkeypatch):
    """CI, 2026-11-27: a validation stopped at its request's 8 s budget answered 200 with the
    rule's 'ran longer than 30000 ms': the run's end had been computed as clock + budget left with
    the clock read first, so a stall between the two reads put it before the budget's own end, and
    a stop in between found the budget not yet spent. Read in the other order, it never is."""
    import jsonata

    from chalicelib.core import budget
    from chalicelib.core import expressions as module
    token = budget.start(0.2)
    real_remaining = budget.remaining

    def stall_then_remaining(**kwargs):
        time.sleep(0.05)   # the host stalls between the run's two reads of the clock
        return real_remaining(**kwargs)
    monkeypatch.setattr(module.budget, 'remaining', stall_then_remaining)
    try:
        run = module._Run(timeout_ms=30_000, max_depth=10)
        monkeypatch.setattr(module.budget, 'remaining', real_remaining)
        deadline = time.monotonic() + 1
        while time.monotonic() <= run.ends and time.monotonic() < deadline:
            time.sleep(0.001)
        with pytest.raises(jsonata.JException):
            run.check_time()
        assert isinstance(run.stopped, budget.BudgetExceeded), run.stopped
    finally:
        budget.end(token)
