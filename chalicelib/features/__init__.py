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

# Every feature's declarations (its families, and the shapes and enumerations their fields name),
# then the hooks they name, into the kernel: the same for the app, ops/, localdev and the tests
# (docs/architecture.md "How to add a family").
_DECLARATIONS = (_identity, _tasks, _work, _documents, _bridges, _events, _records, _extraction)
_registry.install([fam for d in _DECLARATIONS for fam in d.FAMILIES],
                  shapes=[shape for d in _DECLARATIONS for shape in getattr(d, 'SHAPES', ())],
                  enums=[d.ENUMS for d in _DECLARATIONS if hasattr(d, 'ENUMS')],
                  enum_aliases=[d.ENUM_ALIASES for d in _DECLARATIONS if hasattr(d, 'ENUM_ALIASES')],
                  enum_retired=[d.ENUM_RETIRED for d in _DECLARATIONS if hasattr(d, 'ENUM_RETIRED')])
_hooks.install()
