"""POST /api/v2/internal/activities: the service-token route."""
from __future__ import annotations

import uuid

import pytest

from tests.conftest import ADMIN_KEY, make_org

TOKEN = 'svc-' + uuid.uuid4().hex * 2
PATH = '/api/v2/internal/activities'


@pytest.fixture
def service(monkeypatch):
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('INTERNAL_SERVICE_TOKEN', TOKEN)
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests
    yield {'x-service-token': TOKEN}
    monkeypatch.delenv('INTERNAL_SERVICE_TOKEN')
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests


@pytest.fixture
def plan(api, org_id):
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    plan = api.post('/api/activity-plans', {'projectId': project['id'], 'name': 'plan'}).json
    return project, plan


def test_the_route_is_marked_service_and_refuses_user_credentials(api, service, plan):
    from chalicelib.kernel.http import policy
    assert policy.of(PATH) == 'service'
    project, activity_plan = plan
    body = {'projectId': project['id'], 'activityPlanId': activity_plan['id']}
    for headers in ({}, {'x-api-key': ADMIN_KEY}, {'x-service-token': TOKEN + 'x'},
                    {'x-service-token': TOKEN[:-1]}, {'authorization': 'Bearer wrong'}):
        r = api.post(PATH, body, key=None, headers=headers)
        assert r.status == 401, headers
        assert 'www-authenticate' in r.headers and 'x-ratelimit-limit' in r.headers
    assert api.post(PATH, body, key=None, headers={'authorization': f'Bearer {TOKEN}'}).status == 202


def test_refused_when_no_service_token_is_configured(api, plan):
    project, activity_plan = plan
    r = api.post(PATH, {'projectId': project['id'], 'activityPlanId': activity_plan['id']}, key=None,
                 headers={'x-service-token': ''})
    assert r.status == 401


def test_starts_a_pending_activity_in_the_projects_organization(api, org_id, service, plan):
    project, activity_plan = plan
    elsewhere = make_org(api)
    r = api.post(PATH, {'projectId': project['id'], 'activityPlanId': activity_plan['id'], 'name': 'run',
                        'organizationId': elsewhere['id'], 'status': 'COMPLETED', 'metadata': {'k': 1}},
                 key=None, headers=service)
    assert r.status == 202, r.json
    activity = r.json
    assert activity['status'] == 'PENDING' and activity['name'] == 'run' and activity['metadata'] == {'k': 1}
    assert activity['organizationId'] == org_id                     # derived from the project
    assert activity['projectId'] == project['id'] and activity['activityPlanId'] == activity_plan['id']
    assert api.get(f"/api/activities/{activity['id']}").json == activity


def test_the_plan_must_be_bound_to_the_project(api, org_id, service, plan):
    project, activity_plan = plan
    other_project = api.post('/api/projects', {'name': 'q', 'organizationId': org_id}).json
    r = api.post(PATH, {'projectId': other_project['id'], 'activityPlanId': activity_plan['id']},
                 key=None, headers=service)
    assert r.status == 400 and 'not bound' in r.json['message']
    for body in ({'projectId': project['id']}, {'activityPlanId': activity_plan['id']},
                 {'projectId': str(uuid.uuid4()), 'activityPlanId': activity_plan['id']},
                 {'projectId': project['id'], 'activityPlanId': str(uuid.uuid4())},
                 {'projectId': 'nope', 'activityPlanId': activity_plan['id']}):
        assert api.post(PATH, body, key=None, headers=service).status == 400, body
    assert api.post(PATH, key=None, headers=service, raw='[]').status == 400
    assert api.get("/api/activities").json['totalElements'] == 0


def test_the_service_caller_is_not_rate_limited(api, service, plan, monkeypatch):
    from chalicelib.core.config import get_config, reset_config
    monkeypatch.setenv('RATE_LIMIT_PER_MINUTE', '3')
    monkeypatch.setenv('RATE_LIMIT_BURST_PER_SECOND', '2')
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests
    project, activity_plan = plan
    for _ in range(5):
        r = api.post(PATH, {'projectId': project['id'], 'activityPlanId': activity_plan['id']},
                     key=None, headers=service)
        assert r.status == 202 and r.headers['x-ratelimit-limit'] == '3'
