"""The work feature's families, declared: each one's fields, references, indexes, hook and
rules (kernel/registry.py ``Family``), installed into the kernel by chalicelib/features/__init__.py.

Work: activity plans, their activities and executions, scheduled jobs.
"""
from __future__ import annotations

from chalicelib.features.work import schedule_shapes, step_shapes
from chalicelib.kernel.fields import Retired
from chalicelib.kernel.registry import NAMED_FIELDS, TEXT_FIELDS, declare

# The named shapes and enumerations its fields name (kernel/shapes.py, kernel/fields.py
# ``install_enums``): a plan's steps and their policy (step_shapes.py), a schedule's expression
# (schedule_shapes.py); the execution statuses are named in statuses.py.
SHAPES = (*step_shapes.SHAPES, *schedule_shapes.SHAPES)
ENUMS = {
    # the platform SDK's values (kodexa Execution.status) hold all five: no TIMED_OUT (ENUM_RETIRED)
    'ExecutionStatus': ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED'),
    # why an execution ended FAILED, when the engine knows more (docs/api/work.md "Steps and executions")
    'ExecutionEndReason': ('TIMED_OUT',),
    'ExecutionStatusMessageType': ('INFO', 'WARNING', 'ERROR'),
    'ActivityStatus': ('PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED'),
    'ScheduleTargetType': ('ACTIVITY_PLAN',),
    # an execution's steps (step_shapes.py; docs/api/sdk-compatibility.md "Executions: steps")
    'StepKind': step_shapes.STEP_KINDS,
    'ExecutionStepType': step_shapes.SDK_STEP_TYPES,
}

# An execution whose last attempt ran out of its time ended TIMED_OUT until issue 46: the SDK's
# list of executions refused it. It ends FAILED with endReason TIMED_OUT now; the old value is a 400
# naming that (writes, filters) and a stored one is answered in the new form
# (docs/api/sdk-compatibility.md "Executions: statuses", which says how to rewrite stored ones).
ENUM_RETIRED = {'ExecutionStatus': {'TIMED_OUT': Retired(
    value='FAILED', also=(('endReason', 'TIMED_OUT'),),
    hint="an execution whose last attempt ran out of its time ends FAILED with endReason TIMED_OUT "
         "(filter: endReason == 'TIMED_OUT')")}}

FAMILIES = (
    declare('executions', 'Execution', 'project',
        'name description status=PENDING@ExecutionStatus endReason@ExecutionEndReason? '
        'statusMessages:array activityId>activities? '
        'assistantId>assistants? startDate:datetime? endDate:datetime? metadata:object '
        # the SDK's names (kodexa.model Execution): the contract names no execution fields
        'processingTime:int? exceptionDetails:object? statusDetails:object? pipeline:object(ExecutionPipeline)? '
        'parameters:object? context:object? '
        # work orchestration (features/work/service.py): the step run, its attempts and result
        # step: validated as a plan's step is, or a stage's (features/work/step_shapes.py RunStep;
        # docs/api/lifecycle.md); pipeline: its steps answered in the SDK's form (ExecutionPipeline)
        'step:object(RunStep) attempts:int? nextAttemptAt:datetime? output:any inputs:object '
        # an assistant's pipeline over a document family (features/work/pipelines.py)
        'documentFamilyId>document-families?',
        id_param='executionId', hook='executions',
        indexed={'activityId': 1, 'status': 2, 'documentFamilyId': 3}, deleted_with='documentFamilyId',
        # a worker creates a family's runs after reading the family (features/work/pipelines.py)
        swept_after_delete=True),
    declare('activities', 'Activity', 'project',
        f'{TEXT_FIELDS} status=PENDING@ActivityStatus activityPlanId>activity-plans? startedOn:datetime? '
        'completedOn:datetime? metadata:object inputs:object requestId', unique=('requestId',),
        hook='activities', indexed={'activityPlanId': 1, 'status': 2},
        refuse_delete_if_referred=True),
    declare('activity-plans', 'ActivityPlan', 'project',
        f'{NAMED_FIELDS} steps:array(PipelineStep) schemas:object metadata:object prompts:array '
        'documentFamilyGroups:array',
        summary_omit=('steps', 'schemas', 'metadata', 'prompts', 'documentFamilyGroups')),
    declare('scheduled-jobs', 'ScheduledJob', 'org',
        f'{TEXT_FIELDS} scheduleExpression:string(ScheduleExpression) active:bool=true '
        'targetType@ScheduleTargetType? targetId>activity-plans? lastRunOn:datetime? '
        'nextRunOn:datetime? options:object', hook='scheduled_jobs'),
)
