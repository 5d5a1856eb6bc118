"""Issue 24: one time budget per request (core/budget.py), checked inside the loops that grow
with input; past it a 422 naming the limit and nothing half-written (docs/api/limits.md).
Delta application and validation have their own tests (test_documents_deltas.py,
test_documents_validation.py)."""
from __future__ import annotations

import pytest

from chalicelib.core import budget
from tests.support import create


def _without_budget(api, monkeypatch, path: str):
    """GET ``path`` with a request budget of 0 s (the stage's variable patched for that request)."""
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('REQUEST_BUDGET_SECONDS', '0')
    reset_config()
    get_config()   # read now: requests run with the stage's variables patched in
    try:
        return api.get(path)
    finally:
        monkeypatch.delenv('REQUEST_BUDGET_SECONDS')
        reset_config()
        get_config()


def test_filtering_in_memory_past_the_budget_is_a_422(api, org_id, monkeypatch):
    create(api, 'projects', org_id, name='alpha')
    r = _without_budget(api, monkeypatch, "/api/projects?filter=name=='alpha'")
    assert r.status == 422, r.json
    assert r.json['limit'] == 'workBudget' and 'filtering 1 projects in memory stopped after 0' in r.json['message']
    assert api.get("/api/projects?filter=name=='alpha'").json['totalElements'] == 1


def test_reading_a_whole_tenant_past_the_budget_is_a_422(api, org_id, monkeypatch):
    """A filter no index serves reads the tenant's records in rounds of 16 BatchGetItems
    (kernel/store/table.py ``_records``); the budget is checked between rounds, before the
    filtering, so a tenant too large for it stops while reading (here: one record a call)."""
    from chalicelib.kernel.store import table
    for n in range(table.INDEX_SHARDS + 1):
        create(api, 'projects', org_id, name=f'wave {n}')
    monkeypatch.setattr(table, 'BATCH_GET', 1)
    r = _without_budget(api, monkeypatch, "/api/projects?filter=name=='wave 3'")
    assert r.status == 422, r.json
    assert r.json['limit'] == 'workBudget' and 'records stopped after 16' in r.json['message'], r.json
    assert api.get("/api/projects?filter=name=='wave 3'").json['totalElements'] == 1


def test_a_batch_past_the_budget_reports_each_write_not_made(api, org_id, bucket, monkeypatch):  # noqa: F811
    project = create(api, 'projects', org_id)
    keep = api.post('/api/labels', {'organizationId': org_id, 'name': 'keep'}).json['id']
    fam = api.post('/api/document-families', {'projectId': project['id'], 'path': 'a.pdf', 'labels': [keep]}).json
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('REQUEST_BUDGET_SECONDS', '0')
    reset_config()
    get_config()   # read now: requests run with the stage's variables patched in
    r = api.post('/api/batch-update', {'projectId': project['id'], 'documentFamilyIds': [fam['id']],
                                       'labelUpdates': {'removedLabels': [keep]}, 'notes': {'newNotes': ['n']}})
    monkeypatch.delenv('REQUEST_BUDGET_SECONDS')
    reset_config()
    get_config()   # read now: requests run with the stage's variables patched in
    assert r.status == 200, r.json
    (entry,) = r.json['contentObjectUpdates']
    assert entry['success'] is False and entry['error'] == 'Unprocessable Entity' and 'work budget' in entry['reason']
    assert 'work budget' in r.json['warnings'][0]
    assert api.get(f"/api/document-families/{fam['id']}").json['labels'] == [keep]   # nothing written


def test_the_request_budget_is_capped_by_the_gateway_and_the_invocation():
    class Context:
        def __init__(self, ms):
            self.ms = ms

        def get_remaining_time_in_millis(self):
            return self.ms
    assert budget.for_request(None, 8) == 8
    assert budget.for_request(None, 60) == budget.GATEWAY_SECONDS - budget.SAFETY_SECONDS
    assert budget.for_request(Context(5_000), 8) == 4
    assert budget.for_request(Context(500), 8) == 0
    token = budget.start(0)
    try:
        with pytest.raises(budget.BudgetExceeded) as caught:
            budget.check('a loop')
        assert caught.value.status == 422 and caught.value.message.endswith(': a loop')
    finally:
        budget.end(token)
    token = budget.start(0, ceiling=5)   # waiting on other writers is held to the ceiling only
    try:
        assert budget.remaining() <= 0 and 4 < budget.remaining(ceiling=True) <= 5
    finally:
        budget.end(token)
    assert budget.remaining() == float('inf')
    budget.check('outside a unit of work: never raises')
