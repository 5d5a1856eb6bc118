"""The HTTP side of the kernel: the current request parsed (``request``), how each route is
authenticated (``policy``), the generic REST routes of every registered family (``routes``),
the OpenAPI document (``openapi``, ``docmeta``), /docs and /v3/api-docs (``docs``), /api/health."""
