"""One definition of each limit (chalicelib/core/limits.py): no other module of chalicelib gives a
limit a number of its own; the ones that keep a local name alias the core one."""
from __future__ import annotations

import ast
from pathlib import Path

from chalicelib.core import limits

ROOT = Path(__file__).resolve().parents[2]
# the local names limits had before they moved to core/limits.py (issue 23)
LOCAL_NAMES = {'MAX_PAGE_SIZE', 'DEFAULT_PAGE_SIZE', 'MAX_PAGE', 'MAX_BODY_BYTES', 'DEFAULT_MAX_BYTES',
               'MAX_EVENTS', 'MAX_KIND', 'MAX_REQUEST_ID', 'MAX_FAMILIES', 'MAX_PART_NUMBER',
               'MAX_PARTS_PER_URL_REQUEST', 'MAX_PATH'}


def _numbers_assigned(tree: ast.Module) -> dict[str, ast.AST]:
    found = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
        for target in targets:
            parts = target.elts if isinstance(target, ast.Tuple) else [target]
            names = [t.id for t in parts if isinstance(t, ast.Name)]
            for name in names:
                if any(isinstance(n, ast.Constant) and isinstance(n.value, int) for n in ast.walk(node.value)):
                    found[name] = node.value
    return found


def test_limits_are_numbers_defined_once():
    defined = {k: v for k, v in vars(limits).items() if k.isupper()}
    # a figure, or a short ascending list of figures (the page image's dpi steps)
    assert defined and all((isinstance(v, int) and v > 0) or
                           (isinstance(v, tuple) and v and all(isinstance(x, int) and x > 0 for x in v)
                            and list(v) == sorted(set(v))) for v in defined.values()), defined
    offenders = []
    for path in (ROOT / 'chalicelib').rglob('*.py'):
        if path.name == 'limits.py' and path.parent.name == 'core':
            continue
        assigned = _numbers_assigned(ast.parse(path.read_text(encoding='utf-8')))
        offenders += [f'{path.relative_to(ROOT)}: {name}' for name in assigned
                      if name in LOCAL_NAMES or name in defined]
    assert offenders == []


def test_the_enforcing_modules_use_the_core_figures():
    from chalicelib.core import config, egress, jsonbody
    from chalicelib.features.documents import batch, service
    from chalicelib.features.events import ui_events
    from chalicelib.features.work import service as work_service
    from chalicelib.kernel import listing
    assert (listing.MAX_PAGE_SIZE, listing.DEFAULT_PAGE_SIZE, listing.MAX_PAGE) == \
        (limits.MAX_PAGE_SIZE, limits.DEFAULT_PAGE_SIZE, limits.MAX_PAGE)
    assert jsonbody.MAX_BODY_BYTES == limits.MAX_JSON_BODY_BYTES
    assert egress.DEFAULT_MAX_BYTES == config.Config.bridge_max_bytes == limits.OUTBOUND_MAX_BYTES
    assert config.Config.small_upload_max_bytes == limits.SMALL_UPLOAD_MAX_BYTES
    assert (ui_events.MAX_EVENTS, ui_events.MAX_KIND) == (limits.MAX_UI_EVENTS, limits.MAX_UI_EVENT_KIND)
    assert work_service.MAX_REQUEST_ID == limits.MAX_REQUEST_ID and batch.MAX_FAMILIES == limits.MAX_BATCH_FAMILIES
    assert (service.MAX_PART_NUMBER, service.MAX_PARTS_PER_URL_REQUEST, service.MAX_PATH) == \
        (limits.MAX_PART_NUMBER, limits.MAX_PARTS_PER_URL_REQUEST, limits.MAX_DOCUMENT_PATH)
