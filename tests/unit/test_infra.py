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
    slots = {f'x{n}_created' for n in range(1, 6)}   # equality indexes, by createdOn only
    assert names == {'by_created', 'by_updated', 'by_name', 'parent_keys'} | slots
    assert len(names) <= 20   # DynamoDB's limit of GSIs per table
    projections = {g['IndexName']: g['Projection']['ProjectionType'] for g in props['GlobalSecondaryIndexes']}
    # no index projects records: a write moves keys only (docs/scale.md "Projections")
    assert set(projections.values()) == {'KEYS_ONLY'}
    for g in props['GlobalSecondaryIndexes']:
        assert [k['KeyType'] for k in g['KeySchema']] == ['HASH', 'RANGE']
    assert props['TimeToLiveSpecification'] == {'AttributeName': 'ttl', 'Enabled': True}
    assert 'ttl' in Item.get_attributes()
    defined = {a['AttributeName'] for a in props['AttributeDefinitions']}
    used = {k['AttributeName'] for g in props['GlobalSecondaryIndexes'] for k in g['KeySchema']}
    assert used | {'pk', 'sk'} == defined
    assert Item.Meta.billing_mode == 'PAY_PER_REQUEST' == props['BillingMode']


def test_retired_indexes_are_kept_only_when_asked_one_step_at_a_time():
    """A stage moves off tenant_all / by_parent one GSI per stack update
    (docs/operations/deploy.md "Index changes")."""
    import pytest

    def names(**kw):
        return {g['IndexName']: g for g in template('prod', **kw)['Resources']['Table']['Properties']
                ['GlobalSecondaryIndexes']}
    final = names(keep_retired=())
    both = names(keep_retired=('tenant_all', 'by_parent'))
    one = names(keep_retired=('by_parent',))
    assert 'tenant_all' not in final and 'by_parent' not in final and 'parent_keys' in final
    assert set(both) - set(final) == {'tenant_all', 'by_parent'} and set(one) - set(final) == {'by_parent'}
    assert both['tenant_all']['Projection'] == {'ProjectionType': 'ALL'}
    assert [k['AttributeName'] for k in both['by_parent']['KeySchema']] == ['ppk', 'csk']
    with pytest.raises(ValueError, match='not a retired index'):
        names(keep_retired=('by_created',))
    # the value indexes in updatedOn order (docs/scale.md "Value indexes by createdOn only")
    kept = names(keep_retired=('x1_updated', 'x2_updated'))
    assert set(kept) - set(final) == {'x1_updated', 'x2_updated'} and 'x1_updated' not in final
    assert kept['x2_updated']['Projection'] == {'ProjectionType': 'KEYS_ONLY'}
    assert [k['AttributeName'] for k in kept['x2_updated']['KeySchema']] == ['x2', 'usk']


def test_chalice_stages_name_the_template_resources():
    config = json.loads((ROOT / '.chalice' / 'config.json').read_text())
    for stage in ('dev', 'prod'):
        env = config['stages'][stage]['environment_variables']
        res = template(stage)['Resources']
        assert env['TABLE_NAME'] == res['Table']['Properties']['TableName'] == Names(stage).table
        assert env['BUCKET_NAME'] == res['Documents']['Properties']['BucketName']
        assert env['ACTIVITY_QUEUE_NAME'] == res['ActivityStarts']['Properties']['QueueName']
        assert env['OCR_QUEUE_NAME'] == res['OcrStarts']['Properties']['QueueName'] == Names(stage).ocr_queue
        assert env['EVENT_BUS_NAME'] == res['EventBus']['Properties']['Name']
        assert env['ORG_SECRETS_PREFIX'] == Names(stage).org_secrets_prefix == f'platform/{stage}/org/'
