"""core/expression_plans.py answers exactly what jsonata-python answers: the same expressions
evaluated with the plan and with the library alone (the plan made to fall back), over inputs
with numbers, strings, booleans, nulls, missing fields, arrays, objects, huge strings, zero
divisors and rounding halves; values, their types and error messages compared."""
from __future__ import annotations

import random

import pytest

from chalicelib.core import expression_plans, expressions
from chalicelib.core.expressions import ExpressionError, evaluate

FIELDS = ['a', 'b', 'c', 's', 'n', 't', 'f', 'z', 'missing', 'l', 'o', 'o.x', 'o.y.q', 'o.missing', 'a.b',
          '$__up1.total', '$__up1.missing', '$v', '$w', '$nothing']
LITERALS = ['0', '2', '2.5', '-1', '0.005', '100', '"x"', '""', '"12"', 'true', 'false']
ARITHMETIC = ['+', '-', '*', '/', '%']
COMPARE = ['=', '!=', '<', '<=', '>', '>=']
CALLS = ['$round({0}, 2)', '$round({0})', '$round({0}, 0)', '$abs({0})', '$floor({0})', '$ceil({0})', '$sqrt({0})',
         '$power({0}, 2)', '$exists({0})', '$not({0})', '$boolean({0})', '$number({0})', '$round({0}, -1)']

INPUTS = [
    {'a': 2, 'b': 19.99, 'c': 39.98, 's': 'abc', 'n': None, 't': True, 'f': False, 'z': 0,
     'l': [1, 2, 3], 'o': {'x': 1.5, 'y': {'q': 'deep'}}},
    {'a': 1.005, 'b': 2.675, 'c': 0.125, 's': '12', 'n': None, 't': False, 'f': True, 'z': 0.0,
     'l': [], 'o': {'x': None, 'y': {'q': 2}}},
    {'a': -7, 'b': 3, 'c': -2.5, 's': '', 'z': -0.0, 'o': {}, 'l': [{'x': 1}]},
    {'a': 1e308, 'b': 10, 'c': 1e-7, 's': 'x' * 10, 'o': {'x': 'str', 'y': [1, 2]}},
    {'a': 10**20, 'b': 0.1, 'c': 0.2, 's': '3.5', 't': True},
    {'a': '5', 'b': None, 'c': True, 's': 7, 'o': 3},
    {'a': 2, 'b': 3, 'c': 6, 's': 'y' * (expressions.MAX_STRING_LENGTH + 1)},
    {},
    {'a': 4, 'b': 2, 'c': 2, 'l': [[1], [2]], 'o': {'x': 0.5}},
]
BINDINGS = [None, {'__up1': {'total': 120.5}, 'v': 3}, {'__up1': None, 'v': 'text', 'w': [1, 2]},
            {'__up1': {'total': None}, 'round': 5}]


def _leaf(rng: random.Random) -> str:
    return rng.choice(FIELDS) if rng.random() < 0.65 else rng.choice(LITERALS)


def _expression(rng: random.Random, depth: int) -> str:
    if depth <= 0 or rng.random() < 0.25:
        return _leaf(rng)
    pick = rng.random()
    if pick < 0.3:
        return f'{_expression(rng, depth - 1)} {rng.choice(ARITHMETIC)} {_expression(rng, depth - 1)}'
    if pick < 0.55:
        return f'{_expression(rng, depth - 1)} {rng.choice(COMPARE)} {_expression(rng, depth - 1)}'
    if pick < 0.75:
        return rng.choice(CALLS).format(_expression(rng, depth - 1))
    if pick < 0.83:
        return f'({_expression(rng, depth - 1)}) {rng.choice(["and", "or"])} ({_expression(rng, depth - 1)})'
    if pick < 0.9:
        return f'{_expression(rng, depth - 1)} ? {_expression(rng, depth - 1)} : {_expression(rng, depth - 1)}'
    if pick < 0.95:
        return f'-({_expression(rng, depth - 1)})'
    return f'({_expression(rng, depth - 1)})'


SHAPES = [   # the validations data definitions write, and neighbours the plan must refuse or match
    '$round(quantity * unitPrice, 2) = amount', '$round(subtotal + tax, 2) = total', 'total > 0',
    'amount <= $__up1.total', 'quantity >= 1 and quantity <= 1000', 'a = "2"', 'a & b', '$sum(l)', 'l[0]',
    'o', 'o.y', '$string(a)', '$', '$$.a', 'a ? b', 'a in l', '[a, b]', '{"k": a}', 'a.b.c', '(a; b)',
    '$x := 2', '$round(a, b)', '$exists(missing) = false', '-a', '$not(t) or f', 'l.x', '$count(l)']


def _outcome(expression: str, data, bindings):
    try:
        value = evaluate(expression, data, bindings=bindings)
    except ExpressionError as exc:
        return 'error', str(exc)
    return 'value', type(value).__name__, repr(value)


def _library_only(monkeypatch):
    def fall_back(self, data, bindings):
        raise expression_plans.Fallback
    monkeypatch.setattr(expression_plans.Plan, 'run', fall_back)


def _cases():
    rng = random.Random(42)
    exprs = SHAPES + [_expression(rng, 3) for _ in range(450)]
    return [(e, data, bindings) for e in exprs for data in INPUTS for bindings in BINDINGS[:2]] + \
        [(e, data, bindings) for e in exprs[:80] for data in INPUTS[:3] for bindings in BINDINGS[2:]]


def test_the_plan_answers_what_the_library_answers(monkeypatch):
    cases = _cases()
    planned = [_outcome(*case) for case in cases]
    used = 0
    real_run = expression_plans.Plan.run

    def counting(self, data, bindings):
        nonlocal used
        result = real_run(self, data, bindings)
        used += 1
        return result
    monkeypatch.setattr(expression_plans.Plan, 'run', counting)
    for case in cases[:400]:
        _outcome(*case)
    _library_only(monkeypatch)
    reference = [_outcome(*case) for case in cases]
    differ = [(case, got, want) for case, got, want in zip(cases, planned, reference, strict=True) if got != want]
    assert not differ, differ[:5]
    assert used > 100   # the plan really ran (most random expressions are plain on most inputs)
    assert {o[0] for o in planned} == {'value', 'error'}


@pytest.mark.parametrize('expression', ['$round(quantity * unitPrice, 2) = amount', 'total > 0 and tax >= 0',
                                        '$round(subtotal + tax, 2) = total', 'amount <= $__up1.total'])
def test_the_validation_shapes_have_a_plan(expression):
    compiled, plan = expressions._compiled(expressions._classes(), expression)
    assert plan is not None


@pytest.mark.parametrize('expression', ['a & b', '$sum(l)', 'l[0]', '$', '[a]', '{"k": a}', '$x := 2', 'a in l',
                                        '$string(a)', '$count(l)', 'a.*', '$f(a)'])
def test_other_shapes_have_none(expression):
    compiled, plan = expressions._compiled(expressions._classes(), expression)
    assert plan is None


def test_a_binding_that_shadows_a_builtin_goes_to_the_library():
    # $round bound by the caller: the library reports it is not a function, the plan must not run
    with pytest.raises(ExpressionError):
        evaluate('$round(a, 2)', {'a': 1.234}, bindings={'round': 5})
    assert evaluate('$round(a, 2)', {'a': 1.234}) == 1.23


def test_depth_cap_is_kept():
    expression = '(((((((a + 1) + 1) + 1) + 1) + 1) + 1) + 1)'
    assert evaluate(expression, {'a': 1}) == 8
    with pytest.raises(ExpressionError, match='nests deeper than 5'):
        evaluate(expression, {'a': 1}, max_depth=5)


def test_an_input_the_library_refuses_is_still_refused_by_it():
    # a Decimal is not a JSON value: the library's own input check runs and its error is the answer
    from decimal import Decimal
    with pytest.raises(ExpressionError, match='ValueError'):
        evaluate('a + 1', {'a': Decimal('1.5')})
    with pytest.raises(ExpressionError, match='ValueError'):
        evaluate('$substringBefore(s, "x")', {'s': 'abxc', 'deep': [{'d': Decimal('1')}]})
    assert evaluate('$substringBefore(s, "x")', {'s': 'abxc', 'deep': [{'d': 1.5}]}) == 'ab'
