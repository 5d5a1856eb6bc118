"""A session with the platform's public Python SDK (``kodexa``), unmodified, as a user writes it.

Run by tests/integration/test_sdk_client.py with the SDK's own virtualenv (.venv-sdk, built by
``make``), never imported by the app's tests: ``python sdk_session.py <base url> <api key>``.
Each step prints one line ``ok <step> <detail>``; the first failure prints its traceback and
exits 1, so the test shows which everyday call broke and how.
"""
from __future__ import annotations

import json
import sys
import traceback
import uuid

import requests
from kodexa.model.entities.product import Product
from kodexa.model.entities.product_group import ProductGroup, ProductGroupsEndpoint
from kodexa.model.objects import Assistant, KnowledgeSet, Project, Task
from kodexa.platform.client import DocumentStoreEndpoint, KodexaClient


def ok(step: str, detail: object = '') -> None:
    print(f'ok {step} {detail}', flush=True)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def main(base: str, key: str) -> None:
    client = KodexaClient(url=base, access_token=key)
    tag = uuid.uuid4().hex[:6]

    orgs = client.organizations.list()
    check(orgs.total_elements >= 1 and orgs.content, f'organizations: {orgs}')
    default = client.organizations.find_by_slug('default')
    check(default is not None and default.slug == 'default', 'find_by_slug(default)')
    got = client.organizations.get(default.id)
    check(got.id == default.id and got.name == default.name, 'organizations.get')
    ok('organizations', f'{orgs.total_elements} listed, default={default.id}')

    # projects: create (the SDK sends ~25 nulls and organization as an object), get, update, stale, delete
    project = client.projects.create(Project(name=f'sdk-project-{tag}', organization=default))
    check(project.id and project.organization is not None and project.organization.id == default.id,
          f'project create: {project}')
    fetched = client.projects.get(project.id)
    check(fetched.name == project.name and fetched.organization.slug == 'default', 'projects.get')
    fetched.description = 'changed by the SDK'
    updated = fetched.update()
    check(updated.description == 'changed by the SDK' and updated.change_sequence == fetched.change_sequence + 1,
          f'project update: {updated.change_sequence}')
    stale = client.projects.get(project.id)
    stale.change_sequence = 1
    stale.description = 'stale'
    try:
        stale.update()
    except Exception as exc:  # the SDK raises Exception('Conflict (...)') for a 409
        check(str(exc).startswith('Conflict'), f'stale update: {exc}')
    else:
        raise AssertionError('a stale update was accepted')
    check(client.projects.get(project.id).description == 'changed by the SDK', 'stale update changed nothing')
    ok('projects', f'create/get/update/stale 409 on {project.id}')

    # the organization's projects: org.projects.list() sends the legacy filter organization.id: '<id>'
    listed = default.projects.list(page_size=100)
    check(project.id in [p.id for p in listed.content], 'org.projects.list()')
    first = client.projects.list()                          # the SDK's default: page=1, the first page
    check(first.content and first.number == 1 and first.first, f'projects.list() page: {first.number}')
    ok('project lists', f'{listed.total_elements} in default, first page of {first.total_elements}')

    # product group, and a product naming its group as an object
    groups = ProductGroupsEndpoint(client)
    group = groups.create(ProductGroup(name=f'sdk-group-{tag}', description='g'))
    product = client.products.create(Product(name=f'sdk-product-{tag}', product_group=group))
    check(product.product_group.id == group.id and product.product_group.name == group.name, 'product create')
    check(client.products.get(product.id).product_group.id == group.id, 'products.get')
    ok('products', f'group {group.id}, product {product.id}')

    # an assistant of the project, read back with its project
    assistant = client.assistants.create(Assistant(name=f'sdk-assistant-{tag}', project=project))
    again = client.assistants.get(assistant.id)
    check(again.project is not None and again.project.id == project.id and again.project.name == project.name,
          f'assistant project: {again.project}')
    ok('assistants', assistant.id)

    # tasks: create, find by id through the list, delete
    task = client.tasks.create(Task(title=f'sdk-task-{tag}', project=project))
    found = client.tasks.list(filters=[f"id: '{task.id}'"])
    check([t.id for t in found.content] == [task.id] and found.content[0].project.id == project.id, 'tasks by id')
    client.tasks.delete(task.id)
    check(client.tasks.list(filters=[f"id: '{task.id}'"]).content == [], 'task deleted')
    ok('tasks', task.id)

    # executions: the SDK's names (startDate, endDate) and sort
    execution_ids = []
    for day in ('01', '03', '02'):
        r = requests.post(f'{base}/api/executions', headers={'x-api-key': key}, json={
            'projectId': project.id, 'startDate': f'2026-01-{day}T00:00:00Z', 'endDate': f'2026-01-{day}T01:00:00Z'})
        check(r.status_code == 201, f'execution create: {r.text}')
        execution_ids.append(r.json()['id'])
    executions = client.executions.list(sort='startDate:desc', filters=[f"projectId: '{project.id}'"])
    starts = [e.start_date.isoformat()[:10] if hasattr(e.start_date, 'isoformat') else str(e.start_date)[:10]
              for e in executions.content]
    check(starts == ['2026-01-03', '2026-01-02', '2026-01-01'], f'executions by startDate desc: {starts}')
    ok('executions', starts)

    # knowledge sets: create (project and organization as objects), update, delete
    ks = client.knowledge_sets.create(KnowledgeSet(name=f'sdk-ks-{tag}', project={'id': project.id},
                                                   organization={'id': default.id}))
    check(ks.project['id'] == project.id and ks.organization['id'] == default.id, f'knowledge set: {ks}')
    ks.description = 'described'
    ks = ks.update()
    check(ks.description == 'described', 'knowledge set update')
    ks.delete()
    try:
        client.knowledge_sets.get(ks.id)
    except Exception as exc:
        check(str(exc).startswith('Not found'), f'knowledge set delete: {exc}')
    else:
        raise AssertionError('a deleted knowledge set is still there')
    ok('knowledge sets', ks.id)

    # the store file API (DocumentStoreEndpoint): a store of another project, found by org/slug
    holder = requests.post(f'{base}/api/projects', headers={'x-api-key': key}, json={'name': f'sdk-files-{tag}'})
    check(holder.status_code == 201, f'project for the store: {holder.text}')
    made = requests.post(f'{base}/api/document-stores', headers={'x-api-key': key},
                         json={'projectId': holder.json()['id'], 'name': 'SDK files', 'slug': f'sdk-files-{tag}'})
    check(made.status_code == 201, f'document store: {made.text}')
    store = client.get_object_by_ref('store', f'default/sdk-files-{tag}')
    check(isinstance(store, DocumentStoreEndpoint) and store.id == made.json()['id'], f'store by ref: {store}')
    payload = bytes(range(256)) * 64
    family = store.upload_bytes('sdk/data.bin', payload, additional_metadata={'origin': 'sdk'},
                                external_data={'po': 4711})
    check(family.path == 'sdk/data.bin' and family.size == len(payload), f'upload_bytes: {family}')
    check(family.metadata == {'origin': 'sdk', 'externalData': '{"po": 4711}'}, f'metadata: {family.metadata}')
    check(store.get_bytes('sdk/data.bin') == payload, 'get_bytes returns the bytes')
    check(store.exists_by_path('sdk/data.bin') and not store.exists_by_path('sdk/none.bin'), 'exists_by_path')
    check(store.get_by_path('sdk/data.bin').id == family.id, 'get_by_path')
    replaced = store.upload_bytes('sdk/data.bin', b'replaced', replace=True)
    check(replaced.id != family.id and store.get_bytes('sdk/data.bin') == b'replaced', 'upload_bytes(replace=True)')
    check(requests.get(f'{base}/api/document-families/{family.id}', headers={'x-api-key': key}).status_code == 404,
          'the replaced family is deleted')
    store.delete_by_path('sdk/data.bin')
    check(not store.exists_by_path('sdk/data.bin'), 'delete_by_path')
    ok('document store', f'{store.ref} upload/get_bytes/exists/get_by_path/replace/delete')

    # a project is deleted once it holds nothing (docs/reliability.md: no orphans)
    for execution_id in execution_ids:
        r = requests.delete(f'{base}/api/executions/{execution_id}', headers={'x-api-key': key})
        check(r.status_code == 204, f'execution delete: {r.text}')
    r = requests.delete(f'{base}/api/assistants/{assistant.id}', headers={'x-api-key': key})
    check(r.status_code == 204, f'assistant delete: {r.text}')
    project_id = project.id
    project.delete()
    check(not client.exists(f'/api/projects/{project_id}'), 'project delete')
    ok('project delete', project_id)
    print(json.dumps({'done': True}), flush=True)


if __name__ == '__main__':
    try:
        main(sys.argv[1], sys.argv[2])
    except Exception:  # noqa: BLE001 - the test reads the traceback
        traceback.print_exc()
        sys.exit(1)
