"""``CLIENT_READ_TIMEOUT_SECONDS`` (chalicelib/core/config.py) reaches every AWS client the API
makes: the table's (pynamodb's and the boto3 resource's), SQS, EventBridge and S3; unset, each
keeps its own (DynamoDB, SQS and EventBridge 8 s, S3 20 s). The chaos run of `make test` relies
on it (docs/operations/chaos-runs.md)."""
from __future__ import annotations

import pytest

from chalicelib.core.config import reset_config
from chalicelib.features.documents import blobs
from chalicelib.features.work import store as work_store
from chalicelib.kernel.store import model


def _timeouts() -> dict[str, float]:
    reset_config()
    model.reset()
    work_store.reset()
    blobs.reset()
    return {'table': model.client().meta.config.read_timeout,
            'resource': model.boto3_table().meta.client.meta.config.read_timeout,
            'sqs': work_store.sqs().meta.config.read_timeout,
            'events': work_store.events_client().meta.config.read_timeout,
            's3': blobs.client().meta.config.read_timeout}


@pytest.fixture
def fresh_clients(aws):
    yield
    reset_config()
    model.reset()
    work_store.reset()
    blobs.reset()


def test_each_client_keeps_its_own_read_timeout_when_unset(fresh_clients, monkeypatch):
    monkeypatch.delenv('CLIENT_READ_TIMEOUT_SECONDS', raising=False)
    assert _timeouts() == {'table': 8, 'resource': 8, 'sqs': 8, 'events': 8, 's3': 20}


def test_the_setting_reaches_every_client(fresh_clients, monkeypatch):
    monkeypatch.setenv('CLIENT_READ_TIMEOUT_SECONDS', '2.5')
    assert set(_timeouts().values()) == {2.5}
