"""Organizations: slug rules, and the creator becomes the new organization's manager."""
from __future__ import annotations

import re
import secrets
import uuid
from typing import Any

from chalicelib.core.clock import now_iso
from chalicelib.core.errors import BadRequest
from chalicelib.core.principal import Principal
from chalicelib.domain.registry import Family, family as family_of
from chalicelib.services import access
from chalicelib.store import credentials, repository as repo

from . import Hook

SLUG = re.compile(r'^[a-z0-9-]{3,100}$')


def normalize_slug(value: Any) -> str:
    slug = str(value).strip().lower()
    if not SLUG.match(slug):
        raise BadRequest("Field 'slug' must be 3-100 characters of a-z, 0-9 and '-'")
    return slug


def slug_from_name(name: str) -> str:
    base = re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')[:80] or 'org'
    return f'{base}-{secrets.token_hex(3)}' if len(base) < 3 else base


class OrganizationHook(Hook):
    def can_create(self, family: Family, principal: Principal) -> bool:
        return access.can_create_organization(principal)

    def before_create(self, family, principal, data, body):
        if 'slug' in data:
            data['slug'] = normalize_slug(data['slug'])
        else:
            data['slug'] = slug_from_name(data.get('name', ''))

    def before_update(self, family, principal, new, stored):
        if 'slug' in new:
            new['slug'] = normalize_slug(new['slug'])

    def extra_create_ops(self, family, principal, data):
        builtins = access.builtin_ops(data['id'], principal.user_id)  # built-in roles and permissions
        if principal.credential in ('system', 'service'):
            return builtins  # no user behind the call
        # The creator manages the new organization (a platform admin too: it is then in their lists).
        memberships = family_of('memberships')
        now = now_iso()
        membership = {'id': str(uuid.uuid4()), 'uuid': str(uuid.uuid4()), 'createdOn': now, 'updatedOn': now,
                      'changeSequence': 1, 'organizationId': data['id'], 'userId': principal.user_id,
                      'role': 'MANAGE', 'createdByUserId': principal.user_id}
        item = repo.entity_item('memberships', membership, 1, data['id'], data['id'],
                                f'memberships#U#{principal.user_id}', 'MANAGE')
        return builtins + [repo.put_entity(item, None),
                repo.claim_unique('memberships', data['id'], 'userId', principal.user_id, membership['id']),
                repo.move_counter(memberships.path, data['id'], 1),
                credentials.acl_put(principal.user_id, data['id'], 'MANAGE')]  # what auth reads


HOOK = OrganizationHook()
