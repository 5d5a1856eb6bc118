"""The per-organization in-flight cap on the worker's handler (features/work/inflight.py,
features/work/worker.py ``handle_admitted``; docs/operations/worker.md "Fairness between
organizations"): with cap K, a message of an organization that has K messages in flight is not
worked but sent again, delayed, while another organization's message is worked; a crashed
holder's slot frees when it expires. Driven through the HTTP routes and the real queue handler
(tests/work_support.py: receive, ``activity_start_worker``, delete), as `make run` and Lambda run it."""
from __future__ import annotations

import json
import time
import uuid

import pytest

CAP = 2


@pytest.fixture
def capped(monkeypatch):
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('ORG_INFLIGHT_CAP', str(CAP))
    monkeypatch.setenv('ORG_INFLIGHT_DELAY_SECONDS', '1')
    reset_config()
    get_config()   # read now: the test client's requests run with the stage's environment
    yield
    monkeypatch.delenv('ORG_INFLIGHT_CAP')
    monkeypatch.delenv('ORG_INFLIGHT_DELAY_SECONDS')
    reset_config()
    get_config()


def _start(api, org: str) -> dict:
    project = api.post('/api/projects', {'name': 'capped', 'organizationId': org}).json
    plan = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'plan', 'steps': [
        {'name': 'double', 'stepType': 'SCRIPT', 'options': {'expression': '$inputs.amount * 2'}}]}).json
    r = api.post(f"/api/activity-plans/{plan['id']}/start", {'projectId': project['id'], 'inputs': {'amount': 21}})
    assert r.status == 202, r.json
    return r.json


def test_a_message_over_its_organizations_cap_waits_while_another_organizations_is_worked(api, org_id, work,
                                                                                          capped):
    from chalicelib.features.work import inflight
    other = api.post('/api/organizations', {'name': 'B', 'slug': f'b-{uuid.uuid4().hex[:8]}'}).json['id']
    a, b = _start(api, org_id), _start(api, other)
    # A has CAP messages in flight in other invocations, which then crash: they never give their
    # slots back; the slots expire 2 s from now (an invocation's end plus the margin, on AWS)
    for n in range(CAP):
        assert inflight.take('activity', org_id, f'crashed-{n}', cap=CAP, seconds=2.0) is not None
    assert inflight.take('activity', org_id, 'one-more', cap=CAP, seconds=2.0) is None
    seen: list[tuple[str, dict]] = []
    handler = work.queue.handler

    def spying(event, context):
        seen.extend((rec['attributes'].get('MessageGroupId'), json.loads(rec['body'])) for rec in event['Records'])
        return handler(event, context)
    work.queue.handler = spying
    assert work.queue.poll_once(wait_seconds=0)['received'] == 2     # A's start and B's, one batch
    assert api.get(f"/api/activities/{b['id']}").json['status'] != 'PENDING'   # B's was worked
    assert api.get(f"/api/activities/{a['id']}").json['status'] == 'PENDING'   # A's was not
    assert work.depth() >= 2     # A's start sent again (delayed), B's step's attempt
    assert work.depth(work.dlq_url) == 0
    time.sleep(2.1)              # the crashed holders' slots expire
    work.drain(seconds=15)
    assert api.get(f"/api/activities/{a['id']}").json['status'] == 'COMPLETED'
    assert api.get(f"/api/activities/{b['id']}").json['status'] == 'COMPLETED'
    again = [body for group, body in seen if group == org_id and body.get('type') == 'activity.start']
    assert again[0].get('deferredOverCap') is None and again[1]['deferredOverCap'] == 1, again
    assert all(group in (org_id, other) for group, _ in seen), seen   # re-sent in its own group
    assert inflight.held('activity', org_id, CAP) == {}               # every slot given back


def test_slots_are_taken_once_given_back_reclaimed_by_a_redelivery_and_free_after_expiry(api):
    from chalicelib.features.work import inflight
    org = str(uuid.uuid4())
    first = inflight.take('ocr', org, 'm1', cap=2, seconds=30)
    second = inflight.take('ocr', org, 'm2', cap=2, seconds=30)
    assert {first, second} == {0, 1}
    assert inflight.take('ocr', org, 'm3', cap=2, seconds=30) is None
    assert inflight.take('activity', org, 'm3', cap=2, seconds=30) is not None   # each queue its own slots
    assert inflight.take('ocr', org, 'm1', cap=2, seconds=30) == first            # m1 delivered again
    inflight.release('ocr', org, second, 'someone-else')                          # not its slot: kept
    assert inflight.take('ocr', org, 'm3', cap=2, seconds=30) is None
    inflight.release('ocr', org, second, 'm2')
    assert inflight.take('ocr', org, 'm3', cap=2, seconds=0.3) == second
    time.sleep(0.4)                                                               # m3 crashed: expired
    assert inflight.held('ocr', org, 2) == {first: 'm1'}
    assert inflight.take('ocr', org, 'm4', cap=2, seconds=30) == second
