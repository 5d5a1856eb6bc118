"""The agent tools of service bridges: ``list_service_bridges`` and ``call_service_bridge``.

An agent may call a bridge only when the bridge is ``agentCallable`` and bound to the agent's
project. Every call is therefore first tied to one project, by who is calling:

* an agent principal (credential ``agent``, ``agent_principal``): the project of the agent
  record it was made from. This is how an AGENT step running in the worker calls the tools in
  process; it holds no membership, so nothing else of the platform is visible to it;
* any other caller names an execution it may see, still PENDING or RUNNING, as
  ``executionId``: an execution runs as a project's assistant, and the execution's project is
  the tie. ``list_service_bridges`` also accepts ``projectId`` alone (a project the caller
  may see), to show what an agent of that project could call; a call needs the execution.

A call that cannot be tied (no agent and no execution, or an execution that has ended) is 403;
an execution or project the caller cannot see is 404, as any other organization's resource. A
bridge that is not in the tied project or not agent-callable is 403 (one message for both, so
nothing is learnt about other projects' bridges). Then the call is the proxy's (features/bridges/proxy.py), with the
caller's own permission: a user with VIEWER can still only call GET endpoints.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from chalicelib.core.errors import BadRequest, Forbidden, NotFound
from chalicelib.core.principal import Principal
from chalicelib.features.bridges import proxy
from chalicelib.kernel import crud
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table

ACTIVE_EXECUTION = frozenset({'PENDING', 'RUNNING'})
UNTIED = ('This call cannot be tied to a project: an agent calls with its own credentials, anyone '
          'else names a running execution they can see (executionId)')


@dataclass(frozen=True)
class Tie:
    project_id: str
    organization_id: str
    execution_id: str | None = None


def agent_principal(agent_id: str) -> Principal:
    """The principal an agent acts as (in-process callers: the worker's AGENT steps)."""
    agent = table.get('agents', crud.check_id(family_of('agents'), agent_id))
    if agent is None:
        raise NotFound(f'No Agent with id {agent_id}')
    return Principal(user_id=agent.id, email='', credential='agent', project_id=agent.data['projectId'],
                     agent_id=agent.id)


def tie(principal: Principal, *, execution_id: str | None = None, project_id: str | None = None,
        listing: bool = False) -> Tie:
    """The project this call acts in: 403 when nothing ties it to one (or the execution has
    ended), 404 for an execution or project the caller cannot see (another organization's)."""
    if principal.credential == 'agent':
        project = table.get('projects', principal.project_id) if principal.project_id else None
        if project is None:
            raise Forbidden(UNTIED)
        if project_id is not None and _uuid(project_id) != project.id:
            raise BadRequest("Field 'projectId' is not the agent's project")
        if execution_id is not None:
            execution = table.get('executions', crud.check_id(family_of('executions'), execution_id))
            if execution is None or execution.data.get('projectId') != project.id:
                raise NotFound(f'No Execution with id {execution_id}')
            _require_active(execution)
        return Tie(project.id, project.org, execution_id)
    if execution_id is not None:
        execution = crud.load_visible('executions', execution_id, principal)
        _require_active(execution)
        if project_id is not None and _uuid(project_id) != execution.data.get('projectId'):
            raise BadRequest("Field 'projectId' is not the project of the execution named by 'executionId'")
        return Tie(execution.data['projectId'], execution.org, execution.id)
    if listing and project_id is not None:
        project = crud.load_visible('projects', project_id, principal)
        return Tie(project.id, project.org)
    raise Forbidden(UNTIED)


def _uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        return None


def _require_active(execution) -> None:
    status = execution.data.get('status')
    if status not in ACTIVE_EXECUTION:
        raise Forbidden(f'This call cannot be tied to a project: execution {execution.id} is {status}, '
                        'not running')


def _callable_bridges(bound: Tie) -> list[dict[str, Any]]:
    return [b for b in table.query_project(proxy.FAMILY, bound.project_id)
            if b.get('agentCallable') is True and b.get('organizationId') == bound.organization_id]


def _describe(bridge: dict[str, Any]) -> dict[str, Any]:
    out = {k: bridge[k] for k in ('id', 'name', 'slug', 'description') if bridge.get(k) is not None}
    out['endpoints'] = [{k: e[k] for k in ('name', 'method', 'description', 'requestSchema') if k in e}
                        for e in bridge.get('endpoints') or [] if isinstance(e, dict)]
    return out


def list_service_bridges(*, principal: Principal, project_id: str | None = None,
                         execution_id: str | None = None) -> dict[str, Any]:
    """``list_service_bridges``: the agent-callable bridges of the tied project."""
    bound = tie(principal, execution_id=execution_id, project_id=project_id, listing=True)
    found = sorted(_callable_bridges(bound), key=lambda b: (str(b.get('name') or '').lower(), b['id']))
    out: dict[str, Any] = {'projectId': bound.project_id, 'bridges': [_describe(b) for b in found]}
    if bound.execution_id:
        out['executionId'] = bound.execution_id
    return out


def call_service_bridge(*, principal: Principal, bridge: str, endpoint_name: str,
                        query: dict[str, list[str]] | None = None, body: Any = None,
                        execution_id: str | None = None, timeout: float | None = None) -> dict[str, Any]:
    """``call_service_bridge``: ``{status, ok, body, truncated}``. ``bridge`` is the id, slug
    or name of an agent-callable bridge of the tied project."""
    bound = tie(principal, execution_id=execution_id)
    candidates = _callable_bridges(bound)
    chosen = ([b for b in candidates if b['id'] == _uuid(bridge)] or
              [b for b in candidates if b.get('slug') == bridge] or
              [b for b in candidates if b.get('name') == bridge])
    if len(chosen) != 1:
        raise Forbidden(f'Bridge {bridge[:100]!r} is not an agent-callable bridge of this project'
                        if len(chosen) == 0 else f'Several bridges of this project are named {bridge[:100]!r}: '
                        'use its id or slug')
    result = proxy.call_endpoint(chosen[0], endpoint_name, query=query, body=body, principal=principal,
                                   write=True, timeout=timeout)
    return result.tool_result()


def call_tool(args: dict[str, Any], *, principal: Principal, timeout: float | None = None) -> dict[str, Any]:
    """``call_service_bridge`` from its JSON arguments ``{bridge, endpoint_name, query?, body?,
    executionId?}``: ``query`` is an object of scalars or lists of scalars."""
    bridge, endpoint_name = args.get('bridge'), args.get('endpoint_name')
    if not isinstance(bridge, str) or not bridge:
        raise BadRequest("Field 'bridge' is required: the id, slug or name of a bridge")
    if not isinstance(endpoint_name, str) or not endpoint_name:
        raise BadRequest("Field 'endpoint_name' is required")
    execution_id = args.get('executionId')
    if execution_id is not None and not isinstance(execution_id, str):
        raise BadRequest("Field 'executionId' must be a string")
    return call_service_bridge(principal=principal, bridge=bridge, endpoint_name=endpoint_name,
                               query=_query(args.get('query')), body=args.get('body'),
                               execution_id=execution_id, timeout=timeout)


def _query(value: Any) -> dict[str, list[str]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest("Field 'query' must be an object of query parameters")
    out: dict[str, list[str]] = {}
    for name, item in value.items():
        items = item if isinstance(item, list) else [item]
        texts = [_scalar(name, v) for v in items if v is not None]
        if texts:
            out[name] = texts
    return out


def _scalar(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (str, int, float)):
        return str(value)
    raise BadRequest(f"Query parameter '{name[:60]}' must be a string, number or boolean (or a list of them)")
