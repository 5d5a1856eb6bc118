"""Reprocess a document family on demand (issue 39; docs/api/processing.md "Reprocess"): a new run
of the stages before the pipelines (the parse stage reads the original again and writes a new
version), then the pipelines of the assistant named (or of every subscribed assistant).

The run is the engine's like any other (pipelines.py ``run_stages`` with the trigger
``reprocess:<id>``); this module checks who asks and for what, and answers the run.
"""
from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core.errors import BadRequest
from chalicelib.core.principal import Principal
from chalicelib.features.parsing import serving as parsing
from chalicelib.features.work import pipelines
from chalicelib.kernel import crud, embedding
from chalicelib.kernel.registry import family as family_of
from chalicelib.kernel.store import table
from chalicelib.kernel.store.table import Stored

FAMILIES = family_of('document-families')


def _assistant(value: Any, family: Stored, principal: Principal) -> str | None:
    if value in (None, ''):
        return None
    missing = BadRequest(f"'assistantId' names no assistant of the family's project: {str(value)[:64]}")
    try:
        assistant_id = str(uuid.UUID(str(value)))
    except ValueError:
        raise missing from None
    stored = table.get('assistants', assistant_id)
    if stored is None or stored.data.get('deleted') or stored.data.get('projectId') != family.data.get('projectId') \
            or not crud.visible(family_of('assistants'), principal, stored):
        raise missing
    return assistant_id


def reprocess(family: Stored, principal: Principal, assistant_id: Any = None) -> dict[str, Any]:
    """Start a new parse run over ``family`` (the caller may write it) -> the run (PENDING)."""
    crud.require_write(FAMILIES, principal, family, op='update')
    then = _assistant(assistant_id, family, principal)
    trigger = f'{pipelines.REPROCESS}{uuid.uuid4()}'
    pipelines.run_stages(family.id, trigger, then)
    run = table.get('executions', pipelines.stages_id(family.id, trigger))
    # answered as GET /api/executions/{id} answers it (its steps in the SDK's form: step_shapes.py)
    return embedding.embed_one(family_of('executions'), run.data, principal) if run is not None else {}


def reprocess_family(family_id: str, body: Any, principal: Principal) -> dict[str, Any]:
    """``POST /api/document-families/{id}/reprocess`` with an optional ``{"assistantId"}``."""
    if body is not None and not isinstance(body, dict):
        raise BadRequest('The body must be a JSON object {"assistantId"?} or empty')
    family = crud.load_visible(FAMILIES, family_id, principal)
    return reprocess(family, principal, (body or {}).get('assistantId'))


def reprocess_in_store(org_slug: str, store_slug: str, family_id: str, principal: Principal, *,
                       assistant_id: str | None, content_object_id: str | None = None) -> dict[str, Any]:
    """The SDK's ``PUT /api/stores/{org}/{store}/families/{id}[/objects/{coId}]/reprocess?assistantId=``."""
    _, family = parsing.family_in_store(org_slug, store_slug, family_id, principal)
    if content_object_id is not None:
        parsing.object_of(family, content_object_id)   # 404 for another family's object
    return reprocess(family, principal, assistant_id)
