"""Review in tasks (docs/api/extraction.md "Review"): a family whose extraction leaves open
exceptions gets a review task in its project; a reviewer's change of an attribute re-runs the
object's normalisation and the validations of the object and the groups above it, closes the
exceptions it resolves (opening any it causes) and records who changed what; once the family
has no open exception left, its review task is closed and the family moves to the step's
resolved document status.

The review task is an ordinary task (statusSlug, teamId, assigneeId from the step's options or
its ``assigneeRules``): take-next, the MCP task tools and the task routes work on it as on any
task. Its ``metadata`` names the family and the extraction (``extractionReview``).
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core import clock
from chalicelib.core.errors import ApiError, BadRequest, Conflict
from chalicelib.core.expressions import ExpressionError, evaluate
from chalicelib.core.expressions import check as check_expression
from chalicelib.core.principal import Principal
from chalicelib.features.extraction import engine, storage
from chalicelib.features.extraction import taxons as taxon_rules
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.kernel import crud, records
from chalicelib.kernel.store import table

OPTION_KEYS = ('statusSlug', 'teamId', 'assigneeId', 'assigneeRules', 'resolvedDocumentStatus', 'reviewTitle',
               'closedStatusSlug')
MAX_RULES = 20
MAX_HISTORY = 20
MAX_VALUE_LENGTH = 10_000


def check_options(options: dict[str, Any], where: str) -> None:
    for key in ('statusSlug', 'resolvedDocumentStatus', 'reviewTitle', 'closedStatusSlug'):
        value = options.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f'{where}: options.{key} must be a non-empty string')
    for key in ('teamId', 'assigneeId'):
        _uuid(options.get(key), f'{where}: options.{key}')
    rules = options.get('assigneeRules')
    if rules is None:
        return
    if not isinstance(rules, list) or len(rules) > MAX_RULES:
        raise ValueError(f'{where}: options.assigneeRules must be a list of at most {MAX_RULES} rules')
    for i, rule in enumerate(rules):
        here = f'{where}: options.assigneeRules[{i}]'
        if not isinstance(rule, dict) or set(rule) - {'when', 'teamId', 'assigneeId'}:
            raise ValueError(f'{here} must be {{when, teamId?, assigneeId?}}')
        if not isinstance(rule.get('when'), str) or not rule['when'].strip():
            raise ValueError(f'{here}.when must be a JSONata expression')
        try:
            check_expression(rule['when'])
        except ExpressionError as exc:
            raise ValueError(f'{here}.when is not an expression that can run: {exc.reason}') from None
        _uuid(rule.get('teamId'), f'{here}.teamId')
        _uuid(rule.get('assigneeId'), f'{here}.assigneeId')


def _uuid(value: Any, where: str) -> None:
    if value is None:
        return
    try:
        uuid.UUID(str(value))
    except ValueError:
        raise ValueError(f'{where} must be an id (a UUID)') from None


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
    if task_id:
        _close_task(task_id, family.org, options)
    _resolve_family(family.id, options)
    return {'taskId': task_id, 'status': 'RESOLVED'} if task_id else {'status': 'CLEAN'}


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


def _closed_status(org: str, options: dict[str, Any]) -> str | None:
    if options.get('closedStatusSlug'):
        return options['closedStatusSlug']
    done = [s for s in table.query_tenant('task-statuses', org) if s.get('statusType') == 'DONE']
    done.sort(key=lambda s: (s.get('sortOrder') or 0, s.get('slug') or ''))
    return done[0].get('slug') if done else None


def _close_task(task_id: str, org: str, options: dict[str, Any]) -> None:
    stored = table.get('tasks', task_id)
    if stored is None:
        return
    slug = _closed_status(org, options)
    if slug is None:
        raise Conflict('the review task cannot be closed: the organization has no task status of type DONE '
                       '(create one, or name closedStatusSlug in the EXTRACT step options)')
    if stored.data.get('statusSlug') == slug:
        return
    crud.update('tasks', task_id, {'statusSlug': slug}, principal=SERVICE, action='statusChanged')


def _resolve_family(family_id: str, options: dict[str, Any]) -> None:
    status = options.get('resolvedDocumentStatus')
    if not status:
        return
    crud.update('document-families', family_id, {'documentStatus': {'slug': status}}, principal=SERVICE)


# ----------------------------------------------------------------------------- a reviewer's change

def _run_objects(obj) -> list:
    key = obj.data.get('sourceKey')
    return storage.objects_of_run(obj.org, key) if key else [obj]


def _definition_taxons(obj) -> dict[str, dict[str, Any]]:
    ref = obj.data.get('dataDefinitionId')
    found = table.get('data-definitions', ref) if ref else None
    return dict(taxon_rules.walk((found.data.get('taxons') if found else None) or []))


def update_attribute(obj, attribute_id: str, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """A reviewer's PUT of one attribute: ``value`` (the corrected text) and/or ``confirmed``."""
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
    taxon_of = _definition_taxons(obj)
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
        engine.renormalise(attr, taxon, None)
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


def _reassess(obj, new: dict[str, Any], tree: list[dict[str, Any]], taxon_of, principal: Principal) -> dict[str, Any]:
    """Exceptions of the object and the groups above it decided again; closed / opened ones
    written with the object in one transaction (the object's own items only)."""
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
    family_done(obj.org, new.get('documentFamilyId'), new.get('sourceKey'))
    return new


def close_exception(exc, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """A reviewer closes an exception by hand (the document is right as it is): recorded, kept
    closed by later re-assessments of the object."""
    if not isinstance(body, dict):
        raise BadRequest('The body must be a JSON object')
    if body.get('open') is not False:
        raise BadRequest('Set open to false (with a closingComment) to close an exception')
    comment = body.get('closingComment')
    if not isinstance(comment, str) or not comment.strip() or len(comment) > 2000:
        raise BadRequest('closingComment is required: why the exception is accepted (at most 2000 characters)')
    if not exc.data.get('open'):
        return exc.data
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
    family_done(exc.org, data.get('documentFamilyId'), data.get('sourceKey'))
    return data


def family_done(org: str, family_id: str | None, source_key: str | None) -> None:
    """When the extraction has no open exception left: close its review task, resolve the
    family, and record it on the family's summary."""
    if not family_id or not source_key:
        return
    left = [e for e in storage.exceptions_of_run(org, source_key) if e.data.get('open')]
    family = storage.family_record(family_id)
    if family is None:
        return
    summary = dict(family.data.get('extraction') or {})
    runs = dict(summary.get('runs') or {})
    run = dict(runs.get(source_key) or {})
    run['openExceptions'] = len(left)
    if not left and run.get('status') == 'REVIEW':
        options = run.get('options') or {}
        if run.get('taskId'):
            _close_task(run['taskId'], org, options)
        _resolve_family(family_id, options)
        run['status'] = 'RESOLVED'
        run['resolvedOn'] = clock.now_iso()
    runs[source_key] = run
    storage.set_family_summary(family_id, {'runs': runs, 'openExceptions': sum(
        r.get('openExceptions') or 0 for r in runs.values())})
