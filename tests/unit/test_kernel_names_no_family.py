"""The kernel is the generic engine: no module of chalicelib/kernel/ names a family (issue 40).

A family's rules live in its declaration (chalicelib/features/*/declarations.py, read through
kernel/registry.py): who may write it, what it embeds, whether its delete refuses while it is
named, its SDK aliases, ... A string literal equal to a family's path ('tasks',
'document-families', ...) anywhere in the kernel is a rule kept outside its family: this test
fails on it. The one exception is kernel/tenancy.py, which names the families the kernel's own
tenancy and access model is built on (organizations, projects, users, memberships, the built-in
roles and permissions), once; every other kernel module uses its constants.
"""
from __future__ import annotations

import ast
from pathlib import Path

from chalicelib.kernel import tenancy
from chalicelib.kernel.registry import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / 'chalicelib' / 'kernel'
TENANCY = KERNEL / 'tenancy.py'


def _named(path: Path, names: set[str]) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names)


def test_no_kernel_module_names_a_family():
    names = {f.path for f in FAMILIES}
    found = {str(p.relative_to(ROOT)): hits for p in sorted(KERNEL.rglob('*.py'))
             if p != TENANCY and (hits := _named(p, names))}
    assert found == {}, ("kernel modules naming families (declare the rule in the family's "
                         f'declaration, or use kernel/tenancy.py for the tenancy model): {found}')


def test_the_tenancy_module_names_only_the_tenancy_families():
    declared = {f.path for f in FAMILIES}
    model = {tenancy.ORGANIZATIONS, tenancy.PROJECTS, tenancy.USERS, tenancy.MEMBERSHIPS, tenancy.ROLES,
             tenancy.PERMISSIONS}
    assert model <= declared   # each is a declared family
    assert {value for _, value in _named(TENANCY, declared)} == model


def test_the_check_sees_a_family_named_in_the_kernel(tmp_path):
    """The check itself: a literal family path is found, in code and in f-string-free keys alike."""
    module = tmp_path / 'rule.py'
    module.write_text("LIST = ('tasks', 'x')\nif path == 'document-families':\n    pass\n")
    assert _named(module, {f.path for f in FAMILIES}) == [(1, 'tasks'), (2, 'document-families')]
