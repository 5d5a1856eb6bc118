"""The DynamoDB compiler: what is pushed down, what stays residual, and that every leaf the
compiler pushes down selects on a real (moto) table exactly what the evaluator selects, on
data made to trip up type-sloppy translations (mixed types, lists, nulls, missing values)."""
from __future__ import annotations

import itertools
from decimal import Decimal

import boto3
import pytest
from boto3.dynamodb.conditions import ConditionExpressionBuilder
from moto import mock_aws

from chalicelib.kernel.query import (
    And,
    Compare,
    DictSchema,
    IsNull,
    Not,
    compile_filter,
    evaluate,
    parse,
    render,
)
from chalicelib.kernel.query.dynamo import MAX_IN_OPERANDS

SCHEMA = DictSchema(
    {'name': 'string', 'count': 'integer', 'score': 'number', 'active': 'boolean',
     'createdAt': 'datetime', 'tags': 'list', 'options': 'object'},
    references={'project': DictSchema({'name': 'string'})},
    collections={'memberTask': DictSchema({'statusSlug': 'string'})},
)


def expression(condition) -> str:
    return ConditionExpressionBuilder().build_expression(condition).condition_expression


def split(text):
    condition, residual = compile_filter(parse(text, SCHEMA), SCHEMA)
    return condition, (None if residual is None else render(residual))


# --- shape of the split --------------------------------------------------------------------

@pytest.mark.parametrize('text, pushed, residual', [
    ("name == 'a'", True, None),
    ("name != 'a'", True, None),
    ("count > 1", True, None),
    ("score <= 1.5", True, None),
    ("active == true", True, None),
    ("createdAt >= '2024-01-01T00:00:00+01:00'", True, None),
    ("name =in=('a','b')", True, None),
    ("count =in=(1,2)", True, None),
    ("options.x =in=('a', 1, true)", True, None),
    ("name is null", True, None),
    ("tags is not null", True, None),
    ("options.a.b is null", True, None),
    ("name =like= 'abc'", True, None),
    ("name =like= 'abc*'", True, None),
    ("name =like= '*abc*'", True, None),
    ("name =like= '**abc***'", True, None),
    ("name =like= '*'", True, None),
    ("name =like= '*abc'", False, "name =like= '*abc'"),
    ("name =like= 'a*c'", False, "name =like= 'a*c'"),
    ("name =like= '*a*c*'", False, "name =like= '*a*c*'"),
    ("name ~~ 'abc'", False, "name ~~ 'abc'"),
    ("tags == 'a'", False, "tags == 'a'"),
    ("tags =in=('a')", False, "tags =in=('a')"),
    ("project.name == 'p'", False, "project.name == 'p'"),
    ("memberTask.statusSlug == 's'", False, "memberTask.statusSlug == 's'"),
    # And: compilable children go down, the others stay.
    ("name == 'a' and tags == 'x' and count > 1", True, "tags == 'x'"),
    ("name ~~ 'a' ; project.name == 'p'", False, "name ~~ 'a' and project.name == 'p'"),
    # Or / Not: all or nothing.
    ("name == 'a' or count > 1", True, None),
    ("name == 'a' or tags == 'x'", False, "name == 'a' or tags == 'x'"),
    ("not(name == 'a' or count > 1)", True, None),
    ("not(name == 'a' and name ~~ 'b')", False, "not(name == 'a' and name ~~ 'b')"),
    ("count > 1 and (name == 'a' or name ~~ 'b')", True, "name == 'a' or name ~~ 'b'"),
    ("(name == 'a' and count > 1) and (active == true and tags == 'x')", True, "tags == 'x'"),
])
def test_split(text, pushed, residual):
    condition, rest = split(text)
    assert (condition is not None) == pushed
    assert rest == residual


@pytest.mark.parametrize('pattern, expected', [
    ('abc', '#n0.#n1 = :v0'),
    ('abc*', 'begins_with(#n0.#n1, :v0)'),
    ('*abc*', '(attribute_type(#n0.#n1, :v0) AND contains(#n2.#n3, :v1))'),
    ('*', 'attribute_type(#n0.#n1, :v0)'),
])
def test_like_patterns_compile_to_exact_functions(pattern, expected):
    condition, residual = split(f"name =like= '{pattern}'")
    assert residual is None
    assert expression(condition) == expected


def test_values_and_paths_of_the_compiled_condition():
    condition, _ = split("options.properties.x == 'v'")
    built = ConditionExpressionBuilder().build_expression(condition)
    assert list(built.attribute_name_placeholders.values()) == ['data', 'options',
                                                                'properties', 'x']
    assert list(built.attribute_value_placeholders.values()) == ['v']


def test_other_root():
    condition, _ = compile_filter(parse("name == 'a'", SCHEMA), SCHEMA, root='attrs')
    built = ConditionExpressionBuilder().build_expression(condition)
    assert list(built.attribute_name_placeholders.values()) == ['attrs', 'name']


def test_datetime_literal_is_pushed_down_normalised():
    condition, _ = split("createdAt < '2024-01-01T01:00:00+01:00'")
    built = ConditionExpressionBuilder().build_expression(condition)
    assert '2024-01-01T00:00:00.000000Z' in built.attribute_value_placeholders.values()


def test_in_lists_are_chunked_to_the_dynamodb_operand_limit():
    values = ', '.join(f"'v{i}'" for i in range(250))
    condition, residual = split(f'name =in=({values})')
    assert residual is None
    text = expression(condition)
    assert text.count(' IN (') == 3
    for chunk in text.split(' IN (')[1:]:
        assert chunk.split(')')[0].count(':v') <= MAX_IN_OPERANDS


def test_nothing_to_compile():
    assert compile_filter(None, SCHEMA) == (None, None)


@pytest.mark.parametrize('limit', [200, 1000, 3000])
def test_expression_length_budget_is_exact_and_respected(limit):
    text = ' and '.join(f"name != 'value{i}'" for i in range(400))
    node = parse(text, SCHEMA)
    condition, residual = compile_filter(node, SCHEMA, max_expression_length=limit)
    length = len(expression(condition))
    assert length <= limit
    # Greedy packing: one more conjunct would not have fitted.
    assert length > limit - len("(attribute_type(#n999.#n999, :v999) AND #n999.#n999 <> :v999)") - 7
    pushed = len(node.items) - len(residual.items)
    assert 0 < pushed < 400


def test_an_or_too_long_alone_stays_residual():
    text = ' or '.join(f"name == 'value{i}'" for i in range(300))
    condition, residual = compile_filter(parse(text, SCHEMA), SCHEMA)
    assert condition is None and residual is not None


def test_hand_built_leaves_are_any_fields():
    node = And((Compare(('name',), '==', 'a'), IsNull(('x', 'y'), True)))
    condition, residual = compile_filter(node, None)
    assert residual is None
    assert expression(condition).count('attribute_') == 2


# --- every leaf on a real table ---------------------------------------------------------------

INSTANTS = ['2024-01-01T00:00:00.000000Z', '2024-01-01T12:30:00.000000Z']
# Every path holds each of these in some item: right types, wrong types, containers, null.
ADVERSARIAL = ['a', 'A', 'ab', 'ba', 'abc', 'xabcx', '', 'x*y', 'straße', 1, 0, -1,
               Decimal('1.5'), Decimal('10'), True, False, None, ['a', 1, True], ['ab'], [],
               {'c': 'a'}, {}] + INSTANTS
FIELDS = ['name', 'count', 'score', 'active', 'createdAt', 'tags']


def adversarial_items():
    items = [{'pk': 'empty', 'data': {}}, {'pk': 'nodata'}]
    for index, value in enumerate(ADVERSARIAL):
        data = {name: value for name in FIELDS}
        data['options'] = {'a': value, 'b': {'c': value}}
        items.append({'pk': f'v{index}', 'data': data})
    # Paths through something that is not a map.
    for index, value in enumerate(['a', 1, None, ['a'], {'a': None}]):
        items.append({'pk': f'o{index}', 'data': {'options': value}})
    return items


LITERALS = {
    'string': ['a', 'ab', '', 'b'],
    'datetime': ['2024-01-01T01:00:00+01:00', '2024-01-01T12:30:00Z'],
    'integer': [1, 0, Decimal('1.5')],
    'number': [1, Decimal('1.5'), -1],
    'boolean': [True, False],
    'list': ['a', 1],
    'any': ['a', '', 1, Decimal('1.5'), True, False],
}
PATTERNS = ['a', 'ab*', '*b*', '*ab*', '*a*', '*', '', 'x*y', '*a']
OPS = {
    'string': ['==', '!=', '>', '>=', '<', '<=', '=like='],
    'datetime': ['==', '!=', '>', '<='],
    'integer': ['==', '!=', '>', '<'],
    'number': ['==', '!=', '>=', '<='],
    'boolean': ['==', '!='],
    'list': ['=='],
    'any': ['==', '!=', '>', '>=', '<', '<=', '=like='],
}


def leaf_filters():
    for path in ['name', 'count', 'score', 'active', 'createdAt', 'tags', 'options',
                 'options.a', 'options.b.c']:
        type_ = SCHEMA.resolve(tuple(path.split('.'))).type
        yield f'{path} is null'
        yield f'{path} is not null'
        for op in OPS[type_]:
            pool = PATTERNS if op == '=like=' else LITERALS[type_]
            for value in pool:
                if op in ('>', '>=', '<', '<=') and isinstance(value, bool):
                    continue
                yield f'{path} {op} {render_literal(value)}'
        values = ', '.join(render_literal(v) for v in LITERALS[type_])
        yield f'{path} =in=({values})'


def render_literal(value):
    return render(Compare(('x',), '==', value)).split(' == ', 1)[1]


@pytest.fixture(scope='module')
def table():
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv('AWS_ENDPOINT_URL', raising=False)
        patch.delenv('AWS_ENDPOINT_URL_DYNAMODB', raising=False)
        patch.setenv('AWS_DEFAULT_REGION', 'us-east-1')
        patch.setenv('AWS_ACCESS_KEY_ID', 'testing')
        patch.setenv('AWS_SECRET_ACCESS_KEY', 'testing')
        patch.delenv('AWS_SESSION_TOKEN', raising=False)
        patch.delenv('AWS_PROFILE', raising=False)
        with mock_aws():
            table = boto3.resource('dynamodb', region_name='us-east-1').create_table(
                TableName='filter-leaves',
                KeySchema=[{'AttributeName': 'pk', 'KeyType': 'HASH'}],
                AttributeDefinitions=[{'AttributeName': 'pk', 'AttributeType': 'S'}],
                BillingMode='PAY_PER_REQUEST')
            items = adversarial_items()
            with table.batch_writer() as batch:
                for item in items:
                    batch.put_item(Item=item)
            yield table, items


def check(table, items, node):
    condition, residual = compile_filter(node, SCHEMA)
    kwargs = {} if condition is None else {'FilterExpression': condition}
    if residual is None:
        kwargs['ProjectionExpression'] = 'pk'  # only the ids are needed: faster moto responses
    returned = table.scan(**kwargs)['Items']  # < 1 MB: a single page
    got = {i['pk'] for i in returned if residual is None or evaluate(residual, i, root='data')}
    want = {i['pk'] for i in items if evaluate(node, i, root='data')}
    assert got == want, render(node)
    return condition is not None


def test_every_leaf_matches_in_memory_evaluation(table):
    table, items = table
    pushed = 0
    for text in leaf_filters():
        node = parse(text, SCHEMA)
        pushed += check(table, items, node)
        if node.op in ('!=', '=like=') if isinstance(node, Compare) else True:
            check(table, items, Not(node))  # where DynamoDB's own semantics differ most
    assert pushed > 150  # the point is to exercise pushed-down leaves


@pytest.mark.parametrize('text', [
    "name == 'a' and not(count > 0) or active == false",
    "not(name =like= 'a*' or options.a is null); score >= 1",
    "(name ~~ 'A' or count == 1), tags == 'a'",
    "not(not(options.b.c != 'a'))",
])
def test_combinations_match_in_memory_evaluation(table, text):
    check(*table, parse(text, SCHEMA))


def test_budgeted_split_matches_in_memory_evaluation(table):
    text = ' and '.join(itertools.islice(itertools.cycle(
        ["name != 'zz'", "count >= -5", "options.a is not null"]), 300))
    node = parse(text, SCHEMA)
    condition, residual = compile_filter(node, SCHEMA)
    assert condition is not None and residual is not None
    check(*table, node)


def test_hand_built_leaves_boto3_cannot_express_stay_residual():
    for leaf in (Compare(('a[0]',), '==', 'x'), Compare(('a.b',), '==', 'x'),
                 Compare(('a',), '==', 1.5), Compare(('a',), '=like=', 5)):
        assert compile_filter(leaf, None) == (None, leaf)


def test_wide_filters_compile_without_deep_recursion():
    # boto3 renders conditions recursively: long chains must not be left-deep.
    wide_or = ','.join(["name=='a'"] * 1500)
    condition, residual = compile_filter(parse(wide_or, SCHEMA), SCHEMA)
    assert condition is None and residual is not None  # too long for one expression
    condition, residual = compile_filter(parse(wide_or, SCHEMA), SCHEMA,
                                         max_expression_length=10**6)
    assert residual is None and expression(condition).count(' OR ') == 1499
    wide_and = ';'.join(["name!='a'"] * 1600)
    condition, residual = compile_filter(parse(wide_and, SCHEMA), SCHEMA)
    assert len(expression(condition)) <= 3000 and len(residual.items) > 1000
