"""AWS faults in the exact wire shape, injected into the app's own botocore clients.

``inject(rule)`` registers a ``before-call`` handler on the DynamoDB clients the store uses (the
pynamodb connection's client and the boto3 Table resource's client): for every call, ``rule(op,
params)`` returns None (the call goes on to moto) or an error to answer instead, as botocore
would have parsed it from AWS (``error('ThrottlingException')``,
``cancelled('ThrottlingError', ...)``). Nothing reaches moto for an injected call, so nothing is
written, as on AWS. Botocore's own retries do not run for an injected answer: each injected
error is one attempt as the store sees it after botocore gave up. A rule may also return an
exception (``timeout()``: the answer never came), which the call raises as botocore would.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Rule = Callable[[str, dict[str, Any]], dict[str, Any] | Exception | None]

STATUS = {'ThrottlingException': 400, 'ProvisionedThroughputExceededException': 400,
          'TransactionCanceledException': 400, 'ValidationException': 400,
          'InternalServerError': 500, 'ServiceUnavailable': 503, 'TooManyRequestsException': 429}


class _Http:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}
        self.content = b''
        self.raw = None


def error(code: str, message: str = 'injected') -> dict[str, Any]:
    return {'Error': {'Code': code, 'Message': message},
            'ResponseMetadata': {'HTTPStatusCode': STATUS.get(code, 400), 'HTTPHeaders': {}}}


def timeout() -> Exception:
    """What botocore raises when the answer did not come in time (after its own retries)."""
    from botocore.exceptions import ReadTimeoutError
    return ReadTimeoutError(endpoint_url='http://127.0.0.1:1/')


def cancelled(*codes: str) -> dict[str, Any]:
    """A TransactionCanceledException with one reason per operation (``'None'`` for those that
    were fine)."""
    answer = error('TransactionCanceledException', 'Transaction cancelled, please refer cancellation reasons')
    answer['CancellationReasons'] = [{'Code': c, **({} if c == 'None' else {'Message': 'injected'})} for c in codes]
    return answer


def _api_params(request: dict[str, Any]) -> dict[str, Any]:
    """The operation's parameters from botocore's serialized request (JSON protocols: the body;
    REST: the URL path as ``_path``)."""
    body = request.get('body')
    out: dict[str, Any] = {'_path': request.get('url_path', '')}
    if isinstance(body, bytes | str) and body:
        try:
            loaded = json.loads(body)
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            out.update(loaded)
    return out


def _clients() -> list[Any]:
    from chalicelib.kernel.store import model
    return [model.configure()._get_connection().connection.client, model.boto3_table().meta.client]


@contextmanager
def inject(rule: Rule, clients: list[Any] | None = None, service: str = 'dynamodb') -> Iterator[list[str]]:
    """Answer calls ``rule`` picks with its error; yields the names of the calls it answered."""
    answered: list[str] = []

    def handler(model, params, **_):
        answer = rule(model.name, _api_params(params))
        if answer is None:
            return None
        answered.append(model.name)
        if isinstance(answer, Exception):
            raise answer
        return _Http(answer['ResponseMetadata']['HTTPStatusCode']), answer

    targets = clients if clients is not None else _clients()
    for c in targets:
        c.meta.events.register_first(f'before-call.{service}.*', handler)
    try:
        yield answered
    finally:
        for c in targets:
            c.meta.events.unregister(f'before-call.{service}.*', handler)


def transaction_size(params: dict[str, Any]) -> int:
    return len(params.get('TransactItems') or [])


def lands_then_lost(ops: tuple[str, ...], *, when=lambda params: True) -> Rule:
    """A rule: the first call of ``ops`` that ``when`` accepts is carried out (sent to moto by a
    client of its own), then every such call answers ``timeout()``: a write that landed while
    its answer, and every retry's, was lost (the store then gives up: StoreUnavailable)."""
    import boto3
    state = {'applied': False}

    def rule(op: str, params: dict[str, Any]) -> Exception | None:
        if op not in ops or not when(params):
            return None
        if not state['applied']:
            state['applied'] = True
            call = {k: v for k, v in params.items() if k != '_path'}
            method = ''.join('_' + c.lower() if c.isupper() else c for c in op).lstrip('_')
            getattr(boto3.client('dynamodb', region_name='us-east-1'), method)(**call)
        return timeout()
    return rule
