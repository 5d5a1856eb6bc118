"""The filter language: syntax, type checks, limits and in-memory semantics, table-driven,
plus fuzzing that nothing but FilterError ever escapes ``parse``."""
from __future__ import annotations

import time
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.kernel.query import (
    MAX_DEPTH,
    MAX_LENGTH,
    NULL_CONTEXT,
    And,
    Compare,
    DictSchema,
    FilterError,
    IsNull,
    Not,
    Or,
    Resolved,
    evaluate,
    parse,
    render,
)

PROJECT = DictSchema({'name': 'string', 'slug': 'string', 'budget': 'number'})
MEMBER = DictSchema({'statusSlug': 'string', 'points': 'integer', 'labels': 'list'})
SCHEMA = DictSchema(
    {'name': 'string', 'count': 'integer', 'score': 'number', 'active': 'boolean',
     'createdAt': 'datetime', 'tags': 'string[]', 'options': 'object', 'meta': 'any',
     'documentStatus': 'object', 'documentStatus.status': 'string'},
    references={'project': PROJECT},
    collections={'memberTask': MEMBER},
)


class Ctx:
    """References and collections keyed by the item's ``id``."""

    def __init__(self, projects=None, members=None):
        self.projects, self.members = projects or {}, members or {}

    def reference(self, item, name):
        assert name == 'project'
        return self.projects.get(item.get('id'))

    def collection(self, item, name):
        assert name == 'memberTask'
        return self.members.get(item.get('id'), [])


def matches(text, item, ctx=NULL_CONTEXT):
    return evaluate(parse(text, SCHEMA), item, ctx)


ITEM = {
    'id': 'i1', 'name': 'Alpha Beta', 'count': 3, 'score': Decimal('2.50'), 'active': True,
    'createdAt': '2024-03-01T10:00:00.000000Z', 'tags': ['red', 'Green', 7],
    'options': {'properties': {'x': 'yes', 'n': Decimal('1'), 'none': None, 'list': [1, 2]}},
    'meta': None, 'documentStatus': {'status': 'draft'}, 'quote': "it's",
}


# --- operators --------------------------------------------------------------------------------

@pytest.mark.parametrize('text, expected', [
    ("name == 'Alpha Beta'", True),
    ("name == 'alpha beta'", False),
    ("name != 'x'", True),
    ("name != 'Alpha Beta'", False),
    ("name > 'Alpha'", True),
    ("name >= 'Alpha Beta'", True),
    ("name < 'Alpha Beta'", False),
    ("name <= 'B'", True),
    ("count == 3", True),
    ("count == 3.0", True),
    ("count != 3", False),
    ("count > 2", True),
    ("count > 2.99", True),
    ("count >= 3", True),
    ("count < 3", False),
    ("count <= -1", False),
    ("score == 2.5", True),  # Decimal('2.50') from DynamoDB
    ("score == 2.50", True),
    ("score > 2", True),
    ("score < 2.51", True),
    ("active == true", True),
    ("active != false", True),
    ("active == false", False),
    ("name =in=('x', 'Alpha Beta')", True),
    ("name =in=('x')", False),
    ("count =in=(1, 2, 3)", True),
    ("count =in=(1, 2.5)", False),
    ("active =in=(false)", False),
    ("name =like= 'Alpha*'", True),
    ("name =like= 'alpha*'", False),  # case-sensitive
    ("name =like= '*Beta'", True),
    ("name =like= 'A*a B*'", True),
    ("name =like= 'Alpha'", False),  # whole value
    ("name =like= '*'", True),
    ("name =like= 'Alpha Beta'", True),
    ("name =like= '*ph*et*'", True),
    ("name =like= '*et*ph*'", False),
    ("name ~~ 'BETA'", True),  # anywhere, case-insensitive
    ("name ~~ 'ha b'", True),
    ("name ~~ 'gamma'", False),
    ("name ~~ 'alpha*'", True),  # with * it is a whole-value match
    ("name ~~ 'beta*'", False),
    ("name ~~ '*BETA'", True),
    ("name ~~ ''", True),
    ("createdAt == '2024-03-01T10:00:00Z'", True),
    ("createdAt == '2024-03-01T11:00:00+01:00'", True),  # same instant, other offset
    ("createdAt == '2024-03-01T05:00:00-05:00'", True),
    ("createdAt > '2024-03-01T10:30:00+01:00'", True),  # 09:30Z
    ("createdAt < '2024-03-01T10:00:00.000001Z'", True),
    ("createdAt >= '2024-03-01'", True),
    ("createdAt =in=('2024-03-01T12:00:00+02:00')", True),
    ("tags == 'red'", True),  # list fields: some element matches
    ("tags == 'green'", False),
    ("tags == 7", True),
    ("tags =in=('blue', 'Green')", True),
    ("tags ~~ 'GRE'", True),
    ("tags ~~ 'blue'", False),
    ("tags is not null", True),
    ("options.properties.x == 'yes'", True),
    ("options.properties.n == 1", True),
    ("options.properties.n > 0.5", True),
    ("options.properties.x > 1", False),  # different kinds: false
    ("options.properties.n == '1'", False),
    ("options.properties.list == 1", False),  # no element semantics below 'any'
    ("options.properties == 'x'", False),  # an object has no kind
    ("documentStatus.status == 'draft'", True),
    ("documentStatus.other is null", True),
])
def test_operators(text, expected):
    assert matches(text, ITEM) is expected


@pytest.mark.parametrize('text, expected', [
    # missing ('nope' below options) and null ('none', 'meta') behave alike
    ("options.properties.nope == 'a'", False),
    ("options.properties.nope != 'a'", False),  # != on missing is false too
    ("options.properties.none != 'a'", False),
    ("meta != 1", False),
    ("meta < 1", False),
    ("meta =in=(1, 'a')", False),
    ("meta =like= '*'", False),
    ("meta ~~ ''", False),
    ("options.properties.nope is null", True),
    ("options.properties.none is null", True),
    ("meta is null", True),
    ("meta is not null", False),
    ("options.properties.x is null", False),
    ("options.properties.x is not null", True),
    ("not(options.properties.nope == 'a')", True),  # plain negation
    ("not(options.properties.nope != 'a')", True),
    ("options.properties.x.deeper is null", True),  # through a string
    ("options.properties.list.deeper is null", True),  # through a list
])
def test_missing_and_null(text, expected):
    assert matches(text, ITEM) is expected


@pytest.mark.parametrize('item, text, expected', [
    ({'tags': []}, 'tags is null', False),  # an empty list is not null
    ({'tags': None}, 'tags is null', True),
    ({}, 'tags is null', True),
    ({'tags': 'red'}, "tags == 'red'", True),  # a lone value counts as one element
    ({'tags': ['a', None, 'b']}, "tags == 'b'", True),
    ({'count': True}, 'count == 1', False),  # booleans are not numbers
    ({'active': 1}, 'active == true', False),
    ({'score': 2.5}, 'score == 2.5', True),  # floats compare by their decimal repr
    ({'score': 0.1}, 'score == 0.1', True),
    ({'score': 0.1}, 'score > 0.1', False),
    ({'score': float('nan')}, 'score != 1', False),
    ({'score': float('inf')}, 'score > 1', False),
    ({'score': Decimal('NaN')}, 'score != 1', False),
    ({'score': Decimal('1E+2')}, 'score == 100', True),
    ({'count': 10 ** 30}, 'count > 999999999999999999999999999999.5', True),
    ({'name': 'straße'}, "name ~~ 'STRASSE'", True),  # casefold
    ({'name': 'x*y'}, "name =like= 'x*y'", True),
    ({'name': 'xzzy'}, "name =like= 'x*y'", True),
    ({'name': 'ab'}, "name =like= 'ab*b'", False),  # prefix and suffix may not overlap
    ({'name': 'abb'}, "name =like= 'ab*b'", True),
    ({'name': ''}, "name =like= ''", True),
    ({'name': ''}, "name =like= '*'", True),
    ({'name': 'a' * 50}, "name =like= '" + '*a' * 60 + "'", False),  # no backtracking blow-up
    ({'name': "it's"}, r"name == 'it\'s'", True),
    ({'name': 'a\\b'}, r"name == 'a\\b'", True),
    ({'name': 'é'}, "name > 'z'", True),  # code point (= UTF-8 byte) order
])
def test_values(item, text, expected):
    assert matches(text, item) is expected


def test_like_is_fast_on_long_values():
    item = {'name': 'a' * 10_000}
    start = time.perf_counter()
    assert not matches("name =like= '" + '*a' * 2000 + "*b'", item)
    assert time.perf_counter() - start < 1


# --- logic ----------------------------------------------------------------------------------------

def test_and_binds_tighter_than_or():
    node = parse("name == 'a' or count == 1 and active == true", SCHEMA)
    assert isinstance(node, Or) and isinstance(node.items[1], And)
    assert matches("name == 'Alpha Beta' or count == 0 and active == false", ITEM)
    assert not matches("(name == 'Alpha Beta' or count == 0) and active == false", ITEM)
    assert matches("count == 0 and active == false or name == 'Alpha Beta'", ITEM)


@pytest.mark.parametrize('left, right', [
    ("name == 'a'; count == 1", "name == 'a' and count == 1"),
    ("name == 'a',count == 1", "name == 'a' or count == 1"),
    ("name == 'a';count == 1,active == true", "name == 'a' and count == 1 or active == true"),
    ("name =in=('a','b'),count == 1", "name =in=('a', 'b') or count == 1"),
    ("name == 'a' AND count == 1 Or NOT(active == TRUE)",
     "name == 'a' and count == 1 or not(active == true)"),
    ("meta IS NULL and meta Is Not Null", "meta is null and meta is not null"),
    ("active == True, active == FALSE", "active == true or active == false"),
    ("name =LIKE= 'a*' and tags =In= ('x')", "name =like= 'a*' and tags =in=('x')"),
    ("((name == 'a'))", "name == 'a'"),
    ("(name == 'a' and count == 1) and active == true",
     "name == 'a' and count == 1 and active == true"),
    (" \t\nname\n==\t'a' ", "name == 'a'"),
    ("count==-2", "count == -2"),
])
def test_equivalent_spellings(left, right):
    assert parse(left, SCHEMA) == parse(right, SCHEMA)


def test_commas_inside_in_lists_are_not_or():
    node = parse("name =in=('a', 'b', 'c')", SCHEMA)
    assert node == Compare(('name',), '=in=', ('a', 'b', 'c'), SCHEMA.resolve(('name',)))


def test_not_is_plain_negation():
    assert matches("not(name == 'x')", ITEM)
    assert not matches("not(not(name == 'x'))", ITEM)
    assert matches("not(name == 'x' or count == 0) and not(active == false)", ITEM)


def test_keywords_are_allowed_as_nested_path_segments():
    node = parse('options.null.AND is null', SCHEMA)
    assert node.path == ('options', 'null', 'AND')


def test_identifiers_starting_with_keywords_are_fields():
    schema = DictSchema({'android': 'string', 'notes': 'string', 'island': 'string',
                         'nullable': 'boolean', 'order': 'integer'})
    node = parse("android == 'a' and notes == 'b' or island == 'c' and nullable == true "
                 "and order > 1", schema)
    assert isinstance(node, Or)
    assert [leaf.path[0] for part in node.items for leaf in part.items] == [
        'android', 'notes', 'island', 'nullable', 'order']


# --- references and collections ---------------------------------------------------------------

def test_references():
    ctx = Ctx(projects={'i1': {'name': 'Apollo', 'budget': Decimal('10.5')}})
    assert matches("project.name == 'Apollo'", ITEM, ctx)
    assert matches("project.budget > 10", ITEM, ctx)
    assert matches('project.slug is null', ITEM, ctx)
    assert not matches("project.name == 'Apollo'", {'id': 'other'}, ctx)
    assert matches('project.name is null', {'id': 'other'}, ctx)  # no referenced record
    assert not matches("project.name != 'x'", {'id': 'other'}, ctx)


MEMBERS = {'i1': [{'statusSlug': 'done', 'points': 3, 'labels': ['x']},
                  {'statusSlug': 'todo', 'points': None}],
           'empty': []}


@pytest.mark.parametrize('item_id, text, expected', [
    ('i1', "memberTask.statusSlug == 'todo'", True),  # at least one
    ('i1', "memberTask.statusSlug == 'doing'", False),
    ('i1', "memberTask.statusSlug != 'done'", True),  # the 'todo' one
    ('i1', "not(memberTask.statusSlug == 'done')", False),  # no member is done: false
    ('i1', "not(memberTask.statusSlug == 'doing')", True),
    ('i1', 'memberTask.points is null', True),  # some member has no points
    ('i1', 'memberTask.points > 2', True),
    ('i1', "memberTask.labels == 'x'", True),
    ('i1', "memberTask.statusSlug == 'todo' and memberTask.points == 3", True),  # independent
    ('empty', 'memberTask.points is null', False),  # empty collection: every leaf false
    ('empty', 'memberTask.points is not null', False),
    ('empty', "not(memberTask.statusSlug == 'done')", True),
    ('missing', "memberTask.statusSlug =in=('done', 'todo')", False),
])
def test_collections(item_id, text, expected):
    assert matches(text, {'id': item_id}, Ctx(members=MEMBERS)) is expected


def test_null_context_has_no_related_records():
    assert matches('project.name is null', ITEM)
    assert not matches('memberTask.statusSlug is null', ITEM)


def test_root_selects_the_map_attribute_holding_the_fields():
    stored = {'pk': 'x', 'data': {'name': 'a'}}
    node = parse("name == 'a'", SCHEMA)
    assert evaluate(node, stored, root='data')
    assert not evaluate(node, stored)
    assert evaluate(parse('name is null', SCHEMA), {'pk': 'x'}, root='data')


def test_hand_built_nodes_without_targets_are_any_fields():
    node = And((Compare(('a', 'b'), '>=', 2), Not(IsNull(('c',)))))
    assert evaluate(node, {'a': {'b': Decimal('2.0')}, 'c': 0})
    assert not evaluate(node, {'a': {'b': 2}})


# --- parsed values ----------------------------------------------------------------------------

@pytest.mark.parametrize('text, value', [
    (r"name == 'it\'s'", "it's"),
    (r"name == 'a\\b'", 'a\\b'),
    (r"name == '\\\''", "\\'"),
    ("name == ''", ''),
    ("name == 'a,b;c) or (d'", 'a,b;c) or (d'),
    ("name == 'ünï ✓ 𝄞'", 'ünï ✓ 𝄞'),
    ("name == 'line\nbreak'", 'line\nbreak'),
    ('count == 42', 42),
    ('count == -7', -7),
    ('score == 1.50', Decimal('1.50')),
    ('score == -0.001', Decimal('-0.001')),
    ('score == ' + '1' * 38, int('1' * 38)),
    ('score == 1' + '0' * 40 + '.0', Decimal('1E+40')),  # trailing zeros dropped exactly
    ("createdAt == '2024-01-01T00:00:00+01:00'", '2023-12-31T23:00:00.000000Z'),
    ("createdAt == '2024-01-01'", '2024-01-01T00:00:00.000000Z'),
    ("createdAt == '2024-01-01T10:00:00.123Z'", '2024-01-01T10:00:00.123000Z'),
])
def test_literal_values(text, value):
    node = parse(text, SCHEMA)
    assert node.value == value and type(node.value) is type(value)


def test_resolved_targets():
    assert parse("project.name == 'a'", SCHEMA).target == Resolved(
        'reference', 'string', 'project', ('name',))
    assert parse("memberTask.labels == 'a'", SCHEMA).target == Resolved(
        'collection', 'list', 'memberTask', ('labels',))
    assert parse("options.a.b == 'a'", SCHEMA).target == Resolved(
        'field', 'any', 'options', ('a', 'b'))
    assert parse("documentStatus.status == 'a'", SCHEMA).target.type == 'string'


@pytest.mark.parametrize('text', [
    "name == 'it\\'s' and count >= -1.5 or not(tags =in=('a', 'b\\\\c', 7))",
    "options.x =in=('a', 7, true, -0.5)",
    "meta is null, meta is not null; options.x =like= '*a*'",
    "(name == 'a' or name == 'b') and (count == 1 or count == 2)",
    "not(not(name ~~ 'x'))",
])
def test_render_round_trips(text):
    node = parse(text, SCHEMA)
    assert parse(render(node), SCHEMA) == node


# --- errors ---------------------------------------------------------------------------------------

def error(text, schema=SCHEMA) -> FilterError:
    with pytest.raises(FilterError) as info:
        parse(text, schema)
    assert isinstance(info.value, ValueError)
    assert info.value.__cause__ is None
    return info.value


@pytest.mark.parametrize('text, position, fragment', [
    ("name == 'abc", 8, 'unterminated string starting at position 8'),
    ("name == 'abc\\'", 8, 'unterminated string'),
    ("name == 'a\\nb'", 10, "invalid escape '\\n' in string at position 10"),
    ("name == 'a\\\"'", 10, 'invalid escape'),
    ('name ==', 7, 'unexpected end of filter at position 7'),
    ("name == 'a' and", 15, 'unexpected end of filter at position 15'),
    ("name == 'a' or", 14, 'unexpected end of filter'),
    ("name == 'a';", 12, 'unexpected end of filter'),
    ('name', 4, 'unexpected end of filter'),
    ("name =in=()", 10, "syntax error at position 10: unexpected ')'"),
    ("name =in=('a',)", 14, "unexpected ')'"),
    ("name =in= 'a'", 10, 'syntax error at position 10'),
    ("name = 'a'", 5, "syntax error at position 5: unexpected character '='"),
    ("name == 'a' count == 1", 12, "unexpected 'count'"),
    ("(name == 'a'", 12, 'unexpected end of filter'),
    ("name == 'a')", 11, "unexpected ')'"),
    ("not name == 'a'", 4, 'syntax error at position 4'),
    ("name == 'a' and and count == 1", 16, "unexpected 'and'"),
    ('name is', 7, "expected one of 'not', 'null'"),
    ('name is not', 11, "expected 'null'"),
    ("name is 'a'", 8, 'syntax error at position 8'),
    ('count == 1.', 10, 'syntax error at position 10'),
    ('count == .5', 9, 'syntax error at position 9'),
    ('count == 1e3', 10, 'syntax error at position 10'),
    ('count == - 1', 9, 'syntax error at position 9'),
    ("name == \"a\"", 8, 'unexpected character \'"\''),
    ('name-x == 1', 4, 'syntax error at position 4'),
    ('2name == 1', 0, 'syntax error at position 0'),
    ('name.', 5, 'unexpected end of filter at position 5'),
    ('.name == 1', 0, 'syntax error at position 0'),
    ("null == 'a'", 0, "unexpected 'null'"),
    ('()', 1, "unexpected ')'"),
    ('', 0, 'empty filter'),
    ('  \n ', 0, 'empty filter'),
    ("name\u00a0== 'a'", 4, 'unexpected character'),  # only ASCII whitespace
    ('count == \u0661', 9, 'unexpected character'),  # only ASCII digits
    ('%$#@!', 0, 'syntax error at position 0'),
    ("name == 'x' ~~", 12, "unexpected '~~'"),
])
def test_syntax_errors(text, position, fragment):
    exc = error(text)
    assert exc.position == position
    assert fragment in str(exc)
    assert f'position {position}' in str(exc)


@pytest.mark.parametrize('text, field, fragment', [
    ("nope == 'a'", 'nope', "unknown field 'nope' at position 0"),
    ("name == 'a' and name.sub == 'a'", 'name.sub', "unknown field 'name.sub' at position 16"),
    ("project == 'a'", 'project', "unknown field 'project'"),
    ("project.nope == 'a'", 'project.nope', "unknown field 'project.nope'"),
    ("memberTask.nope is null", 'memberTask.nope', "unknown field 'memberTask.nope'"),
    ("Name == 'a'", 'Name', "unknown field 'Name'"),  # field names are case-sensitive
    ('active > true', 'active', "operator '>' cannot be used on field 'active' (boolean)"),
    ("active =like= 'a'", 'active', "operator '=like=' cannot be used on field 'active'"),
    ("active ~~ 'a'", 'active', "operator '~~' cannot be used on field 'active'"),
    ("count =like= '1*'", 'count', "operator '=like=' cannot be used on field 'count'"),
    ("score ~~ '1'", 'score', "operator '~~' cannot be used on field 'score' (number)"),
    ("count == '3'", 'count', "field 'count' (integer) cannot be compared with a string"),
    ("count =in=(1, '2')", 'count', "cannot be compared with a string at position 14"),
    ("active == 'true'", 'active', "field 'active' (boolean) cannot be compared with a string"),
    ('active == 1', 'active', "field 'active' (boolean) cannot be compared with a number"),
    ('name == 1', 'name', "field 'name' (string) cannot be compared with a number"),
    ('name == true', 'name', "field 'name' (string) cannot be compared with a boolean"),
    ('count == false', 'count', 'cannot be compared with a boolean'),
    ("createdAt == 'yesterday'", 'createdAt', "needs an ISO 8601 date-time"),
    ("createdAt > '2024-13-01'", 'createdAt', "got '2024-13-01'"),
    ('createdAt > 20240101', 'createdAt', 'cannot be compared with a number'),
    ("createdAt =like= '2024*'", 'createdAt', "operator '=like=' cannot be used"),
    ("createdAt == '10000-01-01T00:00:00Z'", 'createdAt', 'years 0001-9999'),
    ("createdAt == '0001-01-01T00:00:00+01:00'", 'createdAt', 'ISO 8601'),
    ("tags != 'a'", 'tags', "operator '!=' cannot be used on field 'tags' (list)"),
    ("tags > 'a'", 'tags', "operator '>' cannot be used on field 'tags'"),
    ("tags =like= 'a*'", 'tags', "operator '=like=' cannot be used"),
    ('tags ~~ 1', 'tags', "operator '~~' cannot be used with a number"),
    ('tags == true', 'tags', "field 'tags' (list) cannot be compared with a boolean"),
    ('meta > true', 'meta', "operator '>' cannot be used with a boolean"),
    ('meta =like= 1', 'meta', "operator '=like=' cannot be used with a number"),
    ('options.x ~~ false', 'options.x', "operator '~~' cannot be used with a boolean"),
    ('project.budget == true', 'project.budget', "field 'project.budget' (number)"),
    ("memberTask.points == 'a'", 'memberTask.points', "field 'memberTask.points' (integer)"),
])
def test_type_errors(text, field, fragment):
    exc = error(text)
    assert exc.field == field
    assert fragment in str(exc)
    assert f"'{field}'" in str(exc)


@pytest.mark.parametrize('text', [
    'count == ' + '9' * 39,
    'count == 1' + '0' * 126,
    'score == 0.' + '0' * 130 + '1',
    'score == 1.' + '1' * 38,
])
def test_numbers_dynamodb_cannot_store_are_refused(text):
    assert 'cannot be stored exactly' in str(error(text))


def test_unpaired_surrogates_are_refused():
    assert 'invalid character' in str(error("name == 'a\ud800'"))


def test_non_string_input():
    for value in (None, 42, b"name == 'a'", ['x']):
        assert 'must be a string' in str(error(value))


def test_schema_problems_are_not_filter_errors():
    class Broken:
        def resolve(self, path):
            return Resolved('field', 'blob', path[0], ())

    with pytest.raises(ValueError, match='unsupported type') as info:
        parse("x == 'a'", Broken())
    assert not isinstance(info.value, FilterError)


# --- limits ---------------------------------------------------------------------------------------

def fast_error(text) -> FilterError:
    start = time.perf_counter()
    exc = error(text)
    assert time.perf_counter() - start < 0.5
    return exc


def test_100kb_filter_is_refused_quickly():
    text = " or ".join(["name == 'abcdefgh'"] * 5000)
    assert len(text) > 100_000
    exc = fast_error(text)
    assert 'filter too long' in str(exc) and str(MAX_LENGTH) in str(exc)


def test_longest_filter_is_accepted_quickly():
    unit = "name == 'abcdefgh' or "
    text = unit * ((MAX_LENGTH - 20) // len(unit)) + "count == 1"
    text += ' ' * (MAX_LENGTH - len(text))
    assert len(text) == MAX_LENGTH
    start = time.perf_counter()
    node = parse(text, SCHEMA)
    assert evaluate(node, {'count': 1})
    assert time.perf_counter() - start < 1
    assert 'filter too long' in str(error(text + ' '))


def test_1000_deep_parentheses_are_refused_quickly():
    exc = fast_error('(' * 1000 + "name == 'a'" + ')' * 1000)
    assert exc.position == MAX_DEPTH
    assert f'nested too deeply at position {MAX_DEPTH}' in str(exc)
    assert 'nested too deeply' in str(fast_error('not(' * 1000 + "name == 'a'" + ')' * 1000))
    assert 'nested too deeply' in str(fast_error('(' * 19_000))


def test_nesting_limit_is_exact():
    depth = MAX_DEPTH
    ok = 'not(' * (depth // 2) + '(' * (depth - depth // 2) + "name =in=('a')" + ')' * depth
    assert evaluate(parse(ok, SCHEMA), {'name': 'b'}) is (depth // 2 % 2 == 1)
    assert 'nested too deeply' in str(error('(' + ok + ')'))
    # Parentheses inside strings and =in= lists are not nesting.
    assert parse('(' * depth + "name =IN= ('(((')" + ')' * depth, SCHEMA)


# --- fuzzing ----------------------------------------------------------------------------------

TOKENS = ['name', 'count', 'active', 'tags', 'options', 'project', 'memberTask', '.', 'x',
          'statusSlug', '==', '!=', '>', '>=', '<', '<=', '=like=', '=in=', '~~', 'is', 'not',
          'null', 'and', 'or', ';', ',', '(', ')', "'a'", "'it\\'s'", "'", '\\', "'\\q'",
          '1', '-2.5', 'true', 'FALSE', ' ', '\n', '=', '*', "'2024-01-01'", '9' * 40]


def parses_or_raises_filter_error(text):
    try:
        node = parse(text, SCHEMA)
    except FilterError as exc:
        assert exc.__cause__ is None, repr(exc.__cause__)  # no internal error was wrapped
        assert exc.message
    else:
        assert isinstance(node, (Compare, IsNull, And, Or, Not))
        evaluate(node, ITEM, Ctx(projects={'i1': {}}, members=MEMBERS))
        assert parse(render(node), SCHEMA) == node


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_arbitrary_text(text):
    parses_or_raises_filter_error(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=30).map(''.join))
def test_fuzz_token_soup(text):
    parses_or_raises_filter_error(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=30).map(' '.join))
def test_fuzz_spaced_token_soup(text):
    parses_or_raises_filter_error(text)


# --- schema -------------------------------------------------------------------------------------

def test_dict_schema():
    assert SCHEMA.resolve(('tags',)) == Resolved('field', 'list', 'tags', ())
    assert SCHEMA.resolve(('options',)) == Resolved('field', 'any', 'options', ())
    assert SCHEMA.resolve(('name', 'x')) is None
    assert SCHEMA.resolve(()) is None
    assert SCHEMA.resolve(('memberTask',)) is None
    with pytest.raises(ValueError, match='unknown field type'):
        DictSchema({'a': 'blob'})
    with pytest.raises(ValueError, match='used twice'):
        DictSchema({'project': 'string'}, references={'project': PROJECT})
