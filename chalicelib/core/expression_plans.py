"""A fast path for the simplest JSONata expressions: ``$round(quantity * unitPrice, 2) = amount``,
``total > 0 and total <= $__up1.limit``. core/expressions.py asks ``plan`` for a Python closure of
an expression it has compiled; an expression of another shape has none and is evaluated by the
library as before.

Why it exists: extraction evaluates a data definition's validation once per table row
(features/extraction/engine.py ``assess``), and jsonata-python's tree walk costs ~0.1-0.2 ms
an evaluation (a callback pair per node, a frame, a deep walk of the whole input) for
expressions that are three arithmetic operations (bench/README.md, bench_extraction.py). No
maintained JSONata implementation compiles expressions; this module reuses the library's own
parser and its own operator and builtin implementations, and only skips the walk.

The closure answers exactly what the library would, or raises ``Fallback``, after which the
caller evaluates the expression with the library (evaluation is pure, so running it again is
safe). It falls back on anything outside the plain case rather than imitate it:

* shapes: literals (numbers, strings, true/false), field paths of names over objects (a first
  ``$variable`` step from the caller's bindings allowed), ``+ - * / %``, ``= != < <= > >=``,
  ``and``/``or``, unary ``-``, ``? :``, parentheses, and calls of a few numeric builtins; a node
  with anything more (a predicate, a group, ``[...]``, ``&``, a lambda, ``$``/``$$``, ...) means
  no plan at all;
* values: the input must be an object of plain JSON values (what the library's input check
  accepts); a looked-up value that is null, an array, an over-long string or object, or any
  error (a type error, a division by zero, ...) means ``Fallback``: the library then gives the
  answer, its error message included.

tests/unit/test_expression_plans.py runs both on many expressions and inputs and compares.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

# numeric builtins whose library implementation is called as is (not the capped ones
# core/expressions.py wraps: those always go through the library)
FUNCTIONS = frozenset({'round', 'abs', 'floor', 'ceil', 'sqrt', 'power', 'exists', 'not', 'boolean', 'number'})
# the builtins whose signature takes numbers only, and their argument counts
_NUMERIC_ARITY = {'round': (1, 2), 'abs': (1,), 'floor': (1,), 'ceil': (1,), 'sqrt': (1,), 'power': (2,)}
_ARITHMETIC = frozenset({'+', '-', '*', '/', '%'})
_EQUALITY = frozenset({'=', '!='})
_ORDER = frozenset({'<', '<=', '>', '>='})
# Symbol attributes a supported node may carry (anything else set means a shape the plan does
# not cover: predicates, groups, stages, focus/index bindings, tuple streams, ...)
_PLAIN = frozenset({'_outer_instance', 'id', 'type', 'value', 'position', 'lbp', 'bp', 'rbp', 'token', 'lhs', 'rhs',
                    'steps', 'arguments', 'procedure', 'expression', 'expressions', 'condition', 'then', '_else',
                    'level', 'name'})
_PLAIN_VALUES = (str, int, float, bool)


class Fallback(Exception):
    """The plain case does not hold: evaluate with the library."""


class Unsupported(Exception):
    """The expression has a shape the plan does not cover."""


Step = Callable[[Any, Mapping[str, Any]], Any]


class Plan:
    """A compiled expression: ``run(data, bindings)``; ``depth`` is the nesting the library's
    walk would reach (the caller keeps its depth cap), ``functions`` the builtins it calls (a
    binding of the same name shadows one: then the library evaluates)."""

    def __init__(self, step: Step, depth: int, functions: frozenset[str], limits: tuple[int, int]) -> None:
        self._step = step
        self.depth = depth
        self.functions = functions
        self._limits = limits

    def run(self, data: Any, bindings: Mapping[str, Any]) -> Any:
        if type(data) is not dict or not plain(data, self._limits):
            raise Fallback
        return self._step(data, bindings)


def plain(value: Any, limits: tuple[int, int] | None = None) -> bool:
    """The value holds only exact JSON types (what the library's input check accepts, less its
    subclasses and JSONata null, which go to the library) and, with ``limits`` (longest string,
    longest array/object), none over the size caps. Iterative: a parsed document's input has
    thousands of values, and the library's recursive check costs ~0.5 us each."""
    max_string, max_array = limits if limits is not None else (math.inf, math.inf)
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is str:
            if len(item) > max_string:
                return False
        elif kind is dict:
            if len(item) > max_array:
                return False
            for key, sub in item.items():
                if type(key) is not str:
                    return False
                push(sub)
        elif kind is list:
            if len(item) > max_array:
                return False
            extend(item)
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif item is not None and kind is not int and kind is not bool:
            return False
    return True


def _check(node: Any) -> None:
    extra = [k for k, v in vars(node).items() if k not in _PLAIN and v not in (None, False, 0, '', [])]
    if extra:
        raise Unsupported(f'{node.type}: {extra}')


class _Compiler:
    def __init__(self, library: Any, utils: Any, compiled: Any, limits: tuple[int, int]) -> None:
        self.jsonata = library            # the library's Jsonata class (its static helpers)
        self.jsonata_utils = utils
        self.compiled = compiled          # the compiled expression (its operator methods)
        # what the library's operators and builtins raise (core/expressions.py turns the same
        # into an ExpressionError): here, the library is asked instead
        self.failures = (library_errors(), TypeError, ValueError, ArithmeticError, AttributeError, KeyError,
                         IndexError)
        self.functions: set[str] = set()
        self.limits = limits

    def value(self, value: Any) -> Any:
        """A node's value as the library's exit check sees it (only strings and objects can
        come from a lookup here; arrays never reach a step)."""
        kind = type(value)
        if kind is str and len(value) > self.limits[0]:
            raise Fallback
        if kind is dict and len(value) > self.limits[1]:
            raise Fallback
        return value

    def node(self, node: Any) -> tuple[Step, int]:
        _check(node)
        kind = node.type
        if kind in ('number', 'string'):
            value = node.value
            if type(value) not in _PLAIN_VALUES or (type(value) is float and not math.isfinite(value)):
                raise Unsupported(kind)
            return (lambda data, bindings: value), 1
        if kind == 'value':
            if node.value is True or node.value is False:
                flag = node.value
                return (lambda data, bindings: flag), 1
            raise Unsupported('null')
        if kind == 'path':
            return self.path(node)
        if kind == 'binary':
            return self.binary(node)
        if kind == 'unary' and node.value == '-':
            return self.negate(node)
        if kind == 'condition':
            return self.condition(node)
        if kind == 'block':
            return self.block(node)
        if kind == 'function':
            return self.function(node)
        raise Unsupported(kind)

    def path(self, node: Any) -> tuple[Step, int]:
        steps = node.steps or []
        if not steps:
            raise Unsupported('empty path')
        names: list[str] = []
        variable = None
        for k, step in enumerate(steps):
            _check(step)
            if step.type == 'variable' and k == 0 and isinstance(step.value, str) and step.value \
                    and not step.value.startswith('__evaluate'):
                variable = step.value
            elif step.type == 'name' and isinstance(step.value, str):
                names.append(step.value)
            else:
                raise Unsupported(f'path step {step.type}')
        if variable is not None and not names:
            raise Unsupported('a bare variable')
        value = self.value
        missing = _MISSING

        def walk(data: Any, bindings: Mapping[str, Any]) -> Any:
            current = data
            if variable is not None:
                current = bindings.get(variable, missing)
                if current is missing or type(current) is not dict or not plain(current, self.limits):
                    raise Fallback   # unbound, null, an array, a scalar: the library's sequences
            for name in names:
                if type(current) is not dict:
                    raise Fallback
                current = current.get(name, missing)
                if current is missing:
                    return None
                if current is None or type(current) is list:
                    raise Fallback   # JSONata null, or a sequence
                value(current)
            return current
        return walk, len(steps) + 2

    def binary(self, node: Any) -> tuple[Step, int]:
        op = str(node.value)
        lhs, ldepth = self.node(node.lhs)
        rhs, rdepth = self.node(node.rhs)
        depth = max(ldepth, rdepth) + 1
        library = self.compiled
        if op in _ARITHMETIC:
            numeric = library.evaluate_numeric_expression

            def arithmetic(data, bindings):
                a, b = lhs(data, bindings), rhs(data, bindings)
                if (a is not None and not _number(a)) or (b is not None and not _number(b)):
                    raise Fallback
                try:
                    result = numeric(a, b, op)
                except self.failures:
                    raise Fallback from None
                return result
            return arithmetic, depth
        if op in _EQUALITY:
            equality = library.evaluate_equality_expression

            def equal(data, bindings):
                a, b = lhs(data, bindings), rhs(data, bindings)
                try:
                    return equality(a, b, op)
                except self.failures:
                    raise Fallback from None
            return equal, depth
        if op in _ORDER:
            comparison = library.evaluate_comparison_expression

            def compare(data, bindings):
                a, b = lhs(data, bindings), rhs(data, bindings)
                try:
                    return comparison(a, b, op)
                except self.failures:
                    raise Fallback from None
            return compare, depth
        if op in ('and', 'or'):
            boolize = self.jsonata.boolize
            both = op == 'and'

            def logical(data, bindings):
                a = boolize(lhs(data, bindings))
                if both:
                    return a and boolize(rhs(data, bindings))
                return a or boolize(rhs(data, bindings))
            return logical, depth
        raise Unsupported(f'operator {op}')

    def negate(self, node: Any) -> tuple[Step, int]:
        inner, depth = self.node(node.expression)
        convert = self.jsonata_utils.convert_number

        def minus(data, bindings):
            value = inner(data, bindings)
            if value is None:
                return None
            if not _number(value):
                raise Fallback
            return convert(-float(value))
        return minus, depth + 1

    def condition(self, node: Any) -> tuple[Step, int]:
        test, tdepth = self.node(node.condition)
        then, hdepth = self.node(node.then)
        other, odepth = self.node(node._else) if node._else is not None else ((lambda data, bindings: None), 0)
        boolize = self.jsonata.boolize

        def choose(data, bindings):
            return then(data, bindings) if boolize(test(data, bindings)) else other(data, bindings)
        return choose, max(tdepth, hdepth, odepth) + 1

    def block(self, node: Any) -> tuple[Step, int]:
        parts = [self.node(e) for e in node.expressions or []]
        if not parts:
            raise Unsupported('empty block')
        steps = [p[0] for p in parts]

        def run(data, bindings):
            result = None
            for step in steps:
                result = step(data, bindings)
            return result
        return run, max(p[1] for p in parts) + 1

    def function(self, node: Any) -> tuple[Step, int]:
        procedure = node.procedure
        if procedure is None or procedure.type != 'variable' or procedure.value not in FUNCTIONS:
            raise Unsupported('function')
        _check(procedure)
        name = procedure.value
        builtin = self.jsonata.static_frame.lookup(name)
        if builtin is None or not hasattr(builtin, 'signature'):
            raise Unsupported(f'${name}')
        self.functions.add(name)
        args = [self.node(a) for a in node.arguments or []]
        steps = [a[0] for a in args]
        validate = self.compiled.validate_arguments
        max_string = self.limits[0]

        numeric = _NUMERIC_ARITY.get(name, ())

        def call(data, bindings):
            values = [step(data, bindings) for step in steps]
            for v in values:
                if v is not None and type(v) not in _PLAIN_VALUES:
                    raise Fallback
            try:
                if len(values) in numeric and all(_number(v) for v in values):
                    # finite numbers where the signature wants numbers: its check passes them as they are
                    result = builtin.call(data, values)
                else:
                    result = builtin.call(data, validate(builtin, values, data))
            except self.failures:
                raise Fallback from None
            if result is not None and (type(result) not in _PLAIN_VALUES
                                       or (type(result) is str and len(result) > max_string)
                                       or (type(result) is float and not math.isfinite(result))):
                raise Fallback
            return result
        return call, max((a[1] for a in args), default=0) + 3


_MISSING = object()


def library_errors() -> type[Exception]:
    import jsonata  # noqa: PLC0415 - loaded already: plans are made of compiled expressions
    return jsonata.JException


def _number(value: Any) -> bool:
    kind = type(value)
    return kind is int or (kind is float and math.isfinite(value))


def plan(compiled: Any, library: Any, utils: Any, limits: tuple[int, int]) -> Plan | None:
    """The closure of a compiled expression (``compiled``: the library's ``Jsonata`` object),
    or None when its shape is not covered. ``limits``: (longest string, longest array/object)."""
    ast = getattr(compiled, 'ast', None)
    if ast is None or getattr(compiled, 'errors', None):
        return None
    compiler = _Compiler(library, utils, compiled, limits)
    try:
        step, depth = compiler.node(ast)
    except (Unsupported, RecursionError):
        return None
    return Plan(step, depth, frozenset(compiler.functions), limits)
