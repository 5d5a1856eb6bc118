"""python -m chalicelib.ops.migrate_labels (issue 40, defect 2): label names stored on document
families by SCRIPT steps before issue 40 become label ids, idempotently; an unknown or ambiguous
name is reported and kept, or (--create-missing) becomes a new label."""
from __future__ import annotations

import pytest

from tests.invariants import table_invariants  # noqa: F401 - the checker fixture
from tests.support import create

pytestmark = pytest.mark.usefixtures('table_invariants')


def _store_labels(family_id: str, labels: list[str]) -> None:
    """Write labels as the previous release's SCRIPT step could (bypassing today's checks)."""
    from chalicelib.features.identity.service_token import SERVICE
    from chalicelib.kernel import records
    from chalicelib.kernel.registry import family
    from chalicelib.kernel.store import table
    stored = table.get('document-families', family_id)
    new = {**stored.data, 'labels': labels, 'changeSequence': stored.seq + 1}
    records.commit(records.update_ops(family('document-families'), new, stored, principal=SERVICE))


def test_stored_label_names_become_ids_once(api, org_id, tmp_path):
    from chalicelib.ops import migrate_labels
    project = create(api, 'projects', org_id)
    invoice = api.post('/api/labels', {'organizationId': org_id, 'name': 'invoice'}).json['id']
    for _ in range(2):
        api.post('/api/labels', {'organizationId': org_id, 'name': 'dup'})
    family = api.post('/api/document-families', {'projectId': project['id'], 'path': 'a.pdf'}).json
    clean = api.post('/api/document-families', {'projectId': project['id'], 'path': 'b.pdf',
                                                 'labels': [invoice]}).json
    _store_labels(family['id'], ['invoice', invoice, 'missing', 'dup'])   # the defect's mix
    url = f"/api/document-families/{family['id']}"

    dry = migrate_labels.migrate(dry_run=True, out=lambda line: None)
    assert dry['migrated'] == 1 and api.get(url).json['labels'] == ['invoice', invoice, 'missing', 'dup']

    totals = migrate_labels.migrate(state=tmp_path / 'cursor.json', page_size=7, out=lambda line: None)
    assert (totals['migrated'], totals['unknown'], totals['ambiguous'], totals['created']) == (1, 1, 1, 0)
    after = api.get(url).json
    assert after['labels'] == [invoice, 'missing', 'dup'] and after['changeSequence'] == family['changeSequence'] + 2
    assert api.get(f"/api/document-families/{clean['id']}").json['changeSequence'] == clean['changeSequence']

    again = migrate_labels.migrate(out=lambda line: None)   # nothing left it can resolve: nothing written
    assert again['migrated'] == 0 and api.get(url).json['changeSequence'] == after['changeSequence']

    created = migrate_labels.migrate(create_missing=True, out=lambda line: None)
    assert created['created'] == 1 and created['migrated'] == 1 and created['ambiguous'] == 1
    [missing] = api.get("/api/labels?filter=name=='missing'").json['content']
    assert api.get(url).json['labels'] == [invoice, missing['id'], 'dup']
