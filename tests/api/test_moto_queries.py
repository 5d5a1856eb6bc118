"""localdev/moto_server.py ``narrow_queries`` (applied to the in-process moto of every test by
tests/conftest.py, and to ``make run``'s moto server): a Query answers exactly what it answered
before, in the same order and pages, for a table Query and an index Query, forward and back,
with a range condition, a filter and a limit; and a table Query no longer reads the table."""
from __future__ import annotations

import random

import boto3
import pytest
from boto3.dynamodb.conditions import Attr, Key
from moto import mock_aws

from tests.moto_tables import table_with_index


@pytest.fixture()
def tbl():
    with mock_aws():
        ddb = boto3.resource('dynamodb', region_name='us-east-1')
        table = table_with_index(ddb, 'narrow', projection='ALL')
        rnd = random.Random(7)
        items = []
        for n in range(300):
            item = {'pk': f'p{n % 7}', 'sk': f'{rnd.randrange(10**6):07d}#{n}', 'n': n}
            if n % 5:   # some items out of the index
                item.update(g=f'g{n % 3}', r=f'{rnd.randrange(10**6):07d}#{n}')
            items.append(item)
        with table.batch_writer() as batch:
            for item in items:
                batch.put_item(Item=item)
        yield table, items


def _all(table, **kwargs) -> list[list[int]]:
    pages = []
    while True:
        page = table.query(**kwargs)
        pages.append([int(i['n']) for i in page['Items']])
        if 'LastEvaluatedKey' not in page:
            return pages
        kwargs['ExclusiveStartKey'] = page['LastEvaluatedKey']


@pytest.mark.parametrize('forward', [True, False])
def test_a_table_query_answers_its_partition_in_key_order_page_by_page(tbl, forward):
    table, items = tbl
    want = sorted((i for i in items if i['pk'] == 'p3'), key=lambda i: i['sk'], reverse=not forward)
    pages = _all(table, KeyConditionExpression=Key('pk').eq('p3'), ScanIndexForward=forward, Limit=9)
    assert [n for page in pages for n in page] == [i['n'] for i in want]
    assert all(len(page) <= 9 for page in pages) and len(pages) >= len(want) // 9
    ranged = _all(table, KeyConditionExpression=Key('pk').eq('p3') & Key('sk').lt('0500000'),
                  FilterExpression=Attr('n').gt(100), ScanIndexForward=forward)
    assert [n for page in ranged for n in page] == [i['n'] for i in want if i['sk'] < '0500000' and i['n'] > 100]
    assert _all(table, KeyConditionExpression=Key('pk').eq('nothing')) == [[]]


@pytest.mark.parametrize('forward', [True, False])
def test_an_index_query_answers_the_indexed_items_in_index_order(tbl, forward):
    table, items = tbl
    want = sorted((i for i in items if i.get('g') == 'g1'), key=lambda i: i['r'], reverse=not forward)
    pages = _all(table, IndexName='by_g', KeyConditionExpression=Key('g').eq('g1'), ScanIndexForward=forward, Limit=11)
    assert [n for page in pages for n in page] == [i['n'] for i in want]
    bounded = _all(table, IndexName='by_g', KeyConditionExpression=Key('g').eq('g1') & Key('r').gte('0300000'),
                   ScanIndexForward=forward)
    assert [n for page in bounded for n in page] == [i['n'] for i in want if i['r'] >= '0300000']


def test_a_table_query_does_not_read_the_other_partitions(tbl):
    from moto.dynamodb.models.table import Table
    table, _ = tbl
    gathered = []
    real = Table.all_items

    def counting(self):
        out = real(self)
        gathered.append(len(out))
        return out
    Table.all_items = counting
    try:
        table.query(KeyConditionExpression=Key('pk').eq('p3'))
        table.query(IndexName='by_g', KeyConditionExpression=Key('g').eq('g1'))
    finally:
        Table.all_items = real
    assert gathered == [43, 300]   # p3's 43 items; an index Query still looks at every item
