"""Review in tasks, part one: corrections and assessment (docs/api/extraction.md "Review").
A reviewer's change of an attribute re-runs the object's normalisation (with the locale of the
run that wrote it) and the validations of the object and the groups above it, closes the
exceptions it resolves, opens any it causes, rewrites the messages of those it leaves open, and
records who changed what; a reviewer may also close an exception by hand.

A change is one transaction of the object and its exceptions (its own items only); what follows
it, the family's summary, the review task and the family's document status, is part two,
features/extraction/review_task.py (``follow_up``), which runs after the commit and never turns a
committed change into an error. A correction by ``nodeIds`` then teaches the definition's
layout memory (features/extraction/memories.py), reported as ``layoutMemory``, never an error.
"""
from __future__ import annotations

from typing import Any

from chalicelib.core import clock
from chalicelib.core.errors import ApiError, BadRequest, Conflict
from chalicelib.core.principal import Principal
from chalicelib.features.extraction import engine, pointing, storage
from chalicelib.features.extraction import taxons as taxon_rules
from chalicelib.features.extraction.normalise import AUTO, Conventions, Locale
from chalicelib.features.extraction.review_task import follow_up
from chalicelib.kernel import records
from chalicelib.kernel.store import table

MAX_HISTORY = 20
MAX_VALUE_LENGTH = 10_000


def _run_objects(obj) -> list:
    key = obj.data.get('sourceKey')
    return storage.objects_of_run(obj.org, key) if key else [obj]


def _definition(obj) -> dict[str, Any]:
    ref = obj.data.get('dataDefinitionId')
    found = table.get('data-definitions', ref) if ref else None
    return found.data if found is not None else {}


def _run_locale(obj, definition: dict[str, Any]) -> Locale:
    """The locale the object's run read with (its effective options on the family's summary,
    service.run), else the definition's ``metadata.locale``: a correction is read as the run read."""
    family = storage.family_record(obj.data.get('documentFamilyId') or '')
    runs = ((family.data.get('extraction') or {}).get('runs') or {}) if family is not None else {}
    options = (runs.get(obj.data.get('sourceKey') or '') or {}).get('options') or {}
    locale = options.get('locale') or (definition.get('metadata') or {}).get('locale')
    if locale == AUTO:   # the document's conventions as the run detected them (normalise.detect)
        return Conventions.of(options.get('conventions'))
    return locale


def _pointed(obj, node_ids: list[str]):
    """The words ``node_ids`` name in the family's parsed document (read as an extraction run reads
    it: features/documents/deltas.py ``load_nodes``, bounded by its node and byte caps)."""
    from chalicelib.features.documents import deltas  # noqa: PLC0415 - lazy: S3 reads
    from chalicelib.features.extraction.document import Document  # noqa: PLC0415 - the pointing path only
    family = storage.family_record(obj.data.get('documentFamilyId') or '')
    nodes = deltas.load_nodes(family) if family is not None and family.org == obj.org else []
    if not nodes:
        raise ApiError(f'data object {obj.id} has no parsed document to point at (nodeIds): send value instead',
                       status=409)
    doc = Document(nodes)
    try:
        return doc, pointing.point(doc, node_ids)
    except pointing.PointingError as exc:
        raise BadRequest(str(exc)) from None


def update_attribute(obj, attribute_id: str, body: dict[str, Any],
                     principal: Principal) -> tuple[dict[str, Any], dict[str, Any]]:
    """A reviewer's PUT of one attribute: ``value`` (the corrected text), ``nodeIds`` (the words the
    value is: its text when no ``value`` is sent, its place either way) and/or ``confirmed``.
    Answers the object as committed and the report of what followed (``follow_up``)."""
    if not isinstance(body, dict) or not ({'value', 'confirmed', 'nodeIds'} & set(body)):
        raise BadRequest('The body must be an object with value (text or null), nodeIds (the words the value is) '
                         'and/or confirmed (true/false)')
    unknown = sorted(set(body) - {'value', 'confirmed', 'comment', 'nodeIds', 'id', 'changeSequence'})
    if unknown:
        raise BadRequest(f'{unknown[0]} is not a field a reviewer sets on an attribute '
                         '(value, nodeIds, confirmed, comment)')
    value = body.get('value')
    if 'value' in body and value is not None and (not isinstance(value, (str, int, float, bool)) or
                                                  len(str(value)) > MAX_VALUE_LENGTH):
        raise BadRequest(f'value must be a text (or a number or boolean) of at most {MAX_VALUE_LENGTH} characters')
    if 'confirmed' in body and not isinstance(body['confirmed'], bool):
        raise BadRequest('confirmed must be true or false')
    if body.get('comment') is not None and (not isinstance(body['comment'], str) or len(body['comment']) > 2000):
        raise BadRequest('comment must be a text of at most 2000 characters')
    node_ids = pointed = doc = run_locale = None
    if 'nodeIds' in body:
        try:
            node_ids = pointing.check_node_ids(body['nodeIds'])
        except pointing.PointingError as exc:
            raise BadRequest(str(exc)) from None
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
    if node_ids is not None:
        doc, pointed = _pointed(obj, node_ids)
    if 'value' in body or pointed is not None:
        if 'value' in body:
            text = None if value is None else (value if isinstance(value, str) else
                                               ('true' if value is True else 'false' if value is False else str(value)))
        else:   # the words pointed at are the value
            text = pointed.text[:MAX_VALUE_LENGTH] if pointed.text else None
        change.update(before=attr.get('value'), after=text)
        attr['value'] = text
        attr['confidence'] = 1.0
        if pointed is not None:   # where the value stands on the page (with a value sent, too)
            change['nodeIds'] = node_ids
            features = pointed.features(node_ids)
        else:
            features = dict(attr.get('dataFeatures') or {})
            features['rule'] = 'reviewer'
            features.pop('ocrSuspect', None)   # the reviewer's value, not OCR's (engine.ocr_suspect)
        attr['dataFeatures'] = features
        run_locale = _run_locale(obj, definition)
        engine.renormalise(attr, taxon, run_locale)
    if 'confirmed' in body:
        change['confirmed'] = body['confirmed']
        attr['confirmed'] = body['confirmed']
    if body.get('comment'):
        change['comment'] = body['comment']
    corrected = 'value' in body or pointed is not None
    attr['reviewStatus'] = 'CONFIRMED' if attr.get('confirmed') else 'CORRECTED' if corrected else \
        attr.get('reviewStatus')
    attr['history'] = [*(attr.get('history') or []), change][-MAX_HISTORY:]
    attrs = [attr if a.get('id') == attribute_id else a for a in attrs]
    new['attributes'] = attrs
    tree = [dict(s.data) for s in siblings.values() if s.id != obj.id] + [new]
    new, followed = _reassess(obj, new, tree, taxon_of, principal)
    if pointed is not None:   # committed: the layout memory learns where the value stands
        typed = attr.get('typedValue')
        if typed is None and isinstance(value, (int, float)) and not isinstance(value, bool):
            typed = value   # a JSON number is the value whatever separator its text would show
        followed['layoutMemory'] = _teach(obj, attr, taxon_of, doc, pointed, principal,
                                          locale=run_locale, typed=typed)
    return new, followed


def _teach(obj, attr, taxon_of, doc, pointed, principal: Principal, **taught) -> dict[str, Any]:
    """The layout memory's write (features/extraction/memories.py) after the correction committed:
    what could not be kept is reported, never raised (the correction stands)."""
    from chalicelib.features.extraction import memories  # noqa: PLC0415 - lazy: the pointing path only
    try:
        return memories.learn(obj, attr, taxon_of, doc, pointed, principal, **taught)
    except Exception as exc:   # noqa: BLE001 - the correction committed: report, never raise
        memories.log.warning('layout memory not kept', extra={'dataObjectId': obj.id, 'error': type(exc).__name__})
        return {'kept': False, 'reason': f'the layout memory could not be written ({type(exc).__name__}): '
                                         'correct the value again to teach it'}


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
