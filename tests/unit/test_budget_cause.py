"""A budget spent while AWS was slow or failing is the platform's cause: 503 with Retry-After,
not the 422 that blames the input (core/budget.py, kernel/store/endpoints.py; docs/api/limits.md)."""
from __future__ import annotations

import time

import pytest

from chalicelib.core import budget
from chalicelib.kernel.store import endpoints


class _Http:
    def __init__(self, status_code):
        self.status_code = status_code


def _spent():
    token = budget.start(0.01)
    time.sleep(0.02)
    return token


def test_a_budget_spent_on_the_input_is_a_422_naming_the_limit():
    token = _spent()
    try:
        with pytest.raises(budget.BudgetExceeded) as caught:
            budget.check('validation of 100 instances')
        assert caught.value.status == 422
    finally:
        budget.end(token)


@pytest.mark.parametrize('call', [
    {'caught_exception': TimeoutError('read timeout')},
    {'response': (_Http(400), {'Error': {'Code': 'ThrottlingException'}})},
    {'response': (_Http(500), {'Error': {'Code': 'InternalServerError'}})},
])
def test_a_budget_spent_after_a_slow_or_failing_aws_call_is_a_503_with_retry_after(call):
    token = _spent()
    try:
        assert endpoints.note_trouble(**call) is None          # botocore's own retry decision stands
        with pytest.raises(budget.BudgetSpentWaiting) as caught:
            budget.check('batch update stopped before f1')
        assert caught.value.status == 503 and caught.value.headers['Retry-After']
    finally:
        budget.end(token)


def test_an_answered_call_notes_nothing_and_a_new_unit_starts_untroubled():
    token = _spent()
    try:
        endpoints.note_trouble(response=(_Http(200), {}))
        endpoints.note_trouble(response=(_Http(400), {'Error': {'Code': 'ConditionalCheckFailedException'}}))
        with pytest.raises(budget.BudgetExceeded):
            budget.check('x')
        endpoints.note_trouble(caught_exception=TimeoutError())
    finally:
        budget.end(token)
    token = _spent()
    try:
        with pytest.raises(budget.BudgetExceeded):
            budget.check('y')                                   # the earlier unit's trouble is not this one's
    finally:
        budget.end(token)


def test_every_aws_client_the_platform_builds_notes_its_slow_or_failing_calls():
    """Not only DynamoDB: a batch update can run out of time on a slow S3 answer (the chaos run
    found it). A watched client to a closed loopback port fails; the unit's budget knows."""
    import boto3
    from botocore.config import Config
    s3 = endpoints.watched(boto3.client('s3', region_name='us-east-1', endpoint_url='http://127.0.0.1:9',
                                        aws_access_key_id='x', aws_secret_access_key='x',
                                        config=Config(connect_timeout=1, retries={'max_attempts': 1})))
    token = _spent()
    try:
        with pytest.raises(Exception):  # noqa: B017 - the connection is refused: which error is botocore's business
            s3.head_object(Bucket='b', Key='k')
        with pytest.raises(budget.BudgetSpentWaiting):
            budget.check('batch update stopped before f1')
    finally:
        budget.end(token)
