"""Linked deltas: a create naming ``documentFamilyId`` and ``operations`` applies the delta to
that family's document (features/documents/deltas.py) instead of storing the body as given. A body
without either stores a bare delta record and touches no document (the generic create)."""
from __future__ import annotations

from chalicelib.kernel.hooks import Hook


class LinkedDeltaHook(Hook):
    guards = frozenset()   # its rule is about creating (a delta applied to its document)

    def create_instead(self, family, principal, body):
        if body.get('documentFamilyId') is None or body.get('operations') is None:
            return None
        from chalicelib.features.documents import deltas  # noqa: PLC0415 - deltas imports the hooks
        return deltas.save(body, principal)


HOOK = LinkedDeltaHook()
