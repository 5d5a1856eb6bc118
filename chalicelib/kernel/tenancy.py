"""The families the kernel's tenancy and access model is built on, named once.

The scopes of kernel/registry.py are owned by records of two families: an organization
(``org`` scope, ``organizationId``) and a project (``project`` scope, ``projectId``). Who may do
what is the user's ACL item (kernel/access.py), written with each membership; the built-in roles
and permissions of an organization are records too. These are the kernel's own model, not a
feature's rules: every other kernel module names them through these constants, never as text
(tests/unit/test_kernel_names_no_family.py), and their declarations live with the identity
feature (chalicelib/features/identity/declarations.py) like any other family's.
"""
from __future__ import annotations

ORGANIZATIONS = 'organizations'   # owns the org scope; an organization belongs to itself
PROJECTS = 'projects'             # owns the project scope
USERS = 'users'                   # the principal; its ACL item holds its roles and keys
MEMBERSHIPS = 'memberships'       # a user in an organization, with a role (written to the ACL item)
ROLES = 'roles'                   # the built-in records of every organization (kernel/access.py)
PERMISSIONS = 'permissions'
