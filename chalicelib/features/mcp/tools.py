"""The 20 MCP tools: each a thin adapter from validated arguments to the same service call a
REST route makes (kernel/crud.py, listing.py, features/tasks/service.py, grouping.py), with the
caller's principal. Permissions, tenancy (another organization's record is "not found"),
optimistic locking, the task-group assignee rule (features/tasks/hooks.py, features/tasks/groups.py), history
and whatever else a service write carries come from there, never from here.

A tool answers a JSON object (its ``structuredContent``; lists as the REST page envelope). A
service error becomes a tool error (protocol.py): ``{"error": {"status", "message",
"changeSequence"?}}`` with ``isError: true``.

Input schemas are JSON Schema (draft 2020-12 subset: object, string, integer, boolean, array,
enum, required, bounds, additionalProperties false), checked here by ``validate``; a bad
argument is a tool error naming it (the model can correct itself), not a protocol error.
"""
from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import limits
from chalicelib.core.errors import BadRequest, Conflict
from chalicelib.core.principal import Principal
from chalicelib.features.parsing import serving as parsing
from chalicelib.features.tasks import grouping
from chalicelib.features.tasks import service as tasks_service
from chalicelib.kernel import crud, listing
from chalicelib.kernel.store import table

SLUG = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$')


# ----------------------------------------------------------------------------- schemas

def _id(what: str) -> dict[str, Any]:
    return {'type': 'string', 'format': 'uuid', 'description': f'id of the {what} (a UUID)'}


SEQUENCE = {'type': 'integer', 'minimum': 0, 'maximum': 2 ** 31 - 1,
            'description': 'optimistic locking: the changeSequence you last read; a stale value is refused '
                           'with the current one'}
PAGING = {
    'page': {'type': 'integer', 'minimum': 0, 'maximum': limits.MAX_PAGE, 'default': 0,
             'description': 'page number, from 0'},
    'pageSize': {'type': 'integer', 'minimum': 1, 'maximum': limits.MAX_PAGE_SIZE,
                 'default': limits.MCP_DEFAULT_PAGE_SIZE, 'description': 'items per page'},
    'query': {'type': 'string', 'maxLength': 200,
              'description': 'text search over name/title/description (case-insensitive, * wildcard)'},
}
RECORD = {'type': 'object', 'additionalProperties': True,
          'properties': {'id': {'type': 'string'}, 'changeSequence': {'type': 'integer'}}}


def _page_schema(item: dict[str, Any] = RECORD) -> dict[str, Any]:
    return {'type': 'object', 'required': ['content', 'totalElements', 'totalPages', 'number', 'size'],
            'properties': {'content': {'type': 'array', 'items': item},
                           'totalElements': {'type': 'integer'}, 'totalPages': {'type': 'integer'},
                           'number': {'type': 'integer'}, 'size': {'type': 'integer'},
                           'numberOfElements': {'type': 'integer'}, 'first': {'type': 'boolean'},
                           'last': {'type': 'boolean'}}}


TASK = {'type': 'object', 'additionalProperties': True, 'required': ['id', 'projectId', 'changeSequence'],
        'properties': {'id': {'type': 'string'}, 'title': {'type': 'string'}, 'statusSlug': {'type': 'string'},
                       'assigneeId': {'type': 'string'}, 'taskGroupId': {'type': 'string'},
                       'projectId': {'type': 'string'}, 'organizationId': {'type': 'string'},
                       'changeSequence': {'type': 'integer'}}}
GROUP = {'type': 'object', 'additionalProperties': True, 'required': ['id', 'projectId', 'changeSequence'],
         'properties': {'id': {'type': 'string'}, 'name': {'type': 'string'}, 'assigneeId': {'type': 'string'},
                        'projectId': {'type': 'string'}, 'changeSequence': {'type': 'integer'}}}


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    properties: dict[str, Any]
    run: Callable[[dict[str, Any], Principal], dict[str, Any]]
    output: dict[str, Any]
    required: tuple[str, ...] = ()
    read_only: bool = True
    idempotent: bool = True
    annotations: dict[str, Any] = field(default_factory=dict)

    @property
    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {'type': 'object', 'properties': self.properties, 'additionalProperties': False}
        if self.required:
            schema['required'] = list(self.required)
        return schema

    def listing(self) -> dict[str, Any]:
        """The tool as tools/list describes it (wire names)."""
        return {'name': self.name, 'title': self.title, 'description': self.description,
                'inputSchema': self.input_schema, 'outputSchema': self.output,
                'annotations': {'title': self.title, 'readOnlyHint': self.read_only,
                                'destructiveHint': False, 'idempotentHint': self.idempotent,
                                'openWorldHint': False}}


# ----------------------------------------------------------------------------- argument checks

def validate(schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """The arguments checked against the tool's input schema, defaults filled in (BadRequest
    naming the first problem)."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise BadRequest('arguments must be an object')
    props = schema['properties']
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise BadRequest(f"unknown argument '{unknown[0]}' (expected: {', '.join(props) or 'none'})")
    for name in schema.get('required', ()):
        if args.get(name) is None:
            raise BadRequest(f"argument '{name}' is required")
    out: dict[str, Any] = {}
    for name, spec in props.items():
        value = args.get(name)
        if value is None:
            if 'default' in spec:
                out[name] = spec['default']
            continue
        out[name] = _check(name, spec, value)
    return out


def _check(name: str, spec: dict[str, Any], value: Any) -> Any:
    kind = spec['type']
    if kind == 'string':
        if not isinstance(value, str):
            raise BadRequest(f"argument '{name}' must be a string")
        if len(value) > spec.get('maxLength', 1000):
            raise BadRequest(f"argument '{name}' is longer than {spec.get('maxLength', 1000)} characters")
        if spec.get('format') == 'uuid':
            try:
                value = str(uuid.UUID(value))
            except ValueError:
                raise BadRequest(f"argument '{name}' must be an id (a UUID), not '{value[:64]}'") from None
        if 'pattern' in spec and not re.fullmatch(spec['pattern'], value):
            raise BadRequest(f"argument '{name}' has an invalid value '{value[:64]}'")
    elif kind == 'integer':
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadRequest(f"argument '{name}' must be an integer")
        if not spec.get('minimum', -2 ** 63) <= value <= spec.get('maximum', 2 ** 63):
            raise BadRequest(f"argument '{name}' must be between {spec.get('minimum')} and {spec.get('maximum')}")
    elif kind == 'boolean':
        if not isinstance(value, bool):
            raise BadRequest(f"argument '{name}' must be true or false")
    elif kind == 'array':
        if not isinstance(value, list):
            raise BadRequest(f"argument '{name}' must be an array")
        if not spec.get('minItems', 0) <= len(value) <= spec.get('maxItems', limits.MCP_MAX_ARRAY_ITEMS):
            raise BadRequest(f"argument '{name}' must hold {spec.get('minItems', 0)} to "
                             f"{spec.get('maxItems', limits.MCP_MAX_ARRAY_ITEMS)} items")
        value = [_check(f'{name}[{i}]', spec['items'], v) for i, v in enumerate(value)]
    if 'enum' in spec and value not in spec['enum']:
        raise BadRequest(f"argument '{name}' must be one of {', '.join(map(str, spec['enum']))}")
    return value


# ----------------------------------------------------------------------------- helpers

def _list(family: str, args: dict[str, Any], principal: Principal, filters: list[str], *,
          summary: bool = False, sort: list[tuple[str, bool]] | None = None) -> dict[str, Any]:
    req = listing.ListRequest(page=args.get('page', 0), size=args.get('pageSize', limits.MCP_DEFAULT_PAGE_SIZE),
                              query=args.get('query') or None, filters=filters, summary=summary,
                              sort=sort or [])
    return listing.list_resources(family, req, principal)


def _eq(name: str, value: str) -> str:
    """A filter condition on a value already checked to be an id or a slug (no quotes inside)."""
    return f"{name} == '{value}'"


def _org_filter(args: dict[str, Any], principal: Principal) -> list[str]:
    org = args.get('organizationId')
    if org is None:
        return []
    crud.load_visible('organizations', org, principal)   # another organization: "not found"
    return [_eq('organizationId', org)]


def _project_filter(args: dict[str, Any], principal: Principal) -> list[str]:
    project = args.get('projectId')
    if project is None:
        return []
    crud.load_visible('projects', project, principal)
    return [_eq('projectId', project)]


def _assignee(args: dict[str, Any], principal: Principal) -> str | None:
    value = args.get('assigneeId')
    return principal.user_id if value == 'me' else value


def _change(args: dict[str, Any], **values: Any) -> dict[str, Any]:
    if args.get('changeSequence') is not None:
        values['changeSequence'] = args['changeSequence']
    return values


# ----------------------------------------------------------------------------- reads

def whoami(args, principal):
    names = {o.id: o.data.get('name') for o in table.batch_get(
        ('organizations', org) for org in principal.org_ids).values()} if principal.memberships else {}
    user = principal.user or {}
    return {'userId': principal.user_id, 'email': principal.email, 'firstName': user.get('firstName'),
            'lastName': user.get('lastName'), 'platformAdmin': principal.platform_admin,
            'credential': principal.credential,
            'memberships': [{'organizationId': org, 'organizationName': names.get(org), 'role': role}
                            for org, role in sorted(principal.memberships.items())]}


def list_organizations(args, principal):
    return _list('organizations', args, principal, [])


def list_projects(args, principal):
    return _list('projects', args, principal, _org_filter(args, principal))


def list_teams(args, principal):
    return _list('teams', args, principal, _org_filter(args, principal))


def list_organization_members(args, principal):
    filters = _org_filter(args, principal)
    page = _list('memberships', args, principal, filters + ["status == 'ACTIVE'"])
    users = table.batch_get(('users', m['userId']) for m in page['content'] if m.get('userId'))
    page['content'] = [{'membershipId': m['id'], 'userId': m.get('userId'), 'role': m.get('role'),
                        'organizationId': m.get('organizationId'),
                        'email': users[m['userId']].data.get('email') if m.get('userId') in users else m.get('email'),
                        'firstName': users[m['userId']].data.get('firstName') if m.get('userId') in users else None,
                        'lastName': users[m['userId']].data.get('lastName') if m.get('userId') in users else None}
                       for m in page['content']]
    for member in page['content']:
        for key in [k for k, v in member.items() if v is None]:
            del member[key]
    return page


def list_activities(args, principal):
    filters = _project_filter(args, principal)
    if args.get('status'):
        filters.append(_eq('status', args['status']))
    return _list('activities', args, principal, filters)


def get_activity(args, principal):
    return crud.get('activities', args['activityId'], principal)


def list_tasks(args, principal):
    filters = _project_filter(args, principal)
    for name in ('statusSlug', 'taskGroupId', 'teamId'):
        if args.get(name):
            filters.append(_eq(name, args[name]))
    assignee = _assignee(args, principal)
    if assignee:
        filters.append(_eq('assigneeId', assignee))
    elif args.get('unassigned'):
        filters.append('assigneeId is null')
    return _list('tasks', args, principal, filters, summary=True)


def get_task(args, principal):
    return crud.get('tasks', args['taskId'], principal)


def list_task_groups(args, principal):
    filters = _project_filter(args, principal)
    if args.get('statusSlug'):
        filters.append(_eq('statusSlug', args['statusSlug']))
    assignee = _assignee(args, principal)
    if assignee:
        filters.append(_eq('assigneeId', assignee))
    return _list('task-groups', args, principal, filters)


def get_task_group(args, principal):
    group = crud.get('task-groups', args['taskGroupId'], principal)
    tasks = _list('tasks', {'pageSize': 100}, principal, [_eq('taskGroupId', group['id'])], summary=True)
    return {'taskGroup': group, 'tasks': tasks['content'], 'totalTasks': tasks['totalElements']}


def list_task_statuses(args, principal):
    return _list('task-statuses', {**args, 'pageSize': args.get('pageSize', 100)}, principal,
                 _org_filter(args, principal), sort=[('sortOrder', False)])


def get_document_text(args, principal):
    """The family's parsed text (features/parsing/serving.py ``text_for``): what the caller may
    read of it, a page range at a time (docs/api/mcp.md)."""
    return parsing.text_for(args['documentFamilyId'], principal, page=args.get('page'),
                            limit=args.get('maxBytes', parsing.STEP_TEXT_BYTES))


# ----------------------------------------------------------------------------- writes

def assign_task(args, principal):
    return crud.update('tasks', args['taskId'], _change(args, assigneeId=_assignee(args, principal)),
                            principal=principal)


def unassign_task(args, principal):
    return crud.update('tasks', args['taskId'], _change(args, assigneeId=None), principal=principal)


def _group_write(args, principal, assignee):
    group = crud.update('task-groups', args['taskGroupId'], _change(args, assigneeId=assignee),
                             principal=principal)
    members = _list('tasks', {'pageSize': 100}, principal, [_eq('taskGroupId', group['id'])], summary=True)
    return {'taskGroup': group, 'tasks': members['content'], 'totalTasks': members['totalElements']}


def assign_task_group(args, principal):
    return _group_write(args, principal, _assignee(args, principal))


def unassign_task_group(args, principal):
    return _group_write(args, principal, None)


def update_task_status(args, principal):
    return tasks_service.set_task_status(args['taskId'], _change(args, statusSlug=args['statusSlug']), principal)


def add_tasks_to_group(args, principal):
    return grouping.add_tasks(args['taskGroupId'], args['taskIds'], principal,
                                   change_sequence=args.get('changeSequence'))


def remove_task_from_group(args, principal):
    task = crud.load_visible('tasks', args['taskId'], principal)
    if not task.data.get('taskGroupId'):
        raise Conflict(f'Task {task.id} is not in a task group', changeSequence=task.seq)
    return crud.update('tasks', task.id, _change(args, taskGroupId=None), principal=principal)


# ----------------------------------------------------------------------------- the table

ORG = {'organizationId': _id('organization; omitted: every organization you belong to')}
SLUG_ARG = {'type': 'string', 'pattern': SLUG.pattern, 'maxLength': 100}
ASSIGNEE = {'type': 'string', 'maxLength': 36, 'pattern': r'^(me|[0-9a-fA-F-]{36})$',
            'description': "a user id (a member of the task's organization), or 'me'"}

TOOLS: tuple[Tool, ...] = (
    Tool('whoami', 'Who am I', 'The calling user: id, e-mail, platform-admin flag and organization memberships '
         'with roles.', {}, whoami,
         {'type': 'object', 'required': ['userId', 'email', 'memberships'], 'additionalProperties': True,
          'properties': {'userId': {'type': 'string'}, 'email': {'type': 'string'},
                         'platformAdmin': {'type': 'boolean'},
                         'memberships': {'type': 'array', 'items': {'type': 'object'}}}}),
    Tool('list_organizations', 'List organizations', 'Organizations you belong to (a page).', dict(PAGING),
         list_organizations, _page_schema()),
    Tool('list_projects', 'List projects', 'Projects of your organizations, optionally of one organization.',
         {**ORG, **PAGING}, list_projects, _page_schema()),
    Tool('list_teams', 'List teams', 'Teams of your organizations, optionally of one organization.',
         {**ORG, **PAGING}, list_teams, _page_schema()),
    Tool('list_organization_members', 'List organization members',
         'Active members of an organization: user id, e-mail, name and role (VIEWER, MEMBER, MANAGE).',
         {'organizationId': _id('organization'), **PAGING}, list_organization_members, _page_schema(),
         required=('organizationId',)),
    Tool('list_activities', 'List activities', 'Activities (runs of activity plans), optionally of one project '
         'or status (PENDING, RUNNING, ...).',
         {'projectId': _id('project'), 'status': SLUG_ARG, **PAGING}, list_activities, _page_schema()),
    Tool('get_activity', 'Get an activity', 'One activity by id.', {'activityId': _id('activity')}, get_activity,
         RECORD, required=('activityId',)),
    Tool('list_tasks', 'List tasks', 'Tasks, filtered by project, status slug, assignee (a user id or "me"), '
         'unassigned, task group or team; newest first, paged. Heavy plan details are left out.',
         {'projectId': _id('project'), 'statusSlug': SLUG_ARG, 'assigneeId': ASSIGNEE,
          'unassigned': {'type': 'boolean', 'description': 'only tasks without an assignee'},
          'taskGroupId': _id('task group'), 'teamId': _id('team'), **PAGING},
         list_tasks, _page_schema(TASK)),
    Tool('get_task', 'Get a task', 'One task by id, with its changeSequence.', {'taskId': _id('task')}, get_task,
         TASK, required=('taskId',)),
    Tool('list_task_groups', 'List task groups', 'Task groups, filtered by project, status slug or assignee.',
         {'projectId': _id('project'), 'statusSlug': SLUG_ARG, 'assigneeId': ASSIGNEE, **PAGING},
         list_task_groups, _page_schema(GROUP)),
    Tool('get_task_group', 'Get a task group', 'One task group with its tasks (up to 100).',
         {'taskGroupId': _id('task group')}, get_task_group,
         {'type': 'object', 'required': ['taskGroup', 'tasks', 'totalTasks'],
          'properties': {'taskGroup': GROUP, 'tasks': {'type': 'array', 'items': TASK},
                         'totalTasks': {'type': 'integer'}}}, required=('taskGroupId',)),
    Tool('list_task_statuses', 'List task statuses', "The organization's task statuses (slug, label, statusType), "
         'in their sort order.', {**ORG, **PAGING}, list_task_statuses, _page_schema()),
    Tool('get_document_text', 'Get the text of a document', "A document family's parsed text (lines end with \\n, "
         'a page starts with a form feed), from page (default 1) up to maxBytes; nextPage names where the next '
         'read starts (null at the end).',
         {'documentFamilyId': _id('document family'),
          'page': {'type': 'integer', 'minimum': 1, 'maximum': limits.MAX_PAGE, 'description': 'first page to read'},
          'maxBytes': {'type': 'integer', 'minimum': 1_000, 'maximum': 1_000_000, 'default': 100_000,
                       'description': 'UTF-8 bytes of text at most'}},
         get_document_text,
         {'type': 'object', 'required': ['documentFamilyId', 'text', 'version'], 'additionalProperties': True,
          'properties': {'documentFamilyId': {'type': 'string'}, 'text': {'type': 'string'},
                         'version': {'type': 'integer'}, 'pageCount': {'type': ['integer', 'null']},
                         'firstPage': {'type': ['integer', 'null']}, 'lastPage': {'type': ['integer', 'null']},
                         'nextPage': {'type': ['integer', 'null']}, 'truncated': {'type': 'boolean'}}},
         required=('documentFamilyId',)),
    Tool('assign_task', 'Assign a task', 'Set the assignee of a task that is not in a task group (a grouped '
         "task's assignee is set through its group: assign_task_group).",
         {'taskId': _id('task'), 'assigneeId': ASSIGNEE, 'changeSequence': SEQUENCE}, assign_task, TASK,
         required=('taskId', 'assigneeId'), read_only=False),
    Tool('unassign_task', 'Unassign a task', 'Clear the assignee of a task that is not in a task group.',
         {'taskId': _id('task'), 'changeSequence': SEQUENCE}, unassign_task, TASK, required=('taskId',),
         read_only=False),
    Tool('assign_task_group', 'Assign a task group', 'Set the assignee of a task group; every task of the group '
         'takes it in the same write.',
         {'taskGroupId': _id('task group'), 'assigneeId': ASSIGNEE, 'changeSequence': SEQUENCE}, assign_task_group,
         {'type': 'object', 'required': ['taskGroup', 'tasks', 'totalTasks'],
          'properties': {'taskGroup': GROUP, 'tasks': {'type': 'array', 'items': TASK},
                         'totalTasks': {'type': 'integer'}}},
         required=('taskGroupId', 'assigneeId'), read_only=False),
    Tool('unassign_task_group', 'Unassign a task group', 'Clear the assignee of a task group and of its tasks.',
         {'taskGroupId': _id('task group'), 'changeSequence': SEQUENCE}, unassign_task_group,
         {'type': 'object', 'required': ['taskGroup', 'tasks', 'totalTasks'],
          'properties': {'taskGroup': GROUP, 'tasks': {'type': 'array', 'items': TASK},
                         'totalTasks': {'type': 'integer'}}},
         required=('taskGroupId',), read_only=False),
    Tool('update_task_status', 'Update task status', "Move a task to another of its organization's task statuses "
         '(list_task_statuses gives the slugs).',
         {'taskId': _id('task'), 'statusSlug': SLUG_ARG, 'changeSequence': SEQUENCE}, update_task_status, TASK,
         required=('taskId', 'statusSlug'), read_only=False),
    Tool('add_tasks_to_group', 'Add tasks to a group', 'Put tasks of the same project into a task group, in one '
         "write; they take the group's assignee. changeSequence is the group's.",
         {'taskGroupId': _id('task group'),
          'taskIds': {'type': 'array', 'items': _id('task'), 'minItems': 1,
                      'maxItems': grouping.MAX_TASKS_PER_CALL},
          'changeSequence': SEQUENCE}, add_tasks_to_group,
         {'type': 'object', 'required': ['taskGroup', 'tasks'],
          'properties': {'taskGroup': GROUP, 'tasks': {'type': 'array', 'items': TASK}}},
         required=('taskGroupId', 'taskIds'), read_only=False),
    Tool('remove_task_from_group', 'Remove a task from its group', 'Take a task out of its task group; it keeps '
         'its assignee, which is then its own.', {'taskId': _id('task'), 'changeSequence': SEQUENCE},
         remove_task_from_group, TASK, required=('taskId',), read_only=False, idempotent=False),
)
BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
