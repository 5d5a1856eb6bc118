"""The platform SDK's (``kodexa``) calls that reach the alias paths (chalicelib/kernel/http/aliases.py),
unmodified, as a user writes them. Run by tests/integration/test_sdk_aliases.py with the SDK's own
virtualenv: ``python sdk_aliases_session.py <base url> <api key>``. Each alias prints one line
``ok <alias> <detail>`` or ``FAIL <alias> <error>``: every alias is tried, whatever the others did.
Setup the SDK has no call for is done with plain HTTP (requests), never the step under test.
"""
from __future__ import annotations

import sys
import traceback
import uuid

import requests
from kodexa.model.objects import Assistant, Project
from kodexa.platform.client import KodexaClient


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def main(base: str, key: str) -> int:
    client = KodexaClient(url=base, access_token=key)
    http = requests.Session()
    http.headers['x-api-key'] = key
    tag = uuid.uuid4().hex[:6]
    org = client.organizations.find_by_slug('default')
    project = client.projects.create(Project(name=f'alias-project-{tag}', organization=org))
    other = client.projects.create(Project(name=f'alias-other-{tag}', organization=org))
    state: dict = {}
    failures = 0

    def step(name: str, run) -> None:
        nonlocal failures
        try:
            print(f'ok {name} {run()}', flush=True)
        except Exception as exc:  # noqa: BLE001 - report every alias, then fail at the end
            failures += 1
            print(f'FAIL {name} {exc!r}', flush=True)
            traceback.print_exc()

    # ---------------------------------------------------------------- /api/extensionPacks/...
    made = http.post(f'{base}/api/extension-packs', json={
        'organizationId': org.id, 'name': f'pack {tag}', 'slug': f'pack-{tag}', 'version': '1.0.0'})
    check(made.status_code == 201, f'extension pack setup: {made.text}')

    # The SDK's component models (ExtensionPackEndpoint) require a `type` the contract's
    # ExtensionPackMetadata does not carry (docs/api/clients.md): the paths ComponentEndpoint builds
    # are called through the SDK's own client (auth header, page numbering, query encoding).
    def pack_org_list():
        params = {'query': requests.utils.quote('*'), 'page': 1, 'pageSize': 10}   # as ComponentEndpoint.list
        page = client.get(f'/api/extensionPacks/{org.slug}', params=params).json()
        slugs = [p['slug'] for p in page['content']]
        check(f'pack-{tag}' in slugs and page['number'] == 1, f'extensionPacks/default: {page}')
        return len(slugs)

    def pack_by_slug():
        pack = client.get(f'/api/extensionPacks/{org.slug}/pack-{tag}/1.0.0').json()   # as get_by_slug
        check(pack['slug'] == f'pack-{tag}' and pack['version'] == '1.0.0', f'by slug: {pack}')
        return pack['id']

    def pack_by_ref():
        ref = f'{org.slug}/pack-{tag}'
        got = client.get(f"/api/extensionPacks/{ref.replace(':', '/')}").json()   # as get_object_by_ref
        check(got['slug'] == f'pack-{tag}', f'by ref: {got}')
        return got['id']

    step('extensionPacks-organization-list', pack_org_list)
    step('extensionPacks-by-slug-and-version', pack_by_slug)
    step('extensionPacks-by-ref', pack_by_ref)

    # ---------------------------------------------------------------- /api/documentFamilies/...
    store = http.post(f'{base}/api/document-stores', json={'projectId': project.id, 'name': f'docs {tag}',
                                                           'slug': f'docs-{tag}'})
    check(store.status_code == 201, f'document store setup: {store.text}')
    family = http.post(f'{base}/api/document-families', json={
        'projectId': project.id, 'documentStoreId': store.json()['id'], 'path': f'alias-{tag}.pdf'})
    check(family.status_code == 201, f'document family setup: {family.text}')
    family_id = family.json()['id']

    def families_get():
        got = client.document_families.get(family_id)     # GET /api/documentFamilies/{id}
        check(got.id == family_id, f'documentFamilies get: {got}')
        return got.id

    def families_list():
        page = client.document_families.list(filters=[f"id: '{family_id}'"])   # GET /api/documentFamilies
        check([f.id for f in page.content] == [family_id], f'documentFamilies list: {page}')
        return page.total_elements

    def families_delete():
        client.document_families.delete(family_id)        # DELETE /api/documentFamilies/{id}
        gone = http.get(f'{base}/api/document-families/{family_id}')
        check(gone.status_code == 404, f'documentFamilies delete: {gone.status_code}')
        return 'deleted'

    step('documentFamilies-get', families_get)
    step('documentFamilies-list', families_list)
    step('documentFamilies-delete', families_delete)

    # ---------------------------------------------------------------- /api/projects/{id}/assistants...
    def assistants_create():
        made = project.assistants.create(Assistant(name=f'alias-assistant-{tag}'))   # POST .../assistants
        check(made.id and made.name == f'alias-assistant-{tag}', f'create: {made}')
        state['assistant'] = made
        return made.id

    def assistants_list():
        listed = project.assistants.list()                                 # GET .../assistants
        check([a.id for a in listed] == [state['assistant'].id], f'list: {listed}')
        check(other.assistants.list() == [], 'another project lists none')
        return len(listed)

    def assistant_update():
        assistant = client.assistants.get(state['assistant'].id)
        assistant.description = 'changed through the nested path'
        updated = assistant.update()                                      # PUT .../assistants/{a}
        check(updated.description == 'changed through the nested path', f'update: {updated}')
        return updated.change_sequence

    def assistant_delete():
        client.assistants.get(state['assistant'].id).delete()             # DELETE .../assistants/{a}
        gone = http.get(f'{base}/api/assistants/{state["assistant"].id}')
        check(gone.status_code == 404, f'delete: {gone.status_code}')
        return 'deleted'

    step('project-assistants-create', assistants_create)
    step('project-assistants-list', assistants_list)
    step('project-assistant-update', assistant_update)
    step('project-assistant-delete', assistant_delete)

    # ---------------------------------------------------------------- /api/projects/{id}/<stores, forms>
    # ProjectAssistantsEndpoint parses assistants; the store and form models (DocumentStoreEndpoint, ...)
    # require the component `type` the contract's records do not carry (docs/api/clients.md), so
    # these lists are called as ProjectResourceEndpoint.list builds them, through the SDK's client.
    def project_list(segment, accessor, family_path, body):
        def run():
            made = http.post(f'{base}/api/{family_path}', json={'projectId': project.id, **body})
            check(made.status_code == 201, f'{family_path} setup: {made.text}')
            endpoint = getattr(project, accessor)
            check(endpoint.get_type() == segment, f'the SDK calls {endpoint.get_type()}')
            params = {'query': requests.utils.quote('*'), 'page': 1, 'pageSize': 10}
            listed = client.get(f'/api/projects/{project.id}/{endpoint.get_type()}', params=params).json()
            check(isinstance(listed, list) and made.json()['id'] in [x['id'] for x in listed], f'{segment}: {listed}')
            other_list = client.get(f'/api/projects/{other.id}/{endpoint.get_type()}', params=params).json()
            check(other_list == [], f'another project: {other_list}')
            return len(listed)
        return run

    step('project-documentStores-list', project_list('documentStores', 'document_stores', 'document-stores',
                                                     {'name': f'store {tag}', 'slug': f'store-{tag}'}))
    step('project-dataStores-list', project_list('dataStores', 'data_stores', 'data-stores',
                                                 {'name': f'data {tag}', 'slug': f'data-{tag}'}))
    step('project-dataForms-list', project_list('dataForms', 'data_forms', 'data-forms',
                                                {'name': f'form {tag}', 'slug': f'form-{tag}'}))

    # ---------------------------------------------------------------- executions, users
    def execution_cancel():
        made = http.post(f'{base}/api/executions', json={'projectId': project.id})
        check(made.status_code == 201, f'execution setup: {made.text}')
        client.executions.get(made.json()['id']).cancel()                 # PUT /api/executions/{id}/cancel
        status = http.get(f'{base}/api/executions/{made.json()["id"]}').json()['status']
        check(status == 'CANCELLED', f'after cancel: {status}')
        return status

    def user_memberships():
        # UserEndpoint.get_memberships builds this path; its MembershipEndpoint model only knows the
        # roles OWNER/READ/WRITE, not the contract's (docs/api/clients.md): called through the SDK's client
        me = client.get('/api/account/me').json()
        user = client.users.get(me['id'])
        memberships = client.get(f'/api/users/{user.id}/memberships').json()
        check(isinstance(memberships, list) and org.id in [m['organizationId'] for m in memberships],
              f'memberships: {memberships}')
        return len(memberships)

    step('execution-cancel-put', execution_cancel)
    step('user-memberships', user_memberships)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], sys.argv[2]))
