"""Review in tasks (docs/api/extraction.md "Review"): a family whose extraction leaves open
exceptions gets a review task in its project; a reviewer's change of an attribute re-runs the
object's normalisation and the validations of the object and the groups above it, closes the
exceptions it resolves (opening any it causes) and records who changed what; once the family
has no open exception left, its review task is closed and the family moves to the step's
resolved document status.

A change is one transaction of the object and its exceptions (closed, opened, their messages
rewritten); what follows it (the family's summary, the review task, the family's document
status) runs after the commit and never turns a committed change into an error: what could not
follow is reported (``reviewTask: {closed: false, reason}``) and retried by the run's next
change. The family's summary is derived from the exception records each time (``follow_up``),
so a summary left stale (a lost write, two changes racing) is repaired by the next change.

The review task is an ordinary task (statusSlug, teamId, assigneeId from the step's options or
its ``assigneeRules``): take-next, the MCP task tools and the task routes work on it as on any
task. Its ``metadata`` names the family and the extraction (``extractionReview``).
"""
from __future__ import annotations

from typing import Any

from chalicelib.core import clock, observability
from chalicelib.core.errors import ApiError, BadRequest, Conflict
from chalicelib.core.expressions import ExpressionError, evaluate
from chalicelib.core.principal import Principal
from chalicelib.features.extraction import engine, storage
from chalicelib.features.extraction import taxons as taxon_rules
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.kernel import crud, records
from chalicelib.kernel.store import table

log = observability.get_logger('extraction')

MAX_HISTORY = 20
MAX_VALUE_LENGTH = 10_000
SUMMARY_TRIES = 3    # summary writes one change makes at most while changes race (follow_up)


# ----------------------------------------------------------------------------- after a run

def _who(options: dict[str, Any], family: dict[str, Any], exceptions: list[dict[str, Any]]) -> dict[str, Any]:
    """teamId / assigneeId: the first assignee rule whose ``when`` holds over
    {family, exceptions, types}, else the step's options."""
    data = {'family': family, 'exceptions': [{k: e.get(k) for k in ('exceptionType', 'taxon', 'message', 'severity')}
                                             for e in exceptions],
            'types': sorted({e.get('exceptionType') for e in exceptions})}
    for rule in options.get('assigneeRules') or []:
        try:
            if evaluate(rule['when'], data, timeout_ms=200):
                return {k: rule[k] for k in ('teamId', 'assigneeId') if rule.get(k)}
        except ExpressionError:
            continue
    return {k: options[k] for k in ('teamId', 'assigneeId') if options.get(k)}


def after_run(family, summary: dict[str, Any], exceptions: list[dict[str, Any]]) -> dict[str, Any]:
    """Open (or reopen) the review task when exceptions remain, else close it: the summary's
    review fields."""
    options = summary.get('options') or {}
    previous = ((family.data.get('extraction') or {}).get('runs') or {}).get(summary['sourceKey']) or {}
    task_id = previous.get('taskId')
    if exceptions:
        task_id = _open_task(family, options, exceptions, summary, task_id)
        return {'taskId': task_id, 'status': 'REVIEW'}
    out: dict[str, Any] = {'taskId': task_id, 'status': 'RESOLVED'} if task_id else {'status': 'CLEAN'}
    _follow(out, family.org, family.id, options, closing_task=bool(task_id))
    return out


def _open_task(family, options, exceptions, summary, task_id: str | None) -> str:
    who = _who(options, family.data, exceptions)
    title = options.get('reviewTitle') or f"Review the extraction of {family.data.get('path') or family.id}"
    description = f'{len(exceptions)} open exception(s): ' + '; '.join(e['message'] for e in exceptions[:5])
    if task_id and table.get('tasks', task_id) is not None:
        body: dict[str, Any] = {'description': description[:4000], **who}
        if options.get('statusSlug'):
            body['statusSlug'] = options['statusSlug']
        crud.update('tasks', task_id, body, principal=SERVICE)
        return task_id
    body = {'projectId': family.data['projectId'], 'title': title[:500], 'description': description[:4000],
            'metadata': {'extractionReview': {'documentFamilyId': family.id, 'sourceKey': summary['sourceKey'],
                                              'dataStoreId': summary['dataStoreId']}}, **who}
    if options.get('statusSlug'):
        body['statusSlug'] = options['statusSlug']
    try:
        made = crud.create('tasks', body, SERVICE)
    except ApiError as exc:
        raise ApiError(f'the review task could not be created: {exc.message}', status=exc.status) from None
    return made['id']


def _done_statuses(org: str) -> list[str]:
    done = [s for s in table.query_tenant('task-statuses', org) if s.get('statusType') == 'DONE']
    done.sort(key=lambda s: (s.get('sortOrder') or 0, s.get('slug') or ''))
    return [s.get('slug') for s in done]


def _close_task(task_id: str, org: str, options: dict[str, Any]) -> None:
    """The review task moved to ``closedStatusSlug`` (else the organization's first DONE status);
    one already in a DONE status (closed by a reviewer) stays where it is."""
    stored = table.get('tasks', task_id)
    if stored is None:
        return
    done = _done_statuses(org)
    slug = options.get('closedStatusSlug') or (done[0] if done else None)
    if slug is None:
        raise Conflict('the review task cannot be closed: the organization has no task status of type DONE '
                       '(create one, or name closedStatusSlug in the EXTRACT step options); the next change '
                       'of the extraction closes it')
    if stored.data.get('statusSlug') == slug or stored.data.get('statusSlug') in done:
        return
    crud.update('tasks', task_id, {'statusSlug': slug}, principal=SERVICE, action='statusChanged')


def _resolve_family(family_id: str, options: dict[str, Any]) -> None:
    status = options.get('resolvedDocumentStatus')
    if not status:
        return
    crud.update('document-families', family_id, {'documentStatus': {'slug': status}}, principal=SERVICE)


def _attempt(what: str, action) -> str | None:
    """Run a follow-up of a committed change: None when done, else why not (never raised: the
    change is committed and answered as such)."""
    try:
        action()
    except ApiError as exc:
        return exc.message
    except Exception:   # noqa: BLE001 - a follow-up never fails a committed change; logged, retried
        log.exception('extraction follow-up failed', extra={'followUp': what})
        return f'{what} failed (an internal error); the next change of the extraction tries again'
    return None


def _follow(run: dict[str, Any], org: str, family_id: str, options: dict[str, Any], *, closing_task: bool,
            resolving: bool = True) -> dict[str, Any]:
    """Close the run's review task and resolve the family (the run has no open exception left):
    the outcome recorded on the run (``reviewTaskClosed``, ``documentStatusSet``, false with a
    reason when it could not follow) and answered as the change's report."""
    report: dict[str, Any] = {}
    task_id = run.get('taskId')
    if task_id and closing_task:
        reason = _attempt('closing the review task', lambda: _close_task(task_id, org, options))
        run['reviewTaskClosed'] = reason is None
        run['reviewTaskReason'] = reason
        report['reviewTask'] = {'id': task_id, 'closed': reason is None, **({'reason': reason} if reason else {})}
    slug = options.get('resolvedDocumentStatus')
    if slug and resolving:
        reason = _attempt('setting the document status', lambda: _resolve_family(family_id, options))
        run['documentStatusSet'] = reason is None
        run['documentStatusReason'] = reason
        report['documentStatus'] = {'slug': slug, 'set': reason is None, **({'reason': reason} if reason else {})}
    for key in ('reviewTaskReason', 'documentStatusReason'):
        if run.get(key) is None:
            run.pop(key, None)
    return report


# ----------------------------------------------------------------------------- a reviewer's change

def _run_objects(obj) -> list:
    key = obj.data.get('sourceKey')
    return storage.objects_of_run(obj.org, key) if key else [obj]


def _definition(obj) -> dict[str, Any]:
    ref = obj.data.get('dataDefinitionId')
    found = table.get('data-definitions', ref) if ref else None
    return found.data if found is not None else {}


def _run_locale(obj, definition: dict[str, Any]) -> str | None:
    """The locale the object's run read with (its effective options on the family's summary,
    service.run), else the definition's ``metadata.locale``: a correction is read as the run read."""
    family = storage.family_record(obj.data.get('documentFamilyId') or '')
    runs = ((family.data.get('extraction') or {}).get('runs') or {}) if family is not None else {}
    options = (runs.get(obj.data.get('sourceKey') or '') or {}).get('options') or {}
    return options.get('locale') or (definition.get('metadata') or {}).get('locale')


def update_attribute(obj, attribute_id: str, body: dict[str, Any],
                     principal: Principal) -> tuple[dict[str, Any], dict[str, Any]]:
    """A reviewer's PUT of one attribute: ``value`` (the corrected text) and/or ``confirmed``.
    Answers the object as committed and the report of what followed (``follow_up``)."""
    if not isinstance(body, dict) or not ({'value', 'confirmed'} & set(body)):
        raise BadRequest('The body must be an object with value (text or null) and/or confirmed (true/false)')
    unknown = sorted(set(body) - {'value', 'confirmed', 'comment', 'id', 'changeSequence'})
    if unknown:
        raise BadRequest(f'{unknown[0]} is not a field a reviewer sets on an attribute (value, confirmed, comment)')
    value = body.get('value')
    if 'value' in body and value is not None and (not isinstance(value, (str, int, float, bool)) or
                                                  len(str(value)) > MAX_VALUE_LENGTH):
        raise BadRequest(f'value must be a text (or a number or boolean) of at most {MAX_VALUE_LENGTH} characters')
    if 'confirmed' in body and not isinstance(body['confirmed'], bool):
        raise BadRequest('confirmed must be true or false')
    if body.get('comment') is not None and (not isinstance(body['comment'], str) or len(body['comment']) > 2000):
        raise BadRequest('comment must be a text of at most 2000 characters')
    siblings = {s.id: s for s in _run_objects(obj)}
    siblings[obj.id] = obj
    new = {k: (list(v) if isinstance(v, list) else v) for k, v in obj.data.items()}
    attrs = [dict(a) for a in new.get('attributes') or []]
    attr = next((a for a in attrs if a.get('id') == attribute_id), None)
    if attr is None:
        raise ApiError(f'No attribute {attribute_id} on data object {obj.id}', status=404)
    definition = _definition(obj)
    taxon_of = dict(taxon_rules.walk(definition.get('taxons') or []))
    taxon = taxon_of.get(attr.get('taxon') or '') or {'name': attr.get('tag'), 'type': attr.get('type', 'string')}
    change: dict[str, Any] = {'userId': principal.user_id, 'userEmail': principal.email, 'on': clock.now_iso()}
    if 'value' in body:
        text = None if value is None else (value if isinstance(value, str) else
                                           ('true' if value is True else 'false' if value is False else str(value)))
        change.update(before=attr.get('value'), after=text)
        attr['value'] = text
        attr['confidence'] = 1.0
        features = dict(attr.get('dataFeatures') or {})
        features['rule'] = 'reviewer'
        attr['dataFeatures'] = features
        engine.renormalise(attr, taxon, _run_locale(obj, definition))
    if 'confirmed' in body:
        change['confirmed'] = body['confirmed']
        attr['confirmed'] = body['confirmed']
    if body.get('comment'):
        change['comment'] = body['comment']
    attr['reviewStatus'] = 'CONFIRMED' if attr.get('confirmed') else 'CORRECTED' if 'value' in body else \
        attr.get('reviewStatus')
    attr['history'] = [*(attr.get('history') or []), change][-MAX_HISTORY:]
    attrs = [attr if a.get('id') == attribute_id else a for a in attrs]
    new['attributes'] = attrs
    tree = [dict(s.data) for s in siblings.values() if s.id != obj.id] + [new]
    return _reassess(obj, new, tree, taxon_of, principal)


def _reassess(obj, new: dict[str, Any], tree: list[dict[str, Any]], taxon_of,
              principal: Principal) -> tuple[dict[str, Any], dict[str, Any]]:
    """Exceptions of the object and the groups above it decided again; closed / opened ones, and
    open ones whose message changed with the value, written with the object in one transaction
    (the object's own items only); then what follows (``follow_up``)."""
    open_now = engine.assess(tree, taxon_of)
    affected = {obj.id}
    cur = new
    by_id = {o['id']: o for o in tree}
    while cur.get('parentId') and cur['parentId'] in by_id:
        affected.add(cur['parentId'])
        cur = by_id[cur['parentId']]
    stored_exc = [e for e in storage.exceptions_of_family(obj.org, obj.data.get('documentFamilyId') or '')
                  if e.data.get('sourceKey') == obj.data.get('sourceKey') and e.data.get('dataObjectId') in affected]
    now = clock.now_iso()
    ops: list = []
    keys_open = {e.data.get('key') for e in stored_exc if e.data.get('open')}
    keys_manual = {e.data.get('key') for e in stored_exc if not e.data.get('open') and e.data.get('closedBy')
                   and e.data.get('closingComment') and e.data.get('exceptionDetails') == 'closed by a reviewer'}
    closed = 0
    for e in stored_exc:
        if e.data.get('open') and e.data.get('key') not in open_now:
            closed += 1
            data = dict(e.data)
            data.update(open=False, state='CLOSED', closedBy=principal.email or principal.user_id, closedOn=now,
                        closingComment='resolved by a review change',
                        storeState=storage.store_state(data.get('dataStoreId') or '', 'CLOSED'),
                        changeSequence=e.seq + 1, updatedOn=now)
            ops += storage.replace(storage.EXCEPTIONS, data, e, principal)
        elif e.data.get('open') and open_now[e.data.get('key')]['message'] != e.data.get('message'):
            data = dict(e.data)   # still open, about the new value: its message names the new value
            data.update(message=open_now[e.data['key']]['message'], changeSequence=e.seq + 1, updatedOn=now)
            ops += storage.replace(storage.EXCEPTIONS, data, e, principal)
            e.data['message'] = data['message']
    created = []
    for key, entry in open_now.items():
        if entry['dataObjectId'] not in affected or key in keys_open or key in keys_manual:
            continue
        values = {**entry, 'dataStoreId': new.get('dataStoreId'), 'documentFamilyId': new.get('documentFamilyId'),
                  'sourceKey': new.get('sourceKey'), 'open': True, 'state': 'OPEN',
                  'storeState': storage.store_state(new.get('dataStoreId') or '', 'OPEN')}
        created.append(storage.new_record(storage.EXCEPTIONS, values, principal=principal, org=obj.org,
                                          project_id=new['projectId']))
    still = [e.data for e in stored_exc if e.data.get('open') and e.data.get('key') in open_now
             and e.data.get('dataObjectId') == obj.id] + [c for c in created if c['dataObjectId'] == obj.id]
    new['dataExceptions'] = [{'id': r['id'], 'exceptionType': r['exceptionType'], 'message': r['message'],
                              'severity': r.get('severity'), 'open': True, 'taxon': r.get('taxon')} for r in still]
    new['exceptionCount'] = len(still)
    for attr in new.get('attributes') or []:
        attr['dataExceptions'] = [x for x in new['dataExceptions'] if any(
            r['id'] == x['id'] and r.get('attributeId') == attr['id'] for r in still)]
    new['changeSequence'] = obj.seq + 1
    new['updatedOn'] = now
    ops = storage.replace(storage.OBJECTS, new, obj, principal, action='reviewed') + ops
    if created:
        ops += records.create_ops(storage.EXCEPTIONS, created, principal)
    try:
        storage.commit(ops)
    except Exception as exc:
        from chalicelib.kernel.store.repository import WriteConflict  # noqa: PLC0415
        if isinstance(exc, WriteConflict):
            raise Conflict('The data object or its exceptions changed meanwhile; read it again and retry') from None
        raise
    return new, follow_up(obj.org, new.get('documentFamilyId'), new.get('sourceKey'))


def close_exception(exc, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """A reviewer closes an exception by hand (the document is right as it is): recorded, kept
    closed by later re-assessments of the object. Answers the exception with the report of what
    followed (``follow_up``)."""
    if not isinstance(body, dict):
        raise BadRequest('The body must be a JSON object')
    if body.get('open') is not False:
        raise BadRequest('Set open to false (with a closingComment) to close an exception')
    comment = body.get('closingComment')
    if not isinstance(comment, str) or not comment.strip() or len(comment) > 2000:
        raise BadRequest('closingComment is required: why the exception is accepted (at most 2000 characters)')
    if not exc.data.get('open'):   # closed already: what follows is checked again (a repair)
        return exc.data | follow_up(exc.org, exc.data.get('documentFamilyId'), exc.data.get('sourceKey'))
    now = clock.now_iso()
    data = dict(exc.data)
    data.update(open=False, state='CLOSED', closedBy=principal.email or principal.user_id, closedOn=now,
                closingComment=comment, exceptionDetails='closed by a reviewer',
                storeState=storage.store_state(data.get('dataStoreId') or '', 'CLOSED'),
                changeSequence=exc.seq + 1, updatedOn=now)
    ops = storage.replace(storage.EXCEPTIONS, data, exc, principal)
    obj = storage.get(storage.OBJECTS, data.get('dataObjectId') or '')
    if obj is not None:
        new = dict(obj.data)
        new['dataExceptions'] = [x for x in new.get('dataExceptions') or [] if x.get('id') != exc.id]
        new['exceptionCount'] = len(new['dataExceptions'])
        new['attributes'] = [{**a, 'dataExceptions': [x for x in a.get('dataExceptions') or []
                                                       if x.get('id') != exc.id]}
                             for a in new.get('attributes') or []]
        new['changeSequence'] = obj.seq + 1
        new['updatedOn'] = now
        ops += storage.replace(storage.OBJECTS, new, obj, principal)
    storage.commit(ops)
    return data | follow_up(exc.org, data.get('documentFamilyId'), data.get('sourceKey'))


def _open_counts(org: str, family_id: str) -> dict[str, int]:
    """Open exceptions of each run of the family, from the records (one read of the family's index)."""
    counts: dict[str, int] = {}
    for e in storage.exceptions_of_family(org, family_id):
        if e.data.get('open') and e.data.get('sourceKey'):
            counts[e.data['sourceKey']] = counts.get(e.data['sourceKey'], 0) + 1
    return counts


def _derived(runs: dict[str, dict[str, Any]], counts: dict[str, int]) -> None:
    """Each run's ``openExceptions`` from the records; a run with open exceptions is in REVIEW
    (a change that opens one after the run was resolved), one without is no longer."""
    for key, run in runs.items():
        run['openExceptions'] = counts.get(key, 0)
        if run['openExceptions'] and run.get('status') in ('RESOLVED', 'CLEAN'):
            run['status'] = 'REVIEW'
            run.pop('resolvedOn', None)
        elif not run['openExceptions'] and run.get('status') == 'REVIEW':
            run['status'] = 'RESOLVED'
            run['resolvedOn'] = clock.now_iso()
            run['reviewTaskClosed'] = False if run.get('taskId') else None   # to follow (below)
            run['documentStatusSet'] = False if (run.get('options') or {}).get('resolvedDocumentStatus') else None


def follow_up(org: str, family_id: str | None, source_key: str | None) -> dict[str, Any]:
    """What follows a committed change of a run's exceptions, each step reported, none raised:

    * the family's summary derived again from the exception records (every run's
      ``openExceptions`` and ``status``) and written; read again after the write, and written
      again while a change that raced this one left it disagreeing with the records (at most
      ``SUMMARY_TRIES`` writes): the last change to write checks it last;
    * when the run has no open exception left: its review task closed and the family moved to
      ``resolvedDocumentStatus``; what could not be done (no DONE task status) is recorded on
      the run and tried again by its next change.

    Answers ``{reviewTask: {id, closed, reason?}, documentStatus: {slug, set, reason?}}`` (the
    parts that apply)."""
    if not family_id or not source_key:
        return {}
    report: dict[str, Any] = {}
    followed: dict[str, Any] = {}
    counts = _open_counts(org, family_id)
    for _ in range(SUMMARY_TRIES):
        family = storage.family_record(family_id)
        if family is None:
            return report
        runs = {k: dict(v) for k, v in ((family.data.get('extraction') or {}).get('runs') or {}).items()}
        run = runs.get(source_key)
        if run is None:   # replaced by a later run of the step
            return report
        _derived(runs, counts)
        if run['openExceptions'] == 0 and run.get('status') in ('RESOLVED', 'CLEAN'):
            followed.update(_follow(run, org, family_id, run.get('options') or {},
                                  closing_task=run.get('reviewTaskClosed') is False,
                                  resolving=run.get('documentStatusSet') is False))
        for key in ('reviewTaskClosed', 'documentStatusSet'):
            if run.get(key) is None:
                run.pop(key, None)
        report = dict(followed)
        if run.get('taskId'):
            report['reviewTask'] = _task_state(run)   # as written now (after a closing just done, its outcome)
        if not storage.set_family_summary(family_id, {'runs': runs, 'openExceptions': sum(
                r.get('openExceptions') or 0 for r in runs.values())}):
            return report
        again = _open_counts(org, family_id)
        if again == counts:
            return report
        counts = again   # a change committed meanwhile: derive again from what the records hold now
    log.warning('extraction summary still racing', extra={'documentFamilyId': family_id})
    return report


def _task_state(run: dict[str, Any]) -> dict[str, Any]:
    if run['openExceptions']:
        return {'id': run['taskId'], 'closed': False, 'reason': f"{run['openExceptions']} open exception(s) left"}
    if run.get('reviewTaskClosed') is False:
        return {'id': run['taskId'], 'closed': False, 'reason': run.get('reviewTaskReason') or 'not closed yet'}
    return {'id': run['taskId'], 'closed': True}
