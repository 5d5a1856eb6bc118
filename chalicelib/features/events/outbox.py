"""The outbox publisher: domain events (written by kernel/records.py in the transaction of
every write, kernel/store/outbox.py ``outbox_op``) go to the EventBridge bus and into the ``events``
family.

The ``@app.on_dynamodb_record`` handler (and ``make run``'s stream poller) hands the batch's
outbox events to ``publish``: one PutEvents per 10 events (entries EventBridge refuses are
sent again, up to three times), then each published event is recorded as an ``events`` record
whose id is the event's id, so a batch delivered twice is recorded (and counted) once: each
record one PutItem, RECORD_CHUNK of them counted together under a tally (``record_all``;
features/events/tally.py; docs/scale.md "Events records"). Events it
could not publish or record are reported: the handler reports the first as the batch item
failure, so the stream delivers it (and what follows) again.

An ``executions.updated`` event that ended an execution also gives its activity a chance to
finish (features/work/service.py ``finish_activity``: idempotent), whoever ended it; an ended
pipeline execution updates its document's ``processing`` summary. ``document-families.created``
and ``assistants.created|updated`` are document processing's triggers (features/work/pipelines.py).
"""
from __future__ import annotations

import json
import re
from typing import Any

from chalicelib.core import observability
from chalicelib.core.principal import Principal
from chalicelib.features.events import tally
from chalicelib.features.work import store as work_store
from chalicelib.features.work.statuses import TERMINAL
from chalicelib.kernel import records
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import outbox as outbox_store
from chalicelib.kernel.store import repository as repo
from chalicelib.kernel.store import table
from chalicelib.kernel.store.repository import WriteConflict

log = observability.get_logger('outbox')
SOURCE = 'platform-api'
PAYLOAD_FIELDS = ('family', 'resourceId', 'resourceIds', 'projectId', 'actorId', 'changedFields', 'changes',
                  'correlationId', 'parse')   # parse: document-families.parsed's (features/parsing/stage.py)
# An update event's ``changes`` (docs/api/work.md "Domain events"): each changed field's old and
# new value, read from the stream record's two images (no cost on the write path). Bounded: a
# field whose two values take over CHANGE_PAIR_BYTES of JSON, and every field once the event's
# changes reach CHANGES_BYTES, is {"omitted": "size"}; a field whose name says it holds a secret is
# {"omitted": "secret"}, and API keys, bearer credentials and JWTs inside any text are redacted
# (core/observability.py ``redact``).
CHANGE_PAIR_BYTES = 1024
CHANGES_BYTES = 2048
SECRET_NAME = re.compile(r'(?i)(secret|passw|token|credential|apikey|privatekey|signingkey|clientiphash)')


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return observability.redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def changes_of(fields: list[str], old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """{field: {"old", "new"}} of ``fields`` between two versions of a record, within the bounds above."""
    out: dict[str, Any] = {}
    used = 0
    for name in fields:
        if SECRET_NAME.search(name):
            out[name] = {'omitted': 'secret'}
            continue
        pair = {'old': _redacted(old.get(name)), 'new': _redacted(new.get(name))}
        size = len(json.dumps(pair, default=str))
        if size > CHANGE_PAIR_BYTES or used + size > CHANGES_BYTES:
            out[name] = {'omitted': 'size'}
            continue
        used += size
        out[name] = pair
    return out


def _with_changes(event: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """An update event carried by its record's own write, with the changed fields' values."""
    fields = event.get('changedFields')
    if not fields or 'obx' not in (change.get('NewImage') or {}):
        return event
    old, new = outbox_store.record_data(change.get('OldImage')), outbox_store.record_data(change.get('NewImage'))
    if old is None or new is None:
        return event
    return {**event, 'changes': changes_of(fields, old, new)}


def events_of(records: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(SequenceNumber, domain event) of a stream batch: INSERTs of outbox items, and records
    whose write carried its event on the item (``obx``, kernel/unlocked.py); the latter, when
    the record was there before, with its ``changes``."""
    out = []
    for rec in records:
        change = rec.get('dynamodb') or {}
        if rec.get('eventName') in ('INSERT', 'MODIFY'):
            event = outbox_store.outbox_event(change.get('NewImage') or {}, change.get('OldImage'))
            if event is not None:
                if rec.get('eventName') == 'MODIFY':
                    event = _with_changes(event, change)
                out.append((change.get('SequenceNumber'), event))
    return out


def correlation_of(records: list[dict[str, Any]]) -> str | None:
    found = events_of(records[:50])
    return found[0][1].get('correlationId') if found else None


def handle_stream(records: list[dict[str, Any]]) -> list[str]:
    """Publish the outbox events of a stream batch; SequenceNumbers of those that failed."""
    found = events_of(records)
    failed = {e['id'] for e in publish([event for _, event in found])}
    if found:
        log.info('outbox batch', extra={'published': len(found) - len(failed), 'failed': len(failed)})
    return [sequence for sequence, event in found if event['id'] in failed]


def entry(event: dict[str, Any]) -> dict[str, Any]:
    return {'Source': SOURCE, 'DetailType': event['eventType'], 'Detail': json.dumps(event),
            'Resources': []}


def publish(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Publish and record ``events``; the ones that failed (in order)."""
    if not events:
        return []
    # the parse triggers first, batched per organization (features/work/pipelines.py ``trigger_first``)
    from chalicelib.features.work import pipelines  # noqa: PLC0415 - lazy
    triggered = pipelines.trigger_first(events)
    refused = work_store.put_events([entry(e) for e in events])
    refused_ids = {json.loads(r['Detail'])['id'] for r in refused}
    failed = [e for e in events if e['id'] in refused_ids]
    unrecorded = record_all([e for e in events if e['id'] not in refused_ids])
    for event in events:
        if event['id'] in refused_ids:
            continue
        if event['id'] in unrecorded:
            failed.append(event)
            continue
        # the organization of the event: the message group of the work it triggers (engine.send)
        with observability.work(correlation_id=event.get('correlationId'), organization_id=event.get('organizationId')):
            try:
                if event['id'] not in triggered:
                    _after(event)
            except Exception as exc:  # noqa: BLE001 - reported as a batch item failure, delivered again
                log.warning('event %s (%s) not recorded: %s', event['id'], event['eventType'], exc)
                failed.append(event)
    observability.count('DomainEventsPublished', len(events) - len(failed))
    return failed


def _recordable(event: dict[str, Any]) -> bool:
    # platform-wide records (users, the catalogue) and a gone organization: published only
    return bool(event.get('organizationId')) and event['eventType'] != 'organizations.deleted'


def record_item(event: dict[str, Any]):
    """The events record of a domain event, in its own shape (docs/scale.md "Events records"):
    its id is the event's; no copy of the id as ``uuid`` nor of the type as ``name`` (filled in
    on read: kernel/store/table.py ``stored_from``); no updatedOn key until it is changed (the
    family is ``sparse_updated``). Under 1 KB for a task's events: 2 write units in a
    transaction, three KEYS_ONLY index entries."""
    fam = family_of('events')
    actor = Principal(user_id=event.get('actorId') or '', email='', credential='system')
    data = records.new_record(fam, {'eventType': event['eventType'], 'source': SOURCE,
                                    'occurredOn': event['occurredOn'],
                                    'payload': {k: event[k] for k in PAYLOAD_FIELDS if k in event}},
                              principal=actor, org=event['organizationId'], id_=event['id'])
    del data['uuid']
    return records.entity(fam, data, seq=1, org=event['organizationId']), data


# Events records of one stream batch are put one PutItem each (1 WCU under 1 KB, not 2 in a
# transaction) and counted exactly once through a tally (features/events/tally.py): RECORD_CHUNK
# records per tally, whose closing transaction moves each counter once for all of them
# (<= 2 x 40 + 1 items of the 100 a transaction holds; docs/scale.md "Events records").
RECORD_CHUNK = 40
# A tally costs 3 WCU of its own (its put 1, its close in the counting transaction 2) and saves
# 1 per record (a PutItem at 1, not a put in a transaction at 2): a chunk of up to TALLY_FROM - 1
# records is cheaper written the old way, its puts and counter moves in one transaction.
TALLY_FROM = 4


def _write(built: list[tuple[Any, dict[str, Any]]]) -> None:
    """Put and count a few records in one transaction (exact by the transaction itself); a
    WriteConflict when one of them is there already."""
    records.commit([repo.put_entity(item, None) for item, _ in built] +
                   records.count_ops(family_of('events'), [data for _, data in built], 1))


def _count(datas: list[dict[str, Any]], token: str, ids: list[str]) -> None:
    """Count the records ``datas`` and close the tally ``token`` (naming ``ids``), noting which
    it counted, in one transaction; a WriteConflict when it was settled already (or the counters
    conflicted: then it stays open and whoever comes back settles it)."""
    counted = tally.bits(ids, [d['id'] for d in datas])
    records.commit(records.count_ops(family_of('events'), datas, 1) + [tally.close_op(token, counted)])


def settle(token: str) -> None:
    """Count the records a writer that did not finish put under ``token`` (module docstring of
    features/events/tally.py), once: nothing when someone settled it first."""
    found_state = tally.state(token)
    if found_state is None or not found_state[0]:
        return
    ids = found_state[1]
    found = tally.marked(lambda i: table.entity_pk('events', i), ids, token)
    try:
        _count([s.data for s in found], token, ids)
    except WriteConflict as exc:
        if exc.code == 'TransactionConflict':
            raise
        # settled by another writer meanwhile: counted once, by it
    log.info('settled tally %s: %d records counted', token, len(found))


def _catch_up(token: str, datas: list[dict[str, Any]]) -> None:
    """Records of this chunk found under another writer's tally ``token``: an open tally is
    settled (counting them with the rest); a closed one that did not count them (their puts
    landed after it was settled) counts them now, noting their bits (features/events/tally.py)."""
    found_state = tally.state(token)
    if found_state is None:
        return   # past its TTL: long settled
    is_open, ids, done = found_state
    if is_open:
        settle(token)
        return
    late = [d for d in datas if not done & tally.bits(ids, [d['id']])]
    if late:
        records.commit(records.count_ops(family_of('events'), late, 1) +
                       [tally.amend_op(token, done, done | tally.bits(ids, [d['id'] for d in late]))])
        log.info('tally %s: %d records landed after it was settled, counted now', token, len(late))


def _record_chunk(events: list[dict[str, Any]]) -> set[str]:
    """Put and count the records of ``events`` (each once); the ids that could not be recorded."""
    built = [record_item(e) for e in events]
    if len(built) < TALLY_FROM:
        try:
            _write(built)
            return set()
        except WriteConflict as exc:
            if exc.code == 'TransactionConflict':
                return {data['id'] for _, data in built}   # delivered again, then
            # one of them is there already (a redelivery): the tally's way sorts out which
    ids = [data['id'] for _, data in built]
    token = tally.begin(ids)
    results = tally.put_all_marked([item for item, _ in built], token)
    unknown = [(data['id'], r) for (_, data), r in zip(built, results, strict=True) if isinstance(r, Exception)]
    if unknown:
        # a put that failed may have landed all the same (its answer lost): nothing is counted
        # and the tally stays open, so the redelivery of the chunk settles it, counting
        # every record that bears its token (features/events/tally.py)
        log.warning('events chunk of %d left to its redelivery: %d not recorded (%s: %s)', len(events),
                    len(unknown), unknown[0][0], unknown[0][1])
        return set(ids)
    counted = [data for (_, data), r in zip(built, results, strict=True) if r is True]
    foreign: dict[str, list[dict[str, Any]]] = {}
    for (_, data), r in zip(built, results, strict=True):
        if r is not False:
            continue
        mark = tally.mark_of(table.entity_pk('events', data['id']))   # recorded already: by whom
        if mark == token:          # our own put, applied though its answer was lost
            counted.append(data)
        elif mark is not None:     # another writer's: settled or caught up below
            foreign.setdefault(mark, []).append(data)
    for mark, datas in foreign.items():
        _catch_up(mark, datas)
    try:
        _count(counted, token, ids)
    except Exception as exc:  # noqa: BLE001 - the tally stays open; the redelivery settles it
        log.warning('events chunk of %d not counted: %s', len(events), exc)
        return set(ids)
    return set()


def record_all(events: list[dict[str, Any]]) -> set[str]:
    """Record ``events`` RECORD_CHUNK at a time (each once: a redelivered event, already
    recorded, is left as it is); the ids that could not be recorded."""
    # one event may come twice in a batch (its outbox item inserted, then changed): each id once
    todo = list({e['id']: e for e in reversed(events) if _recordable(e)}.values())[::-1]
    failed: set[str] = set()
    for start in range(0, len(todo), RECORD_CHUNK):
        chunk = todo[start:start + RECORD_CHUNK]
        try:
            failed |= _record_chunk(chunk)
        except Exception as exc:  # noqa: BLE001 - reported as batch item failures, delivered again
            log.warning('events chunk of %d not recorded: %s', len(chunk), exc)
            failed |= {e['id'] for e in chunk}
    return failed


def _after(event: dict[str, Any]) -> None:
    if event['eventType'] in ('document-families.created', 'assistants.created', 'assistants.updated'):
        from chalicelib.features.work import pipelines  # noqa: PLC0415 - lazy
        pipelines.on_event(event)   # document processing's triggers (docs/api/processing.md)
        return
    if event['eventType'] not in ('executions.updated', 'executions.cancelled') or \
            'status' not in (event.get('changedFields') or []):
        return
    execution = table.get('executions', event['resourceId'])
    if execution is not None and execution.data.get('activityId') and \
            execution.data.get('status') in TERMINAL:
        from chalicelib.features.work import service as work_service  # noqa: PLC0415 - lazy
        work_service.finish_activity(execution.data['activityId'])
    elif execution is not None and execution.data.get('documentFamilyId'):
        from chalicelib.features.work import pipelines  # noqa: PLC0415 - lazy
        pipelines.execution_changed(execution.data)   # a cancel: the family's processing summary follows
