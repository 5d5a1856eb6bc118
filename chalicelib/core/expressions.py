"""JSONata expressions: the SCRIPT steps of activity plans and the validation rules of content
objects are written in JSONata, evaluated here with ``jsonata-python`` (a maintained, pure
Python port of JSONata: no code execution, no I/O). Both callers get the same settings.

Every evaluation is bounded (docs/api/limits.md, "Expressions"):

* time: ``timeout_ms`` (1 s unless the caller says less), and never past the unit of work's
  budget (core/budget.py): the check runs on entry to and exit from every node, and inside the
  builtins below that loop natively;
* depth: ``max_depth`` nested evaluations (200): ``$f := function($n){ $f($n+1) }`` stops;
* size: no string longer than ``MAX_STRING_LENGTH`` characters, no array or object longer than
  ``MAX_ARRAY_LENGTH`` items, no range ``[a..b]`` longer than that, and an answer of at most
  ``MAX_RESULT_SIZE`` (its JSON length, estimated without building it). The builtins that
  allocate from a small input (``$pad``, ``$join``, ``$replace``, ``$split``, ``$append``,
  ``$string``, ``$distinct``; the ``&`` and ``..`` operators) check *before* allocating, so
  ``$pad('', 30000000)`` fails without taking 30 MB; every node's value is checked on exit, so
  repeated doubling stops at the first value over a cap.

Any failure, a syntax error, an ``$error("...")`` call or a bound exceeded, is an
``ExpressionError`` whose message starts ``evaluation error: ``; callers decide what it means (a
failed step attempt, a validation entry's ``error``). Running out of the unit of work's budget
is not the expression's failure: ``budget.BudgetExceeded`` propagates (the request is a 422).

Regular expressions run on RE2, not on the library's Python ``re`` (core/expression_regex.py:
linear time, the interpreter lock released while matching, a time check between two matches).
``re`` backtracks while holding the lock, so one ``$match(text, /(a+)+$/)`` stalled every request
of the process, out of reach of any check between nodes. No maintained JSONata implementation for
Python uses RE2: the library's regex-engine hook is handed ``_regex_engine``, and $match,
$replace and $split over a regex are wrapped below with jsonata-js's semantics. A pattern RE2
refuses is an ``ExpressionError`` when the expression is parsed: ``check`` is what writes call
(a 400), evaluation reports it as any other error (docs/api/limits.md, "Regular expressions are
RE2").

The library costs ~80 ms to import: it is loaded on the first evaluation, never at cold start.
The caps are enforced by wrapping the library's own builtins and two of its evaluator methods
(a subclass); no maintained JSONata implementation for Python offers size limits.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from chalicelib.core import budget, expression_plans, expression_regex

DEFAULT_TIMEOUT_MS = 1000
DEFAULT_MAX_DEPTH = 200
MAX_EXPRESSION_LENGTH = 10_000
MAX_STRING_LENGTH = 1_000_000      # characters of any string an expression makes
MAX_ARRAY_LENGTH = 100_000         # items of any array (or keys of any object), ranges included
MAX_RESULT_SIZE = 1_000_000        # JSON characters of the value an evaluation answers
_TICK = 1024                       # native loop steps between two time checks


class ExpressionError(Exception):
    """The expression could not be evaluated; the message is safe to show its author."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(f'evaluation error: {reason}')
        self.reason = reason
        self.timed_out = timed_out   # it ran out of its time box (a SCRIPT attempt timed out: endReason TIMED_OUT)


def _n(value: float) -> str:
    return f'{int(value):,}'


class _Run:
    """The bounds of one evaluation (the library's Timebox, plus the budget and the sizes)."""

    def __init__(self, timeout_ms: int, max_depth: int) -> None:
        # the budget's time left first, the clock after: now + left is then never before the
        # budget's own end, so a stop at ``ends`` for the budget finds it spent (budget.check
        # raises) and never names this expression's cap instead (a stall between the two
        # clock reads had made the 422 of a spent request a rule's '30000 ms' timeout)
        left = budget.remaining()
        now = time.monotonic()
        own = now + timeout_ms / 1000
        self.ends = min(own, now + left)
        self.timeout_ms = timeout_ms
        self.max_depth = max_depth
        self.depth = 0
        self.steps = 0
        self.stopped: BaseException | None = None

    def stop(self, exc: BaseException):
        """Remember why and unwind through the library (which re-wraps some exceptions)."""
        import jsonata  # noqa: PLC0415 - loaded already
        self.stopped = exc
        error = jsonata.JException('D1012', -1, self.timeout_ms)
        raise error

    def check_time(self) -> None:
        if time.monotonic() <= self.ends:
            return
        # The unit of work's budget is asked first even when the expression's own cap ended
        # first: after a stall (a loaded host, a paused process) both can have passed, and then
        # the request cannot finish anyway: its 422 names the work, not one rule's timeout.
        try:
            budget.check('evaluating an expression')
        except (budget.BudgetExceeded, budget.BudgetSpentWaiting) as exc:
            self.stop(exc)
        self.stop(ExpressionError(f'the expression ran longer than {self.timeout_ms} ms (timed out)', timed_out=True))

    def tick(self) -> None:
        self.steps += 1
        if self.steps % _TICK == 0:
            self.check_time()

    def string(self, length: int, what: str) -> None:
        if length > MAX_STRING_LENGTH:
            self.stop(ExpressionError(f'{what} would make a string of {_n(length)} characters '
                                      f'(the limit is {_n(MAX_STRING_LENGTH)})'))

    def array(self, length: int, what: str) -> None:
        if length > MAX_ARRAY_LENGTH:
            self.stop(ExpressionError(f'{what} would make an array of {_n(length)} items '
                                      f'(the limit is {_n(MAX_ARRAY_LENGTH)})'))

    def value(self, value: Any, what: str = 'a value') -> None:
        if isinstance(value, str):
            self.string(len(value), what)
        elif isinstance(value, (list, dict)):
            # the library's lazy range reports one item too many: count what it iterates
            self.array(value.b - value.a if hasattr(value, 'b') and hasattr(value, 'a') else len(value), what)

    # the library's callbacks, bound as __evaluate_entry / __evaluate_exit
    def entry(self, expr, input_, env) -> None:
        if env.is_parallel_call:
            return
        self.depth += 1
        if self.depth > self.max_depth:
            self.stop(ExpressionError(f'the expression nests deeper than {self.max_depth} levels'))
        self.check_time()

    def exit(self, expr, input_, env, result) -> None:
        if env.is_parallel_call:
            return
        self.depth -= 1
        self.value(result)
        self.check_time()


_local = threading.local()


def _run() -> _Run:
    return _local.run


def json_size(value: Any, limit: int) -> int:
    """The length of ``value`` as compact JSON, estimated without building it; the walk stops
    as soon as it passes ``limit`` (shared sub-values count each time they appear)."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, dict):
            total += 2 + len(item)
            for key, sub in item.items():
                total += len(str(key)) + 3
                stack.append(sub)
        elif isinstance(item, (list, tuple)):
            total += 2 + len(item)
            stack.extend(item)
        elif isinstance(item, float) and math.isfinite(item):
            total += 24
        else:
            total += 8
        if total > limit:
            return total
    return total


_jsonata_classes: dict[str, Any] = {}
_PICTURE_CHARACTERS = ('decimal-separator', 'grouping-separator', 'exponent-separator', 'minus-sign', 'percent',
                       'per-mille', 'zero-digit', 'digit', 'pattern-separator')
_REGEX_SPECIAL = '\\^$.|?*+()[]{}'


def _check_regex_time() -> None:
    """Between two matches of a regex (expression_regex.Pattern): the evaluation's time box."""
    run = getattr(_local, 'run', None)
    if run is not None:
        run.check_time()


def _regex_engine(pattern: str, flags: Any) -> expression_regex.Pattern:
    """The library's regex-engine hook: a regex literal compiled by RE2 (core/expression_regex.py).
    A pattern RE2 refuses is this expression's error, at parse as during an ``$eval``."""
    try:
        return expression_regex.compile_pattern(pattern, case_insensitive=flags.case_insensitive,
                                                multiline=flags.multiline, check=_check_regex_time)
    except expression_regex.RegexRefused as exc:
        error = ExpressionError(str(exc))
        run = getattr(_local, 'run', None)
        if run is not None:
            run.stop(error)   # unwinds through the library, which re-wraps what it catches
        raise error from None


def check(expression: str) -> None:
    """ExpressionError when ``expression`` cannot be evaluated whatever its input: empty, too
    long, a syntax error, or a regex RE2 refuses. What a write checks (a definition's rules, a
    SCRIPT step, an assignee rule); nothing is evaluated."""
    if not isinstance(expression, str) or not expression.strip():
        raise ExpressionError('the expression is empty')
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError(f'the expression is longer than {MAX_EXPRESSION_LENGTH} characters')
    classes = _classes()
    try:
        classes['Capped'](expression, _regex_engine)
    except classes['jsonata'].JException as exc:
        raise ExpressionError(str(exc) or type(exc).__name__) from None
    except RecursionError:
        raise ExpressionError('the expression nests too deeply') from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise ExpressionError(f'{type(exc).__name__}: {exc}') from None


def _classes() -> dict[str, Any]:
    """The capped evaluator and the wrapped builtins, built on first use (lazy import)."""
    if _jsonata_classes:
        return _jsonata_classes
    import jsonata  # noqa: PLC0415 - lazy: ~80 ms of import, paid by the first evaluation only
    from jsonata import datetimeutils, functions, utils  # noqa: PLC0415
    base = functions.Functions

    def _replace_regex(string, pattern, replacement, limit):
        """jsonata-js replace over a regex: ``$n`` group references in a text, or a function
        of the match object ($match's shape); at most ``limit`` matches replaced."""
        if limit is not None and limit < 0:
            raise jsonata.JException('Fourth argument of replace function must evaluate to a positive number', 0)
        run = _run()
        pieces: list[str] = []
        end = 0
        size = 0
        for count, m in enumerate(pattern.finditer(string)):
            if limit is not None and count >= limit:
                break
            if isinstance(replacement, str):
                substitute = expression_regex.expand(replacement, m)
            else:
                substitute = base.func_apply(replacement, [expression_regex.match_object(m)])
                if not isinstance(substitute, str):
                    raise jsonata.JException('D3012', -1)
            pieces.append(string[end:m.start()])
            pieces.append(substitute)
            size += m.start() - end + len(substitute)
            run.string(size, '$replace')
            end = m.end()
        pieces.append(string[end:])
        return ''.join(pieces)

    class Capped(jsonata.Jsonata):
        def evaluate_string_concat(self, lhs, rhs):
            left = '' if lhs is None else base.string(lhs, None)
            right = '' if rhs is None else base.string(rhs, None)
            _run().string(len(left) + len(right), 'the & operator')
            return left + right

        def evaluate_range_expression(self, lhs, rhs):
            if isinstance(lhs, int) and isinstance(rhs, int) and not isinstance(lhs, bool) \
                    and not isinstance(rhs, bool) and rhs >= lhs:
                _run().array(rhs - lhs + 1, f'the range [{lhs}..{rhs}]')
            return super().evaluate_range_expression(lhs, rhs)

    class Bounded(base):
        @staticmethod
        def pad(string, width, char):
            if isinstance(string, str) and isinstance(width, (int, float)) and not isinstance(width, bool):
                _run().string(max(len(string), abs(int(width))), '$pad')
            return base.pad(string, width, char)

        @staticmethod
        def join(strs, separator):
            if isinstance(strs, list):
                run = _run()
                sep = len(separator) if isinstance(separator, str) else 0
                total = sep * max(len(strs) - 1, 0)
                for s in strs:
                    total += len(s) if isinstance(s, str) else 0
                    run.tick()
                run.string(total, '$join')
            return base.join(strs, separator)

        @staticmethod
        def split(string, pattern, limit):
            if isinstance(string, str) and isinstance(pattern, expression_regex.Pattern):
                if limit is not None and int(limit) < 0:
                    raise jsonata.JException('D3020', -1, string)
                lim = None if limit is None else int(limit)
                run = _run()
                pieces: list[str] = []
                end = 0
                for m in pattern.finditer(string):   # jsonata-js split: the text between matches
                    if lim is not None and len(pieces) >= lim:
                        break
                    pieces.append(string[end:m.start()])
                    end = m.end()
                    run.array(len(pieces) + 1, '$split')
                if lim is None or len(pieces) < lim:
                    pieces.append(string[end:])
                return pieces
            result = base.split(string, pattern, limit)
            if isinstance(result, list):
                _run().array(len(result), '$split')
            return result

        @staticmethod
        def match_(string, regex, limit):
            if not isinstance(string, str) or not isinstance(regex, expression_regex.Pattern):
                return base.match_(string, regex, limit)
            if limit is not None and limit < 0:
                raise jsonata.JException('D3040', -1, limit)
            cap = None if limit is None else math.ceil(limit)
            run = _run()
            result = utils.Utils.create_sequence()
            for m in regex.finditer(string):
                if cap is not None and len(result) >= cap:
                    break
                result.append(expression_regex.match_object(m))
                run.array(len(result), '$match')
            return result

        @staticmethod
        def format_number(value, picture, decimal_format):
            # the library puts these options into regexes unescaped: XPath's format-number
            # takes one character for each (docs/api/limits.md "Expressions")
            for key in _PICTURE_CHARACTERS:
                option = (decimal_format or {}).get(key) if isinstance(decimal_format, Mapping) else None
                if option is not None and (not isinstance(option, str) or len(option) != 1
                                           or not option.isprintable() or option in _REGEX_SPECIAL):
                    _run().stop(ExpressionError(f"$formatNumber: the option {key} must be one character "
                                                f"(not one of {_REGEX_SPECIAL})"))
            return base.format_number(value, picture, decimal_format)

        @staticmethod
        def replace(string, pattern, replacement, limit):
            if isinstance(string, str) and isinstance(replacement, str) and replacement:
                if isinstance(pattern, str):
                    count = string.count(pattern) if pattern else 0
                else:
                    count = sum(1 for _ in pattern.finditer(string)) if hasattr(pattern, 'finditer') else 0
                if isinstance(limit, (int, float)) and not isinstance(limit, bool):
                    count = min(count, max(int(limit), 0))
                _run().string(len(string) + count * len(replacement), '$replace')
            if isinstance(string, str) and isinstance(pattern, expression_regex.Pattern):
                result = _replace_regex(string, pattern, replacement, limit)
            else:
                result = base.replace(string, pattern, replacement, limit)
            if isinstance(result, str):
                _run().string(len(result), '$replace')
            return result

        @staticmethod
        def append(arg1, arg2):
            def size(v):
                return len(v) if isinstance(v, list) else (0 if v is None else 1)
            _run().array(size(arg1) + size(arg2), '$append')
            return base.append(arg1, arg2)

        @staticmethod
        def string(arg, prettify):
            if arg is not None and not isinstance(arg, (str, int, float, bool)):
                _run().string(json_size(arg, MAX_STRING_LENGTH), '$string')
            return base.string(arg, prettify)

        @staticmethod
        def distinct(arr):
            if not isinstance(arr, list) or len(arr) <= 1:
                return arr
            run = _run()
            results = utils.Utils.create_sequence() if isinstance(arr, utils.Utils.JList) else []
            for el in arr:   # the library's quadratic loop, with the time checked as it goes
                run.tick()
                if el not in results:
                    results.append(el)
            return results

    # the library's own signatures; the method when it is not the name
    signatures = {'pad': '<s-ns?:s>', 'join': '<a<s>s?:s>', 'split': '<s-(sf)n?:a<s>>',
                  'replace': '<s-(sf)(sf)n?:s>', 'append': '<xx:a>', 'string': '<x-b?:s>', 'distinct': '<x:x>',
                  'match': ('<s-f<s:o>n?:a<o>>', 'match_'), 'formatNumber': ('<n-so?:s>', 'format_number')}
    builtins = {}
    for name, sig in signatures.items():
        sig, method = sig if isinstance(sig, tuple) else (sig, name)
        builtins[name] = jsonata.Jsonata.JNativeFunction(name, sig, Bounded, method)
    # $toMillis(text, picture) matches the text with a regex built from the picture: on RE2 too
    datetimeutils.re = expression_regex.DateTimeRe(_check_regex_time)
    _jsonata_classes.update(jsonata=jsonata, utils=utils, Capped=Capped, builtins=builtins)
    return _jsonata_classes


_UNPLANNED = object()
COMPILED_CACHE = 256   # compiled expressions kept per thread (a rule run over every row of a table)


def _compiled(classes: dict[str, Any], expression: str) -> tuple[Any, expression_plans.Plan | None]:
    """The expression parsed once per thread and kept (least recently used first out): parsing
    costs more than evaluating a small expression, and a validation runs once per table row. A
    compiled expression holds no state between evaluations (each gets its own frame of bindings).
    Beside it, its plan (core/expression_plans.py) when it has the simple shape one covers."""
    cache = getattr(_local, 'compiled', None)
    if cache is None:
        cache = _local.compiled = {}
    entry = cache.pop(expression, None)
    if entry is None:
        compiled = classes['Capped'](expression, _regex_engine)
        compiled.set_output_convert_nulls(False)   # done below, once the size is known to be bounded
        entry = (compiled, expression_plans.plan(compiled, classes['jsonata'].Jsonata, classes['utils'].Utils,
                                                 (MAX_STRING_LENGTH, MAX_ARRAY_LENGTH)))
        while len(cache) >= COMPILED_CACHE:
            cache.pop(next(iter(cache)))
    cache[expression] = entry
    classes['jsonata'].Jsonata.CURRENT.jsonata = entry[0]   # what the library's builtins read ($now, regexes)
    return entry


def evaluate(expression: str, data: Any, *, bindings: Mapping[str, Any] | None = None,
             timeout_ms: int = DEFAULT_TIMEOUT_MS, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """The value of ``expression`` over ``data``; ``bindings`` become ``$name`` variables.
    An expression that yields nothing answers None."""
    if not isinstance(expression, str) or not expression.strip():
        raise ExpressionError('the expression is empty')
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ExpressionError(f'the expression is longer than {MAX_EXPRESSION_LENGTH} characters')
    budget.check('evaluating an expression')
    classes = _classes()
    jsonata = classes['jsonata']
    run = _Run(timeout_ms, max_depth)
    outer = getattr(_local, 'run', None)
    _local.run = run
    try:
        compiled, plan = _compiled(classes, expression)
        result: Any = _UNPLANNED
        if plan is not None and plan.depth * 2 < max_depth and not (bindings and plan.functions & bindings.keys()):
            try:
                # the plain case without the library's walk, the same answer (tests/unit/
                # test_expression_plans.py); anything else is evaluated by the library
                result = plan.run(data, bindings or {})
            except expression_plans.Fallback:
                result = _UNPLANNED
        if result is _UNPLANNED:
            scope: dict[str, Any] = dict(classes['builtins'])
            scope.update(bindings or {})
            scope['__evaluate_entry'] = run.entry
            scope['__evaluate_exit'] = run.exit
            # the library's input check walks the input recursively (~2 ms for a parsed
            # document's lines): an input of exact JSON types passes it, so it is skipped then
            compiled.validate_input = not expression_plans.plain(data)
            result = compiled.evaluate(data, scope)
    except jsonata.JException as exc:
        if isinstance(run.stopped, BaseException):
            raise run.stopped from None
        raise ExpressionError(str(exc) or type(exc).__name__) from None
    except RecursionError:
        raise ExpressionError('the expression recurses too deeply') from None
    except (TypeError, ValueError, ArithmeticError, AttributeError, KeyError, IndexError) as exc:
        if isinstance(run.stopped, BaseException):
            raise run.stopped from None
        raise ExpressionError(f'{type(exc).__name__}: {exc}') from None
    finally:
        _local.run = outer
    if json_size(result, MAX_RESULT_SIZE) > MAX_RESULT_SIZE:
        raise ExpressionError(f'the result is larger than {_n(MAX_RESULT_SIZE)} characters of JSON')
    return classes['utils'].Utils.convert_nulls(result)
