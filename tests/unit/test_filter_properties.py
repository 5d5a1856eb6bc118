"""Property tests of the filter language.

* Random filter ASTs, rendered to text with random (but equivalent) spellings, parse back to
  filters that evaluate the same on random data sets.
"""
from __future__ import annotations

import random
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core.clock import normalize_instant
from chalicelib.kernel.query import (
    And,
    Compare,
    DictSchema,
    IsNull,
    Not,
    Or,
    evaluate,
    parse,
    render,
)

pytestmark = pytest.mark.slow   # minutes of CPU: `make test` runs it, the quick loop (`make check`) does not

SCHEMA = DictSchema(
    {'name': 'string', 'count': 'integer', 'score': 'number', 'active': 'boolean',
     'createdAt': 'datetime', 'tags': 'list', 'options': 'object',
     'documentStatus': 'object', 'documentStatus.status': 'string'},
    references={'project': DictSchema({'name': 'string', 'budget': 'number'})},
    collections={'memberTask': DictSchema({'statusSlug': 'string', 'points': 'integer'})},
)

PATHS = [('name',), ('count',), ('score',), ('active',), ('createdAt',), ('tags',),
         ('options',), ('options', 'a'), ('options', 'b', 'c'), ('documentStatus', 'status'),
         ('project', 'name'), ('project', 'budget'), ('memberTask', 'statusSlug'),
         ('memberTask', 'points')]

STRINGS = ['', 'a', 'A', 'ab', 'aB', 'abc', 'b', 'ba', 'x*y', "it's", 'a\\b', 'é', 'É',
           'straße', 'STRASSE', 'a,b', 'a;b', 'not', 'null']
NUMBERS = [0, 1, -1, 2, 10, Decimal('1.5'), Decimal('-2.25'), Decimal('1.0'), Decimal('0.1')]
BOOLS = [True, False]
INSTANTS = ['2024-01-01T00:00:00.000000Z', '2024-01-01T12:30:00.000000Z',
            '2023-12-31T23:00:00.000000Z', '2024-06-01T08:00:00.500000Z']
# Equivalent spellings of each instant (other offsets, no fraction, date only).
INSTANT_SPELLINGS = {
    INSTANTS[0]: ['2024-01-01T00:00:00Z', '2024-01-01T01:00:00+01:00', '2024-01-01',
                  '2023-12-31T19:00:00-05:00', INSTANTS[0]],
    INSTANTS[1]: ['2024-01-01T12:30:00Z', '2024-01-01T18:00:00+05:30', INSTANTS[1]],
    INSTANTS[2]: ['2023-12-31T23:00:00Z', '2024-01-01T00:00:00+01:00', INSTANTS[2]],
    INSTANTS[3]: ['2024-06-01T08:00:00.5Z', '2024-06-01T10:00:00.500+02:00', INSTANTS[3]],
}
PATTERNS = ['a*', '*a*', '*b', 'a*b', '*', '**', 'ab', '', 'A*', '*B*', 'a**', '*x*y*',
            'x*y', '*é*', 'STRA*', "it's*", '*\\*']

OPS_BY_TYPE = {
    'string': ['==', '!=', '>', '>=', '<', '<=', '=in=', '=like=', '~~'],
    'datetime': ['==', '!=', '>', '>=', '<', '<=', '=in='],
    'integer': ['==', '!=', '>', '>=', '<', '<=', '=in='],
    'number': ['==', '!=', '>', '>=', '<', '<=', '=in='],
    'boolean': ['==', '!=', '=in='],
    'list': ['==', '=in=', '~~'],
    'any': ['==', '!=', '>', '>=', '<', '<=', '=in=', '=like=', '~~'],
}


def scalar_for(type_, op):
    """A strategy of literals that fit the field type and the operator."""
    if op in ('=like=', '~~'):
        return st.sampled_from(PATTERNS + STRINGS)
    if type_ == 'string':
        return st.sampled_from(STRINGS)
    if type_ == 'datetime':
        return st.sampled_from(INSTANTS)
    if type_ in ('integer', 'number'):
        return st.sampled_from(NUMBERS)
    if type_ == 'boolean':
        return st.sampled_from(BOOLS)
    if type_ == 'list':
        return st.sampled_from(STRINGS + NUMBERS)
    pool = STRINGS + NUMBERS + INSTANTS
    if op in ('==', '!=', '=in='):
        pool = pool + BOOLS
    return st.sampled_from(pool)


@st.composite
def leaves(draw):
    path = draw(st.sampled_from(PATHS))
    target = SCHEMA.resolve(path)
    if draw(st.integers(0, 4)) == 0:
        return IsNull(path, draw(st.booleans()), target)
    op = draw(st.sampled_from(OPS_BY_TYPE[target.type]))
    if op == '=in=':
        value = tuple(draw(st.lists(scalar_for(target.type, op), min_size=1, max_size=4)))
    else:
        value = draw(scalar_for(target.type, op))
    return Compare(path, op, value, target)


def filters():
    return st.recursive(
        leaves(),
        lambda children: st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda xs: And(tuple(xs))),
            st.lists(children, min_size=2, max_size=3).map(lambda xs: Or(tuple(xs))),
            children.map(Not),
        ),
        max_leaves=8,
    )


# --- a renderer that spells the same filter in random ways ----------------------------------

def _case(rng: random.Random, word: str) -> str:
    return rng.choice([word, word.upper(), word.capitalize(),
                       ''.join(c.upper() if rng.random() < 0.5 else c for c in word)])


def _space(rng: random.Random) -> str:
    return rng.choice(['', ' ', '  ', '\t', '\n'])


def spell_literal(rng, value, type_: str) -> str:
    # another spelling of an instant is the same value only where the field is a datetime (an
    # object or untyped field compares the text as it is)
    if type_ == 'datetime' and isinstance(value, str) and value in INSTANT_SPELLINGS and rng.random() < 0.7:
        value = rng.choice(INSTANT_SPELLINGS[value])
    if isinstance(value, bool):
        return _case(rng, 'true' if value else 'false')
    if isinstance(value, str):
        return "'" + value.replace('\\', '\\\\').replace("'", "\\'") + "'"
    return format(value, 'f') if isinstance(value, Decimal) else str(value)


def spell(rng: random.Random, node) -> str:
    """Filter text for ``node``; parenthesises every composite child (harmless, and needed
    for Or under And) and sometimes adds redundant parentheses."""
    if isinstance(node, (And, Or)):
        sep = rng.choice([' and ', ';', ' AND ']) if isinstance(node, And) else rng.choice(
            [' or ', ',', ' Or '])
        text = sep.join(_wrap(rng, child) for child in node.items)
    elif isinstance(node, Not):
        inner = f'{_space(rng)}{spell(rng, node.item)}{_space(rng)}'
        text = f'{_case(rng, "not")}{_space(rng)}({inner})'
    elif isinstance(node, IsNull):
        words = ['is', 'not', 'null'] if node.negated else ['is', 'null']
        text = '.'.join(node.path) + ' ' + ' '.join(_case(rng, w) for w in words)
    else:
        path = '.'.join(node.path)
        op = node.op if node.op not in ('=like=', '=in=') else _case(rng, node.op)
        if node.op == '=in=':
            items = (',' + _space(rng)).join(spell_literal(rng, v, node.target.type) for v in node.value)
            text = f'{path}{_space(rng)}{op}{_space(rng)}({items})'
        else:
            text = f'{path}{_space(rng)}{op}{_space(rng)}{spell_literal(rng, node.value, node.target.type)}'
    if rng.random() < 0.1:
        text = f'({text})'
    return text


def _wrap(rng, node) -> str:
    text = spell(rng, node)
    return f'({text})' if isinstance(node, (And, Or)) else text


# --- random data ------------------------------------------------------------------------------

MISSING = object()
ANY_VALUES = st.one_of(
    st.sampled_from(STRINGS + NUMBERS + BOOLS + INSTANTS + [None]),
    st.lists(st.sampled_from(STRINGS + NUMBERS), max_size=3),
    st.fixed_dictionaries({}, optional={'c': st.sampled_from(STRINGS + NUMBERS + [None])}),
)


def typed(pool):
    """Mostly values of the field's type, sometimes null/missing, rarely anything at all."""
    return st.one_of(pool, pool, pool, st.just(None), st.just(MISSING), ANY_VALUES)


FIELD_VALUES = {
    'name': typed(st.sampled_from(STRINGS)),
    'count': typed(st.sampled_from([n for n in NUMBERS if isinstance(n, int)])),
    'score': typed(st.sampled_from(NUMBERS)),
    'active': typed(st.sampled_from(BOOLS)),
    'createdAt': typed(st.sampled_from(INSTANTS)),
    'tags': typed(st.lists(st.sampled_from(STRINGS + NUMBERS + BOOLS), max_size=3)),
    'options': typed(st.fixed_dictionaries({}, optional={
        'a': ANY_VALUES, 'b': st.one_of(ANY_VALUES, st.fixed_dictionaries(
            {}, optional={'c': ANY_VALUES}))})),
    'documentStatus': typed(st.fixed_dictionaries(
        {}, optional={'status': typed(st.sampled_from(STRINGS))})),
}


def _drop_missing(value):
    if isinstance(value, dict):
        return {k: _drop_missing(v) for k, v in value.items() if v is not MISSING}
    return value


@st.composite
def records(draw, fields):
    record = {name: draw(strategy) for name, strategy in fields.items()}
    return _drop_missing(record)


PROJECT = {'name': typed(st.sampled_from(STRINGS)), 'budget': typed(st.sampled_from(NUMBERS))}
MEMBER = {'statusSlug': typed(st.sampled_from(STRINGS)),
          'points': typed(st.sampled_from([0, 1, 2, 10]))}


@st.composite
def datasets(draw):
    """(stored items, context): items are stored DynamoDB items ``{'pk', 'data'}``."""
    count = draw(st.integers(1, 8))
    items, projects, members = [], {}, {}
    for index in range(count):
        pk = f'item{index}'
        items.append({'pk': pk, 'data': draw(records(FIELD_VALUES))})
        projects[pk] = draw(st.one_of(st.none(), records(PROJECT)))
        members[pk] = draw(st.lists(records(MEMBER), max_size=3))
    return items, Context(projects, members)


class Context:
    def __init__(self, projects, members):
        self.projects, self.members = projects, members

    def reference(self, item, name):
        assert name == 'project'
        return self.projects.get(item['pk'])

    def collection(self, item, name):
        assert name == 'memberTask'
        return self.members.get(item['pk'], [])


def matching(node, items, ctx):
    return {item['pk'] for item in items if evaluate(node, item, ctx, root='data')}


# --- (1) text round trip ------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(node=filters(), data=datasets(), rng=st.randoms(use_true_random=False))
def test_spelled_filter_parses_to_an_equivalent_filter(node, data, rng):
    items, ctx = data
    text = spell(rng, node)
    parsed = parse(text, SCHEMA)
    assert matching(parsed, items, ctx) == matching(node, items, ctx), text
    # The canonical rendering is a fixed point of parse.
    assert parse(render(parsed), SCHEMA) == parsed


def test_spellings_of_instants_are_equivalent():
    # Guards the test data itself: every spelling must normalise to its canonical instant.
    for canonical, spellings in INSTANT_SPELLINGS.items():
        assert {normalize_instant(s) for s in spellings} == {canonical}
