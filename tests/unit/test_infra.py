"""The generated data stack matches the table the code uses, and the Chalice stages name the
resources the template creates (infra/names.py is the one source of both)."""
import json
from pathlib import Path

from chalicelib.kernel.store.model import Item
from infra.names import Names
from infra.stack import template

ROOT = Path(__file__).resolve().parents[2]


def test_table_template_has_every_index_of_the_model():
    props = template('prod')['Resources']['Table']['Properties']
    names = {g['IndexName'] for g in props['GlobalSecondaryIndexes']}
    slots = {f'x{n}_{order}' for n in range(1, 6) for order in ('created', 'updated')}   # equality indexes
    assert names == {'by_created', 'by_updated', 'by_name', 'tenant_all', 'by_parent'} | slots
    assert len(names) <= 20   # DynamoDB's limit of GSIs per table
    projections = {g['IndexName']: g['Projection']['ProjectionType'] for g in props['GlobalSecondaryIndexes']}
    assert projections['by_created'] == 'KEYS_ONLY' and projections['tenant_all'] == 'ALL'
    assert all(projections[s] == 'KEYS_ONLY' for s in slots)
    for g in props['GlobalSecondaryIndexes']:
        assert [k['KeyType'] for k in g['KeySchema']] == ['HASH', 'RANGE']
    assert props['TimeToLiveSpecification'] == {'AttributeName': 'ttl', 'Enabled': True}
    assert 'ttl' in Item.get_attributes()
    defined = {a['AttributeName'] for a in props['AttributeDefinitions']}
    used = {k['AttributeName'] for g in props['GlobalSecondaryIndexes'] for k in g['KeySchema']}
    assert used | {'pk', 'sk'} == defined
    assert Item.Meta.billing_mode == 'PAY_PER_REQUEST' == props['BillingMode']


def test_chalice_stages_name_the_template_resources():
    config = json.loads((ROOT / '.chalice' / 'config.json').read_text())
    for stage in ('dev', 'prod'):
        env = config['stages'][stage]['environment_variables']
        res = template(stage)['Resources']
        assert env['TABLE_NAME'] == res['Table']['Properties']['TableName'] == Names(stage).table
        assert env['BUCKET_NAME'] == res['Documents']['Properties']['BucketName']
        assert env['ACTIVITY_QUEUE_NAME'] == res['ActivityStarts']['Properties']['QueueName']
        assert env['EVENT_BUS_NAME'] == res['EventBus']['Properties']['Name']
        assert env['ORG_SECRETS_PREFIX'] == Names(stage).org_secrets_prefix == f'platform/{stage}/org/'
