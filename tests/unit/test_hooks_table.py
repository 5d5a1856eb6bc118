"""The family hooks are imported, not named by string (chalicelib/features/hooks.py), installed
into the kernel once, the same for the app, ops/ tools and tests, and failing closed."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chalicelib.features import hooks as feature_hooks
from chalicelib.kernel import hooks as kernel_hooks
from chalicelib.kernel.registry import BY_PATH, FAMILIES

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, 'PYTHONPATH': str(ROOT)})


def test_every_family_hook_is_a_feature_hook():
    for family in FAMILIES:
        if family.hook is None:
            assert kernel_hooks.hook_for(family) is kernel_hooks.hook_for(BY_PATH['projects'])
            continue
        hook = kernel_hooks.hook_for(family)
        assert isinstance(hook, kernel_hooks.Hook) and type(hook) is not kernel_hooks.Hook, family.path
        assert type(hook).__module__.startswith('chalicelib.features.'), family.path
    assert kernel_hooks.installed() == feature_hooks.HOOKS


_TABLE = ('from chalicelib.kernel import hooks; '
          'print(sorted((k, f.__module__, f.__name__) for k, f in hooks.installed().items()))')


@pytest.mark.parametrize('entry', ['import app', 'import chalicelib.ops.backfill_indexes',
                                   'import chalicelib.ops.check_table'])
def test_the_app_and_ops_tools_install_the_same_table(entry):
    """(localdev serves `app` itself; the event handlers run inside it.)"""
    expected = sorted((k, f.__module__, f.__name__) for k, f in feature_hooks.HOOKS.items())
    out = _python(f'{entry}; {_TABLE}')
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(expected)


def test_the_kernel_alone_refuses_to_guess_a_hook():
    out = _python('from chalicelib.kernel import hooks; from chalicelib.kernel.registry import declare\n'
                  'try:\n    hooks.hook_for(declare("tasks", "Task", "project", "title", hook="tasks"))\n'
                  'except hooks.HooksNotInstalled as exc:\n    print("refused:", exc)\n')
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('refused: the family hooks are not installed')


def test_the_kernel_alone_knows_no_family():
    """The declarations are the features' (chalicelib/features/*/declarations.py): read before they
    are installed, the registry raises instead of answering "no such family"."""
    out = _python('from chalicelib.kernel import registry\n'
                  'for read in (lambda: registry.family("tasks"), lambda: list(registry.FAMILIES),\n'
                  '             lambda: "tasks" in registry.BY_PATH):\n'
                  '    try:\n        read()\n'
                  '    except registry.FamiliesNotInstalled:\n        print("refused")\n')
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ['refused'] * 3


def test_a_table_missing_a_hook_is_refused_at_install():
    partial = {k: v for k, v in feature_hooks.HOOKS.items() if k != 'tasks'}
    with pytest.raises(kernel_hooks.HooksNotInstalled, match='no hook installed for tasks'):
        kernel_hooks.install(partial)
    assert kernel_hooks.installed() == feature_hooks.HOOKS   # the good table stays


def test_a_family_naming_an_unknown_hook_raises_at_once():
    stray = dataclasses.replace(BY_PATH['tasks'], hook='no_such_hook')
    with pytest.raises(kernel_hooks.HooksNotInstalled, match="names hook 'no_such_hook'"):
        kernel_hooks.hook_for(stray)


def test_the_kernel_alone_declares_no_feature_shape_or_enumeration():
    """Issue 40: the step, bridge, schedule and taxon shapes and the features' enumerations are
    declared beside their families (``SHAPES``/``ENUMS`` of features/*/declarations.py); the kernel
    holds the mechanism and its two generic enumerations, and a field naming a shape nobody
    installed is refused when it is parsed."""
    out = _python('from chalicelib.kernel import fields, shapes\n'
                  'print(sorted(shapes.SHAPES), sorted(fields.ENUMS))\n'
                  'try:\n    fields.parse_fields("steps:array(PipelineStep)")\n'
                  'except ValueError as e:\n    print(e)\n')
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[] ['AuditAction', 'SortDirection']",
                                       "unknown shape in 'steps:array(PipelineStep)'"]


def test_every_shape_and_enumeration_is_installed_from_its_feature():
    from chalicelib.features.bridges import declarations as bridges
    from chalicelib.features.extraction import declarations as extraction
    from chalicelib.features.work import declarations as work
    from chalicelib.kernel import fields, shapes
    owners = {s.name: m.__name__ for m in (bridges, extraction, work) for s in m.SHAPES}
    assert set(shapes.SHAPES) == set(owners)
    assert owners['PipelineStep'] == owners['ScheduleExpression'] == work.__name__
    assert owners['ServiceBridgeEndpoint'] == bridges.__name__ and owners['Taxon'] == extraction.__name__
    assert fields.ENUMS['ExecutionStatus'] is work.ENUMS['ExecutionStatus']
    assert fields.ENUM_ALIASES == {'TaskStatusType': {'TODO': 'OPEN'}}


def test_a_shape_or_enumeration_declared_twice_is_refused():
    from chalicelib.kernel import fields, shapes
    step = shapes.SHAPES['PipelineStep']
    with pytest.raises(ValueError, match="a shape is declared twice: \\['PipelineStep'\\]"):
        shapes.install([step, step])
    with pytest.raises(ValueError, match="declared twice: \\['SortDirection'\\]"):
        fields.install_enums({'SortDirection': ('UP',)}, {})
    with pytest.raises(ValueError, match='with other declarations'):
        shapes.install([step])
    assert 'Taxon' in shapes.SHAPES   # the installed ones stay
