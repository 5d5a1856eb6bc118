"""POST /api/content-objects/{id}/validate: the content object's documentTaxonValidations rules
evaluated over its extracted data (docs/api/documents.md).

Each entry ``{taxonPath, taxonomyRef, validation: {name, ruleFormula, messageFormula?,
conditional?, conditionalFormula?, disabled?}}``: the group at ``taxonPath`` (slash-separated
keys into the data) is the input of ``ruleFormula`` (JSONata, core/expressions.py). A path in a
formula may start with ``../`` steps: each step goes one enclosing group up (a list of repeated
groups counts as one level with its group). JSONata itself cannot parse ``../``, so each such
path becomes a variable bound to the enclosing group. Walking above the top of the data, or any
other failure, is that entry's ``error`` ("evaluation error: ..."), never a 500.

A group that is a list (repeated groups) passes when every instance passes; the message and the
error are the first failing instance's. Disabled rules, and conditional rules whose
conditionalFormula is false, are left out of the answer.

Bounded work (docs/api/limits.md): the instances of every rule are counted before any rule runs,
and a request whose rules x instances exceed ``MAX_EVALUATIONS`` is a 422 naming the count;
every evaluation then counts against the request's time budget (core/budget.py), checked before
each one, so a request built to run for minutes ends with a 422 naming how far it got.
Validation writes nothing, so stopping is always clean.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from chalicelib.core import budget
from chalicelib.core.errors import ApiError, BadRequest
from chalicelib.core.expressions import ExpressionError, evaluate
from chalicelib.core.principal import Principal
from chalicelib.kernel import crud

_UP = re.compile(r'((?:\.\./)+)')
MAX_RULES = 500
MAX_EVALUATIONS = 20_000    # instance x rule evaluations one request may ask for


class _Progress:
    """How much of the request's validation is done: named when the budget runs out."""

    def __init__(self, total: int, rules: int) -> None:
        self.total, self.rules, self.done = total, rules, 0

    def what(self) -> str:
        return (f'validation of {self.total:,} instances x rules ({self.rules:,} rules) stopped after '
                f'{self.done:,} evaluations')

    def step(self) -> None:
        budget.check(self.what())
        self.done += 1


@lru_cache(maxsize=1024)   # a pure function of the formula: extraction asks once per table row
def _rewrite(formula: str) -> tuple[str, int]:
    """``../../x`` -> ``$__up2.x`` outside string literals; the deepest number of steps."""
    out: list[str] = []
    deepest = 0
    i, n = 0, len(formula)
    quote = None
    while i < n:
        ch = formula[i]
        if quote is not None:
            out.append(ch)
            if ch == '\\' and i + 1 < n:
                out.append(formula[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = None
            i += 1
            continue
        if ch in ('"', "'", '`'):
            quote = ch
            out.append(ch)
            i += 1
            continue
        match = _UP.match(formula, i)
        if match and (i == 0 or not (formula[i - 1].isalnum() or formula[i - 1] in '_.$')):
            steps = match.group(1).count('../')
            deepest = max(deepest, steps)
            out.append(f'$__up{steps}.')
            i = match.end()
            continue
        out.append(ch)
        i += 1
    return ''.join(out), deepest


def rewrite_up_paths(formula: str) -> str:
    """A formula's ``../`` paths as the variables ``run_formula`` binds (extraction checks the
    formulas of data definitions with it: features/extraction/taxons.py)."""
    return _rewrite(formula)[0]


def run_formula(formula: str, group: Any, chain: list[Any]) -> Any:
    """``formula`` over ``group`` with its enclosing groups ``chain`` (nearest first) for ``../``;
    ExpressionError on any failure. Extraction evaluates data definitions' validations with it."""
    return _run(formula, group, chain)


def _groups(data: Any, path: str) -> list[tuple[Any, list[Any]]]:
    """(group, its enclosing groups from the nearest up) for each instance at ``path``."""
    current: list[tuple[Any, list[Any]]] = [(data, [])]
    for part in [p for p in path.split('/') if p]:
        nxt: list[tuple[Any, list[Any]]] = []
        for value, chain in current:
            if isinstance(value, dict) and part in value:
                child = value[part]
                children = child if isinstance(child, list) else [child]
                nxt += [(c, [value, *chain]) for c in children]
        current = nxt
    return current


def _run(formula: str, group: Any, chain: list[Any]) -> Any:
    text, steps = _rewrite(formula)
    if steps > len(chain):
        raise ExpressionError(f'the path {"../" * steps} walks above the top of the data')
    bindings = {f'__up{k}': chain[k - 1] for k in range(1, len(chain) + 1) if k <= max(steps, 0)}
    return evaluate(text, group, bindings=bindings)


def _truthy(value: Any) -> bool:
    if isinstance(value, list):
        return any(_truthy(v) for v in value)
    return bool(value) and value is not None


def _validation(rule: dict[str, Any]) -> dict[str, Any]:
    return rule.get('validation') if isinstance(rule.get('validation'), dict) else {}


def _instances(rule: dict[str, Any], data: Any) -> list[tuple[Any, list[Any]]]:
    taxon_path = str(rule.get('taxonPath') or '')
    instances = _groups(data, taxon_path)
    if not instances:
        instances = [(None, [data])] if taxon_path else [(data, [])]
    return instances


def _entry(rule: dict[str, Any], data: Any, instances: list[tuple[Any, list[Any]]],
           progress: _Progress) -> dict[str, Any] | None:
    validation = _validation(rule)
    taxon_path = str(rule.get('taxonPath') or '')
    out: dict[str, Any] = {'taxonPath': taxon_path, 'name': str(validation.get('name') or taxon_path)}
    formula = validation.get('ruleFormula')
    if not isinstance(formula, str) or not formula.strip():
        out.update(passed=False, error='evaluation error: the rule has no ruleFormula')
        return out
    passed = True
    checked = 0
    for group, chain in instances:
        progress.step()
        try:
            if validation.get('conditional') and isinstance(validation.get('conditionalFormula'), str) \
                    and not _truthy(_run(validation['conditionalFormula'], group, chain)):
                continue
            checked += 1
            if _truthy(_run(formula, group, chain)):
                continue
            passed = False
            if isinstance(validation.get('messageFormula'), str) and validation['messageFormula'].strip():
                message = _run(validation['messageFormula'], group, chain)
                if message is not None:
                    out['message'] = str(message)
            elif validation.get('description'):
                out['message'] = str(validation['description'])
        except ExpressionError as exc:
            out.update(passed=False, error=str(exc))
            return out
        except budget.BudgetExceeded:   # ran out inside an evaluation: say how far validation got
            progress.done -= 1
            budget.check(progress.what())
            raise
        break_on_fail = not passed
        if break_on_fail:
            break
    if validation.get('conditional') and checked == 0:
        return None
    out['passed'] = passed
    return out


def validate(content_object_id: str, body: dict[str, Any], principal: Principal) -> list[dict[str, Any]]:
    stored = crud.load_visible('content-objects', content_object_id, principal)
    if 'data' in body:
        data = body['data']
    else:
        metadata = stored.data.get('metadata') or {}
        data = metadata.get('extractedData') if isinstance(metadata, dict) else None
    rules = stored.data.get('documentTaxonValidations') or []
    if not isinstance(rules, list):
        raise BadRequest('documentTaxonValidations of this content object is not a list')
    active = [r for r in rules[:MAX_RULES] if isinstance(r, dict) and _validation(r).get('disabled') is not True]
    planned = []
    total = 0
    for rule in active:
        budget.check(f'counting the instances of {len(active):,} validation rules')
        instances = _instances(rule, data)
        total += len(instances)
        if total > MAX_EVALUATIONS:
            break
        planned.append((rule, instances))
    if total > MAX_EVALUATIONS:
        raise ApiError(f'The request exceeds its work budget: validation of more than {MAX_EVALUATIONS:,} '
                       f'instances x rules ({len(active):,} rules; at most {MAX_EVALUATIONS:,} per request)',
                       status=422, limit='validationEvaluations', maxEvaluations=MAX_EVALUATIONS)
    progress = _Progress(total, len(active))
    return [e for e in (_entry(r, data, instances, progress) for r, instances in planned) if e is not None]
