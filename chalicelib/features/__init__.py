"""The features, one folder each: its routes, its service, its storage access and its family hooks.

identity (credentials, the request gate, users, organizations, memberships), tasks (status,
groups), work (activity starts, worker, steps, schedules, executions), documents (stores,
uploads, content, deltas, batch update, validation, store files), bridges (proxy, secrets,
agent tools), events (domain events: outbox and publisher; UI events), mcp (the MCP connector).

A feature imports the kernel and core; another feature only through an edge declared in
``.importlinter``.
"""

from chalicelib.features import hooks as _hooks

_hooks.install()   # the family hooks, into the kernel: the same for the app, ops/, localdev, tests
