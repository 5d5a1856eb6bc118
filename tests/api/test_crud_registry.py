"""The contract's update semantics, exercised over every registered family through HTTP."""
from __future__ import annotations

import uuid

import pytest

from chalicelib.kernel.registry import FAMILIES, Family
from tests.support import create, create_body, release_organization, sample

COMMON = ('id', 'uuid', 'createdOn', 'updatedOn', 'changeSequence')
WRITABLE = [f for f in FAMILIES if not f.read_only]
ALL = pytest.mark.parametrize('family', WRITABLE, ids=lambda f: f.path)


def plain(f, family: Family) -> bool:
    """A field set by value (not a reference by id or slug, not an embedded record resolved by id,
    not a document family's labels: ids of labels its hook checks, docs/api/documents.md)."""
    from chalicelib.kernel.models import embedded_family
    label_ids = family.path == 'document-families' and f.name == 'labels'
    return not f.ref and f.name not in family.slug_refs and embedded_family(f) is None and not label_ids


# A field whose value goes only with another's (an execution's endReason with status FAILED,
# docs/api/work.md "Timed out"): set beside it.
COMPANIONS = {('executions', 'endReason'): {'status': 'FAILED'}}


def fields_of(family: Family, *types: str, nullable: bool | None = None, required: bool = False):
    return [f for f in family.writable.values()
            if f.type in types and not f.enum and not f.ref and (nullable is None or f.nullable == nullable)
            and f.required == required and f.name not in ('email', 'slug')]


@ALL
def test_create_returns_201_with_the_stored_resource(api, org_id, family):
    made = create(api, family, org_id)
    for name in COMMON:
        assert name in made
    uuid.UUID(made['id'])
    assert made['changeSequence'] == 1
    got = api.get(f'/api/{family.path}/{made["id"]}')
    assert got.status == 200
    assert got.json == made


@ALL
def test_false_and_zero_are_stored_even_over_defaults(api, org_id, family):
    body = create_body(api, family, org_id)
    bools = fields_of(family, 'bool')
    ints = fields_of(family, 'int', 'number')
    for f in bools:
        body[f.name] = not f.default if f.default is not None else False
    for f in ints:
        body[f.name] = 0
    made = api.post(f'/api/{family.path}', body)
    assert made.status == 201, made.json
    for f in bools + ints:
        assert made.json[f.name] == body[f.name], f.name
    # and on update: flip every boolean, zero every number
    upd = {f.name: not body[f.name] for f in bools}
    upd.update({f.name: 0 for f in ints})
    r = api.put(f'/api/{family.path}/{made.json["id"]}', upd)
    assert r.status == 200, r.json
    got = api.get(f'/api/{family.path}/{made.json["id"]}').json
    for name, value in upd.items():
        assert got[name] == value, name


WITH_OPTIONAL = [f for f in WRITABLE if len([x for x in f.writable.values() if not x.required and not x.ref]) > 1]


@pytest.mark.parametrize('family', WITH_OPTIONAL, ids=lambda f: f.path)
def test_omitted_fields_keep_their_values(api, org_id, family):
    optional = [f for f in family.writable.values() if not f.required and f.name not in ('email',)]
    body = create_body(api, family, org_id)
    chosen = [f for f in optional if plain(f, family)][:4]
    for f in chosen:
        body[f.name] = sample(f)
        body.update(COMPANIONS.get((family.path, f.name), {}))
    made = api.post(f'/api/{family.path}', body).json
    untouched = chosen[0]
    others = [f for f in family.writable.values() if f.name != untouched.name and not f.ref and not f.required
              and f.type in ('string', 'int', 'bool') and not f.enum and f.name not in ('slug', 'email')]
    upd = {others[0].name: sample(others[0], 1)} if others else {}
    r = api.put(f'/api/{family.path}/{made["id"]}', upd)
    assert r.status == 200, r.json
    assert r.json[untouched.name] == made[untouched.name]


@ALL
def test_null_clears_an_optional_field_and_is_400_on_a_required_one(api, org_id, family):
    """Null on update clears any field that is not required (back to its default, or absent);
    a required field (and an identity field unique platform-wide: organization slug) stays 400.
    (docs/api/sdk-compatibility.md: null on input.)"""
    made = create(api, family, org_id)
    path = f'/api/{family.path}/{made["id"]}'
    identity = {'slug'} if family.path == 'organizations' else set()
    optional = [f for f in family.writable.values() if not f.required and plain(f, family) and f.name not in identity
                and not (family.path == 'memberships' and f.name == 'email')]
    for f in optional:
        companion = COMPANIONS.get((family.path, f.name), {})
        assert api.put(path, {f.name: sample(f), **companion}).status == 200, f.name
        r = api.put(path, {f.name: None})
        assert r.status == 200, (f.name, r.json)
        assert r.json.get(f.name) == f.default, f.name
        assert api.get(path).json.get(f.name) == f.default, f.name
    refused = [f for f in family.writable.values() if f.required or f.name in identity]
    for f in refused:
        r = api.put(path, {f.name: None})
        assert r.status == 400, f.name
        assert f.name in r.json['message']
    assert api.get(path).json['changeSequence'] == made['changeSequence'] + 2 * len(optional)


@ALL
def test_sending_back_a_get_body_changes_nothing_but_bookkeeping(api, org_id, family):
    made = create(api, family, org_id)
    path = f'/api/{family.path}/{made["id"]}'
    before = api.get(path).json
    r = api.put(path, before)
    assert r.status == 200, r.json
    after = api.get(path).json
    assert after['changeSequence'] == before['changeSequence'] + 1
    assert after['updatedOn'] >= before['updatedOn']
    strip = lambda d: {k: v for k, v in d.items() if k not in ('updatedOn', 'changeSequence')}  # noqa: E731
    assert strip(after) == strip(before)


@ALL
def test_optimistic_locking(api, org_id, family):
    made = create(api, family, org_id)
    path = f'/api/{family.path}/{made["id"]}'
    ok = api.put(path, {'changeSequence': 1})
    assert ok.status == 200 and ok.json['changeSequence'] == 2
    for stale in (1, 0, 99):
        r = api.put(path, {'changeSequence': stale})
        assert r.status == 409, stale
        assert r.json['changeSequence'] == 2
        assert set(r.json) >= {'error', 'message', 'status'} and r.json['status'] == 409
    assert api.put(path, {'changeSequence': None}).json['changeSequence'] == 3
    assert api.put(path, {}).json['changeSequence'] == 4
    assert api.get(f'{path}/sequence').json == 4
    assert api.put(path, {'changeSequence': 'x'}).status == 400


@ALL
def test_bad_bodies_are_400(api, org_id, family):
    made = create(api, family, org_id)
    path = f'/api/{family.path}/{made["id"]}'
    for raw in ('{', '[1,2]', '"text"', '42', 'null', '{"a":1,"A":2}', '{"a": NaN}', ''):
        for method, target in (('POST', f'/api/{family.path}'), ('PUT', path)):
            r = api.call(method, target, raw=raw)
            assert r.status == 400, (method, raw, r.status)
            assert set(r.json) == {'error', 'message', 'status'}
    assert api.get(path).json == made


@ALL
def test_wrong_types_are_400(api, org_id, family):
    made = create(api, family, org_id)
    path = f'/api/{family.path}/{made["id"]}'
    wrong = {'string': 12, 'bool': 'yes', 'int': 'seven', 'number': 'x', 'datetime': 'not a date',
             'object': [1], 'strings': 'abc', 'array': {'a': 1}}
    for f in family.writable.values():
        if f.type in wrong and not f.enum:
            r = api.put(path, {f.name: wrong[f.type]})
            assert r.status == 400, (f.name, r.json)
        if f.enum:
            assert api.put(path, {f.name: 'NOT_A_VALUE'}).status == 400
        if f.type == 'int':
            assert api.put(path, {f.name: 2 ** 31}).status == 400
            assert api.put(path, {f.name: True}).status == 400
    assert api.get(path).json == made


@ALL
def test_server_and_ownership_fields_are_ignored_on_update(api, org_id, family):
    made = create(api, family, org_id)
    path = f'/api/{family.path}/{made["id"]}'
    other = str(uuid.uuid4())
    r = api.put(path, {'id': other, 'uuid': other, 'createdOn': '2000-01-01T00:00:00Z',
                       'createdByUserId': other, 'organizationId': other, 'projectId': other,
                       'deleted': True, 'deletedDate': '2000-01-01T00:00:00Z'})
    assert r.status == 200, r.json
    for name in ('id', 'uuid', 'createdOn', 'createdByUserId', 'organizationId', 'projectId'):
        assert r.json.get(name) == made.get(name), name
    assert api.get(path).status == 200


@ALL
def test_delete_then_404_and_gone_from_lists(api, org_id, family):
    made = create(api, family, org_id)
    path = f'/api/{family.path}/{made["id"]}'
    listed = api.get(f'/api/{family.path}?pageSize=100').json
    assert made['id'] in [i['id'] for i in listed['content']]
    if family.path == 'organizations':
        release_organization(api, made['id'])
    assert api.delete(path).status == 204
    assert api.get(path).status == 404
    assert api.put(path, {}).status == 404
    assert api.delete(path).status == 404
    assert api.get(f'{path}/sequence').status == 404
    after = api.get(f'/api/{family.path}?pageSize=100').json
    assert made['id'] not in [i['id'] for i in after['content']]
    assert after['totalElements'] == listed['totalElements'] - 1


@pytest.mark.parametrize('family', FAMILIES, ids=lambda f: f.path)
def test_unknown_and_malformed_ids(api, family):
    assert api.get(f'/api/{family.path}/{uuid.uuid4()}').status == 404
    r = api.get(f'/api/{family.path}/not-a-uuid')
    # prompts, extension packs, data definitions: a segment that is no UUID is an organization slug
    assert r.status == (404 if family.org_slug_paths else 400)
    assert set(r.json) == {'error', 'message', 'status'}


@pytest.mark.parametrize('family', [f for f in WRITABLE if 'slug' in f.unique], ids=lambda f: f.path)
def test_slug_is_unique_in_its_scope_and_freed_by_delete(api, org_id, family):
    first = create(api, family, org_id, slug=f'a-{uuid.uuid4().hex[:8]}')
    body = create_body(api, family, org_id)
    if family.scope == 'project':
        body['projectId'] = first['projectId']
    body['slug'] = first['slug']
    dup = api.post(f'/api/{family.path}', body)
    assert dup.status == 409, dup.json
    second = api.post(f'/api/{family.path}', {**body, 'slug': f'x-{uuid.uuid4().hex[:8]}'}).json
    assert api.put(f'/api/{family.path}/{second["id"]}', {'slug': first['slug']}).status == 409
    if family.path == 'organizations':
        release_organization(api, first['id'])
    assert api.delete(f'/api/{family.path}/{first["id"]}').status == 204
    assert api.put(f'/api/{family.path}/{second["id"]}', {'slug': first['slug']}).status == 200
    # the old slug of `second` is free again too
    third = api.post(f'/api/{family.path}', {**body, 'slug': second['slug']})
    assert third.status == 201, third.json


@pytest.mark.parametrize('family', [f for f in WRITABLE if any(x.ref for x in f.writable.values())],
                         ids=lambda f: f.path)
def test_reference_to_a_missing_record_is_400(api, org_id, family):
    made = create(api, family, org_id)
    path = f'/api/{family.path}/{made["id"]}'
    for f in family.writable.values():
        if f.ref:
            r = api.put(path, {f.name: str(uuid.uuid4())})
            assert r.status == 400 and f.name in r.json['message'], (f.name, r.json)
            bad = create_body(api, family, org_id)
            bad[f.name] = str(uuid.uuid4())
            assert api.post(f'/api/{family.path}', bad).status == 400


@pytest.mark.parametrize('family', [f for f in WRITABLE if f.scope == 'project'], ids=lambda f: f.path)
def test_project_scoped_create_needs_an_existing_project(api, family):
    assert api.post(f'/api/{family.path}', {}).status == 400
    assert api.post(f'/api/{family.path}', {'projectId': str(uuid.uuid4())}).status == 400
    assert api.post(f'/api/{family.path}', {'projectId': 'nope'}).status == 400


@pytest.mark.parametrize('family', [f for f in FAMILIES if f.read_only], ids=lambda f: f.path)
def test_read_only_families_have_no_write_routes(api, family):
    assert api.post(f'/api/{family.path}', {}).status == 405
    some = str(uuid.uuid4())
    assert api.put(f'/api/{family.path}/{some}', {}).status == 405
    assert api.delete(f'/api/{family.path}/{some}').status == 405
    assert api.get(f'/api/{family.path}').status == 200


def test_embedded_records_are_resolved_by_id(api, org_id):
    status = create(api, 'document-statuses', org_id, status='Done', color='#00ff00')
    family = create(api, 'document-families', org_id, projectId=status['projectId'])
    path = f'/api/document-families/{family["id"]}'
    r = api.put(path, {'documentStatus': {'id': status['id'], 'status': 'ignored'}})
    assert r.status == 200, r.json
    assert r.json['documentStatus'] == status
    assert api.get(path).json['documentStatus']['status'] == 'Done'
    assert api.put(path, {'documentStatus': {'id': str(uuid.uuid4())}}).status == 400
    assert api.put(path, {'documentStatus': {'status': 'no id'}}).status == 400
    assert api.put(path, {'documentStatus': None}).json.get('documentStatus') is None
    group = create(api, 'product-groups', org_id)
    product = create(api, 'products', org_id, productGroup={'id': group['id']})
    assert product['productGroupId'] == group['id'] and product['productGroup'] == group
