"""Who is calling: the authenticated principal of the current request."""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.errors import Unauthorized

ROLE_ORDER = ('VIEWER', 'MEMBER', 'MANAGE', 'PLATFORM_ADMIN')


@dataclass
class RequestReads:
    """What was read once for one request on the caller's behalf, so that nothing is read twice
    (issue 17's one round trip): the admission's reads (features/identity/admission.py ``admit``)
    and those of answering it (kernel/access.py, kernel/embedding.py). A principal lives for
    one request, so this never outlives it. Each field says what it holds (issue 40: before, an
    untyped dict keyed by strings)."""
    # (family path, id) -> the record (None: absent) the admission read ahead for the view; taken once
    prefetched: dict[tuple[str, str], Any] = field(default_factory=dict)
    # user id -> the organizations of their live memberships (their ACL item)
    orgs_of: dict[str, frozenset[str]] = field(default_factory=dict)
    # organization id -> its organizationStatus (ACTIVE, SUSPENDED; absent: not read)
    organization_status: dict[str, str | None] = field(default_factory=dict)
    # (family path, id) -> a record read for this request (None: it does not exist)
    records: dict[tuple[str, str], Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Principal:
    user_id: str
    email: str
    memberships: dict[str, str] = field(default_factory=dict)  # organization id -> role
    platform_admin: bool = False
    credential: str = 'api-key'          # api-key | jwt | basic | service | system | agent
    rate_key: str = ''                   # the credential the rate limiter counts ('' = not counted)
    # An agent (credential 'agent', features/bridges/agent_tools.py) is bound to one project: it holds no
    # membership, so the generic rules let it see nothing; the agent tools check project_id.
    project_id: str | None = None
    agent_id: str | None = None
    # The user's record as read while authenticating (GET /api/account/me answers from it).
    user: dict | None = field(default=None, compare=False, hash=False, repr=False)
    # What was read once for this request on the caller's behalf (``RequestReads``).
    reads: RequestReads = field(default_factory=RequestReads, compare=False, hash=False, repr=False)

    def role_in(self, org_id: str | None) -> str | None:
        if self.platform_admin:
            return 'PLATFORM_ADMIN'
        if org_id is None:
            return None
        return self.memberships.get(org_id)

    @property
    def org_ids(self) -> list[str]:
        return sorted(self.memberships)

    @property
    def default_org(self) -> str | None:
        return self.org_ids[0] if len(self.memberships) == 1 else None


_current: contextvars.ContextVar[Principal | None] = contextvars.ContextVar('principal', default=None)


def set_current(principal: Principal | None) -> None:
    _current.set(principal)


def current() -> Principal:
    principal = _current.get()
    if principal is None:  # a route that needs a caller ran without one: refuse, never guess
        raise Unauthorized()
    return principal


def prefetched(principal: Principal, family: str, id_: str) -> tuple[bool, Any]:
    """(True, record or None) when the request's admission (features/identity/admission.py
    ``admit``) read (family, id) for this request; else (False, None)."""
    found = principal.reads.prefetched
    if (family, id_) in found:
        return True, found.pop((family, id_))
    return False, None

