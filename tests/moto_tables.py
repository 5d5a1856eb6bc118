"""The table the tests of the local moto's fixes read (localdev/moto_server.py: narrowed Queries,
index groups, plain answers): keyed (pk, sk), with one index ``by_g`` keyed (g, r)."""
from __future__ import annotations

from typing import Any


def table_with_index(ddb, name: str, *, projection: str = 'KEYS_ONLY') -> Any:
    """Create it through ``ddb`` (a boto3 client or resource); what ``create_table`` answers."""
    return ddb.create_table(
        TableName=name, BillingMode='PAY_PER_REQUEST',
        KeySchema=[{'AttributeName': 'pk', 'KeyType': 'HASH'}, {'AttributeName': 'sk', 'KeyType': 'RANGE'}],
        AttributeDefinitions=[{'AttributeName': a, 'AttributeType': 'S'} for a in ('pk', 'sk', 'g', 'r')],
        GlobalSecondaryIndexes=[{'IndexName': 'by_g', 'Projection': {'ProjectionType': projection},
                                 'KeySchema': [{'AttributeName': 'g', 'KeyType': 'HASH'},
                                               {'AttributeName': 'r', 'KeyType': 'RANGE'}]}])
