"""Dense logic of the document services, without HTTP: relative taxon paths in JSONata rules,
parents-first ordering over cycles, and delta application."""
from __future__ import annotations

from chalicelib.features.documents import deltas, validation


def test_relative_paths_are_rewritten_outside_string_literals_only():
    assert validation._rewrite('amount <= ../total') == ('amount <= $__up1.total', 1)
    assert validation._rewrite("../../date > '../x' and \"../y\" = `../z`") == \
        ("$__up2.date > '../x' and \"../y\" = `../z`", 2)
    assert validation._rewrite('[1..5]') == ('[1..5]', 0)
    assert validation._rewrite('a.../b') == ('a.../b', 0)


def test_ordering_is_parents_first_and_terminates_on_cycles():
    nodes = [{'id': 'x', 'parentId': 'y'}, {'id': 'y', 'parentId': 'x'}, {'id': 'c2', 'parentId': 'r', 'index': 2},
             {'id': 'c1', 'parentId': 'r', 'index': 1}, {'id': 'r', 'parentId': None}, {'id': 'o', 'parentId': 'gone'},
             {'id': 's', 'parentId': 's'}]
    assert [n['id'] for n in deltas.ordered(nodes)] == ['o', 'r', 'c1', 'c2', 'x', 'y', 's']


def test_apply_keeps_what_applies_in_order():
    nodes = [{'id': 'r', 'parentId': None}, {'id': 'a', 'parentId': 'r'}, {'id': 'b', 'parentId': 'a'}]
    ops = deltas.parse_operations([
        {'op': 'delete', 'id': 'a'}, {'op': 'move', 'id': 'b', 'parentId': 'r'},
        {'op': 'add', 'node': {'id': 'n', 'parentId': 'r'}}, {'op': 'move', 'id': 'r', 'parentId': 'n'},
        {'op': 'update', 'id': 'n', 'set': {'content': 'x'}}])
    out, dropped = deltas.apply(nodes, ops)
    assert [n['id'] for n in out] == ['r', 'n'] and out[1]['content'] == 'x'
    assert dropped == ['operation 1 (move): node b does not exist',
                       'operation 3 (move): moving r under n would put it under itself']
    assert nodes[1]['id'] == 'a'   # the input is not changed
