"""Finding one document family's records, and a store's taxonomies, through the HTTP layer
(docs/api/conventions.md "Lists", docs/api/extraction.md "Reading"): what DynamoDB reads is
counted on the wire (botocore's event hooks on the client the code uses), so each test shows
the read is served from an index, not from the tenant's (or every organization's) records.

* ``documentFamilyId == '<id>'`` on executions, content objects, data objects, data exceptions
  (``/api/exceptions``, the store's object list) and linked deltas reads the value index of the
  family's organization only: never a tenant read (by_created / parent_keys keys), whatever the
  number of organizations the caller belongs to (kernel/listing.py ``_referenced_org``).
* ``/api/exceptions?dataStoreId=&documentFamilyId=`` reads the family's exceptions, not the
  store's (the ``deleted_with`` equality first: kernel/listing.py ``_indexed_equality``).
* ``/api/stores/{o}/{s}/taxonomies`` names every definition the store's objects name, past the
  first 100 objects (features/extraction/storage.py ``definitions_used``).
"""
from __future__ import annotations

import json
import uuid
from contextlib import contextmanager

import pytest

from tests.conftest import make_org, make_user
from tests.support import create

MANY_ORGS = 22   # more than kernel/listing.py MAX_VALUE_PARTITIONS (20)


@contextmanager
def wire():
    """Every DynamoDB call made meanwhile: (operation, request, response)."""
    from chalicelib.kernel.store import model
    events = model.configure()._get_connection().connection.client.meta.events
    calls: list[dict] = []

    def before(model, params, context, **_):
        context['_fam_reads'] = call = {'op': model.name, 'request': json.loads(params.get('body') or b'{}')}
        calls.append(call)

    def after(parsed, context, **_):
        if '_fam_reads' in context:
            context['_fam_reads']['response'] = parsed
    events.register('before-call.dynamodb', before, unique_id='fam-reads-before')
    events.register('after-call.dynamodb', after, unique_id='fam-reads-after')
    try:
        yield calls
    finally:
        events.unregister('before-call.dynamodb', unique_id='fam-reads-before')
        events.unregister('after-call.dynamodb', unique_id='fam-reads-after')


def tenant_reads(calls) -> list[dict]:
    """Queries of a tenant's or a project's whole partition (what an unindexed filter reads)."""
    return [c for c in calls if c['op'] == 'Query' and c['request'].get('IndexName') in ('by_created', 'parent_keys')]


def records_read(calls, family: str) -> int:
    """Records of ``family`` DynamoDB returned (BatchGetItem, GetItem)."""
    n = 0
    for c in calls:
        response = c.get('response') or {}
        items = [i for items in response.get('Responses', {}).values() for i in items]
        if 'Item' in response:
            items.append(response['Item'])
        n += sum(1 for i in items if i.get('pk', {}).get('S', '').startswith(f'{family}#'))
    return n


def _ids(page) -> list[str]:
    return sorted(i['id'] for i in page['content'])


@pytest.fixture
def families(api, org_id, bucket):
    """One project holding two document families and, for each, records of every family that
    names it; a store whose definition both use."""
    pid = create(api, 'projects', org_id)['id']
    store = create(api, 'data-stores', org_id, projectId=pid, name='Store', slug=f's-{uuid.uuid4().hex[:8]}')
    fams = [create(api, 'document-families', org_id, projectId=pid, path=f'f{i}.txt') for i in range(2)]
    made: dict[str, dict[str, list[str]]] = {}

    def add(path: str, fam: dict, body: dict) -> None:
        r = api.post(f'/api/{path}', {'projectId': pid, 'documentFamilyId': fam['id'], **body})
        assert r.status == 201, (path, r.json)
        made.setdefault(path, {}).setdefault(fam['id'], []).append(r.json['id'])
    for n, fam in enumerate(fams):
        for i in range(2 + 3 * n):   # the other family has more of each
            add('executions', fam, {'name': f'run {i}'})
            add('content-objects', fam, {'name': f'page {i}'})
            add('linked-deltas', fam, {'name': f'delta {i}'})
            obj = {'dataStoreId': store['id'], 'path': 'invoice'}
            add('data-objects', fam, obj)
            add('data-exceptions', fam, {'dataStoreId': store['id'], 'message': f'doubt {i}', 'taxon': 'invoice/total',
                                         'exceptionType': 'LOW_CONFIDENCE', 'severity': 'WARNING'})
    org = api.get(f'/api/organizations/{org_id}').json
    return {'project': pid, 'store': store, 'families': fams, 'made': made, 'org': org}


READS = ['executions', 'content-objects', 'linked-deltas', 'data-objects', 'data-exceptions', '/api/exceptions',
         'store objects']


def _get(api, families, what: str, fam: dict, key=None):
    if what == '/api/exceptions':
        path, family = f"/api/exceptions?documentFamilyId={fam['id']}", 'data-exceptions'
    elif what == 'store objects':
        path, family = (f"/api/stores/{families['org']['slug']}/{families['store']['slug']}/dataObjects"
                        f"?documentFamilyId={fam['id']}"), 'data-objects'
    else:
        path, family = f"/api/{what}?filter=documentFamilyId == '{fam['id']}'", what
    with wire() as calls:
        r = api.as_key(key).get(path) if key else api.get(path)
    assert r.status == 200, (what, r.status, r.json)
    return r.json, calls, family


def test_a_caller_in_many_organizations_finds_a_familys_records_from_its_index(api, families):
    """A member of more organizations than a list merges value partitions of (20) reads the
    family's organization's value index only; before, every organization's records were read
    whole and filtered in memory (issue 46, item 7)."""
    user, key = make_user(api, families['org']['id'], 'MEMBER')
    for _ in range(MANY_ORGS - 1):
        org = make_org(api)
        r = api.post('/api/memberships', {'organizationId': org['id'], 'userId': user['id'], 'role': 'MEMBER'})
        assert r.status == 201, r.json
    fam, other = families['families']
    for what in READS:
        page, calls, family = _get(api, families, what, fam, key)
        assert _ids(page) == sorted(families['made'][family][fam['id']]), what
        assert not tenant_reads(calls), f'{what}: read a whole tenant or project'
        # the family's records, and never the other family's (nor any other organization's)
        assert records_read(calls, family) == len(families['made'][family][fam['id']]), what
        queried = {c['request'].get('IndexName') for c in calls if c['op'] == 'Query'}
        assert queried <= {None, 'x1_created', 'x2_created', 'x3_created'}, (what, queried)
    # a documentFamilyId naming no family (deleted, or never one): its value indexes are read, no
    # organization's records
    for value in (str(uuid.uuid4()), 'not-an-id'):
        with wire() as calls:
            r = api.as_key(key).get(f"/api/executions?filter=documentFamilyId == '{value}'")
        assert r.status == 200 and r.json['totalElements'] == 0 and r.json['content'] == []
        assert not tenant_reads(calls) and records_read(calls, 'executions') == 0
    # a member of another organization naming this family's id sees nothing of it
    _, stranger = make_user(api, make_org(api)['id'], 'MEMBER')
    r = api.as_key(stranger).get(f"/api/executions?filter=documentFamilyId == '{fam['id']}'")
    assert r.status == 200 and r.json['content'] == [] and r.json['totalElements'] == 0


def test_a_stores_exceptions_of_one_family_read_that_familys_only(api, families):
    """``dataStoreId`` and ``documentFamilyId`` together: the family's exceptions are read, not
    every open exception of the store (which grows with the tenant)."""
    fam, other = families['families']
    with wire() as calls:
        r = api.get(f"/api/exceptions?dataStoreId={families['store']['id']}&documentFamilyId={fam['id']}")
    assert r.status == 200, r.json
    assert _ids(r.json) == sorted(families['made']['data-exceptions'][fam['id']])
    assert records_read(calls, 'data-exceptions') == len(families['made']['data-exceptions'][fam['id']])


# ----------------------------------------------------------------------------- taxonomies

def test_a_stores_taxonomies_name_every_definition_past_the_first_hundred_objects(api, org_id):
    """A store filled from four definitions, the fourth's objects after 100 of the others',
    answers four (issue 46, item 6: it answered three, from the first 100 objects)."""
    pid = create(api, 'projects', org_id)['id']
    slug = f's-{uuid.uuid4().hex[:8]}'
    store = create(api, 'data-stores', org_id, projectId=pid, name='Many', slug=slug)
    elsewhere = create(api, 'data-stores', org_id, projectId=pid, name='Other', slug=f's-{uuid.uuid4().hex[:8]}')
    defs = [create(api, 'data-definitions', org_id, name=f'Def {i}', slug=f'd{i}-{uuid.uuid4().hex[:6]}')
            for i in range(5)]

    def obj(store_id: str, definition: dict) -> None:
        r = api.post('/api/data-objects', {'projectId': pid, 'dataStoreId': store_id, 'path': 'row',
                                           'dataDefinitionId': definition['id']})
        assert r.status == 201, r.json
    for i in range(102):
        obj(store['id'], defs[i % 3])
    obj(store['id'], defs[3])
    obj(elsewhere['id'], defs[4])      # another store's definition is not this store's
    org = api.get(f'/api/organizations/{org_id}').json
    r = api.get(f"/api/stores/{org['slug']}/{slug}/taxonomies")
    assert r.status == 200, r.json
    assert sorted(t['id'] for t in r.json) == sorted(d['id'] for d in defs[:4])
    # a definition whose objects all left the store is no longer one of its taxonomies
    last = api.get(f"/api/data-objects?filter=dataDefinitionId == '{defs[3]['id']}'").json['content']
    assert [api.delete(f"/api/data-objects/{o['id']}").status for o in last] == [204]
    r = api.get(f"/api/stores/{org['slug']}/{slug}/taxonomies")
    assert sorted(t['id'] for t in r.json) == sorted(d['id'] for d in defs[:3])


def test_objects_written_before_the_pair_index_name_their_definition_once_backfilled(api, org_id):
    """Objects written before the (store, definition) slot existed (keyed and counted, ``ixv``,
    but no x3 key, no pair counter) are missing from the taxonomies until
    ``python -m chalicelib.ops.backfill_indexes`` extends them (docs/operations/index-backfill.md)."""
    from chalicelib.kernel.store import table
    from chalicelib.kernel.store.model import configure
    from chalicelib.ops.backfill_indexes import backfill
    pid = create(api, 'projects', org_id)['id']
    slug = f's-{uuid.uuid4().hex[:8]}'
    store = create(api, 'data-stores', org_id, projectId=pid, name='Old', slug=slug)
    definition = create(api, 'data-definitions', org_id, name='Old def', slug=f'd-{uuid.uuid4().hex[:6]}')
    ids = [api.post('/api/data-objects', {'projectId': pid, 'dataStoreId': store['id'], 'path': 'row',
                                          'dataDefinitionId': definition['id']}).json['id'] for _ in range(3)]
    model = configure()
    for id_ in ids:
        model.get(table.entity_pk('data-objects', id_), '#').update(actions=[model.x3.remove()])
    pair = f'CNT#data-objects#{org_id}#dataStoreId+dataDefinitionId='
    for counter in model.scan(model.pk.startswith('CNT')):
        if table.counter_base_pk(counter.pk).startswith(pair):
            counter.delete()
    org = api.get(f'/api/organizations/{org_id}').json
    assert api.get(f"/api/stores/{org['slug']}/{slug}/taxonomies").json == []
    assert backfill(page_size=50, out=lambda line: None)['extended'] == 3
    assert [t['id'] for t in api.get(f"/api/stores/{org['slug']}/{slug}/taxonomies").json] == [definition['id']]
    assert backfill(page_size=50, out=lambda line: None)['extended'] == 0
