"""Scheduled jobs: the schedule expression is validated, ``nextRunOn`` computed, and the job's
schedule entry (the due-job index, features/work/store.py) written in the same transaction as every
create, update and delete (features/work/schedules.py)."""
from __future__ import annotations

from chalicelib.features.work import schedules
from chalicelib.features.work import store as work_store
from chalicelib.kernel.hooks import Hook


class ScheduledJobHook(Hook):
    # the next run is planned from these, and the schedule items follow them
    guards = frozenset({'scheduleExpression', 'active', 'nextRunOn', 'lastRunOn', 'targetType', 'targetId'})

    def before_create(self, family, principal, data, body):
        data.pop('lastRunOn', None)   # the scheduler's to write
        schedules.check(data.get('scheduleExpression'))
        schedules.require_target(data)
        schedules.plan_next(data)

    def before_update(self, family, principal, new, stored):
        old = stored.data
        new['lastRunOn'] = old.get('lastRunOn')
        if new['lastRunOn'] is None:
            new.pop('lastRunOn')
        if new.get('scheduleExpression') != old.get('scheduleExpression') or new.get('active', True) != \
                old.get('active', True) or new.get('nextRunOn') != old.get('nextRunOn'):
            schedules.check(new.get('scheduleExpression'))
            schedules.plan_next(new)
        if (new.get('targetType'), new.get('targetId')) != (old.get('targetType'), old.get('targetId')):
            schedules.require_target(new)

    def audit_ops(self, family, principal, action, data, stored):
        run_on = data.get('nextRunOn') if action != 'DELETE' and data.get('active', True) else None
        if action == 'CREATE' and run_on is None:
            return []
        return work_store.schedule_ops(data['id'], run_on)


HOOK = ScheduledJobHook()
