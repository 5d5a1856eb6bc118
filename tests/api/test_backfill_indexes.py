"""python -m chalicelib.ops.backfill_indexes: records written before equality indexes existed
(no index keys, not counted) become keyed and counted exactly once; a second run changes
nothing; a record the API writes meanwhile is never counted twice; an interrupted run resumes."""
from __future__ import annotations

import json
import urllib.parse

import pytest

from tests.support import task_statuses


def _strip_to_legacy(task_ids: list[str], org_id: str) -> None:
    """Make items look written by the code before indexes: no x-slots, no ixv, no value counters."""
    from chalicelib.kernel.store import table
    from chalicelib.kernel.store.model import configure
    from chalicelib.kernel.store.table import entity_pk
    model = configure()
    for id_ in task_ids:
        item = model.get(entity_pk('tasks', id_), '#')
        item.update(actions=[model.ixv.remove(), model.x1.remove()])
    for counter in model.scan(model.pk.startswith('CNT')):   # every partition of the value counters
        if table.counter_base_pk(counter.pk).startswith(f'CNT#tasks#{org_id}#statusSlug='):
            counter.delete()


def _total(api, org_id: str, status: str) -> int:
    query = urllib.parse.urlencode({'filter': [f"statusSlug == '{status}'", f"organizationId == '{org_id}'"]},
                                   doseq=True)
    r = api.get(f'/api/tasks?{query}')
    assert r.status == 200, r.json
    return r.json['totalElements']


@pytest.fixture
def legacy(api, org_id):
    project = api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json
    task_statuses(api, org_id, 'open', 'done')
    tasks = [api.post('/api/tasks', {'projectId': project['id'], 'statusSlug': ('open', 'done')[i % 2]}).json
             for i in range(7)]
    _strip_to_legacy([t['id'] for t in tasks], org_id)
    return tasks


def test_backfill_keys_and_counts_each_record_once(api, org_id, legacy):
    from chalicelib.ops.backfill_indexes import backfill
    assert _total(api, org_id, 'open') == 0          # invisible to the index before the backfill
    first = backfill(page_size=5, out=lambda line: None)
    assert first['keyed'] == 7
    assert (_total(api, org_id, 'open'), _total(api, org_id, 'done')) == (4, 3)
    again = backfill(page_size=5, out=lambda line: None)
    assert again['keyed'] == 0 and (_total(api, org_id, 'open'), _total(api, org_id, 'done')) == (4, 3)


def test_a_record_written_during_the_backfill_is_counted_once(api, org_id, legacy, monkeypatch):
    from chalicelib.kernel.store import table
    from chalicelib.ops import backfill_indexes
    moved = legacy[0]   # 'open' -> 'done' by the API between the backfill's read and its write
    real_scan = table.scan_page

    def scan_then_write(start=None, **kw):
        items, nxt = real_scan(start, **kw)
        if any(i.pk == f"tasks#{moved['id']}" for i in items):
            assert api.put(f"/api/tasks/{moved['id']}", {'statusSlug': 'done'}).status == 200
        return items, nxt
    monkeypatch.setattr(table, 'scan_page', scan_then_write)
    totals = backfill_indexes.backfill(page_size=100, out=lambda line: None)
    assert totals['keyed'] == 6 and totals['skipped'] == 1
    assert (_total(api, org_id, 'open'), _total(api, org_id, 'done')) == (3, 4)


def test_an_interrupted_backfill_resumes_from_its_state_file(api, org_id, legacy, tmp_path):
    from chalicelib.ops.backfill_indexes import backfill
    state = tmp_path / 'backfill.json'

    class Stop(Exception):
        pass

    def stop_after_first_page(line):
        raise Stop(line)
    with pytest.raises(Stop):
        backfill(state=state, page_size=3, out=stop_after_first_page)
    assert json.loads(state.read_text()) is not None          # a position to resume from
    backfill(state=state, page_size=3, out=lambda line: None)
    assert (_total(api, org_id, 'open'), _total(api, org_id, 'done')) == (4, 3)
