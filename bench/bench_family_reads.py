"""Finding one document family's records as the tenant grows (issue 46, item 7), and what the
indexes behind it cost each write.

    PYTHONPATH=. .venv/bin/python bench/bench_family_reads.py [--sizes 1000,10000,100000] [--repeat 5]

1. Reads. One fresh platform per tenant size N: N executions in one organization, 5 of them
   naming the document family asked for, the rest naming 10 each of other families. Seeded with
   BatchWriteItem in the shape the create service writes (records.entity: entity item, index
   keys; the tenant's and the asked family's value counters): N creates through the API would
   take hours under moto. Then ``GET /api/executions?filter=documentFamilyId == '<id>'`` through
   the HTTP layer, as a platform admin in one organization and as a member of 25 organizations
   (over the 20 value partitions a list merges: before this change that caller's filter read
   every organization's executions whole), and the same family found with a filter no index
   serves (``documentFamilyId =like= '<id>*'``: what every caller in over 20 organizations paid
   before). "calls" and "items" count the DynamoDB calls made inside the list service
   (botocore hooks, as bench_list.py): "items" is what DynamoDB read (Query ScannedCount,
   BatchGetItem and GetItem items). Items read is the primary figure; times are moto's, medians.
2. Write units of one create, with and without the index slot this read uses (the
   documentFamilyId slot of executions; the (store, definition) slot of data objects that
   serves a store's taxonomies), computed from the requests sent by DynamoDB's rules
   (bench_write_cost.py).

Figures, never pass/fail.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.pop('AWS_ENDPOINT_URL', None)
os.environ.pop('AWS_ENDPOINT_URL_DYNAMODB', None)
os.environ.pop('AWS_PROFILE', None)
os.environ.update(AWS_DEFAULT_REGION='us-east-1', AWS_ACCESS_KEY_ID='bench', AWS_SECRET_ACCESS_KEY='bench',
                  TABLE_NAME='platform-bench', RATE_LIMIT_PER_MINUTE='100000000',
                  RATE_LIMIT_BURST_PER_SECOND='100000000', LOG_LEVEL='WARNING')

from bench.bench_list import Recorder  # noqa: E402 - after the environment is set
from bench.bench_write_cost import gsi_units, item_size, kb  # noqa: E402

ADMIN_KEY = 'pk_bench-admin-key'
ASKED = 5            # executions of the family asked for
PER_FAMILY = 10      # executions of each other family
ORGS = 25            # organizations of the many-organization caller


def seed(org: str, project: str, user: str, asked: str, n: int) -> None:
    """n executions, ASKED of them naming ``asked``, written as the create service writes them."""
    from chalicelib.core.clock import iso
    from chalicelib.core.config import get_config
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family
    from chalicelib.kernel.store import model as store_model
    from chalicelib.kernel.store import table
    model = store_model.configure()
    executions = family('executions')
    start = datetime(2026, 1, 1, tzinfo=UTC)
    tenant_counter = table.counter_pk('executions', org)
    asked_counter = table.value_counter_pk('executions', org, 'documentFamilyId', asked)
    other = str(uuid.uuid4())
    with model.batch_write() as batch:
        for i in range(n):
            if i % PER_FAMILY == 0:
                other = str(uuid.uuid4())
            created = iso(start + timedelta(seconds=i))
            data = {'id': str(uuid.uuid4()), 'uuid': str(uuid.uuid4()), 'createdOn': created, 'updatedOn': created,
                    'changeSequence': 1, 'createdByUserId': user, 'organizationId': org, 'projectId': project,
                    'name': f'run {i}', 'status': 'SUCCEEDED',
                    'documentFamilyId': asked if i % (n // ASKED) == 0 else other}
            batch.save(records.entity(executions, data, seq=1, org=org))
        # a counter's shard s lives under its partition s % 16 (table.counter_partition_pk), as
        # repository.move_counter_at writes it; the asked value's 5 creates touched 5 shards
        shards = get_config().counter_shards
        for shard in range(shards):
            batch.save(model(table.counter_partition_pk(tenant_counter, shard % table.COUNTER_PARTITIONS), str(shard),
                             cnt=n // shards + (1 if shard < n % shards else 0)))
        for shard in range(ASKED):
            batch.save(model(table.counter_partition_pk(asked_counter, shard % table.COUNTER_PARTITIONS), str(shard),
                             cnt=1))


def reads(n: int, repeat: int) -> dict[str, Any]:
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.core.config import reset_config
    from chalicelib.kernel import embedding, listing
    from chalicelib.kernel.store import model

    reset_config()
    model.reset()
    out: dict[str, Any] = {'n': n}
    with mock_aws():
        from app import app
        from chalicelib.features.identity.bootstrap import bootstrap
        from chalicelib.features.identity.service import create_api_key
        platform = bootstrap(api_key=ADMIN_KEY)
        org = platform['organizationId']
        recorder = Recorder()
        recorder.attach(model.configure()._get_connection().connection.client.meta.events)
        real_list, real_embed = listing.list_resources, embedding.embed_page
        listing.list_resources = recorder.wrap(real_list)

        def embed_outside(*args, **kwargs):   # the page's embedded references are not the list's read
            was, recorder.inside = recorder.inside, False
            try:
                return real_embed(*args, **kwargs)
            finally:
                recorder.inside = was
        embedding.embed_page = embed_outside
        try:
            with Client(app) as client:
                def call(method: str, path: str, body=None, key: str = ADMIN_KEY):
                    headers = {'x-api-key': key, 'content-type': 'application/json'}
                    r = client.http.request(method, path, headers=headers,
                                            body=json.dumps(body) if body is not None else None)
                    return r.status_code, json.loads(r.body) if r.body else None
                _, project = call('POST', '/api/projects', {'organizationId': org, 'name': 'bench'})
                _, fam = call('POST', '/api/document-families', {'projectId': project['id'], 'path': 'asked.pdf'})
                started = time.perf_counter()
                seed(org, project['id'], platform['userId'], fam['id'], n)
                out['seed_s'] = time.perf_counter() - started
                _, user = call('POST', '/api/users', {'email': f'member-{uuid.uuid4().hex[:8]}@example.com'})
                for i in range(ORGS):
                    target = org
                    if i:
                        slug = f'o{i}-{uuid.uuid4().hex[:6]}'
                        _, made = call('POST', '/api/organizations', {'name': f'o{i}', 'slug': slug})
                        target = made['id']
                    status, _ = call('POST', '/api/memberships', {'organizationId': target, 'userId': user['id'],
                                                                  'role': 'MEMBER'})
                    assert status == 201, status
                member = create_api_key(user['id'], user['email'], 'bench')['key']
                rows = [('admin, one organization', f"documentFamilyId == '{fam['id']}'", ADMIN_KEY, True),
                        (f'member of {ORGS} organizations', f"documentFamilyId == '{fam['id']}'", member, True),
                        ('no index (=like=), admin', f"documentFamilyId =like= '{fam['id']}*'", ADMIN_KEY, n <= 10_000)]
                for label, flt, key, run in rows:
                    if not run:
                        out[label] = None
                        continue
                    path = '/api/executions?pageSize=20&filter=' + flt.replace(' ', '%20')
                    recorder.calls = []
                    started = time.perf_counter()
                    status, body = call('GET', path, key=key)
                    first = (time.perf_counter() - started) * 1000
                    calls = list(recorder.calls)
                    found = body.get('totalElements') if status == 200 else f'{status} {body.get("message", "")[:60]}'
                    row = {'calls': len(calls), 'items': sum(r for _, r in calls), 'ms': first, 'found': found}
                    if status == 200 and row['items'] < 2000:
                        times = []
                        for _ in range(repeat):
                            started = time.perf_counter()
                            call('GET', path, key=key)
                            times.append((time.perf_counter() - started) * 1000)
                        row['ms'] = statistics.median(times)
                    out[label] = row
        finally:
            listing.list_resources, embedding.embed_page = real_list, real_embed
    model.reset()
    return out


def write_units() -> list[tuple[str, int, int]]:
    """(write, WCU with the slot, WCU without it) for one create through the API."""
    from chalice.test import Client
    from moto import mock_aws

    from chalicelib.core.config import reset_config
    from chalicelib.kernel.store import model
    reset_config()
    model.reset()
    rows = []
    with mock_aws():
        from app import app
        from chalicelib.features.identity.bootstrap import bootstrap
        platform = bootstrap(api_key=ADMIN_KEY)
        table = model.configure()
        client = model.client()
        indexes = client.describe_table(TableName=table.Meta.table_name)['Table']['GlobalSecondaryIndexes']
        captured: list[tuple[str, dict]] = []

        def capture(params, model, **_):
            captured.append((model.name, params))
        client.meta.events.register('before-parameter-build.dynamodb.TransactWriteItems', capture)
        client.meta.events.register('before-parameter-build.dynamodb.PutItem', capture)

        def cost(write, slot: str, field: str) -> tuple[int, int]:
            captured.clear()
            write()
            with_slot = without = 0
            for op, params in captured:
                entries = params['TransactItems'] if op == 'TransactWriteItems' else [{'Put': params}]
                factor = 2 if op == 'TransactWriteItems' else 1
                for entry in entries:
                    (kind, spec), = entry.items()
                    key = spec.get('Key') or {'pk': spec['Item']['pk'], 'sk': spec['Item']['sk']}
                    after = spec['Item'] if kind == 'Put' else None
                    units = factor * kb(max(item_size(after), 1))
                    with_slot += units
                    pk = key['pk']['S']
                    without += 0 if (pk.startswith('CNT') and f'#{field}=' in pk) else units
                    if kind in ('Put', 'Delete') and not pk.startswith(('CNT', 'UQ#', 'G')):
                        with_slot += gsi_units(indexes, None, after)
                        without += gsi_units(indexes, None, after, keep=lambda name: name != f'{slot}_created')
            return with_slot, without

        with Client(app) as c:
            headers = {'x-api-key': ADMIN_KEY, 'content-type': 'application/json'}
            org = platform['organizationId']

            def post(path, body):
                r = c.http.post(path, headers=headers, body=json.dumps(body))
                assert r.status_code == 201, (path, r.status_code, r.body[:300])
                return json.loads(r.body)
            project = post('/api/projects', {'organizationId': org, 'name': 'bench'})['id']
            fam = post('/api/document-families', {'projectId': project, 'path': 'f.pdf'})['id']
            store = post('/api/data-stores', {'projectId': project, 'name': 'S', 'slug': 's'})['id']
            definition = post('/api/data-definitions', {'organizationId': org, 'name': 'D', 'slug': 'd'})['id']
            w, wo = cost(lambda: post('/api/executions', {'projectId': project, 'name': 'run',
                                                          'documentFamilyId': fam}), 'x3', 'documentFamilyId')
            rows.append(('execution create (documentFamilyId slot)', w, wo))
            w, wo = cost(lambda: post('/api/content-objects', {'projectId': project, 'name': 'p',
                                                               'documentFamilyId': fam}), 'x1', 'documentFamilyId')
            rows.append(('content object create (documentFamilyId slot)', w, wo))
            w, wo = cost(lambda: post('/api/data-objects', {'projectId': project, 'dataStoreId': store, 'path': 'row',
                                                            'documentFamilyId': fam, 'dataDefinitionId': definition}),
                         'x3', 'dataStoreId+dataDefinitionId')
            rows.append(('data object create ((store, definition) slot)', w, wo))
    model.reset()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', default='1000,10000,100000')
    parser.add_argument('--repeat', type=int, default=5)
    args = parser.parse_args()
    from localdev.moto_server import patch_moto
    patch_moto()   # moto's Query as make run's server patches it: cost not growing with the table
    results = []
    for n in (int(s) for s in args.sizes.split(',')):
        results.append(reads(n, args.repeat))
        print(f'seeded {n:,} executions in {results[-1]["seed_s"]:.0f} s', flush=True)
    labels = [k for k in results[0] if k not in ('n', 'seed_s')]
    print("\nGET /api/executions?filter=documentFamilyId == '<id>' (5 executions of that family)")
    print(f"{'request':<32}" + ''.join(f"| N={r['n']:<28,}" for r in results))
    print(f"{'':<32}" + ''.join(f"| {'calls':>5} {'items':>6} {'ms':>8} {'found':>6} " for _ in results))
    for label in labels:
        cells = ''
        for r in results:
            row = r[label]
            cells += '| ' + (f"{'-':>5} {'-':>6} {'-':>8} {'-':>6} " if row is None else
                             f"{row['calls']:>5} {row['items']:>6} {row['ms']:>8.1f} {str(row['found'])[:6]:>6} ")
        print(f'{label:<32}{cells}')
    print('\nWrite units (WCU) of one create, computed from the requests sent (bench_write_cost.py rules)')
    print(f"{'write':<48}{'without the slot':>18}{'with':>6}{'added':>7}")
    for name, w, wo in write_units():
        print(f'{name:<48}{wo:>18}{w:>6}{w - wo:>7}')


if __name__ == '__main__':
    main()
