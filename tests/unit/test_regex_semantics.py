"""JSONata's regex semantics on RE2 (core/expression_regex.py): $match groups and index, $replace
with $n references and a function, $split and $contains with a regex, flags i and m, JavaScript's
``$`` and ``\\uXXXX``; and the library's other regexes ($toMillis pictures, $formatNumber options)
held to linear time or refused."""
from __future__ import annotations

import time

import pytest

from chalicelib.core.expressions import ExpressionError, check, evaluate


def test_match_answers_groups_and_index():
    assert evaluate(r"$match('ab12cd345', /([a-z]+)(\d+)/)", {}) == [
        {'match': 'ab12', 'index': 0, 'groups': ['ab', '12']}, {'match': 'cd345', 'index': 4, 'groups': ['cd', '345']}]
    assert evaluate(r"$match('ab12cd345', /([a-z]+)(\d+)/, 1).index", {}) == 0
    assert evaluate("$match('a\\nb', /^b$/m).index", {}) == 2
    assert evaluate("$match('b\\n', /b$/)", {}) is None          # JavaScript's $: only at the end


def test_replace_takes_group_references_a_limit_and_a_function():
    assert evaluate(r"$replace('John Smith', /(\w+)\s(\w+)/, '$2, $1')", {}) == 'Smith, John'
    assert evaluate("$replace('265USD', /([0-9]+)USD/, '$$$1')", {}) == '$265'
    assert evaluate("$replace('abcd', /(b)/, '$12')", {}) == 'ab2cd'       # $1 then '2'
    assert evaluate("$replace('abc', /(x)?b/, '[$1]')", {}) == 'a[]c'      # a group that took no part
    assert evaluate("$replace('aaa', /a/, 'ba', 2)", {}) == 'babaa'        # the first two matches of the text
    assert evaluate("$replace('hello world', /o/, function($m){ $uppercase($m.match) & $m.index })", {}) \
        == 'hellO4 wO7rld'


def test_split_and_contains_with_a_regex():
    assert evaluate(r"$split('a1b22c', /\d+/)", {}) == ['a', 'b', 'c']
    assert evaluate(r"$split('a1b22c', /(\d)+/)", {}) == ['a', 'b', 'c']   # capture groups are not pieces
    assert evaluate(r"$split('a1b22c3', /\d+/, 2)", {}) == ['a', 'b']
    assert evaluate("$contains('Hello', /hel/i)", {}) is True
    assert evaluate("$contains('Hello', /hel/)", {}) is False
    assert evaluate(r"$contains('A', /\u0041/)", {}) is True              # JavaScript's \uXXXX escape


def test_a_backtracking_pattern_answers_at_once():
    started = time.monotonic()
    assert evaluate('$match(text, /(a+)+$/)', {'text': 'a' * 25 + 'b'}) is None   # ~6 s on Python's re
    assert evaluate('$contains(text, /(a+)+$/)', {'text': 'a' * 10_000}) is True
    assert evaluate("$toMillis(text, '(a+)+c[Y]')", {'text': 'a' * 40 + 'b'}) is None   # a picture is a regex too
    assert time.monotonic() - started < 1.0


def test_many_matches_of_a_long_text_stop_at_the_time_box():
    started = time.monotonic()
    with pytest.raises(ExpressionError, match='ran longer than 300 ms'):
        evaluate('$count($match(text, /a.*b|a/))', {'text': 'a' * 200_000}, timeout_ms=300)
    assert time.monotonic() - started < 2.0


@pytest.mark.parametrize('pattern', [r'(a)\1', '(?=a)', '(?<!a)b'])
def test_a_pattern_re2_refuses_is_an_error_at_parse_and_at_run(pattern):
    with pytest.raises(ExpressionError, match=r'not one the linear-time engine \(RE2\) runs'):
        check(f'$match(x, /{pattern}/)')
    with pytest.raises(ExpressionError, match=r'not one the linear-time engine \(RE2\) runs'):
        evaluate(f'$match(x, /{pattern}/)', {'x': 'aa'})


def test_format_number_options_that_would_be_regexes_are_refused():
    with pytest.raises(ExpressionError, match='exponent-separator must be one character'):
        evaluate("$formatNumber(1, '#', {'exponent-separator': '(a+)+b'})", {})
    assert evaluate("$formatNumber(1234.5, '#,##0.00')", {}) == '1,234.50'
