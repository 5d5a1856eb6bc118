"""Equality-index slots are named in the registry, not taken from the order of the declaration
(issue 23): reordering a family's ``indexed`` must not move stored keys to other GSIs."""
from __future__ import annotations

import pytest

from chalicelib.kernel import records
from chalicelib.kernel.registry import Family, check_declaration, family

SPEC = 'name statusSlug assigneeId teamId'


def test_reordering_a_declaration_keeps_every_field_in_its_slot():
    one = Family('things', 'Thing', 'project', SPEC, indexed={'statusSlug': 1, 'assigneeId': 2, 'teamId': 3})
    other = Family('things', 'Thing', 'project', SPEC, indexed={'teamId': 3, 'statusSlug': 1, 'assigneeId': 2})
    check_declaration(one)
    check_declaration(other)
    data = {'statusSlug': 'open', 'assigneeId': 'u1', 'teamId': 't1'}
    assert records.indexed_values(one, data) == records.indexed_values(other, data) == {
        1: ('statusSlug', 'open'), 2: ('assigneeId', 'u1'), 3: ('teamId', 't1')}
    assert other.slot_of('teamId') == 3


def test_the_tasks_slots_are_the_ones_stored_keys_were_written_under():
    # the slots keys already in the table use: changing one needs a migration of stored keys
    assert dict(family('tasks').indexed) == {'statusSlug': 1, 'assigneeId': 2, 'teamId': 3, 'taskGroupId': 4,
                                             'createdByActivityId': 5}


@pytest.mark.parametrize('indexed, message', [
    (('statusSlug', 'assigneeId'), "must name each field's slot"),
    ({'statusSlug': 1, 'assigneeId': 1}, 'distinct'),
    ({'statusSlug': 6}, '1..5'),
    ({'statusSlug': 0}, '1..5'),
    ({'nope': 1}, 'cannot index'),
])
def test_a_positional_duplicate_or_out_of_range_slot_is_refused(indexed, message):
    with pytest.raises(ValueError, match=message):
        check_declaration(Family('things', 'Thing', 'project', SPEC, indexed=indexed))
