"""The family hooks the features own, by the name a family gives in kernel/registry.py.

One function per hook, each importing its module when the hook is first used (cold start:
``import app`` loads none of them), so go-to-definition and import-linter see every hook.
``install`` puts the table into the kernel (kernel/hooks.py); ``chalicelib/features/__init__.py``
calls it, so whatever imports a feature (the app, ops/ tools, localdev, tests) runs the same
hooks. See docs/architecture.md "Hooks".
"""
from __future__ import annotations

from collections.abc import Callable

from chalicelib.kernel import hooks as kernel_hooks
from chalicelib.kernel.hooks import Hook


def organizations() -> Hook:
    from chalicelib.features.identity import organizations  # noqa: PLC0415 - lazy: cold start
    return organizations.HOOK


def users() -> Hook:
    from chalicelib.features.identity import users  # noqa: PLC0415 - lazy: cold start
    return users.HOOK


def access() -> Hook:
    from chalicelib.features.identity import memberships  # noqa: PLC0415 - lazy: cold start
    return memberships.HOOK


def tasks() -> Hook:
    from chalicelib.features.tasks import hooks  # noqa: PLC0415 - lazy: cold start
    return hooks.HOOK


def task_groups() -> Hook:
    from chalicelib.features.tasks import groups  # noqa: PLC0415 - lazy: cold start
    return groups.HOOK


def document_families() -> Hook:
    from chalicelib.features.documents import families  # noqa: PLC0415 - lazy: cold start
    return families.HOOK


def linked_deltas() -> Hook:
    from chalicelib.features.documents import linked_deltas  # noqa: PLC0415 - lazy: cold start
    return linked_deltas.HOOK


def executions() -> Hook:
    from chalicelib.features.work import executions  # noqa: PLC0415 - lazy: cold start
    return executions.HOOK


def activities() -> Hook:
    from chalicelib.features.work import activities  # noqa: PLC0415 - lazy: cold start
    return activities.HOOK


def scheduled_jobs() -> Hook:
    from chalicelib.features.work import scheduled_jobs  # noqa: PLC0415 - lazy: cold start
    return scheduled_jobs.HOOK


def service_bridges() -> Hook:
    from chalicelib.features.bridges import hooks  # noqa: PLC0415 - lazy: cold start
    return hooks.HOOK


def events() -> Hook:
    from chalicelib.features.events import hooks  # noqa: PLC0415 - lazy: cold start
    return hooks.HOOK


def data_definitions() -> Hook:
    from chalicelib.features.extraction import hooks  # noqa: PLC0415 - lazy: cold start
    return hooks.DEFINITIONS


def data_objects() -> Hook:
    from chalicelib.features.extraction import hooks  # noqa: PLC0415 - lazy: cold start
    return hooks.OBJECTS


def data_exceptions() -> Hook:
    from chalicelib.features.extraction import hooks  # noqa: PLC0415 - lazy: cold start
    return hooks.EXCEPTIONS


def parse_trigger() -> Callable[[list[dict]], None]:
    """New document families: their parse trigger sent at once (docs/operations/worker.md
    "Fairness between organizations": not behind another organization's burst in the stream)."""
    from chalicelib.features.work import pipelines  # noqa: PLC0415 - lazy: cold start
    return pipelines.trigger_created


# hook name -> the listeners told of a family's new records once their create committed
# (kernel/hooks.py ``after_create``)
CREATED: dict[str, tuple[Callable[[], Callable[[list[dict]], None]], ...]] = {
    'document_families': (parse_trigger,),
}

HOOKS: dict[str, Callable[[], Hook]] = {
    'organizations': organizations,
    'users': users,
    'access': access,
    'tasks': tasks,
    'task_groups': task_groups,
    'document_families': document_families,
    'linked_deltas': linked_deltas,
    'executions': executions,
    'activities': activities,
    'scheduled_jobs': scheduled_jobs,
    'service_bridges': service_bridges,
    'events': events,
    'data_definitions': data_definitions,
    'data_objects': data_objects,
    'data_exceptions': data_exceptions,
}


def install() -> None:
    """Install the table into the kernel (idempotent); raises if a family names a missing hook."""
    kernel_hooks.install(HOOKS, CREATED)
