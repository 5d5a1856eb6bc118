"""Every route of the app × every kind of caller, generated from the route table (app.routes),
so a route added later is covered without touching this file.

Cases: no credential, unknown key, revoked key, expired key, expired JWT, JWT for another
audience, JWT signed by a key the provider never published (all 401), a user of another
organization (404 for the default organization's resources, lists without them), a VIEWER
(reads pass, writes 403), and the right credential: a platform admin (2xx; on GET routes also
as a bearer JWT), a MEMBER and a MANAGE user of the default organization (2xx where their role
allows it, 403 where it does not: ``expected_for_role``).

The product (route x caller, ~3,900 cases) is sampled (``sampled``): every route, every caller,
and every pair of a route class and a caller; ``AUTH_MATRIX=full`` runs all of it.

Path parameters are filled with ids of real resources of the default organization, one of each
family, created through the API once per module (one bootstrapped platform per module keeps
the ~2,800 requests fast). Public routes and service routes are checked separately below.
"""
from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import app as app_module
from chalicelib.features.bridges.shapes import EXAMPLE_ENDPOINT
from chalicelib.kernel.http import aliases, policy
from chalicelib.kernel.registry import BY_PATH, FAMILIES, Family
from tests.api.test_auth_credentials import EC, RSA, bearer
from tests.conftest import ADMIN_KEY, Api
from tests.support import sample
from tests.unit.test_jwt_verify import AUDIENCE, ISSUER, JwksServer, Signer

APP = app_module.app
# The SDK's aliases (kernel/http/aliases.py) run the same views under the same checks as the
# routes they stand for: tests/api/test_sdk_aliases.py covers them; the matrix covers the contract.
ROUTES = sorted((path, method) for path, methods in APP.routes.items() for method in methods
                if (path, method) not in aliases.ROUTES)
USER_ROUTES = [r for r in ROUTES if policy.of(r[0]) == 'user']
PUBLIC_ROUTES = [r for r in ROUTES if policy.of(r[0]) == 'public']
SERVICE_ROUTES = [r for r in ROUTES if policy.of(r[0]) == 'service']
CATALOGUE = {'products', 'product-groups', 'product-project-templates'}
PARAM = re.compile(r'^\{(\w+)\}$')
UNAUTHENTICATED = ('no credential', 'unknown key', 'revoked key', 'expired key', 'expired JWT',
                   'JWT wrong audience', 'JWT unknown signing key')
ROLE_CASES = ('member', 'manager')          # the right credential of a MEMBER / a MANAGE user
CASES = UNAUTHENTICATED + ('other organization', 'viewer', 'right credential') + ROLE_CASES
MANAGE_AREA = {'memberships', 'teams', 'roles', 'permissions', 'organizations'}

# Custom (non-CRUD) routes: the body a caller sends. Anything not listed sends {}.
# The right caller must get a 2xx on these; on a custom write not listed it must only not be
# refused (not 401/403, no 5xx).
CUSTOM_BODIES: dict[tuple[str, str], Callable[[World], Any]] = {
    ('PUT', '/api/tasks/{id}/status'): lambda w: {'statusSlug': w.task_status_slug},
    ('POST', '/api/executions/{executionId}/cancel'): lambda w: None,
    # the bridge's only endpoint requires customerId: the call is answered [] without any upstream
    ('POST', '/api/service-bridges/agent-tools/call'): lambda w: {
        'bridge': w.resources['service-bridges']['id'], 'endpoint_name': w.endpoint_name,
        'executionId': w.resources['executions']['id']},
    ('POST', '/api/events/ui/batch'): lambda w: {'events': [{'kind': 'ui.error', 'payload': {'code': 1}}]},
    ('POST', '/api/activity-plans/{id}/start'): lambda w: {'projectId': w.resources['activity-plans']['projectId']},
    ('POST', '/api/tasks/take-next'): lambda w: {'projectId': w.resources['projects']['id']},
    ('POST', '/api/content-objects/{id}/validate'): lambda w: {},
    ('POST', '/api/batch-update'): lambda w: {'projectId': w.resources['projects']['id']},
}
# Query strings of custom GET routes that need one.
CUSTOM_QUERIES: dict[tuple[str, str], Callable[[World], str]] = {
    ('GET', '/api/service-bridges/agent-tools'): lambda w: f"?projectId={w.resources['projects']['id']}",
    **{(method, f'/api/stores/{{orgSlug}}/{{storeSlug}}{v}/fs'): (lambda w: '?path=matrix/none.txt')
       for method in ('GET', 'POST', 'DELETE') for v in ('', '/{version}')},
}
# Where the generic expectation does not hold: (method, path, case) -> statuses.
EXPECTED: dict[tuple[str, str, str], set[int] | str] = {
    # every member of an organization sends the UI's telemetry, viewers included
    ('POST', '/api/events/ui/batch', 'viewer'): 'ok',
    # the query names a project of the default organization: not theirs to see
    ('GET', '/api/service-bridges/agent-tools', 'other organization'): {404},
    # validating a content object is a read, for viewers too
    ('POST', '/api/content-objects/{id}/validate', 'viewer'): 'ok',
    # the store paths name the default organization by slug: another organization's user sees nothing
    **{(method, path, 'other organization'): {404}
       for method, path in (('GET', '/api/stores/{orgSlug}/{storeSlug}'),
                            ('GET', '/api/stores/{orgSlug}/{storeSlug}/fs'),
                            ('GET', '/api/stores/{orgSlug}/{storeSlug}/{version}/fs'),
                            ('POST', '/api/stores/{orgSlug}/{storeSlug}/fs'),
                            ('POST', '/api/stores/{orgSlug}/{storeSlug}/{version}/fs'),
                            ('DELETE', '/api/stores/{orgSlug}/{storeSlug}/fs'),
                            ('DELETE', '/api/stores/{orgSlug}/{storeSlug}/{version}/fs'))},
    # extraction's store paths name the default organization's data store: another organization's
    # user sees nothing (docs/api/extraction.md)
    **{(method, f'/api/stores/{{orgSlug}}/{{storeSlug}}{v}/{tail}', 'other organization'): {404}
       for v in ('', '/{version}')
       for method, tail in (('GET', 'dataObjects'), ('GET', 'dataObjects/{objectId}'),
                            ('GET', 'dataObjects/{objectId}/attributes'),
                            ('PUT', 'dataObjects/{objectId}/attributes/{attributeId}'),
                            ('GET', 'dataObjects/{objectId}/children'), ('GET', 'taxonomies'), ('GET', 'attributes'))},
    # no file at the path the matrix names (store_fs tests cover reading one back)
    **{('GET', path, case): {404}
       for path in ('/api/stores/{orgSlug}/{storeSlug}/fs', '/api/stores/{orgSlug}/{storeSlug}/{version}/fs')
       for case in ('right credential', 'right JWT', 'viewer', 'member', 'manager')},
    # the SDK's family paths (features/parsing/routes.py) look the family up in the named store; the
    # world's family is in none, so every caller gets 404 (tests/api/test_parsing.py reads real ones
    # and check another organization's 404 there)
    **{(method, f'/api/stores/{{orgSlug}}/{{storeSlug}}{v}/families/{tail}', case): {404}
       for v in ('', '/{version}')
       for method, tail in (('GET', '{id}'), ('GET', '{id}/objects/{coId}/content'),
                            ('POST', '{id}/objects/{coId}/content'))
       for case in ('right credential', 'right JWT', 'viewer', 'member', 'manager', 'other organization')},
    # the world's document family has no uploaded file
    **{('GET', '/api/document-families/{id}/content', case): {404}
       for case in ('right credential', 'right JWT', 'viewer', 'member', 'manager')},
}


# ----------------------------------------------------------------------------- route shapes

@dataclass(frozen=True)
class Shape:
    kind: str                    # crud | account | custom
    op: str                      # list create get update delete sequence | read write
    family: Family | None        # the family whose resource the path names (or lists)


def shape(path: str, method: str) -> Shape:
    parts = path.strip('/').split('/')
    if parts[:3] == ['api', 'account', 'me']:
        return Shape('account', 'read' if method == 'GET' else 'write', None)
    family = BY_PATH.get(parts[1]) if len(parts) > 1 and parts[0] == 'api' else None
    item = family is not None and len(parts) > 2 and PARAM.match(parts[2]) is not None
    if family is not None and len(parts) == 2:
        return Shape('crud', {'GET': 'list', 'POST': 'create'}[method], family)
    if item and len(parts) == 3:
        return Shape('crud', {'GET': 'get', 'PUT': 'update', 'DELETE': 'delete'}[method], family)
    if item and len(parts) == 4 and parts[3] == 'sequence' and method == 'GET':
        return Shape('crud', 'sequence', family)
    return Shape('custom', 'read' if method == 'GET' else 'write', family if item else None)


# ----------------------------------------------------------------------------- the platform

@dataclass
class World:
    api: Api
    org_id: str
    admin_id: str
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)   # family -> a record
    created: dict[str, str] = field(default_factory=dict)                # family -> id made by a case
    callers: dict[str, tuple[str | None, dict[str, str]]] = field(default_factory=dict)
    default_user_ids: set[str] = field(default_factory=set)
    admin_key_id: str = ''
    task_status_slug: str = ''
    endpoint_name: str = ''

    def as_caller(self, case: str) -> tuple[str | None, dict[str, str]]:
        return self.callers[case]

    # bodies ------------------------------------------------------------------------------
    def create_body(self, family: Family, creates: bool = True) -> dict[str, Any]:
        """A valid create body for the default organization. ``creates``: the caller may really
        create it (a membership then needs a user who is not a member yet)."""
        body: dict[str, Any] = {}
        if family.scope == 'org':
            body['organizationId'] = self.org_id
        if family.scope == 'project':
            body['projectId'] = self.resources['projects']['id']
        if family.path == 'memberships':       # one membership per user and organization
            body['userId'] = self.new_user()['id'] if creates else self.resources['users']['id']
        for f in family.writable.values():
            if not f.required or f.name in body:
                continue
            if family.path == 'memberships' and f.name == 'role':
                body['role'] = 'MEMBER'
            elif f.ref:
                body[f.name] = self.resources[f.ref]['id']
            else:
                body[f.name] = sample(f)
        return body

    def create(self, family: Family) -> dict[str, Any]:
        r = self.api.post(f'/api/{family.path}', self.create_body(family))
        assert r.status == 201, (family.path, r.status, r.json)
        return r.json

    def spare(self, family: Family) -> str:
        """A resource the right caller may delete: one its create case made, else a new one."""
        made = self.created.pop(family.path, None)
        return made or self.create(family)['id']

    def new_user(self) -> dict[str, Any]:
        r = self.api.post('/api/users', {'email': f'm-{uuid.uuid4().hex[:10]}@example.com'})
        assert r.status == 201, r.json
        return r.json

    def fill(self, path: str, fresh: bool = False) -> str:
        """The route's path with ids of the default organization's resources (a new one when
        ``fresh``: the right caller deletes or changes state without spoiling later cases)."""
        parts = path.strip('/').split('/')
        if len(parts) >= 4 and parts[2:4] == ['{id}', '{slug}']:   # organization-slug read paths
            record = self.resources[parts[1]]
            self._named(parts[1], record)
            values = {'{id}': self.org_slug(), '{slug}': record['slug'], '{version}': record.get('version') or ''}
            return '/' + '/'.join(values.get(p, p) for p in parts)
        if parts[:2] == ['api', 'stores']:   # the SDK's store paths: organization and store slugs
            # extraction's paths name a data store (docs/api/extraction.md), the others a document store
            stores = 'data-stores' if {'dataObjects', 'taxonomies', 'attributes'} & set(parts) else 'document-stores'
            record = self.resources[stores]
            self._named(stores, record)
            obj = self.resources['data-objects']
            values = {'{orgSlug}': self.org_slug(), '{storeSlug}': record['slug'], '{version}': 'None',
                      '{objectId}': obj['id'], '{attributeId}': (obj.get('attributes') or [{'id': 'x'}])[0]['id'],
                      # the SDK's family paths (features/parsing/routes.py): a family and its content object
                      '{id}': self.resources['document-families']['id'],
                      '{coId}': self.resources['content-objects']['id']}
            return '/' + '/'.join(values.get(p, p) for p in parts)
        out = []
        for i, part in enumerate(parts):
            m = PARAM.match(part)
            if not m:
                out.append(part)
                continue
            family = BY_PATH.get(parts[i - 1]) if i > 0 else None
            if parts[:3] == ['api', 'account', 'me']:
                out.append(self.fresh_key_id() if fresh else self.admin_key_id)
            elif part == '{endpointName}':
                out.append(self.endpoint_name)
            elif part == '{memoryId}':   # a memory of the definition the path names, its own: callers delete it
                out.append(_seed_layout_memory({'id': out[-2]}, self.org_id, f'layout:{uuid.uuid4().hex}'))
            elif family is not None and fresh and family.path == 'organizations':
                out.append(self.system_org()['id'])
            elif family is not None:
                out.append(self.spare(family) if fresh and not family.read_only
                           else self.resources[family.path]['id'])
            else:
                out.append('x')
        return '/' + '/'.join(out)

    def org_slug(self) -> str:
        return self.api.get(f'/api/organizations/{self.org_id}').json['slug']

    def _named(self, path: str, record: dict[str, Any]) -> None:
        """Give the generated record a slug (and a version where the family has one) once."""
        if record.get('slug'):
            return
        change = {'slug': f'matrix-{path}'}
        if 'version' in BY_PATH[path].writable:
            change['version'] = '1.0.0'
        assert self.api.put(f"/api/{path}/{record['id']}", change).status == 200
        record.update(change)

    def system_org(self) -> dict[str, Any]:
        """An organization nobody belongs to (created as the system): the admin would otherwise
        become its manager, and every later list of the admin would read one more tenant."""
        from chalicelib.features.identity.bootstrap import SYSTEM
        from chalicelib.kernel.crud import create
        return create('organizations', {'name': 'Fresh', 'slug': f'f-{uuid.uuid4().hex[:10]}'}, SYSTEM)

    def fresh_key_id(self) -> str:
        return self.api.post('/api/account/me/api-keys', {'name': 'fresh'}).json['id']


def _seed_layout_memory(definition: dict[str, Any], org_id: str, fingerprint: str = 'layout:matrix') -> str:
    """A layout memory of the world's definition, as a reviewer's correction by nodeIds writes
    it (features/extraction/memories.py: the server is its only writer)."""
    from chalicelib.features.extraction import memories
    from chalicelib.features.identity.bootstrap import SYSTEM
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family as family_of
    fam = family_of(memories.FAMILY)
    data = records.new_record(fam, {'dataDefinitionId': definition['id'], 'fingerprint': fingerprint,
                                    'kind': 'layout', 'hint': 'matrix', 'fields': {}, 'fieldCount': 0},
                              principal=SYSTEM, org=org_id, id_=memories.memory_id(definition['id'], fingerprint))
    records.commit(records.create_ops(fam, [data], SYSTEM))
    return data['id']


def _build(api: Api, org_id: str, admin_id: str) -> World:
    from chalicelib.features.identity.bootstrap import SYSTEM
    from chalicelib.features.identity.service import create_api_key
    from chalicelib.kernel.crud import create
    # the admin's own key (it names its owner: one read to authenticate, as clients' keys do)
    admin_key = create_api_key(admin_id, 'admin@example.com', 'matrix')['key']
    api = api.as_key(admin_key)
    world = World(api=api, org_id=org_id, admin_id=admin_id)
    world.admin_key_id = api.get('/api/account/me/api-keys').json[0]['id']
    # one record of every writable family, references first
    pending = [f for f in FAMILIES if not f.read_only]
    world.resources['organizations'] = api.get(f'/api/organizations/{org_id}').json
    pending.remove(BY_PATH['organizations'])
    while pending:
        ready = [f for f in pending if all(
            (not s.required or not s.ref or s.ref in world.resources or (f.path, s.name) == ('memberships', 'userId'))
            for s in f.writable.values()) and (f.scope != 'project' or 'projects' in world.resources)]
        assert ready, [f.path for f in pending]
        for family in ready:
            world.resources[family.path] = world.create(family)
            pending.remove(family)
    member = world.new_user()
    assert api.post('/api/memberships', {'organizationId': org_id, 'userId': member['id'],
                                         'role': 'MEMBER'}).status == 201
    world.resources['users'] = member
    _seed_layout_memory(world.resources['data-definitions'], org_id)
    for family in (f for f in FAMILIES if f.read_only):
        listed = api.get(f'/api/{family.path}').json['content']
        assert listed, f'no {family.path} record to address'
        world.resources[family.path] = listed[0]
    # an agent-callable bridge whose one endpoint requires customerId: the proxy and agent-tool
    # cases below are answered [] without contacting any upstream
    bridge = api.put(f"/api/service-bridges/{world.resources['service-bridges']['id']}",
                     {'agentCallable': True, 'endpoints': [EXAMPLE_ENDPOINT]})
    assert bridge.status == 200, bridge.json
    world.resources['service-bridges'] = bridge.json
    world.endpoint_name = EXAMPLE_ENDPOINT['name']
    world.task_status_slug = api.post('/api/task-statuses', {
        'organizationId': org_id, 'label': 'Review', 'slug': 'review-matrix', 'statusType': 'OPEN'}).json['slug']
    # the callers
    viewer = world.new_user()
    assert api.post('/api/memberships', {'organizationId': org_id, 'userId': viewer['id'],
                                         'role': 'VIEWER'}).status == 201
    viewer_key = create_api_key(viewer['id'], viewer['email'], 'viewer')['key']
    revoked = api.as_key(viewer_key).post('/api/account/me/api-keys', {'name': 'to revoke'}).json
    assert api.as_key(viewer_key).delete(f"/api/account/me/api-keys/{revoked['id']}").status == 204
    expired = create_api_key(viewer['id'], viewer['email'], 'old', expires_at='2020-01-01T00:00:00.000000Z')['key']
    # another organization the admin has no role in, managed by its own user
    other_org = create('organizations', {'name': 'Other', 'slug': 'other-matrix'}, SYSTEM)
    other_email = 'other-manager@example.com'
    other_user = create('users', {'email': other_email}, SYSTEM)
    create('memberships', {'organizationId': other_org['id'], 'userId': other_user['id'], 'role': 'MANAGE'}, SYSTEM)
    other_key = create_api_key(other_user['id'], other_email, 'other')['key']
    role_keys = {}
    for case, role in (('member', 'MEMBER'), ('manager', 'MANAGE')):
        person = world.new_user()
        made = api.post('/api/memberships', {'organizationId': org_id, 'userId': person['id'], 'role': role})
        assert made.status == 201
        role_keys[case] = create_api_key(person['id'], person['email'], case)['key']
    admin_email = api.get('/api/account/me').json['email']
    now = int(time.time())
    world.callers = {
        'no credential': (None, {}),
        'unknown key': ('pk_' + uuid.uuid4().hex * 2, {}),
        'revoked key': (revoked['key'], {}),
        'expired key': (expired, {}),
        'expired JWT': (None, bearer(RSA.token(admin_email, exp=now - 3600, iat=now - 7200, nbf=now - 7200))),
        'JWT wrong audience': (None, bearer(EC.token(admin_email, aud='another-api'))),
        'JWT unknown signing key': (None, bearer(Signer('ES256').token(admin_email))),
        'other organization': (other_key, {}),
        'viewer': (viewer_key, {}),
        'right credential': (admin_key, {}),
        'member': (role_keys['member'], {}),
        'manager': (role_keys['manager'], {}),
        'right JWT': (None, bearer(RSA.token(admin_email, exp=now + 3600))),
    }
    world.default_user_ids = {admin_id, viewer['id'], member['id']}
    return world


@pytest.fixture(scope='module')
def world():
    """One bootstrapped platform for the whole module, on its own moto backend."""
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.core import jwt_verify
    from chalicelib.core.config import get_config, reset_config
    from chalicelib.features.identity.bootstrap import bootstrap
    from chalicelib.kernel.store import model
    mp = pytest.MonkeyPatch()
    server = JwksServer(RSA, EC)
    mp.setenv('COUNTER_SHARDS', '1')     # fewer counter items: moto copies the table per transaction
    mp.setenv('AUTH_JWT_ISSUER', ISSUER)
    mp.setenv('AUTH_JWT_AUDIENCE', AUDIENCE)
    mp.setenv('AUTH_JWT_JWKS_URL', server.url)
    reset_config()
    get_config()  # read now: chalice.test.Client swaps os.environ during requests
    model.reset()
    jwt_verify.reset_caches()
    try:
        with mock_aws():
            from tests.work_support import create_resources
            create_resources()   # the activity queue (activity starts) and the event bus
            platform = bootstrap(api_key=ADMIN_KEY)
            from chalicelib.features.documents import blobs
            blobs.reset()
            blobs.client().create_bucket(Bucket=get_config().bucket_name)   # the document routes' bucket
            with Client(APP) as client:
                yield _build(Api(client, ADMIN_KEY), platform['organizationId'], platform['userId'])
    finally:
        server.close()
        mp.undo()
        reset_config()
        model.reset()
        jwt_verify.reset_caches()


# ----------------------------------------------------------------------------- expectations

def expected(sh: Shape, method: str, path: str, case: str) -> set[int] | str:
    """The statuses a case may get on a route: a set, 'ok' (any 2xx) or 'not-denied' (anything
    but 401/403 and 5xx: a custom write this file has no valid body for, see CUSTOM_BODIES)."""
    if case in UNAUTHENTICATED:
        return {401}
    if (method, path, case) in EXPECTED:
        return EXPECTED[(method, path, case)]
    if case in ROLE_CASES:
        return expected_for_role(sh, method, path, case)
    if case in ('right credential', 'right JWT'):
        if sh.kind == 'custom' and method != 'GET' and (method, path) not in CUSTOM_BODIES:
            return 'not-denied'
        return 'ok'
    fam = sh.family.path if sh.family is not None else None
    if sh.kind == 'account':
        if method == 'DELETE':
            return {404}                          # the admin's key id: not theirs
        return 'ok'                               # their own account
    read = method == 'GET'
    if case == 'viewer':
        return 'ok' if read else {403}
    # another organization's user (a manager there, nothing here)
    if sh.kind == 'custom':
        return {404} if sh.family is not None else ('ok' if read else 'not-denied')
    if sh.op == 'list':
        return 'ok'
    if sh.op == 'create':
        if fam in CATALOGUE or fam == 'users':
            return {403}                          # platform admins only
        if fam == 'organizations':
            return 'ok'                           # a manager elsewhere may create one
        return {400}                              # the body names the default org/project: unknown to them
    if fam in CATALOGUE:
        return 'ok' if read else {403}            # the catalogue is everyone's to read
    return {404}


def expected_for_role(sh: Shape, method: str, path: str, case: str) -> set[int] | str:
    """A MEMBER ('member') or MANAGE ('manager') user of the default organization, on its
    resources: reads everywhere; writes of the organization's resources; the Manage area
    (memberships, teams, roles, permissions, the organization's settings) for managers only;
    never the catalogue, users (platform admins create them; a user changes only themselves) or
    an organization's deletion (platform admins only)."""
    if sh.kind == 'account':
        return {404} if method == 'DELETE' else 'ok'     # DELETE names the admin's key: not theirs
    if method == 'GET':
        return 'ok'
    if sh.kind == 'custom':
        return 'ok'                                       # resource actions (CUSTOM_BODIES)
    fam = sh.family.path
    if fam in CATALOGUE or fam == 'users':
        return {403}
    if fam == 'organizations' and sh.op == 'delete':
        return {403}
    if fam in MANAGE_AREA and case == 'member':
        return {403}
    return 'ok'


def _isolated(world: World, sh: Shape, reply) -> None:
    """A list seen by another organization's user holds nothing of the default organization."""
    content = reply.json['content'] if isinstance(reply.json, dict) else reply.json
    assert isinstance(content, list)
    fam = sh.family.path if sh.family else None
    for item in content:
        if fam == 'organizations':
            assert item['id'] != world.org_id
        elif fam == 'users':
            assert item['id'] not in world.default_user_ids
        elif fam not in CATALOGUE:
            assert item.get('organizationId') != world.org_id, item


def _call(world: World, path: str, method: str, case: str, fresh: bool):
    sh = shape(path, method)
    key, headers = world.as_caller(case)
    url = world.fill(path, fresh=fresh) + (CUSTOM_QUERIES[(method, path)](world)
                                           if (method, path) in CUSTOM_QUERIES else '')
    body = None
    if method in ('POST', 'PUT'):
        if sh.kind == 'crud' and sh.op == 'create' and sh.family.path == 'memberships' and case == 'manager':
            body = {'organizationId': world.org_id, 'email': world.new_user()['email'], 'role': 'MEMBER'}
        elif sh.kind == 'crud' and sh.op == 'create':
            body = world.create_body(sh.family, creates=case in ('right credential',) + ROLE_CASES)
        elif (method, path) in CUSTOM_BODIES:
            body = CUSTOM_BODIES[(method, path)](world)
        elif sh.kind == 'account':
            body = {'name': 'matrix'}
        else:
            body = {}
    return sh, world.api.call(method, url, body, key=key, headers=headers)


# Creating an organization makes its creator a member, and every later list of theirs reads one
# more tenant: that route goes last (speed only; no case depends on another).
_ORDERED = sorted(USER_ROUTES, key=lambda r: r == ('/api/organizations', 'POST'))
def _covers(path: str, method: str, case: str) -> bool:
    """The role columns skip custom writes this file has no valid body for (CUSTOM_BODIES)."""
    return not (case in ROLE_CASES and shape(path, method).kind == 'custom' and method != 'GET'
                and (method, path) not in CUSTOM_BODIES)


def _cases(path: str, method: str) -> list[str]:
    return [case for case in CASES + (('right JWT',) if method == 'GET' else ()) if _covers(path, method, case)]


FULL = [(path, method, case) for path, method in _ORDERED for case in _cases(path, method)]


def route_class(path: str, method: str) -> tuple:
    """What a route's expected answers depend on (``expected``, ``expected_for_role``, ``fresh``):
    two routes of one class answer every caller alike, unless EXPECTED names the route."""
    sh = shape(path, method)
    fam = sh.family.path if sh.family is not None else None
    area = ('catalogue' if fam in CATALOGUE else fam if fam in ('users', 'organizations')
            else 'manage' if fam in MANAGE_AREA else 'none' if fam is None else 'other')
    return sh.kind, sh.op, method, area, (method, path) in CUSTOM_BODIES


EXTRA_PER_ROUTE = 2   # callers per route besides the right credential (more in small classes)


def sampled() -> list[tuple[str, str, str]]:
    """The matrix as a covering sample instead of the full product (issue 23: ~3.5x fewer cases).

    Every route is called with the right credential (its 2xx path) and at least two other
    callers; within each route class the other callers rotate over the class's routes, so every
    (route class, caller) pair is covered: each role and each credential kind meets each kind
    of route, and every caller and every route appears. Every (route, caller) the EXPECTED
    table names as an exception is always called. ``AUTH_MATRIX=full`` runs the full product."""
    classes: dict[tuple, list[tuple[str, str]]] = {}
    for path, method in _ORDERED:
        classes.setdefault(route_class(path, method), []).append((path, method))
    chosen: set[tuple[str, str, str]] = set()
    for routes in classes.values():
        for i, (path, method) in enumerate(routes):
            others = [c for c in _cases(path, method) if c != 'right credential']
            per_route = max(EXTRA_PER_ROUTE, -(-len(others) // len(routes)))
            picked = {others[(i * per_route + j) % len(others)] for j in range(min(per_route, len(others)))}
            picked |= {'right credential'} & set(_cases(path, method))
            picked |= {c for c in others if (method, path, c) in EXPECTED}
            chosen |= {(path, method, c) for c in picked}
    return [row for row in FULL if row in chosen]   # the full product's order (org POST last)


MATRIX = FULL if os.environ.get('AUTH_MATRIX') == 'full' else sampled()


@pytest.mark.parametrize('path,method,case', MATRIX, ids=[f'{m} {p} | {c}' for p, m, c in MATRIX])
def test_route_by_caller(world, path, method, case):
    # the right caller deletes, or changes the state of, a resource of its own
    want = expected(shape(path, method), method, path, case)
    fresh = want == 'ok' and method in ('DELETE', 'POST') and \
        (case in ('right credential', 'right JWT') or (case in ROLE_CASES and shape(path, method).kind != 'account'))
    sh, r = _call(world, path, method, case, fresh)
    if case in ('right credential',) + ROLE_CASES and sh.op == 'create' and r.status == 201:
        world.created[sh.family.path] = r.json['id']      # a delete case may use it
    what = (case, method, path, r.status, r.json)
    assert {'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'} <= set(r.headers), what
    if want == 'ok':
        assert 200 <= r.status < 300, what
    elif want == 'not-denied':
        assert r.status not in (401, 403) and r.status < 500, what
    else:
        assert r.status in want, what
    if r.status >= 400:
        assert r.json['status'] == r.status and r.json['error'] and r.json['message'], what
    if r.status == 401:
        assert 'www-authenticate' in r.headers, what
    if case == 'other organization' and r.status == 200 and (sh.op == 'list' or sh.kind == 'custom'):
        if isinstance(r.json, dict) and 'content' in r.json:
            _isolated(world, sh, r)


def test_the_sample_covers_every_route_caller_and_pair():
    """Every route, every caller (role and credential kind), every (route class, caller) pair
    and every EXPECTED exception of the full product is in the sample, at under half its size."""
    sample = set(sampled())
    assert {(p, m) for p, m, _ in sample} == {(p, m) for p, m, _ in FULL}
    assert {c for _, _, c in sample} == {c for _, _, c in FULL}
    assert {(route_class(p, m), c) for p, m, c in sample} == {(route_class(p, m), c) for p, m, c in FULL}
    assert {(p, m, c) for p, m, c in FULL if (m, p, c) in EXPECTED} <= sample
    assert all(sum(1 for p, m, _ in sample if (p, m) == route) >= 3 for route in {(p, m) for p, m, _ in FULL})
    assert len(sample) < 0.45 * len(FULL)


def test_every_user_route_is_in_the_matrix():
    assert len(USER_ROUTES) > 200
    families = {shape(p, m).family.path for p, m in USER_ROUTES if shape(p, m).family is not None}
    assert families == {f.path for f in FAMILIES}
    shapes = {(shape(p, m).kind, shape(p, m).op) for p, m in USER_ROUTES}
    assert {('crud', op) for op in ('list', 'create', 'get', 'update', 'delete', 'sequence')} <= shapes


# ----------------------------------------------------------------------------- public and service

@pytest.mark.parametrize('path,method', PUBLIC_ROUTES, ids=[f'{m} {p}' for p, m in PUBLIC_ROUTES])
def test_public_routes_need_no_credential(world, path, method, monkeypatch):
    from chalicelib.core.config import reset_config
    if path.startswith('/.well-known/oauth-protected-resource'):   # served while MCP is enabled
        monkeypatch.setenv('MCP_ENABLED', 'true')
        monkeypatch.setenv('MCP_PUBLIC_URL', 'https://api.example.com/mcp')
        reset_config()
    try:
        for key, headers in ((None, {}), ('pk_unknown', {}), (None, {'authorization': 'Bearer junk'})):
            r = world.api.call(method, path, key=key, headers=headers)
            assert r.status == 200, (path, r.status)
            assert 'x-ratelimit-limit' in r.headers
    finally:
        monkeypatch.undo()
        reset_config()


@pytest.mark.parametrize('path,method', SERVICE_ROUTES, ids=[f'{m} {p}' for p, m in SERVICE_ROUTES])
def test_service_routes_refuse_every_user_credential(world, path, method, monkeypatch):
    from chalicelib.core.config import get_config, reset_config
    for case in CASES + ('right JWT',):
        key, headers = world.as_caller(case)
        r = world.api.call(method, path, {}, key=key, headers=headers)
        assert r.status == 401, (case, r.status)
    monkeypatch.setenv('INTERNAL_SERVICE_TOKEN', 'matrix-service-token-0123456789')
    reset_config()
    get_config()
    try:
        r = world.api.call(method, path, {}, key=None, headers={'x-service-token': 'matrix-service-token-0123456789'})
        assert r.status not in (401, 403) and r.status < 500, r.json
    finally:
        monkeypatch.undo()
        reset_config()
        get_config()
