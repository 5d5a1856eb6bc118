"""The execution engine's rules that are pure logic (features/work/engine.py): what an exception
raised by a step runner means, the time box of each step kind, statuses defined once."""
from __future__ import annotations

import pytest

from chalicelib.core import errors
from chalicelib.core.expressions import ExpressionError
from chalicelib.features.work import engine, statuses


@pytest.mark.parametrize(('exc', 'final', 'timed_out'), [
    (errors.ServiceUnavailable('busy'), False, False),
    (errors.DependencyUnavailable(), False, False),
    (errors.TooManyRequests('slow down'), False, False),
    (errors.ApiError('upstream timed out', status=504), False, True),
    (errors.ApiError('request timeout', status=408), False, True),
    (errors.ApiError('bad gateway', status=502), False, False),
    (errors.BadRequest('not a PDF'), True, False),
    (errors.NotFound('gone'), True, False),
    (errors.Forbidden('no'), True, False),
    (errors.Conflict('locked'), True, False),
    (errors.PayloadTooLarge('too big'), True, False),
    (errors.ApiError('a limit', status=422), True, False),
    (ExpressionError('$error'), False, False),
    (engine.AttemptFailed('mine', final=True), True, False),
    (RuntimeError('a bug'), False, False),
])
def test_what_an_exception_of_a_runner_means(exc, final, timed_out):
    failure = engine.failure_of(exc)
    assert (failure.final, failure.timed_out) == (final, timed_out)
    assert failure.reason


def test_each_step_kind_has_its_time_box():
    policy = {'timeoutSeconds': 300}
    assert engine.attempt_seconds({'stepType': 'SCRIPT'}, policy) == engine.SCRIPT_MAX_SECONDS
    assert engine.attempt_seconds({'stepType': 'BRIDGE_CALL'}, policy) == engine.MAX_ATTEMPT_SECONDS
    assert engine.attempt_seconds({'stepType': 'BRIDGE_CALL'}, {'timeoutSeconds': 5}) == 5
    assert engine.attempt_seconds({'stepType': 'AGENT'}, policy) == engine.START_SECONDS
    assert engine.attempt_seconds({'stepType': 'NOPE'}, policy) == engine.START_SECONDS


def test_execution_statuses_are_the_contracts_and_defined_once():
    from chalicelib.kernel.fields import ENUMS  # as installed from features/work/declarations.py
    assert statuses.ALL == ENUMS['ExecutionStatus']
    assert statuses.ALL == ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')   # the SDK's: no TIMED_OUT
    # a record stored TIMED_OUT before issue 46 (answered FAILED) has ended all the same
    assert statuses.TERMINAL == {'SUCCEEDED', 'FAILED', 'CANCELLED'} | statuses.STORED_ONLY
    assert statuses.FAILURES == {'FAILED'} | statuses.STORED_ONLY
    assert statuses.FAILURES < statuses.TERMINAL


def test_no_other_module_spells_the_execution_statuses():
    """Issue 40: the terminal statuses were defined in five modules and drifted."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / 'chalicelib'
    spelled = sorted(str(p.relative_to(root)) for p in root.rglob('*.py')
                     if "'TIMED_OUT'" in p.read_text() or '"TIMED_OUT"' in p.read_text())
    assert spelled == ['features/work/declarations.py']   # ExecutionEndReason (and the retired status)


def test_a_missing_regex_engine_is_the_servers_fault_not_the_clients_pattern(monkeypatch):
    """With RE2 not importable (a package built without it, docs/operations/deploy.md), writing a
    regex rule must not answer a 400 blaming the client's pattern: the ImportError goes on to the
    one error mapping (a 500 with no stack trace), where the operators see it."""
    import builtins

    import pytest

    from chalicelib.features.extraction import taxons
    real = builtins.__import__

    def no_re2(name, *args, **kwargs):
        if name == 're2':
            raise ImportError("No module named 're2'")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, '__import__', no_re2)
    rule = [{'name': 'g', 'group': True, 'children': [{'name': 'v', 'rules': [{'type': 'regex', 'pattern': 'a(b)'}]}]}]
    with pytest.raises(ImportError):
        taxons.check(rule)
    table = [{'name': 'g', 'group': True, 'children': [
        {'name': 'rows', 'group': True, 'cardinality': 'many', 'rules': [{'type': 'table', 'stopAt': 'Total'}],
         'children': [{'name': 'c', 'rules': [{'type': 'column', 'header': 'C'}]}]}]}]
    with pytest.raises(ImportError):
        taxons.check(table)
