"""Review in tasks, part two: the review task and the family (docs/api/extraction.md "Review").
A family whose extraction leaves open exceptions gets a review task in its project
(``after_run``); once the run has no open exception left, its review task is closed and the
family moves to the step's resolved document status.

These follow a committed change (features/extraction/review.py, part one: corrections and
assessment) and never turn it into an error: what could not follow is reported
(``reviewTask: {closed: false, reason}``), recorded on the run and tried again by the run's next
change. The family's summary is derived from the exception records each time (``follow_up``),
so a summary left stale (a lost write, two changes racing) is repaired by the next change.

The review task is an ordinary task (statusSlug, teamId, assigneeId from the step's options or
its ``assigneeRules``): take-next, the MCP task tools and the task routes work on it as on any
task. Its ``metadata`` names the family and the extraction (``extractionReview``).
"""
from __future__ import annotations

from typing import Any

from chalicelib.core import clock, observability
from chalicelib.core.errors import ApiError, Conflict
from chalicelib.core.expressions import ExpressionError, evaluate
from chalicelib.features.extraction import storage
from chalicelib.features.identity.service_token import SERVICE
from chalicelib.kernel import crud
from chalicelib.kernel.store import table

log = observability.get_logger('extraction')

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


# ----------------------------------------------------------------------------- the family's summary

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
