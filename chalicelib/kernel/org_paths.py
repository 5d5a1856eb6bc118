"""Organization-slug paths (read-only) for the template-like families, as the platform's Python
SDK addresses them (``ComponentEndpoint``: ``/api/prompts/{orgSlug}/{slug}``):

  GET /api/{family}/{orgSlug}/{slug}[/{version}]   the record with that slug in that organization
  GET /api/{family}/{orgSlug}                      that organization's list page (a segment that
                                                   is not a UUID; a UUID is the record's id)

API Gateway allows one variable name per path level, so the organization slug travels in the
family's ``{id}`` segment. Pure data: imported at app start.
"""
from __future__ import annotations

ORG_SLUG_FAMILIES: tuple[str, ...] = ('prompts', 'extension-packs', 'data-definitions')
VERSIONED: frozenset[str] = frozenset({'extension-packs'})   # families with a `version` field
