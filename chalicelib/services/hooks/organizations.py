"""Organizations: slug rules, and the creator becomes the new organization's manager."""
from __future__ import annotations

import re
import secrets
from typing import Any

from chalicelib.core.errors import BadRequest
from chalicelib.core.principal import Principal
from chalicelib.domain.registry import Family
from chalicelib.domain.registry import family as family_of
from chalicelib.services import access, records

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
        ops = access.builtin_ops(data['id'], principal)  # built-in roles and permissions
        if principal.credential in ('system', 'service'):
            return ops  # no user behind the call
        # The creator manages the new organization (a platform admin too: it is then in their lists).
        memberships = family_of('memberships')
        membership = records.new_record(memberships, {'userId': principal.user_id, 'role': 'MANAGE'},
                                        principal=principal, org=data['id'])
        return ops + records.create_ops(memberships, [membership], principal)


HOOK = OrganizationHook()
