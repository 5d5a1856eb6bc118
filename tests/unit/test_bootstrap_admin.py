"""The operator command that makes a deployed stage's first admin and key (infra/bootstrap_admin.py,
docs/operations/deploy.md "The first admin"), against moto: the key works through the API, and
its API Gateway twin is in the stage's per-key usage plan with the value the authorizer gives."""
from __future__ import annotations

import hashlib
import os

import boto3
import pytest

from chalicelib.core.config import get_config
from chalicelib.kernel.store import model
from infra import bootstrap_admin
from infra.package import stage_environment


@pytest.fixture
def deployed(aws, monkeypatch):
    """A stage's data stack (its table) and app stack (its per-key usage plan), in moto."""
    for name in [*stage_environment('prod'), 'USAGE_PLAN_ID']:   # restored (or removed) after the test
        monkeypatch.setenv(name, os.environ.get(name, ''))   # (delenv of an absent name records nothing)
    monkeypatch.setenv('TABLE_NAME', 'platform-prod')
    get_config.cache_clear()
    model.reset()
    from chalicelib.kernel.store.table import ensure_table
    ensure_table()
    gateway = boto3.client('apigateway', region_name='us-east-1')
    gateway.create_usage_plan(name='platform-prod-shared')
    plan = gateway.create_usage_plan(name='platform-prod-per-key')['id']
    yield gateway, plan
    get_config.cache_clear()
    model.reset()


def test_creates_the_admin_key_with_its_usage_plan_twin(deployed, capsys):
    gateway, plan = deployed
    result = bootstrap_admin.main(['prod', '--email', 'ops@example.com'])
    out = capsys.readouterr().out
    assert result['apiKey'] and result['apiKey'] in out
    twins = gateway.get_usage_plan_keys(usagePlanId=plan)['items']
    assert len(twins) == 1
    value = gateway.get_api_key(apiKey=twins[0]['id'], includeValue=True)['value']
    assert value == hashlib.sha256(result['apiKey'].encode()).hexdigest()

    from chalice.test import Client

    from app import app
    with Client(app, stage_name='prod') as client:
        reply = client.http.get('/api/account/me', headers={'x-api-key': result['apiKey']})
    assert reply.status_code == 200, reply.body
    assert b'ops@example.com' in reply.body


def test_a_second_run_keeps_the_admin_and_prints_no_key(deployed, capsys):
    gateway, plan = deployed
    first = bootstrap_admin.main(['prod', '--email', 'ops@example.com'])
    capsys.readouterr()
    again = bootstrap_admin.main(['prod', '--email', 'ops@example.com'])
    assert again['userId'] == first['userId'] and again['apiKey'] is None
    assert first['apiKey'] not in capsys.readouterr().out
    assert len(gateway.get_usage_plan_keys(usagePlanId=plan)['items']) == 1


def test_refuses_before_the_app_stack_is_deployed(aws, monkeypatch):
    for name in [*stage_environment('prod'), 'USAGE_PLAN_ID']:
        monkeypatch.setenv(name, os.environ.get(name, ''))
    monkeypatch.setenv('TABLE_NAME', 'platform-prod')
    get_config.cache_clear()
    model.reset()
    from chalicelib.kernel.store.table import ensure_table
    ensure_table()
    with pytest.raises(SystemExit, match='usage plan'):
        bootstrap_admin.main(['prod'])
    get_config.cache_clear()
    model.reset()


def test_refuses_before_the_data_stack_is_deployed(aws, monkeypatch):
    for name in [*stage_environment('prod'), 'USAGE_PLAN_ID']:
        monkeypatch.setenv(name, os.environ.get(name, ''))
    boto3.client('apigateway', region_name='us-east-1').create_usage_plan(name='platform-prod-per-key')
    with pytest.raises(SystemExit, match='data stack'):
        bootstrap_admin.main(['prod'])
    get_config.cache_clear()
    model.reset()
