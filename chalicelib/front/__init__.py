"""The front doors every feature shares: the HTTP middleware (authenticate, count, run the view,
map errors) and the Lambda event dispatch (SQS worker, schedule, table stream). Above the
features: it composes identity and mcp; nothing imports it but ``app.py`` and ``localdev``."""
