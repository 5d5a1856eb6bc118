"""The invariant checker (`python -m chalicelib.ops.check_table`): clean on a table the API
wrote, and each kind of damage an operator could meet is reported by its check, with exit 1."""
from __future__ import annotations

import sys
import textwrap
import types

import pytest

from tests.conftest import make_user
from tests.support import task_statuses


@pytest.fixture
def world(api, org_id):
    """A little of everything: a project with a task (indexed values), a team, a membership."""
    project = api.post('/api/projects', {'name': 'P', 'slug': 'p-one', 'organizationId': org_id}).json
    team = api.post('/api/teams', {'organizationId': org_id, 'name': 'T', 'slug': 'tee'}).json
    user, _ = make_user(api, org_id, 'MEMBER')
    task_statuses(api, org_id, 'open')
    task = api.post('/api/tasks', {'projectId': project['id'], 'title': 't', 'statusSlug': 'open',
                                   'teamId': team['id'], 'assigneeId': user['id']}).json
    assert task.get('id'), task
    return {'project': project, 'team': team, 'user': user, 'task': task, 'org': org_id}


@pytest.fixture
def settle_waits(monkeypatch):
    """The command's settle waits (a second read ``--settle-seconds`` after a first that found
    something: 2 s by default), recorded instead of waited: in-process nothing is in flight to
    settle meanwhile (test_a_write_in_flight_... below lands a write in that wait)."""
    from chalicelib.ops import check_table
    waits: list[float] = []
    monkeypatch.setattr(check_table, 'time', types.SimpleNamespace(sleep=waits.append))
    return waits


def run():
    from chalicelib.ops import check_table
    violations, _ = check_table.run()
    return violations


def by_check(violations):
    out = {}
    for v in violations:
        out.setdefault(v.check, []).append(v)
    return out


def raw_delete(pk, sk='#'):
    from chalicelib.kernel.store.model import configure
    configure()(pk, sk).delete()


def raw_add(pk, sk, amount):
    from chalicelib.kernel.store.model import configure
    model = configure()
    model(pk, sk).update(actions=[model.cnt.add(amount)])


def test_a_table_the_api_wrote_is_clean(world, api, capsys):
    from chalicelib.ops import check_table
    group = api.post('/api/task-groups', {'projectId': world['project']['id'], 'name': 'g'}).json
    assert api.delete(f"/api/task-groups/{group['id']}").status == 204   # its history stays, on purpose
    assert run() == []
    assert check_table.main([]) == 0
    out = capsys.readouterr().out
    assert 'ok   unique-values' in out and 'ok   orphans' in out and '0 violation(s)' in out


def test_a_lost_uniqueness_item_and_a_stray_one(world):
    from chalicelib.kernel.store import table
    key = table.unique_key('projects', scope=world['org'], field_name='slug', value='p-one')
    raw_delete(key)
    from chalicelib.kernel.store.model import configure
    configure()(table.unique_key('teams', scope=world['org'], field_name='slug', value='ghost'), '#',
                kind='unique', ref='00000000-0000-0000-0000-000000000000').save()
    found = by_check(run())
    messages = [v.message for v in found['unique-values']]
    assert any("slug='p-one' without its uniqueness item" in m for m in messages)
    assert any('uniqueness item without its entity' in m and 'no such record' in m for m in messages)
    assert set(found) == {'unique-values'}


def test_counters_that_drifted(world):
    from chalicelib.kernel import parents
    from chalicelib.kernel.store import table
    raw_add(table.counter_pk('teams', world['org']), '0', 1)
    raw_add(table.value_counter_pk('tasks', world['org'], 'statusSlug', 'open'), '1', -1)
    raw_add(table.members_pk(world['org']), '#', 2)
    raw_add(parents.guard_of('projects', world['project']['id'], world['task']['id']), '#', 5)
    found = by_check(run())
    assert set(found) == {'family-counters', 'value-counters', 'membership-counts', 'child-counts'}
    assert 'counter says 2, the tenant holds 1 records' in found['family-counters'][0].message
    assert 'counter says 0, 1 records hold the value' in found['value-counters'][0].message
    assert found['child-counts'][0].message == 'child counter says 6, the parent holds 1 records'


def test_children_whose_parent_is_gone_and_references_to_missing_records(world):
    from chalicelib.kernel.store import table
    raw_delete(table.entity_pk('projects', world['project']['id']))   # bypassing the API's refusal
    raw_delete(table.entity_pk('teams', world['team']['id']))
    found = by_check(run())
    assert [v.key for v in found['orphans']] == [table.entity_pk('tasks', world['task']['id'])]
    assert 'of project' in found['orphans'][0].message and 'which is gone' in found['orphans'][0].message
    assert [v.message for v in found['references']] == [f"Task.teamId refers to a missing Team {world['team']['id']}"]


def test_the_command_exits_1_with_a_readable_report(world, capsys, settle_waits):
    from chalicelib.kernel.store import table
    from chalicelib.ops import check_table
    raw_delete(table.entity_pk('teams', world['team']['id']))
    assert check_table.main([]) == 1 and settle_waits == [2]   # found twice, 2 s apart
    out = capsys.readouterr().out
    assert 'FAIL references: 1 violation(s)' in out and 'FAIL unique-values' in out and 'read ' in out
    assert check_table.main(['--only', 'orphans']) == 0
    with pytest.raises(SystemExit) as bad:
        check_table.main(['--only', 'nonsense'])
    assert bad.value.code == 2


def test_a_module_in_the_checks_package_is_a_new_check(world, tmp_path, monkeypatch, capsys, settle_waits):
    """The seam for other families' checks: drop a module in chalicelib/ops/checks/."""
    from chalicelib.ops import check_table, checks
    (tmp_path / 'outbox_example.py').write_text(textwrap.dedent('''
        from chalicelib.ops.check_table import Violation, check

        @check('example-outbox')
        def never_published(snap):
            for row in snap.items_with_prefix('OUTBOX#'):
                if not row.raw.get('ref'):
                    yield Violation('example-outbox', row.pk, 'outbox item never published')
    '''))
    monkeypatch.setattr(checks, '__path__', [*checks.__path__, str(tmp_path)])
    monkeypatch.setattr(check_table, 'CHECKS', dict(check_table.CHECKS))
    monkeypatch.delitem(sys.modules, 'chalicelib.ops.checks.outbox_example', raising=False)
    from chalicelib.kernel.store.model import configure
    configure()('OUTBOX#1', '#', kind='outbox').save()
    assert check_table.main([]) == 1
    out = capsys.readouterr().out
    assert 'FAIL example-outbox: 1 violation(s)' in out and 'OUTBOX#1: outbox item never published' in out
    assert 'OUTBOX#…' not in out   # claimed by the check: not listed as unchecked


def test_a_write_in_flight_during_the_read_is_not_reported_a_lasting_fault_is(world, monkeypatch, capsys):
    """A Scan is not a snapshot: a record written between two pages shows without its counter
    move (the chaos run met it: the stream handler recording an event while the checker read).
    The checker reads again and reports only what it found both times."""
    from chalicelib.kernel.store import table
    from chalicelib.ops import check_table
    raw_add(table.counter_pk('teams', world['org']), '0', -1)          # in flight: heals before the second read
    raw_add(table.members_pk(world['org']), '#', 3)                    # lasting
    waits = []

    def the_write_lands(seconds):
        waits.append(seconds)
        raw_add(table.counter_pk('teams', world['org']), '0', 1)
    monkeypatch.setattr(check_table.time, 'sleep', the_write_lands)
    violations, _, settled = check_table.run_settled(settle_seconds=2)
    assert waits == [2]
    assert [v.check for v in violations] == ['membership-counts']
    assert [v.check for v in settled] == ['family-counters']
    raw_add(table.members_pk(world['org']), '#', -3)
    waits.clear()
    assert check_table.main([]) == 0 and waits == []                  # a clean read is not read twice
    raw_add(table.counter_pk('teams', world['org']), '0', -1)
    assert check_table.main(['--settle-seconds', '0']) == 1 and waits == []
    assert check_table.main([]) == 0 and waits == [2]
    assert 'settled between two reads (writes in flight, not counted): 1: family-counters' in capsys.readouterr().out
