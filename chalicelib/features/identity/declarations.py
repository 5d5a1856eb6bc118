"""The identity feature's families, declared: each one's fields, references, indexes, hook and
rules (kernel/registry.py ``Family``), installed into the kernel by chalicelib/features/__init__.py.

Tenancy and identity: organizations, their projects, users and who belongs where (memberships,
teams, roles, permissions).
"""
from __future__ import annotations

from chalicelib.kernel.registry import NAMED_FIELDS, declare

# The enumerations its fields name (kernel/fields.py ``install_enums``).
ENUMS = {
    'MembershipRole': ('PLATFORM_ADMIN', 'MANAGE', 'MEMBER', 'VIEWER'),
    'MembershipStatus': ('ACTIVE', 'INVITED'),
    'OrganizationStatus': ('ACTIVE', 'SUSPENDED'),
}

ORGANIZATION_NOTES = {
    'create': (
        'organizationStatus, supportAccess, supportAccessExpiresAt, paymentCustomerId and '
        'enterpriseOrganization are platform fields: only a platform admin sets them (403 naming the field).'),
    'update': (
        'Platform fields (organizationStatus, supportAccess, supportAccessExpiresAt, paymentCustomerId, '
        'enterpriseOrganization) are changed by platform admins only (403 naming the field; unchanged values '
        'may be sent back). Managers may grant support access with supportAccessExpiresAt in the future (at '
        'most SUPPORT_ACCESS_MAX_DAYS, default 30, ahead) and revoke it (the expiry is cleared). A SUSPENDED '
        'organization answers 403 "organization suspended" to its members on every request that touches it.'),
    'delete': (
        'Platform admins only. Its memberships (members and invitations) and built-in roles end with it; 409 '
        'naming what it still holds while projects or other records remain (docs/api/lifecycle.md).'),
}
USER_NOTES = {
    'create': 'Platform admins only: managers add people by e-mail invitation (createMembership).',
    'update': 'A user cannot change their own email (400): the identity provider asserts it. A platform admin can.',
}
MEMBERSHIP_NOTES = {
    'create': (
        'Name the person by userId or by email (exactly one). A platform admin adds them at once '
        '(status ACTIVE; an unknown email gets a new user). Anyone else creates an invitation (status '
        'INVITED) that grants nothing until the invited user accepts it: by email the answer is the same '
        'whether the address is registered or not; by userId only a user the caller can already see.'),
    'update': (
        'The invited user accepts an invitation with {"status": "ACTIVE"} (and may change nothing else); '
        'nobody else changes status.'),
    'delete': 'The invited user may decline (delete) an invitation.',
}

FAMILIES = (
    declare('organizations', 'Organization', 'global',
        'name! description searchText slug archived:bool? authGroupLink:object '
        'defaultToPrivateTemplates:bool=false enterpriseOrganization:bool? features:object '
        'hasImage:bool=false memory:object organizationStatus=ACTIVE@OrganizationStatus '
        'properties:object publicAccess:bool=false paymentCustomerId supportAccess:bool=false '
        'supportAccessExpiresAt:datetime?', hook='organizations',
        write_needs='organization:manage', heavy=('memory', 'features', 'properties', 'authGroupLink'),
        notes=ORGANIZATION_NOTES),
    declare('users', 'User', 'global',
        'email! firstName lastName searchText active:bool=true isExternallyManaged:bool=false '
        'showDeveloperTools:bool=false bio businessGroup groupsJson rolesJson image title userType '
        'preferences:object security:object userStorage:object', unique=('email',), name_field='email',
        hook='users',
        heavy=('preferences', 'security', 'userStorage', 'groupsJson', 'rolesJson', 'image', 'bio'),
        refuse_delete_if_referred=True, notes=USER_NOTES),
    declare('memberships', 'Membership', 'org',
        'userId>users role!@MembershipRole email status=ACTIVE@MembershipStatus',
        unique=('userId',), name_field='role', hook='access', joins='userId',
        indexed={'userId': 1},
        write_needs='organization:manage', embeds=('organization', 'user'), notes=MEMBERSHIP_NOTES,
        listed_under={'users': ('memberships', 'userId')}),
    declare('teams', 'Team', 'org', f'{NAMED_FIELDS} color memberIds:strings',
        write_needs='organization:manage', refuse_delete_if_referred=True),
    declare('roles', 'Role', 'org', f'{NAMED_FIELDS} permissions:strings builtIn:bool=false', hook='access',
        write_needs='organization:manage', builtin=True),
    declare('permissions', 'Permission', 'org', f'{NAMED_FIELDS} category builtIn:bool=false', hook='access',
        write_needs='organization:manage', builtin=True),
    declare('projects', 'Project', 'org',
        'name! description searchText slug color notes projectTemplateRef templateArticleId '
        'dataFlow:object documentStatuses:array memory:object options:object ownerId>users? '
        'statusId>project-statuses? statusType=ACTIVE',
        embeds=('organization', 'owner', 'status'),
        heavy=('dataFlow', 'options', 'memory', 'documentStatuses', 'notes')),
    declare('project-statuses', 'ProjectStatus', 'org', 'status color icon production:bool=false',
        name_field='status',
        embeds=('organization',)),
)
