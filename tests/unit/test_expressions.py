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
