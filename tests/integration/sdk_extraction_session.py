"""The platform's public Python SDK (``kodexa``), unmodified, reading a data store's extracted data
(issue 42; docs/api/extraction.md "Reading and exporting").

Run by tests/integration/test_extraction_local.py with the SDK's own virtualenv (.venv-sdk):
``python sdk_extraction_session.py <base url> <api key> <org slug> <data store slug> <family id>``.
Each step prints ``ok <step> <detail>``; the first failure prints its traceback and exits 1.
"""
from __future__ import annotations

import sys
import traceback

from kodexa.platform.client import DataStoreEndpoint, KodexaClient


def ok(step: str, detail: object = '') -> None:
    print(f'ok {step} {detail}', flush=True)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def main(base: str, key: str, org: str, slug: str, family_id: str) -> None:
    client = KodexaClient(url=base, access_token=key)
    store = client.get_object_by_ref('store', f'{org}/{slug}')   # GET /api/stores/{org}/{slug}
    check(isinstance(store, DataStoreEndpoint) and store.slug == slug, f'store: {type(store).__name__}')
    ok('store by ref', store.ref)
    items = store.get_data_objects('invoice/lineItems')
    check(len(items) >= 8 and all(i.path == 'invoice/lineItems' for i in items), f'line items: {len(items)}')
    mine = [i for i in items if i.lineage and i.lineage.document_family_id == family_id]
    check(len(mine) == 4, f'the family has {len(mine)} line items')
    ok('line items', len(items))
    one = store.get_data_object(mine[0].id)
    check(one.id == mine[0].id and one.parent_id and one.taxonomy_ref, f'object: {one}')
    ok('one object', one.path)
    attributes = mine[0].attributes
    by_tag = {a.tag: a for a in attributes}
    check(set(by_tag) == {'description', 'quantity', 'unitPrice', 'amount'}, f'tags: {sorted(by_tag)}')
    check(by_tag['quantity'].number_value == 2 and by_tag['amount'].decimal_value == 2500.0,
          f"values: {by_tag['quantity'].number_value}, {by_tag['amount'].decimal_value}")
    check(by_tag['amount'].data_features['page'] == 1 and len(by_tag['amount'].data_features['bbox']) == 4,
          f'provenance: {by_tag["amount"].data_features}')
    ok('attributes', sorted(by_tag))
    taxonomies = store.get_taxonomies()
    check(taxonomies and taxonomies[0].taxons[0].name == 'invoice', f'taxonomies: {taxonomies}')
    ok('taxonomies', [t.slug for t in taxonomies])
    page = store.get_data_exceptions(page_size=50)
    check(all(e.message for e in page.content), 'exceptions without a message')
    ok('exceptions', page.total_elements)


if __name__ == '__main__':
    try:
        main(*sys.argv[1:6])
    except Exception:  # noqa: BLE001 - the test reads the traceback
        traceback.print_exc()
        sys.exit(1)
