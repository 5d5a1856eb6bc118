"""Activity plan steps (the contract's PipelineStep) and their ExecutionPolicy: shapes, checks
and the arithmetic of retries. Pure data and functions (``SHAPES`` at the end are installed at cold
start from the work feature's declarations.py into kernel/shapes.py): nothing heavy here.

A step is ``{name, stepType, ref, conditional, options, executionPolicy}``:

  TASK         creates a task of the activity (``options.title``, ``options.statusSlug``,
               ``options.assigneeId``, ``options.teamId``, ``options.description``)
  SCRIPT       an execution evaluating ``options.expression`` (JSONata) over the start inputs
  BRIDGE_CALL  an execution calling ``options.bridge`` (id or slug) / ``options.endpointName``
               with ``options.query`` and ``options.body``
  AGENT        an execution waiting for the agent ``ref`` (an agent's slug or id)
  EXTRACT      an execution running the data definition ``options.dataDefinition`` over the
               document family into the data store ``options.dataStore`` (ids or slugs), with
               its review options (docs/api/extraction.md "The EXTRACT step")

``conditional`` (optional) is a JSONata expression over the start inputs: a step whose
condition is falsy when the activity starts is not materialised.

An execution's steps (docs/api/sdk-compatibility.md "Executions: steps"): its ``step`` (the one it
runs) is a ``RunStep``, a plan's step or a stage's (``PARSE``, parse_stage.py), checked as such;
its ``pipeline.steps`` are answered as ``ExecutionStep``s, the platform SDK's form: ``stepType``
is one of the SDK's two values (``ACTION``: every kind the platform runs is an action, none is a
model from a model store) and ``kind`` beside it is the step's own type (``PARSE``, ``SCRIPT``,
...). A write takes that form back (``stepType`` from ``kind``): an execution is stored, and run,
with the step's own type.
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core import expressions
from chalicelib.kernel import shapes as installed
from chalicelib.kernel.shapes import Shape, ref

STEP_TYPES = ('TASK', 'SCRIPT', 'BRIDGE_CALL', 'AGENT', 'EXTRACT')
EXECUTION_STEP_TYPES = ('SCRIPT', 'BRIDGE_CALL', 'AGENT', 'EXTRACT')
STAGE_STEP_TYPES = ('PARSE',)   # the stages before the pipelines (parse_stage.py): no plan holds one
STEP_KINDS = (*STEP_TYPES, *STAGE_STEP_TYPES)   # the step types an execution's ``step`` may have
SDK_STEP_TYPES = ('ACTION', 'MODEL')   # the platform SDK's ExecutionStep.stepType (kodexa.model.objects)
SHOWN_STEP_TYPE = 'ACTION'
BACKOFF_STRATEGIES = ('FIXED', 'EXPONENTIAL')
ON_EXHAUSTED = ('FAIL', 'SKIP', 'CONTINUE')
MAX_STEPS = 25            # one activity's materialisation is one transaction (100 items)
MAX_ATTEMPTS = 10
MAX_DELAY_SECONDS = 900   # SQS DelaySeconds ceiling
MAX_TIMEOUT_SECONDS = 300
DEFAULT_POLICY = {'maxAttempts': 1, 'backoffStrategy': 'FIXED', 'backoffBaseSeconds': 0,
                  'timeoutSeconds': 30, 'onExhausted': 'FAIL'}
STEP_KEYS = {'name', 'stepType', 'ref', 'conditional', 'options', 'executionPolicy'}
OPTION_KEYS: dict[str, set[str] | None] = {
    'TASK': {'title', 'statusSlug', 'assigneeId', 'teamId', 'description'},
    'SCRIPT': {'expression'},
    'BRIDGE_CALL': {'bridge', 'endpointName', 'query', 'body'},
    'AGENT': None,    # free-form: handed to the agent runtime
    'EXTRACT': None,   # the ExtractOptions shape (features/extraction/shapes.py) decides
}

POLICY_SCHEMA = {
    'type': 'object', 'additionalProperties': False,
    'description': 'How a step runs: attempts, the delay between them (SQS DelaySeconds, at most '
                   '900 s: FIXED waits backoffBaseSeconds, EXPONENTIAL backoffBaseSeconds * 2^(attempt-1)), '
                   'the deadline of one attempt and what exhaustion does (FAIL: the activity fails; '
                   'SKIP: the execution is CANCELLED with a warning; CONTINUE: the execution is FAILED, '
                   'the activity goes on).',
    'properties': {
        'maxAttempts': {'type': 'integer', 'minimum': 1, 'maximum': MAX_ATTEMPTS, 'default': 1},
        'backoffStrategy': {'type': 'string', 'enum': list(BACKOFF_STRATEGIES), 'default': 'FIXED'},
        'backoffBaseSeconds': {'type': 'integer', 'minimum': 0, 'maximum': MAX_DELAY_SECONDS, 'default': 0},
        'timeoutSeconds': {'type': 'integer', 'minimum': 1, 'maximum': MAX_TIMEOUT_SECONDS, 'default': 30},
        'onExhausted': {'type': 'string', 'enum': list(ON_EXHAUSTED), 'default': 'FAIL'},
    }}

STEP_SCHEMA = {
    'type': 'object', 'required': ['name', 'stepType'], 'additionalProperties': False,
    'description': 'One step of an activity plan. TASK creates a task (options.title, statusSlug, '
                   'assigneeId, teamId, description); SCRIPT evaluates options.expression (JSONata, '
                   '$inputs = the start inputs); BRIDGE_CALL calls options.bridge (id or slug) / '
                   'options.endpointName with options.query and options.body through the egress fence; '
                   'AGENT waits for the agent named by ref (slug or id); EXTRACT runs options.dataDefinition over the '
                   'document family into options.dataStore (options: the ExtractOptions shape, '
                   'docs/api/extraction.md). conditional: a JSONata expression over the inputs; a falsy value skips '
                   'the step.',
    'properties': {
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 200},
        'stepType': {'type': 'string', 'enum': list(STEP_TYPES)},
        'ref': {'type': 'string'},
        'conditional': {'type': 'string'},
        'options': {'type': 'object', 'additionalProperties': True},
        'executionPolicy': POLICY_SCHEMA,
    }}

EXAMPLE_STEPS = (
    {'name': 'review', 'stepType': 'TASK', 'options': {'title': 'Review the document'}},
    {'name': 'score', 'stepType': 'SCRIPT', 'options': {'expression': '$inputs.amount * 2'},
     'executionPolicy': {'maxAttempts': 3, 'backoffStrategy': 'EXPONENTIAL', 'backoffBaseSeconds': 5,
                         'timeoutSeconds': 10, 'onExhausted': 'CONTINUE'}},
)


def _int(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_policy(policy: Any, where: str) -> dict[str, Any]:
    """The policy with its defaults; ValueError naming the step and field otherwise."""
    if policy is None:
        return dict(DEFAULT_POLICY)
    if not isinstance(policy, dict):
        raise ValueError(f'{where}: executionPolicy must be an object')
    unknown = sorted(set(policy) - set(DEFAULT_POLICY))
    if unknown:
        raise ValueError(f'{where}: executionPolicy.{unknown[0]} is not a policy field')
    out = {**DEFAULT_POLICY, **policy}
    if not _int(out['maxAttempts'], 1, MAX_ATTEMPTS):
        raise ValueError(f'{where}: executionPolicy.maxAttempts must be an integer 1-{MAX_ATTEMPTS}')
    if out['backoffStrategy'] not in BACKOFF_STRATEGIES:
        raise ValueError(f'{where}: executionPolicy.backoffStrategy must be one of {", ".join(BACKOFF_STRATEGIES)}')
    if not _int(out['backoffBaseSeconds'], 0, MAX_DELAY_SECONDS):
        raise ValueError(f'{where}: executionPolicy.backoffBaseSeconds must be an integer 0-{MAX_DELAY_SECONDS}')
    if not _int(out['timeoutSeconds'], 1, MAX_TIMEOUT_SECONDS):
        raise ValueError(f'{where}: executionPolicy.timeoutSeconds must be an integer 1-{MAX_TIMEOUT_SECONDS}')
    if out['onExhausted'] not in ON_EXHAUSTED:
        raise ValueError(f'{where}: executionPolicy.onExhausted must be one of {", ".join(ON_EXHAUSTED)}')
    return policy   # stored as sent: defaults apply when run (policy_of)


def policy_of(step: dict[str, Any]) -> dict[str, Any]:
    return {**DEFAULT_POLICY, **(step.get('executionPolicy') or {})}


def backoff_seconds(policy: dict[str, Any], failed_attempt: int) -> int:
    """Delay before the attempt after ``failed_attempt`` (1-based), capped at SQS's 900 s."""
    base = int(policy['backoffBaseSeconds'])
    delay = base if policy['backoffStrategy'] == 'FIXED' else base * 2 ** (failed_attempt - 1)
    return min(delay, MAX_DELAY_SECONDS)


def _string(options: dict[str, Any], key: str, where: str, *, required: bool = False) -> None:
    value = options.get(key)
    if value is None:
        if required:
            raise ValueError(f'{where}: options.{key} is required')
        return
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f'{where}: options.{key} must be a non-empty string')


def _uuid(options: dict[str, Any], key: str, where: str) -> None:
    value = options.get(key)
    if value is None:
        return
    try:
        uuid.UUID(str(value))
    except ValueError:
        raise ValueError(f'{where}: options.{key} must be an id (a UUID)') from None


def _extract_options(options: dict[str, Any], where: str) -> None:
    """The extraction feature's one shape of an extraction run's options (``ExtractOptions``,
    features/extraction/shapes.py), read from the installed shapes: checked there, once."""
    shape = installed.SHAPES.get('ExtractOptions')
    if shape is None:
        raise ValueError(f'{where}: EXTRACT steps are not available (the extraction feature is not installed)')
    try:
        shape.check(options)
    except ValueError as exc:
        raise ValueError(f'{where}: {exc}') from None


def _expression(expression: str, where: str) -> None:
    """An expression that can never run (a syntax error, a regex RE2 refuses) is refused at
    write (core/expressions.py ``check``; docs/api/limits.md "Expressions")."""
    try:
        expressions.check(expression)
    except expressions.ExpressionError as exc:
        raise ValueError(f'{where} is not an expression that can run: {exc.reason}') from None


def check_step(step: Any) -> dict[str, Any]:
    """One step as stored; ValueError naming the step and the field otherwise."""
    if not isinstance(step, dict):
        raise ValueError('a step must be an object')
    name = step.get('name')
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValueError('step name is required (a non-empty string of at most 200 characters)')
    where = f"step '{name}'"
    unknown = sorted(set(step) - STEP_KEYS)
    if unknown:
        raise ValueError(f'{where}: {unknown[0]} is not a step field')
    kind = step.get('stepType')
    if kind not in STEP_TYPES:
        raise ValueError(f'{where}: stepType must be one of {", ".join(STEP_TYPES)}')
    for key in ('ref', 'conditional'):
        if step.get(key) is not None and not isinstance(step[key], str):
            raise ValueError(f'{where}: {key} must be a string')
    if step.get('conditional'):
        _expression(step['conditional'], f'{where}: conditional')
    options = step.get('options') if step.get('options') is not None else {}
    if not isinstance(options, dict):
        raise ValueError(f'{where}: options must be an object')
    if OPTION_KEYS[kind] is not None:
        unknown = sorted(set(options) - OPTION_KEYS[kind])
        if unknown:
            raise ValueError(f'{where}: options.{unknown[0]} is not an option of a {kind} step')
    if kind == 'TASK':
        for key in ('title', 'statusSlug', 'description'):
            _string(options, key, where)
        for key in ('assigneeId', 'teamId'):
            _uuid(options, key, where)
    elif kind == 'SCRIPT':
        _string(options, 'expression', where, required=True)
        _expression(options['expression'], f'{where}: options.expression')
    elif kind == 'BRIDGE_CALL':
        _string(options, 'bridge', where, required=True)
        _string(options, 'endpointName', where)
        query = options.get('query')
        if query is not None and (not isinstance(query, dict) or any(
                not isinstance(v, (str, int, float, bool, list)) for v in query.values())):
            raise ValueError(f'{where}: options.query must be an object of scalars or lists')
    elif kind == 'AGENT':
        if not isinstance(step.get('ref'), str) or not step['ref'].strip():
            raise ValueError(f"{where}: ref (the agent's slug or id) is required")
    elif kind == 'EXTRACT':
        _extract_options(options, where)
    check_policy(step.get('executionPolicy'), where)
    return step


def check_run_step(step: Any) -> dict[str, Any]:
    """An execution's ``step``: a plan's step, checked as one (docs/api/lifecycle.md), or a stage's
    (PARSE) by the fields every step has."""
    if isinstance(step, dict) and step.get('stepType') in STAGE_STEP_TYPES:
        name = step.get('name')
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise ValueError('step name is required (a non-empty string of at most 200 characters)')
        unknown = sorted(set(step) - STEP_KEYS)
        if unknown:
            raise ValueError(f"step '{name}': {unknown[0]} is not a step field")
        for key in ('ref', 'conditional'):
            if step.get(key) is not None and not isinstance(step[key], str):
                raise ValueError(f"step '{name}': {key} must be a string")
        if step.get('options') is not None and not isinstance(step['options'], dict):
            raise ValueError(f"step '{name}': options must be an object")
        check_policy(step.get('executionPolicy'), f"step '{name}'")
        return step
    return check_step(step)


def shown_step(step: Any) -> Any:
    """One of an execution's ``pipeline.steps`` as answered: ``stepType`` the SDK's, ``kind`` its own."""
    if not isinstance(step, dict):
        return step
    kind = step.get('stepType')
    if kind is None or kind in SDK_STEP_TYPES:   # written so by a client: shown as written
        return step
    return {**step, 'stepType': SHOWN_STEP_TYPE, 'kind': kind}


def stored_step(step: Any) -> dict[str, Any]:
    """One of an execution's ``pipeline.steps`` as written (the answered form accepted): ``kind``
    becomes the stored ``stepType``; ValueError when the two disagree."""
    if not isinstance(step, dict):
        raise ValueError('pipeline.steps: each step must be an object')
    if 'kind' not in step:
        return step
    kind, shown = step['kind'], step.get('stepType')
    if not isinstance(kind, str) or not kind.strip() or len(kind) > 100:
        raise ValueError('pipeline.steps: kind must be a step type (a non-empty string)')
    if shown is not None and shown not in SDK_STEP_TYPES and shown != kind:
        raise ValueError(f'pipeline.steps: stepType {str(shown)[:50]!r} and kind {kind!r} disagree')
    return {**{k: v for k, v in step.items() if k != 'kind'}, 'stepType': kind}


def _pipeline(value: Any, one) -> Any:
    if not isinstance(value, dict) or not isinstance(value.get('steps'), list):
        return value
    return {**value, 'steps': [one(step) for step in value['steps']]}


def check_pipeline(value: Any) -> dict[str, Any]:
    if not isinstance(value.get('steps', []), list):
        raise ValueError('pipeline.steps must be an array')
    return _pipeline(value, stored_step)


def check_steps(steps: list[Any]) -> None:
    if len(steps) > MAX_STEPS:
        raise ValueError(f'a plan has at most {MAX_STEPS} steps')
    seen: set[str] = set()
    for step in steps:
        if step['name'] in seen:
            raise ValueError(f"step '{step['name']}': step names must be unique in a plan")
        seen.add(step['name'])


EXECUTION_STEP_SCHEMA = {
    'type': 'object', 'additionalProperties': True,
    'description': "One step of an execution's pipeline, as the platform SDK reads it (kodexa ExecutionStep; "
                   'docs/api/sdk-compatibility.md "Executions: steps"): stepType is the SDK\'s (ACTION for '
                   'every step the platform runs), kind the step\'s own type (a PipelineStep stepType, PARSE for '
                   'the parse stage, or a kind an engine runner adds). A write may send either form: kind, when '
                   'given, is the type stored.',
    'properties': {
        'name': {'type': 'string'},
        'stepType': ref('ExecutionStepType'),
        'kind': {'type': 'string', 'minLength': 1, 'maxLength': 100,
                 'description': 'the step\'s own type: ' + ', '.join(STEP_KINDS) + ', ...'},
        'ref': {'type': 'string'},
        'conditional': {'type': 'string'},
        'options': {'type': 'object', 'additionalProperties': True},
        'executionPolicy': ref('ExecutionPolicy'),
    }}

# The named shapes of a plan's steps (docs/api/work.md) and of an execution's, installed by the work
# feature's declarations.
SHAPES = (
    Shape(
        name='ExecutionPolicy',
        schema=POLICY_SCHEMA,
        examples=(DEFAULT_POLICY,),
        check=lambda value: check_policy(value, 'executionPolicy') and value,
    ),
    Shape(
        name='PipelineStep',
        schema={**STEP_SCHEMA, 'properties': {**STEP_SCHEMA['properties'], 'executionPolicy': ref('ExecutionPolicy')}},
        examples=EXAMPLE_STEPS,
        check=check_step,
        check_all=check_steps,
    ),
    Shape(
        name='RunStep',
        schema={**STEP_SCHEMA,
                'description': 'The step an execution runs: one of its plan (a PipelineStep, validated as '
                               "in a plan) or of a stage before the pipelines (PARSE: the parse stage).",
                'properties': {**STEP_SCHEMA['properties'], 'stepType': ref('StepKind'),
                               'executionPolicy': ref('ExecutionPolicy')}},
        examples=(*EXAMPLE_STEPS[1:], {'name': 'parse', 'stepType': 'PARSE'}),
        check=check_run_step,
    ),
    Shape(
        name='ExecutionStep',
        schema=EXECUTION_STEP_SCHEMA,
        examples=({'name': 'parse', 'stepType': SHOWN_STEP_TYPE, 'kind': 'PARSE'},),
        check=stored_step,
        present=shown_step,
    ),
    Shape(
        name='ExecutionPipeline',
        schema={'type': 'object', 'additionalProperties': True,
                'description': "An execution's pipeline: its steps as the platform SDK reads them "
                               '(ExecutionStep), and what started it (trigger).',
                'properties': {'steps': {'type': 'array', 'items': ref('ExecutionStep')},
                               'trigger': {'type': 'string'}}},
        examples=({'steps': [{'name': 'parse', 'stepType': SHOWN_STEP_TYPE, 'kind': 'PARSE'}], 'trigger': 'created'},),
        check=check_pipeline,
        present=lambda value: _pipeline(value, shown_step),
    ),
)
