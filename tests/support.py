"""Builders driven by the registry: a valid create body for any family (creating whatever it
must reference first), and sample values per field type."""
from __future__ import annotations

import copy
import uuid
from typing import Any

from chalicelib.kernel.fields import ENUMS, Field
from chalicelib.kernel.registry import FAMILIES, Family
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.shapes import SHAPES

FAMILY_PATHS = [f.path for f in FAMILIES]


def sample(field: Field, variant: int = 0) -> Any:
    """A valid value of the field's type; variant 1 gives a different one."""
    if field.enum:
        values = ENUMS[field.enum]
        return values[variant % len(values)]
    if field.shape:   # a structured value (kernel/shapes.py): one of the shape's valid examples
        examples = SHAPES[field.shape].examples
        example = copy.deepcopy(examples[variant % len(examples)])
        if field.type == 'array':
            return [example]
        if field.type == 'object' and field.shape == 'ServiceBridgeHeaders':
            return {'Accept': 'application/json'}   # no secret: writing those needs MANAGE
        return example
    if field.name == 'email':
        return f'u{uuid.uuid4().hex[:12]}@example.com'
    if field.name == 'slug':
        return f's-{uuid.uuid4().hex[:12]}'
    return {
        'string': f'text-{variant}-{uuid.uuid4().hex[:6]}',
        'bool': bool(variant % 2),
        'int': 7 + variant,
        'number': 1.5 + variant,
        'datetime': f'2026-0{1 + variant}-02T03:04:05.000006Z',
        'object': {'k': variant, 'nested': {'flag': True}},
        'any': {'free': [variant, 'x']},
        'strings': ['a', f'b{variant}'],
        'array': [{'x': variant}],
    }[field.type]


def create_body(api, family: Family | str, org_id: str, _project: dict | None = None) -> dict[str, Any]:
    """A minimal valid create body: required fields, ownership, required references."""
    family = family_of(family) if isinstance(family, str) else family
    body: dict[str, Any] = {}
    if family.scope == 'org':
        body['organizationId'] = org_id
    if family.scope == 'project':
        project = _project or create(api, 'projects', org_id)
        body['projectId'] = project['id']
    joins = getattr(family, 'joins', None)
    if joins:   # memberships: name a new user (one membership per user and organization)
        body[joins] = create(api, family.writable[joins].ref, org_id)['id']
    for f in family.writable.values():
        if not f.required:
            continue
        if f.ref:
            body[f.name] = create(api, f.ref, org_id)['id']
        else:
            body[f.name] = sample(f)
    return body


def release_organization(api, org_id: str) -> None:
    """Remove an organization's memberships: it is deleted only when none are left (docs/reliability.md)."""
    page = api.get(f"/api/memberships?pageSize=100&filter=organizationId=='{org_id}'").json
    for membership in page['content']:
        assert api.delete(f"/api/memberships/{membership['id']}").status == 204


def create(api, family: Family | str, org_id: str, **extra: Any) -> dict[str, Any]:
    family = family_of(family) if isinstance(family, str) else family
    body = create_body(api, family, org_id)
    body.update(extra)
    r = api.post(f'/api/{family.path}', body)
    assert r.status == 201, (family.path, r.status, r.json)
    return r.json


def task_statuses(api, org_id: str, *slugs: str) -> None:
    """The organization's task statuses a data set's tasks name (``statusSlug`` is a reference:
    kernel/registry.py ``slug_refs``); one already there is kept."""
    for slug in slugs:
        r = api.post('/api/task-statuses', {'organizationId': org_id, 'slug': slug, 'label': slug.title()})
        assert r.status in (201, 409), (slug, r.status, r.json)
