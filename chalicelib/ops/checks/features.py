"""Checks of the documents and work features (issue 16): S3 objects of document families,
activities stuck or miscounted, outbox items never published, schedule entries.

* ``document-objects``: a document family with ``storageKey`` whose object is not in the bucket;
  with ``documentVersion`` >= 1 but no ``documentKey``, or a ``documentKey`` naming a missing
  object; a ``documentKey`` without a ``documentVersion`` >= 1. (Upload sessions COMPLETED that
  name a family that is gone are not violations: the family may have been deleted since.)
* ``activities-stuck``: an activity PENDING whose ``createdOn`` is older than
  ``--stuck-minutes`` (15). The queue cannot be asked about one activity, so "stuck" is defined
  by time: the start route sends the message right after writing the activity (or deletes it
  again), and the worker claims it PENDING -> RUNNING at its first delivery; only a message that
  was lost or ended in the DLQ (5 receives x 30 s visibility) leaves an activity PENDING that long.
* ``activity-work``: a RUNNING activity whose ``ACTWORK#{id}`` ``remaining`` count differs from
  its executions not yet ended (statuses.py TERMINAL: SUCCEEDED, FAILED, CANCELLED, the retired TIMED_OUT).
* ``outbox-published``: a domain event, in an outbox item (``EVT#{eventId}``) or carried on a
  record (``obx``: the record's last write's event), whose ``occurredOn`` is older
  than ``--outbox-minutes`` (5) and which has no ``events`` record of the same id (events the
  publisher only publishes, without recording, are not checked: no organization, or
  ``organizations.deleted``).
* ``tallies``: a tally (``TALLY#{token}``, features/events/tally.py) still open
  ``--tally-minutes`` (30: longer than any run of the stream handler) after it was opened: the
  events records its writer put are not counted yet, and no redelivery came to settle it (the
  stream gave the batch up). ``python -m chalicelib.ops.settle_tallies`` settles them.
* ``store-bytes``: a document store's byte counter (``CNT#document-stores#{storeId}#bytes``,
  sharded) differs from the sum of ``size`` of its live families that have a ``storageKey``.
* ``schedule-index``: a schedule entry ``SCHED#{jobId}`` exists exactly for the active
  scheduled jobs with a ``nextRunOn``, with ``csk`` = ``{nextRunOn}#{jobId}``, ``tpk``
  ``SCHED#DUE`` and ``ref`` = the job id.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

from chalicelib.core import clock
from chalicelib.features.documents import blobs
from chalicelib.features.events import tally
from chalicelib.features.work import store as work_store
from chalicelib.features.work.statuses import TERMINAL as EXECUTION_ENDED
from chalicelib.kernel.store import table
from chalicelib.ops.check_table import OPTIONS, Snapshot, Violation, check, option

option('stuck-minutes', 15, 'activities-stuck: minutes an activity may stay PENDING')
option('outbox-minutes', 5, 'outbox-published: minutes an outbox event may wait for its events record')
option('tally-minutes', 30, 'tallies: minutes a tally of events records may stay unsettled')



def _before(minutes: float) -> str:
    return clock.iso(clock.now() - timedelta(minutes=minutes))


def _exists(key: str) -> bool | None:
    """Whether the bucket holds ``key``; None when storage did not answer (after retries)."""
    for attempt in range(4):
        try:
            return blobs.head(key) is not None
        except blobs.BlobUnavailable:
            time.sleep(0.2 * 2 ** attempt)
    return None


def _object_problem(key: str) -> str | None:
    found = _exists(key)
    if found is None:
        return f'could not be checked: storage did not answer for {key}'
    return None if found else f'names {key}, which is not in the bucket'


@check('document-objects')
def document_objects(snap: Snapshot) -> Iterator[Violation]:
    for row in snap.live('document-families'):
        data = row.data
        key = data.get('storageKey')
        if key:
            problem = _object_problem(key)
            if problem:
                yield Violation('document-objects', row.pk, f'storageKey {problem}')
        version = data.get('documentVersion') or 0
        current = data.get('documentKey')
        if int(version) >= 1 and not current:
            yield Violation('document-objects', row.pk, f'documentVersion {version} without a documentKey')
        elif current and int(version) < 1:
            yield Violation('document-objects', row.pk, f'documentKey {current} without a documentVersion >= 1')
        elif current:
            problem = _object_problem(current)
            if problem:
                yield Violation('document-objects', row.pk, f'current version {version}: documentKey {problem}')


@check('activities-stuck')
def activities_stuck(snap: Snapshot) -> Iterator[Violation]:
    minutes = OPTIONS['stuck-minutes']
    cutoff = _before(minutes)
    for row in snap.live('activities'):
        created = row.data.get('createdOn') or ''
        if row.data.get('status') == 'PENDING' and created < cutoff:
            yield Violation('activities-stuck', row.pk,
                            f'PENDING since {created or "(no createdOn)"}: more than {minutes:g} minutes without '
                            f'being started (its start message was lost or is in the DLQ)')


@check('activity-work')
def activity_work(snap: Snapshot) -> Iterator[Violation]:
    counts: dict[str, dict[str, int]] = {}
    for row in snap.items_with_prefix('ACTWORK#'):
        counts.setdefault(row.pk.split('#', 1)[1], {})[row.sk] = row.cnt or 0
    unfinished: dict[str, int] = {}
    for row in snap.live('executions'):
        activity = row.data.get('activityId')
        if activity and row.data.get('status', 'PENDING') not in EXECUTION_ENDED:
            unfinished[activity] = unfinished.get(activity, 0) + 1
    for activity in sorted(counts):   # a deleted activity takes its counters (features/work/activities.py)
        if snap.live_entity('activities', activity) is None:
            yield Violation('activity-work', f'ACTWORK#{activity}',
                            f'work counters {counts[activity]} of activity {activity}, which is gone')
    for row in snap.live('activities'):
        if row.data.get('status') != 'RUNNING':
            continue
        activity = row.data['id']
        remaining = counts.get(activity, {}).get('remaining', 0)
        if remaining != unfinished.get(activity, 0):
            yield Violation('activity-work', row.pk,
                            f'RUNNING with work count remaining={remaining} (ACTWORK#{activity}), '
                            f'but {unfinished.get(activity, 0)} of its executions have not ended')


def _carried(snap: Snapshot) -> Iterator[tuple[str, dict]]:
    """(key, event) of the domain events carried on records (``obx``: kernel/records.py
    ``outbox_ops``, kernel/unlocked.py): the last write's event of each record."""
    for row in snap.rows:
        raw = row.raw.get('obx')
        if raw is not None and row.is_entity:
            yield row.pk, table.plain(raw.as_dict() if hasattr(raw, 'as_dict') else raw)


@check('outbox-published')
def outbox_published(snap: Snapshot) -> Iterator[Violation]:
    """Each domain event has its events record within ``--outbox-minutes``: the outbox items
    (``EVT#``) and the events the records carry (``obx``) alike."""
    minutes = OPTIONS['outbox-minutes']
    cutoff = _before(minutes)
    pending: list[tuple[str, dict]] = []
    for row in snap.items_with_prefix('EVT#'):
        if row.kind != 'outbox':
            yield Violation('outbox-published', row.pk, f'EVT# item of kind {row.kind!r}, not an outbox item')
            continue
        pending.append((row.pk, row.data or {}))
    for key, event in [*pending, *_carried(snap)]:
        if not event.get('organizationId') or event.get('eventType') == 'organizations.deleted':
            continue   # published, never recorded (features/events/outbox.py record): nothing to compare
        occurred = event.get('occurredOn') or ''
        if occurred < cutoff and snap.entity('events', str(event.get('id'))) is None:
            yield Violation('outbox-published', key,
                            f'{event.get("eventType")} of {occurred or "(no occurredOn)"} never published: no events '
                            f'record after {minutes:g} minutes')


@check('tallies')
def tallies(snap: Snapshot) -> Iterator[Violation]:
    """No tally of events records is left open past ``--tally-minutes`` (module docstring)."""
    minutes = OPTIONS['tally-minutes']
    for row in snap.items_with_prefix(tally.PREFIX):
        if not tally.is_open(row.raw):
            continue   # closed: counted, kept until its TTL
        opened = tally.opened_at(row.raw)
        if opened is None or opened < time.time() - minutes * 60:
            yield Violation('tallies', row.pk, f'tally of {len(tally.ids_of(row.raw))} events records unsettled '
                                               f'for more than {minutes:g} minutes (python -m '
                                               'chalicelib.ops.settle_tallies)')


@check('schedule-index')
def schedule_index(snap: Snapshot) -> Iterator[Violation]:
    entries = {row.pk.split('#', 1)[1]: row for row in snap.items_with_prefix('SCHED#')}
    for row in snap.all_of('scheduled-jobs'):
        job = row.data['id']
        entry = entries.pop(job, None)
        due = row.data.get('nextRunOn') if row.listed and row.data.get('active', True) else None
        if due and entry is None:
            yield Violation('schedule-index', row.pk, f'active job due {due} without its schedule entry SCHED#{job}')
        elif not due and entry is not None:
            yield Violation('schedule-index', entry.pk, 'schedule entry of a job that is inactive, deleted or '
                                                        'has no nextRunOn')
        elif entry is not None:
            expected = {'kind': 'schedule', 'tpk': work_store.SCHEDULE_PARTITION, 'csk': f'{due}#{job}', 'ref': job}
            found = {'kind': entry.kind, 'tpk': entry.tpk, 'csk': entry.raw.get('csk'), 'ref': entry.ref}
            wrong = [f'{k}={found[k]!r} (expected {v!r})' for k, v in expected.items() if found[k] != v]
            if wrong:
                yield Violation('schedule-index', entry.pk,
                                'schedule entry does not match its job: ' + ', '.join(wrong))
    for job, entry in sorted(entries.items()):
        yield Violation('schedule-index', entry.pk, f'schedule entry of scheduled job {job}, which does not exist')


@check('store-bytes')
def store_bytes(snap: Snapshot) -> Iterator[Violation]:
    counters = [r for r in snap.items_with_prefix('CNT#document-stores#', claim=False) if r.pk.endswith('#bytes')]
    snap.claim(counters)
    actual: dict[str, int] = {}
    for row in counters:
        actual[row.pk] = actual.get(row.pk, 0) + (row.cnt or 0)
    expected: dict[str, int] = {}
    for row in snap.live('document-families'):
        if row.data.get('storageKey') and row.data.get('documentStoreId') and row.data.get('size'):
            key = f'CNT#document-stores#{row.data["documentStoreId"]}#bytes'
            expected[key] = expected.get(key, 0) + int(row.data['size'])
    for key in sorted(set(actual) | set(expected)):
        if actual.get(key, 0) != expected.get(key, 0):
            yield Violation('store-bytes', key, f'byte counter says {actual.get(key, 0)}, the store\'s uploaded '
                                                f'families hold {expected.get(key, 0)} bytes')
