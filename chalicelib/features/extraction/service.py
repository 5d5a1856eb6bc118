"""Extraction's service: run a data definition over a family's parsed document into a data
store, and everything clients do with the result (docs/api/extraction.md). Every front door
is a thin adapter over these functions: the EXTRACT step runner (``run_extract_step``, called
by the execution engine), the REST routes (features/extraction/routes.py).

A run is identified by its ``sourceKey`` (the family, where the step is declared and the
step's name): running the same step on the same family again replaces what the earlier run
wrote (its objects and exceptions are deleted, the new ones written), so a retried or repeated
step converges on the result of its last run. The family's ``extraction`` field summarises the
latest run of each step (objects, open exceptions, the review task).
"""
from __future__ import annotations

import hashlib
import time
import uuid
from typing import Any

from chalicelib.core import budget, clock, observability
from chalicelib.core.errors import ApiError, BadRequest, NotFound
from chalicelib.core.principal import Principal
from chalicelib.features.extraction import engine, review_task, shapes, storage
from chalicelib.features.extraction import taxons as taxon_rules
from chalicelib.features.extraction.engine import ExtractionLimit
from chalicelib.features.extraction.shapes import LOCALE_CHOICES
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.kernel import access, crud
from chalicelib.kernel.registry import family as family_of

log = observability.get_logger('extraction')

MAX_SUMMARIES = 10     # extraction summaries kept on one family (one per step that extracts it)


def check_options(options: dict[str, Any], where: str) -> None:
    """An extraction run's options: the one ExtractOptions shape (features/extraction/shapes.py),
    which the EXTRACT step's check (features/work/step_shapes.py) uses too."""
    try:
        shapes.check_extract_options(options)
    except ValueError as exc:
        raise ValueError(f'{where}: {exc}') from None


# ----------------------------------------------------------------------------- running

def source_key(family_id: str, origin: str, step: str) -> str:
    digest = hashlib.sha256(f'{origin}|{step}'.encode()).hexdigest()[:16]
    return f'{family_id}:{digest}'


def _definition(org: str, ref: str) -> dict[str, Any]:
    found = storage.find_org('data-definitions', org, ref)
    if found is None:
        raise NotFound(f"No data definition '{ref}' in the document's organization")
    return found.data


def _store(project_id: str, ref: str):
    found = storage.find('data-stores', project_id, ref)
    if found is None:
        raise NotFound(f"No data store '{ref}' in the document's project")
    return found


def taxon_index(taxons: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return dict(taxon_rules.walk(taxons))


def run(family_id: str, options: dict[str, Any], *, origin: str, step: str, run_id: str,
        principal: Principal = SERVICE) -> dict[str, Any]:
    """Extract the family into the store; the summary written on the family is answered."""
    started = time.perf_counter()
    family = storage.family_record(family_id)
    if family is None:
        raise NotFound(f'No DocumentFamily with id {family_id}')
    project_id = family.data['projectId']
    definition = _definition(family.org, str(options.get('dataDefinition') or ''))
    store = _store(project_id, str(options.get('dataStore') or ''))
    taxons = definition.get('taxons') or []
    try:
        taxon_rules.check(taxons)
    except taxon_rules.DefinitionError as exc:
        raise BadRequest(f"data definition '{definition.get('slug')}': {exc}") from None
    from chalicelib.features.documents import deltas  # noqa: PLC0415 - lazy: S3 reads
    nodes = deltas.load_nodes(family)
    if not nodes:
        raise ApiError(f'document family {family_id} has no parsed document yet (run the parse stage first)',
                       status=409)
    locale = options.get('locale') or (definition.get('metadata') or {}).get('locale')
    if locale is not None and locale not in LOCALE_CHOICES:   # the options' locale is checked with them (shapes.py)
        raise BadRequest(f"data definition '{definition.get('slug')}': metadata.locale must be one of "
                         f"{', '.join(LOCALE_CHOICES)}")
    from chalicelib.features.extraction import memories  # noqa: PLC0415 - lazy: the run path only
    result = engine.extract(taxons, nodes, locale=locale, recall=memories.recall_for(family.org, definition['id']))
    key = source_key(family_id, origin, step)
    objects = _records(result, family, definition, store, key, run_id)
    open_ = engine.assess(objects, taxon_index(taxons))
    exceptions = _exception_rows(open_, objects, family, store, key)
    _attach(objects, exceptions)
    _forget_run(family.org, key)   # replace what the earlier run of this step wrote (module docstring)
    storage.create(storage.OBJECTS, objects, principal)
    storage.create(storage.EXCEPTIONS, exceptions, principal)
    summary = {'sourceKey': key, 'runId': run_id, 'dataStoreId': store.id, 'dataDefinitionId': definition['id'],
               'objects': len(objects), 'openExceptions': len(exceptions),
               'options': _effective_options(options, locale, result.conventions),
               'extractedOn': clock.now_iso(), 'extractSeconds': round(result.seconds, 4)}
    if result.memory is not None:   # what reviewers taught for this layout, read (docs/api/extraction.md)
        summary['layoutMemory'] = result.memory
    fresh = storage.family_record(family_id)   # as it is now: deleted while this run wrote?
    if fresh is not None:
        summary.update(review_task.after_run(family, summary, exceptions))
    if fresh is None or not _summarise(fresh, summary):
        _forget_run(family.org, key)
        raise FamilyGone(f'the document family {family_id} was deleted while it was extracted: '
                         'what the run wrote was deleted too')
    summary['seconds'] = round(time.perf_counter() - started, 4)
    return summary


def _effective_options(options: dict[str, Any], locale: str | None, conventions=None) -> dict[str, Any]:
    """What the run's later changes need of its options, kept on its summary: the review's
    (review_task.py) and the locale it read with (the options', else the definition's; with "auto"
    the document's conventions it detected, ``{decimal, dateOrder}``), with which a reviewer's
    correction is normalised."""
    kept = {k: options[k] for k in shapes.REVIEW_OPTION_KEYS if options.get(k) is not None}
    if conventions is not None:
        kept['conventions'] = conventions.as_dict()
        if conventions.evidence():   # which evidence settled each (docs/api/extraction.md "How the date order ...")
            kept['conventionsFrom'] = conventions.evidence()
    return {**kept, 'locale': locale} if locale else kept


def _records(result, family, definition, store, key: str, run_id: str) -> list[dict[str, Any]]:
    ids = {o.key: str(uuid.uuid4()) for o in result.objects}
    ref = f"{definition.get('slug')}"
    out = []
    for order, o in enumerate(result.objects):
        rid = ids[o.key]
        attributes = []
        for attr in o.attributes:
            attributes.append({**{k: v for k, v in attr.items() if v is not None or k == 'value'},
                               'id': str(uuid.uuid4()), 'dataObjId': rid})
        values = {'dataStoreId': store.id, 'documentFamilyId': family.id, 'dataDefinitionId': definition['id'],
                  'taxonomyRef': ref, 'path': o.path, 'parentId': ids.get(o.parent) if o.parent else None,
                  'rowNum': o.row, 'sourceOrdering': f'{order:06d}', 'sourceKey': key, 'attributes': attributes,
                  'lineage': {'documentFamilyId': family.id, 'executionId': run_id, 'storeRef': store.id}}
        row = storage.new_record(storage.OBJECTS, {k: v for k, v in values.items() if v is not None},
                                 principal=SERVICE, org=family.org, project_id=family.data['projectId'])
        row['id'] = rid
        row['uuid'] = rid
        out.append(row)
    return out


def _exception_rows(open_: dict[str, dict[str, Any]], objects, family, store, key: str) -> list[dict[str, Any]]:
    rows = []
    for entry in open_.values():
        values = {**entry, 'dataStoreId': store.id, 'documentFamilyId': family.id, 'sourceKey': key,
                  'open': True, 'state': 'OPEN', 'storeState': storage.store_state(store.id, 'OPEN')}
        rows.append(storage.new_record(storage.EXCEPTIONS, values, principal=SERVICE, org=family.org,
                                       project_id=family.data['projectId']))
    return rows


def exception_summary(row: dict[str, Any]) -> dict[str, Any]:
    return {'id': row['id'], 'exceptionType': row['exceptionType'], 'message': row['message'],
            'severity': row.get('severity'), 'open': row.get('open', True), 'taxon': row.get('taxon')}


def _attach(objects: list[dict[str, Any]], exceptions: list[dict[str, Any]]) -> None:
    """The open exceptions, summarised on their object and attribute."""
    by_object: dict[str, list[dict[str, Any]]] = {}
    for row in exceptions:
        by_object.setdefault(row['dataObjectId'], []).append(row)
    for obj in objects:
        mine = [r for r in by_object.get(obj['id'], []) if r.get('open', True)]
        obj['dataExceptions'] = [exception_summary(r) for r in mine]
        obj['exceptionCount'] = len(mine)
        for attr in obj.get('attributes') or []:
            attr['dataExceptions'] = [exception_summary(r) for r in mine if r.get('attributeId') == attr['id']]


class FamilyGone(NotFound):
    """The family was deleted while it was extracted (its delete had read its data objects before
    this run wrote them): the run deletes what it wrote; the engine's EXTRACT runner answers
    ``Vanished`` (the execution goes with the family), the REST route a 404."""


def _forget_run(org: str, key: str) -> None:
    storage.delete(storage.EXCEPTIONS, storage.exceptions_of_run(org, key), SERVICE)
    storage.delete(storage.OBJECTS, storage.objects_of_run(org, key), SERVICE)


def _summarise(family, summary: dict[str, Any]) -> bool:
    """Write the run's summary on the family (``family``: as read after the run wrote); False when
    the family is gone."""
    current = dict(family.data.get('extraction') or {})
    runs = dict(current.get('runs') or {})
    runs[summary['sourceKey']] = {k: v for k, v in summary.items() if k != 'seconds'}
    if len(runs) > MAX_SUMMARIES:
        for old in sorted(runs, key=lambda k: runs[k].get('extractedOn') or '')[:len(runs) - MAX_SUMMARIES]:
            runs.pop(old)
    return storage.set_family_summary(family.id, {'runs': runs, 'openExceptions': sum(
        r.get('openExceptions') or 0 for r in runs.values())})


# ----------------------------------------------------------------------------- the step runner

def run_extract_step(execution: dict[str, Any], options: dict[str, Any], seconds: float,
                     principal: Principal) -> dict[str, Any]:
    """The EXTRACT runner of the execution engine: the execution names the family
    (``documentFamilyId``, or ``inputs.documentFamilyId`` for an activity plan) and its step."""
    family_id = execution.get('documentFamilyId') or (execution.get('inputs') or {}).get('documentFamilyId')
    if not isinstance(family_id, str) or not family_id:
        raise BadRequest('an EXTRACT step needs a document family (documentFamilyId in the inputs)')
    step = execution.get('step') or {}
    if execution.get('assistantId'):
        origin = f"assistant:{execution['assistantId']}"
    else:   # an activity plan's step: the same plan's step replaces its own earlier runs
        activity = storage.get(family_of('activities'), str(execution.get('activityId') or ''))
        plan = (activity.data.get('activityPlanId') if activity else None) or execution.get('activityId')
        origin = f'plan:{plan or execution.get("id")}'
    token = budget.start(min(seconds, budget.remaining()))   # the attempt's box: rules stop within it
    try:
        return run(family_id, options, origin=origin, step=str(step.get('name') or 'extract'),
                   run_id=str(execution.get('id')), principal=principal)
    finally:
        budget.end(token)


def extract_now(family_id: str, body: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """POST /api/document-families/{id}/extract: the same run as an EXTRACT step, started by a
    client (its ``step`` names the run: repeating it replaces its earlier result)."""
    if not isinstance(body, dict):
        raise BadRequest('The body must be a JSON object')
    family = crud.load_visible('document-families', family_id, principal)
    access.require_write(principal, family_of('data-objects'), family.org)
    step = body.get('step') or 'manual'
    options = {k: v for k, v in body.items() if k != 'step'}
    if not isinstance(step, str) or len(step) > 200:
        raise BadRequest('step must be a name of at most 200 characters')
    try:
        check_options(options, 'extract')
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    return run(family.id, options, origin='api', step=step, run_id=f'api:{uuid.uuid4()}', principal=principal)


__all__ = ['ExtractionLimit', 'check_options', 'extract_now', 'run', 'run_extract_step']
