"""The table client's session answers botocore's endpoint table from a 10 KB slice of it
(chalicelib/kernel/store/endpoints.py): the slice must be botocore's own data, and resolve endpoints
exactly as the full table does."""
from __future__ import annotations

import json

import botocore.config
import botocore.loaders
import botocore.session
import pytest

from chalicelib.kernel.store import endpoints, model

REGIONS = ('us-east-1', 'eu-west-1', 'ap-southeast-2', 'cn-north-1', 'us-gov-west-1', 'eu-central-2')


def test_the_slice_is_the_installed_botocores_table_with_dynamodb_only():
    full = botocore.loaders.Loader().load_data('endpoints')
    assert json.loads(endpoints.SLIM.read_text()) == endpoints.derive(full), \
        'botocore changed: run `python -m chalicelib.kernel.store.endpoints` and commit the file'
    assert {p['partition'] for p in full['partitions']} == \
        {p['partition'] for p in json.loads(endpoints.SLIM.read_text())['partitions']}


@pytest.mark.parametrize('region', REGIONS)
@pytest.mark.parametrize('fips', [False, True])
def test_a_client_of_the_slim_session_resolves_the_endpoint_botocore_resolves(region, fips, monkeypatch):
    monkeypatch.delenv('AWS_ENDPOINT_URL', raising=False)
    monkeypatch.delenv('AWS_ENDPOINT_URL_DYNAMODB', raising=False)
    config = botocore.config.Config(use_fips_endpoint=fips)
    ours = endpoints.session().create_client('dynamodb', region_name=region, config=config,
                                             aws_access_key_id='x', aws_secret_access_key='x')
    theirs = botocore.session.get_session().create_client('dynamodb', region_name=region, config=config,
                                                          aws_access_key_id='x', aws_secret_access_key='x')
    assert ours.meta.endpoint_url == theirs.meta.endpoint_url
    assert ours.meta.partition == theirs.meta.partition


def test_the_models_client_is_made_from_the_slim_session(monkeypatch):
    monkeypatch.setenv('TABLE_NAME', 'slim-check')
    model.reset()
    try:
        client = model.client()
        resolver = model.Item._get_connection().connection.session._get_internal_component('endpoint_resolver')
        assert resolver.uses_builtin_data   # the rule set decides, as with botocore's own file
        assert {name for p in resolver._endpoint_data['partitions'] for name in p['services']} == {'dynamodb'}
        assert client.meta.service_model.service_name == 'dynamodb'
    finally:
        model.reset()
