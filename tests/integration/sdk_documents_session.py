"""The platform's public Python SDK (``kodexa``), unmodified, reading and writing a parsed document
(issue 39; docs/api/documents.md "KDDB and the SDK's routes").

Run by tests/integration/test_sdk_client.py with the SDK's own virtualenv (.venv-sdk):
``python sdk_documents_session.py <base url> <api key> <corpus dir>``. Each step prints
``ok <step> <detail>``; the first failure prints its traceback and exits 1.
"""
from __future__ import annotations

import json
import sys
import time
import traceback
import uuid
from pathlib import Path

import requests
from kodexa.model.objects import Assistant
from kodexa.platform.client import DocumentStoreEndpoint, KodexaClient

WAIT_SECONDS = 60


def ok(step: str, detail: object = '') -> None:
    print(f'ok {step} {detail}', flush=True)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def main(base: str, key: str, corpus: str) -> None:
    client = KodexaClient(url=base, access_token=key)
    tag = uuid.uuid4().hex[:6]
    manifest = json.loads((Path(corpus) / 'manifest.json').read_text())
    project = requests.post(f'{base}/api/projects', headers={'x-api-key': key}, json={'name': f'sdk-docs-{tag}'})
    check(project.status_code == 201, f'project: {project.text}')
    made = requests.post(f'{base}/api/document-stores', headers={'x-api-key': key},
                         json={'projectId': project.json()['id'], 'name': 'SDK docs', 'slug': f'sdk-docs-{tag}'})
    check(made.status_code == 201, f'document store: {made.text}')
    assistant = requests.post(f'{base}/api/assistants', headers={'x-api-key': key}, json={
        'projectId': project.json()['id'], 'name': 'Noter', 'slug': f'noter-{tag}',
        'options': {'pipeline': {'steps': [{'name': 'note', 'stepType': 'SCRIPT',
                                            'options': {'expression': "{'metadata': {'seen': 'yes'}}"}}]}}})
    check(assistant.status_code == 201, f'assistant: {assistant.text}')
    store = client.get_object_by_ref('store', f'default/sdk-docs-{tag}')
    check(isinstance(store, DocumentStoreEndpoint), f'store by ref: {store}')

    for name in ('lppl.pdf', 'memo.docx'):
        expected = manifest['real'][name]['words']
        family = store.upload_bytes(f'sdk/{name}', (Path(corpus) / name).read_bytes())
        ends = time.monotonic() + WAIT_SECONDS
        while True:
            family = store.get_family(family.id)
            if len(family.content_objects or []) >= 2:
                break
            check(time.monotonic() < ends, f'{name}: not parsed within {WAIT_SECONDS} s')
            time.sleep(0.5)
        check([c.content_type for c in family.content_objects] == ['NATIVE', 'DOCUMENT'],
              f'content objects: {family.content_objects}')
        check(family.get_native() == (Path(corpus) / name).read_bytes(), 'get_native answers the original bytes')
        document = family.get_document()
        texts = [node.content for node in document.select('//*') if node.content]
        joined = '\n'.join(texts)
        for word in expected:
            check(word in joined, f'{name}: {word!r} not in the nodes of get_document()')
        ok('get_document', f'{name}: {len(texts)} nodes with text, {", ".join(expected)} found')

    # put_document: a changed document is stored and reads back
    document = family.get_document()
    document.content_node.add_child(document.create_node(node_type='line', content=f'reviewed by the SDK {tag}'))
    family.update_document(document)
    again = store.get_family(family.id).get_document()
    check(f'reviewed by the SDK {tag}' in again.content_node.get_all_content(), 'the changed document reads back')
    text = requests.get(f'{base}/api/document-families/{family.id}/text', headers={'x-api-key': key})
    check(text.status_code == 200 and f'reviewed by the SDK {tag}' in text.text, f'text: {text.text[:200]}')
    version = requests.get(f'{base}/api/document-families/{family.id}', headers={'x-api-key': key}).json()
    ok('put_document', f"{family.id} version {version['documentVersion']}")

    # reprocess (the SDK's PUT .../families/{id}/reprocess?assistantId=): the stage reads it again
    before = requests.get(f'{base}/api/document-families/{family.id}', headers={'x-api-key': key}).json()
    family.reprocess(Assistant(**assistant.json()))
    ends = time.monotonic() + WAIT_SECONDS
    while True:
        now = requests.get(f'{base}/api/document-families/{family.id}', headers={'x-api-key': key}).json()
        if now['documentVersion'] > before['documentVersion']:
            break
        check(time.monotonic() < ends, f'reprocess: no new version within {WAIT_SECONDS} s')
        time.sleep(0.5)
    reread = store.get_family(family.id).get_document()
    check(f'reviewed by the SDK {tag}' not in reread.content_node.get_all_content(),
          'reprocess parsed the original again')
    ok('reprocess', f"version {now['documentVersion']}")
    print(json.dumps({'done': True}), flush=True)


if __name__ == '__main__':
    try:
        main(sys.argv[1], sys.argv[2], sys.argv[3])
    except Exception:  # noqa: BLE001 - the test reads the traceback
        traceback.print_exc()
        sys.exit(1)
