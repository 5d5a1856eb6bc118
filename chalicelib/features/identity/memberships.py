"""Memberships, roles and permissions: the access rules of the Manage area that the generic
permission check (organization:manage) cannot express (the rules live in kernel/access.py),
and the ACL items authentication reads: every write of an active membership also writes, in the
same transaction, the ``ACL#{orgId}`` item in the member's partition (kernel/store/acl.py).

Adding people (``POST /api/memberships``):

* A body names the person by ``userId`` or by ``email`` (exactly one).
* A platform admin adds them at once (``status`` ACTIVE); an e-mail nobody holds yet gets a new
  user in the same transaction.
* Anyone else (an organization's manager) creates an **invitation** (``status`` INVITED): it
  grants nothing (no ACL item is written, the manager does not come to share an organization
  with the person, so cannot read their user record), and it changes nothing for the person
  until they accept it. So a manager can never silently change which organizations someone
  belongs to, nor which organization is theirs by default (the one used when a create omits
  ``organizationId``). By ``email`` the answer is the same whether the address is registered or
  not (an address nobody holds gets a new user, which its owner signs in to with a verified
  e-mail); by ``userId`` only a user the manager can already see may be named (anyone else is
  400 "does not exist", as for a random id).
* The invited user sees their invitations in ``GET /api/account/me`` (``invitations``), reads
  the membership by id, accepts with ``PUT /api/memberships/{id}`` ``{"status": "ACTIVE"}`` (they
  may change nothing else) or declines with ``DELETE``. Nobody else can change ``status``.
"""
from __future__ import annotations

import uuid

from chalicelib.core.errors import BadRequest, Forbidden
from chalicelib.features.identity.users import normalize_email
from chalicelib.kernel import access, records
from chalicelib.kernel.hooks import Hook
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import acl, table
from chalicelib.kernel.store import repository as repo

ACTIVE, INVITED = 'ACTIVE', 'INVITED'
# What an invitee's acceptance may change; anything else in their PUT is refused.
_BOOKKEEPING = frozenset({'status', 'updatedOn', 'changeSequence'})


def _status(data) -> str:
    return data.get('status') or ACTIVE   # memberships written before invitations existed are active


def _is_id(value) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except (ValueError, AttributeError, TypeError):
        return False


def _invitee(principal, data) -> bool:
    return data.get('userId') == principal.user_id


class AccessHook(Hook):
    def guarded(self, family):
        # a membership's status, role and invitee rules read the whole record, and its ACL item
        # follows every update; roles and permissions: built-in ones are refused by can_write
        return None if family.path == 'memberships' else frozenset()

    def before_create(self, family, principal, data, body):
        if family.path != 'memberships':  # roles, permissions: a client never creates a built-in record
            data['builtIn'] = False
            return
        access.check_role_grant(principal, None, data.get('role'))
        email, user_id = data.get('email'), data.get('userId')
        if (email is None) == (user_id is None):
            raise BadRequest("Name the member by 'userId' or by 'email' (exactly one)")
        if email is not None:
            data['email'] = normalize_email(email)
            data['userId'] = table.unique_owner('users', scope=table.GLOBAL_TENANT, field_name='email',
                                                value=data['email']) or str(uuid.uuid4())
        elif not principal.platform_admin and user_id != principal.user_id and \
                not (_is_id(user_id) and access.shares_organization(principal, user_id)):
            raise BadRequest(f"Field 'userId' refers to a record that does not exist: {str(user_id)[:64]}")
        data['status'] = ACTIVE if principal.platform_admin else INVITED

    def before_update(self, family, principal, new, stored):
        if family.path != 'memberships':
            new['builtIn'] = bool(stored.data.get('builtIn'))
            return
        old_status, new_status = _status(stored.data), _status(new)
        if new.get('email') != stored.data.get('email'):
            raise BadRequest("A membership's email cannot change: delete it and invite again")
        if _invitee(principal, stored.data) and old_status == INVITED and not principal.platform_admin:
            changed = {k for k in set(new) | set(stored.data)
                       if new.get(k) != stored.data.get(k) and k not in _BOOKKEEPING}
            if changed or new_status != ACTIVE:
                raise Forbidden('An invitation can only be accepted ({"status": "ACTIVE"}) or declined (DELETE) '
                                'by the invited user')
            return
        if new_status != old_status:
            raise Forbidden('Only the invited user can accept an invitation; a membership cannot become '
                            'an invitation again')
        access.check_membership_update(principal, stored.data, new)

    def extra_create_ops(self, family, principal, data):
        if family.path != 'memberships':
            return []
        org = data['organizationId']
        ops = [repo.move_members(org, 1)]
        if data.get('email') is not None and table.get('users', data['userId']) is None:
            users = family_of('users')
            defaults = {f.name: f.default for f in users.writable.values() if f.default is not None}
            user = records.new_record(users, {**defaults, 'email': data['email']}, principal=principal,
                                      id_=data['userId'])
            user['uuid'] = str(uuid.uuid4())
            ops += records.create_ops(users, [user], principal)
        if _status(data) == ACTIVE:
            ops.append(acl.acl_put(data['userId'], org, data['role']))
        return ops

    def create_checks(self, family, principal, data):
        if family.path != 'memberships':
            return []
        # The organization still exists when the membership lands: an organization is deleted
        # only while it has no memberships (features/identity/organizations.py), in a transaction
        # that this one conflicts with.
        org = data['organizationId']
        return [repo.check_exists('organizations', org, None, field='organizationId', value=org)]

    def audit_ops(self, family, principal, action, data, stored):
        """Keeps the member's ACL item in step on update and delete (create: extra_create_ops)."""
        if family.path != 'memberships' or stored is None:
            return []
        if action == 'DELETE':
            return [acl.acl_delete(stored.data['userId'], stored.org), repo.move_members(stored.org, -1)]
        if _status(data) != ACTIVE:
            return []   # an invitation grants nothing until it is accepted
        return [acl.acl_put(data['userId'], stored.org, data['role'])]   # userId never changes

    def can_write(self, family, principal, stored, op):
        if family.builtin and stored.data.get('builtIn'):
            raise Forbidden(f'Built-in {family.path} are read-only')
        if family.path != 'memberships':
            return None
        if _invitee(principal, stored.data) and _status(stored.data) == INVITED:
            return True   # accept (before_update allows nothing else) or decline
        if op == 'delete' and not access.may_remove_membership(principal, stored.data.get('role')):
            raise Forbidden('Only a platform administrator may remove the PLATFORM_ADMIN role')
        return None  # the generic rule: organization:manage in the record's organization

    def visible(self, family, principal, stored):
        if family.path == 'memberships' and _invitee(principal, stored.data) and _status(stored.data) == INVITED:
            return True   # the invited user reads the invitation they may accept
        return None


HOOK = AccessHook()
