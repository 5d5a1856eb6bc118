"""The features, one folder each: its routes, its service, its storage access and its family hooks.

identity (credentials, the request gate, users, organizations, memberships), tasks (status,
groups), work (activity starts, worker, steps, schedules, executions), documents (stores,
uploads, content, deltas, batch update, validation, store files), bridges (proxy, secrets,
agent tools), events (domain events: outbox and publisher; UI events), mcp (the MCP connector),
parsing (reading uploads into documents), extraction (data definitions, data objects, exceptions,
review), records (the families served by the generic rules alone). Each feature declares its families in
its ``declarations.py``.

A feature imports the kernel and core; another feature only through an edge declared in
``.importlinter``.
"""

from chalicelib.features import hooks as _hooks
from chalicelib.features.bridges import declarations as _bridges
from chalicelib.features.documents import declarations as _documents
from chalicelib.features.events import declarations as _events
from chalicelib.features.extraction import declarations as _extraction
from chalicelib.features.identity import declarations as _identity
from chalicelib.features.records import declarations as _records
from chalicelib.features.tasks import declarations as _tasks
from chalicelib.features.work import declarations as _work
from chalicelib.kernel import registry as _registry

# Every family's declaration, then the hooks they name, into the kernel: the same for the app,
# ops/, localdev and the tests (docs/architecture.md "How to add a family").
_registry.install([*_identity.FAMILIES, *_tasks.FAMILIES, *_work.FAMILIES, *_documents.FAMILIES,
                   *_bridges.FAMILIES, *_events.FAMILIES, *_records.FAMILIES, *_extraction.FAMILIES])
_hooks.install()
