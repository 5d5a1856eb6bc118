"""Parser of the list ``filter`` language: text -> schema-checked AST.

Grammar (keywords ``and or not is null true false`` and the operators ``=like=``/``=in=`` are
case-insensitive; whitespace is space, tab, CR, LF)::

    filter     := or_expr
    or_expr    := and_expr (('or' | ',') and_expr)*
    and_expr   := unary (('and' | ';') unary)*          -- 'and' binds tighter than 'or'
    unary      := 'not' '(' or_expr ')' | '(' or_expr ')' | comparison
    comparison := path ('==' | '!=' | '>' | '>=' | '<' | '<=' | '=like=' | '~~' | ':') literal
                | path '=in=' '(' literal (',' literal)* ')'   -- commas here separate values
                | path 'is' 'null' | path 'is' 'not' 'null'
    path       := NAME ('.' (NAME | keyword))*   -- NAME = [A-Za-z_][A-Za-z0-9_]*; keywords are
                                                 -- reserved except after a dot
    literal    := STRING | NUMBER | 'true' | 'false'
    STRING     := "'" ... "'" with the escapes \\' and \\\\ only
    NUMBER     := -?[0-9]+(.[0-9]+)?

``path: literal`` is the legacy spelling of ``path == literal`` (what older clients, among them
the platform's Python SDK's ``find_by_slug``, send: ``slug: 'default'``, ``organization.id: '...'``).

Every path is resolved against the schema and every operator/literal is checked against the
field's type (see ``_OPS_BY_TYPE`` / ``_LITERALS_BY_TYPE``). Date-time literals on datetime
fields are normalised to the canonical stored form, so the AST compares instants by text.

:func:`parse` raises :class:`FilterError` for every bad input and nothing else: lengths and
nesting are checked before the text reaches lark, the LALR parser builds the AST through
inline callbacks (no recursion), and the binding pass recurses only as deep as the nesting.
Positions in messages are 0-based character offsets into the filter text.
"""
from __future__ import annotations

import dataclasses
import decimal
import functools
import re
from dataclasses import dataclass

from boto3.dynamodb.types import DYNAMODB_CONTEXT
from lark import Lark, Token, Transformer
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from chalicelib.core.clock import normalize_instant
from chalicelib.kernel.query import ast
from chalicelib.kernel.query.ast import And, Compare, IsNull, Not, Or, make_and, make_or
from chalicelib.kernel.query.errors import FilterError
from chalicelib.kernel.query.schema import (
    ANY,
    BOOLEAN,
    DATETIME,
    INTEGER,
    LIST,
    NUMBER,
    STRING,
    TYPES,
    Resolved,
)

MAX_LENGTH = 20_000
MAX_DEPTH = 50

_GRAMMAR = r"""
?start: or_expr

?or_expr: and_expr ((OR | COMMA) and_expr)*
?and_expr: unary ((AND | SEMI) unary)*

?unary: NOT LPAR or_expr RPAR                             -> not_expr
      | LPAR or_expr RPAR                                 -> group
      | path cmp_op literal                               -> compare
      | path IN_OP LPAR literal (COMMA literal)* RPAR     -> compare_in
      | path IS NULL                                      -> is_null
      | path IS NOT NULL                                  -> is_not_null

path: NAME (DOT segment)*
?segment: NAME | AND | OR | NOT | IS | NULL | TRUE | FALSE
?cmp_op: EQ | NE | GE | LE | GT | LT | LIKE | MATCH | COLON
literal: STRING | NUMBER | TRUE | FALSE

NAME: /[A-Za-z_][A-Za-z0-9_]*/i
AND: "and"i
OR: "or"i
NOT: "not"i
IS: "is"i
NULL: "null"i
TRUE: "true"i
FALSE: "false"i
STRING: /'(?:[^'\\]|\\.)*'/s
NUMBER: /-?[0-9]+(?:\.[0-9]+)?/
EQ: "=="
NE: "!="
GE: ">="
LE: "<="
GT: ">"
LT: "<"
LIKE: "=like="i
IN_OP: "=in="i
MATCH: "~~"
COLON: ":"
LPAR: "("
RPAR: ")"
COMMA: ","
SEMI: ";"
DOT: "."

%ignore /[ \t\r\n]+/
"""

_OP_BY_TOKEN = {
    'EQ': ast.EQ, 'NE': ast.NE, 'GE': ast.GE, 'LE': ast.LE, 'GT': ast.GT, 'LT': ast.LT,
    'LIKE': ast.LIKE, 'MATCH': ast.MATCH, 'COLON': ast.EQ,   # legacy: `field: 'value'`
}

# How terminals are named in "expected ..." messages.
_TERMINAL_NAMES = {
    'NAME': 'a field name', 'STRING': 'a string', 'NUMBER': 'a number', 'TRUE': "'true'",
    'FALSE': "'false'", 'AND': "'and'", 'OR': "'or'", 'NOT': "'not'", 'IS': "'is'",
    'NULL': "'null'", 'EQ': "'=='", 'NE': "'!='", 'GE': "'>='", 'LE': "'<='", 'GT': "'>'",
    'LT': "'<'", 'LIKE': "'=like='", 'IN_OP': "'=in='", 'MATCH': "'~~'", 'LPAR': "'('",
    'RPAR': "')'", 'COMMA': "','", 'COLON': "':'", 'SEMI': "';'", 'DOT': "'.'", '$END': 'the end of the filter',
}

# Operators each field type supports, and the literal kinds it can be compared with.
_ALL_OPS = ast.COMPARE_OPS
_ORDERED = {ast.EQ, ast.NE, ast.GT, ast.GE, ast.LT, ast.LE, ast.IN}
_OPS_BY_TYPE = {
    STRING: _ALL_OPS,
    DATETIME: _ORDERED,
    INTEGER: _ORDERED,
    NUMBER: _ORDERED,
    BOOLEAN: {ast.EQ, ast.NE, ast.IN},
    LIST: {ast.EQ, ast.IN, ast.MATCH},  # "some element matches"
    ANY: _ALL_OPS,
}
_LITERALS_BY_TYPE = {
    STRING: {'string'}, DATETIME: {'string'}, INTEGER: {'number'}, NUMBER: {'number'},
    BOOLEAN: {'boolean'}, LIST: {'string', 'number'},
    ANY: {'string', 'number', 'boolean'},
}
# Whatever the field type: ordering needs a string or a number, patterns need a string.
_LITERALS_BY_OP = {
    ast.GT: {'string', 'number'}, ast.GE: {'string', 'number'}, ast.LT: {'string', 'number'},
    ast.LE: {'string', 'number'}, ast.LIKE: {'string'}, ast.MATCH: {'string'},
}

_CANONICAL_INSTANT = re.compile(r'[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z')
_ESCAPE = re.compile(r'\\(.)', re.S)
# Pre-scan tokens: a string literal (possibly unterminated), an =in= list opening, a paren.
_SCAN = re.compile(r"'(?:[^'\\]|\\.)*(?:'|\\?\Z)|(?i:=in=)[ \t\r\n]*\(|[()]", re.S)


# --- intermediate, unchecked leaves built while lark parses ---------------------------------

@dataclass(frozen=True)
class _Path:
    segments: tuple[str, ...]
    pos: int

    @property
    def dotted(self) -> str:
        return '.'.join(self.segments)


@dataclass(frozen=True)
class _Lit:
    kind: str  # 'string' | 'number' | 'boolean'
    value: object
    pos: int


@dataclass(frozen=True)
class _RawCompare:
    path: _Path
    op: str
    lits: tuple[_Lit, ...]


@dataclass(frozen=True)
class _RawNull:
    path: _Path
    negated: bool


def _nodes(children):
    """The sub-expressions among a rule's children (separator tokens dropped)."""
    return [child for child in children if not isinstance(child, Token)]


class _Build(Transformer):
    """Inline LALR callbacks: the tree is never built, AST nodes are made on each reduce."""

    def or_expr(self, children):
        return make_or(_nodes(children))

    def and_expr(self, children):
        return make_and(_nodes(children))

    def not_expr(self, children):
        return Not(_nodes(children)[0])

    def group(self, children):
        return _nodes(children)[0]

    def path(self, children):
        segments = tuple(str(tok) for tok in children if tok.type != 'DOT')
        return _Path(segments, children[0].start_pos)

    def compare(self, children):
        path, op, lit = children
        return _RawCompare(path, _OP_BY_TOKEN[op.type], (lit,))

    def compare_in(self, children):
        return _RawCompare(children[0], ast.IN, tuple(c for c in children if isinstance(c, _Lit)))

    def is_null(self, children):
        return _RawNull(children[0], False)

    def is_not_null(self, children):
        return _RawNull(children[0], True)

    def literal(self, children):
        (tok,) = children
        if tok.type == 'STRING':
            return _Lit('string', _unquote(tok), tok.start_pos)
        if tok.type == 'NUMBER':
            return _Lit('number', _number(str(tok), tok.start_pos), tok.start_pos)
        return _Lit('boolean', tok.type == 'TRUE', tok.start_pos)


def _unquote(tok: Token) -> str:
    body = str(tok)[1:-1]

    def replace(match: re.Match) -> str:
        char = match.group(1)
        if char not in ("'", '\\'):
            pos = tok.start_pos + 1 + match.start()
            raise FilterError(
                f"invalid escape '\\{char}' in string at position {pos} "
                "(only \\' and \\\\ are allowed)", pos)
        return char

    value = _ESCAPE.sub(replace, body)
    try:
        value.encode('utf-8')
    except UnicodeEncodeError:
        raise FilterError(f'invalid character in string at position {tok.start_pos}',
                          tok.start_pos) from None
    return value


def _number(text: str, pos: int):
    """A number literal as int (no fraction) or Decimal; it must be a valid DynamoDB number.

    DynamoDB numbers have at most 38 significant digits and a magnitude from 1E-130 to below
    1E+126; anything else would only fail later, in the request. The value returned is also
    one boto3 serialises without raising (it refuses to drop even trailing zeros beyond 38
    digits), falling back to the same number without trailing zeros.
    """
    value = decimal.Decimal(text)
    sign, digits, exponent = value.as_tuple()
    while len(digits) > 1 and digits[-1] == 0:
        digits, exponent = digits[:-1], exponent + 1
    stripped = decimal.Decimal((sign, digits, exponent))
    adjusted = exponent + len(digits) - 1
    if digits != (0,) and (len(digits) > 38 or not -130 <= adjusted <= 125):
        raise FilterError(
            f'number at position {pos} cannot be stored exactly '
            '(at most 38 significant digits, magnitude 1E-130 to 1E+126)', pos)
    for candidate in (int(value) if '.' not in text else value, stripped):
        try:
            DYNAMODB_CONTEXT.create_decimal(candidate)
        except decimal.DecimalException:
            continue
        return candidate
    raise FilterError(f'number at position {pos} cannot be stored exactly', pos)


@functools.cache
def _parser() -> Lark:
    return Lark(_GRAMMAR, parser='lalr', lexer='basic', transformer=_Build(),
                maybe_placeholders=False)


# --- entry point -----------------------------------------------------------------------------

def parse(text: str, schema) -> ast.Node:
    """Parse and type-check a filter. Raises FilterError (only) for any bad input."""
    if not isinstance(text, str):
        raise FilterError('the filter must be a string')
    if len(text) > MAX_LENGTH:
        raise FilterError(
            f'filter too long: {len(text)} characters (at most {MAX_LENGTH})', MAX_LENGTH)
    if not text.strip(' \t\r\n'):
        raise FilterError('empty filter at position 0', 0)
    _check_depth(text)
    raw = _parse_raw(text)
    return _bind(raw, schema)


def _check_depth(text: str) -> None:
    """Reject deep nesting of parentheses before lark (and our recursion) sees it.

    Counts grouping and ``not(`` parentheses outside string literals; the parenthesis that
    opens an ``=in=`` list is not nesting.
    """
    stack: list[bool] = []  # True for a nesting parenthesis, False for an =in= list
    depth = 0
    for match in _SCAN.finditer(text):
        token = match.group()
        if token[0] == "'":
            continue
        if token == ')':
            if stack and stack.pop():
                depth -= 1
        elif token == '(':
            stack.append(True)
            depth += 1
            if depth > MAX_DEPTH:
                pos = match.start()
                raise FilterError(
                    f'filter nested too deeply at position {pos} (at most {MAX_DEPTH} levels)',
                    pos)
        else:
            stack.append(False)


def _parse_raw(text: str):
    try:
        return _parser().parse(text)
    except FilterError:
        raise
    except UnexpectedCharacters as exc:
        pos = exc.pos_in_stream
        if text[pos] == "'":
            raise FilterError(f'unterminated string starting at position {pos}', pos) from None
        if text[pos] == '"':   # the commonest slip: string literals take single quotes
            raise FilterError(f'syntax error at position {pos}: unexpected character \'"\'; string literals take '
                              "single quotes, e.g. name == 'Acme' (a ' inside one is escaped: 'O\\'Brien')",
                              pos) from None
        raise FilterError(
            f'syntax error at position {pos}: unexpected character {text[pos]!r}', pos) from None
    except UnexpectedToken as exc:
        expected = _describe_expected(exc.expected)
        if exc.token.type == '$END':
            pos = len(text)
            raise FilterError(
                f'unexpected end of filter at position {pos}; expected {expected}', pos) from None
        pos = exc.token.start_pos
        raise FilterError(
            f'syntax error at position {pos}: unexpected {_clip(str(exc.token))!r}; '
            f'expected {expected}', pos) from None
    except UnexpectedInput as exc:  # e.g. UnexpectedEOF; not produced by LALR in practice
        pos = getattr(exc, 'pos_in_stream', None)
        raise FilterError(f'syntax error at position {pos}', pos) from None
    except (LarkError, RecursionError, ValueError, TypeError, LookupError) as exc:
        # Defensive: the grammar and callbacks should make these impossible. Keep the cause.
        raise FilterError('could not parse the filter') from exc


def _clip(text: str, limit: int = 60) -> str:
    """Keep messages short whatever the input (a token can be a 20,000-character string)."""
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _describe_expected(names) -> str:
    described = sorted({_TERMINAL_NAMES.get(name, name) for name in names})
    if not described:
        return 'nothing more'
    return described[0] if len(described) == 1 else 'one of ' + ', '.join(described)


# --- binding: resolve paths, check types, build the final AST --------------------------------

def _bind(node, schema) -> ast.Node:
    if isinstance(node, And):
        return And(tuple(_bind(item, schema) for item in node.items))
    if isinstance(node, Or):
        return Or(tuple(_bind(item, schema) for item in node.items))
    if isinstance(node, Not):
        return Not(_bind(node.item, schema))
    canonical = getattr(schema, 'canonical', None)
    if canonical is not None:
        segments = tuple(canonical(node.path.segments))
        if segments != node.path.segments:
            node = dataclasses.replace(node, path=_Path(segments, node.path.pos))
    target = _resolve(node.path, schema)
    if isinstance(node, _RawNull):
        return IsNull(node.path.segments, node.negated, target)
    return _bind_compare(node, target)


def _resolve(path: _Path, schema) -> Resolved:
    target = schema.resolve(path.segments)
    if target is None:
        raise FilterError(f"unknown field '{_clip(path.dotted, 200)}' at position {path.pos}",
                          path.pos, path.dotted)
    if target.type not in TYPES:
        raise ValueError(f'schema resolved {path.dotted!r} to unsupported type {target.type!r}')
    return target


def _bind_compare(node: _RawCompare, target: Resolved) -> Compare:
    field, op, type_ = node.path.dotted, node.op, target.type
    if op not in _OPS_BY_TYPE[type_]:
        raise FilterError(
            f"operator '{op}' cannot be used on field '{_clip(field, 200)}' ({type_}) "
            f'at position {node.path.pos}', node.path.pos, field)
    values = []
    for lit in node.lits:
        if lit.kind not in _LITERALS_BY_TYPE[type_]:
            raise FilterError(
                f"field '{_clip(field, 200)}' ({type_}) cannot be compared with a {lit.kind} "
                f'at position {lit.pos}', lit.pos, field)
        if lit.kind not in _LITERALS_BY_OP.get(op, {lit.kind}):
            raise FilterError(
                f"operator '{op}' cannot be used with a {lit.kind} at position {lit.pos} "
                f"(field '{_clip(field, 200)}')", lit.pos, field)
        values.append(_instant(lit, field) if type_ == DATETIME else lit.value)
    value = tuple(values) if op == ast.IN else values[0]
    return Compare(node.path.segments, op, value, target)


def _instant(lit: _Lit, field: str) -> str:
    """A datetime literal in the canonical stored form (so text order is instant order)."""
    try:
        value = normalize_instant(lit.value)
    except (ValueError, OverflowError, TypeError):
        value = None
    # The canonical form is fixed-width (4-digit years, 0001-9999), so text order is time order.
    if value is None or not _CANONICAL_INSTANT.fullmatch(value):
        raise FilterError(
            f"field '{_clip(field, 200)}' (datetime) needs an ISO 8601 date-time "
            f'(years 0001-9999), got {_clip(lit.value)!r} at position {lit.pos}', lit.pos, field)
    return value
