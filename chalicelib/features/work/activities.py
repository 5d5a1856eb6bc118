"""Activities: a deleted activity takes its work-counter items (``ACTWORK#{id}``,
features/work/store.py) with it, in its delete transaction (docs/api/lifecycle.md). An activity
is deleted only once no execution names it (kernel/referrers.py), so nothing moves those counters
again afterwards."""
from __future__ import annotations

from chalicelib.features.work import store as work_store
from chalicelib.kernel.hooks import Hook


class ActivityHook(Hook):
    def audit_ops(self, family, principal, action, data, stored):
        if action != 'DELETE' or stored is None:
            return []
        return work_store.work_delete_ops(stored.id)


HOOK = ActivityHook()
