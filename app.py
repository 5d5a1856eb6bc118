"""The Chalice application: creates the app, installs the middleware, registers blueprints.
No logic lives here (see chalicelib/: api -> services -> store/query -> core)."""
from chalice import Chalice

from chalicelib.api import (
    account,
    authorizer,
    bridges,
    docs,
    events,
    health,
    http,
    internal,
    mcp,
    middleware,
    resources,
    workflow,
)

app = Chalice(app_name='platform-api', configure_logs=False)  # logs: core/observability.py
app.api.binary_types = []  # every response is text: JSON, or a service bridge's text answer
http.bind(app)
middleware.install(app)
app.register_blueprint(resources.bp)
app.register_blueprint(account.bp)
app.register_blueprint(docs.bp)
app.register_blueprint(health.bp)
app.register_blueprint(internal.bp)
app.register_blueprint(workflow.bp)
app.register_blueprint(bridges.bp)
app.register_blueprint(events.bp)
app.register_blueprint(mcp.bp)            # the MCP tool connector (/mcp) and its metadata
app.register_blueprint(authorizer.bp)  # the gateway's Lambda authorizer (infra/usage_plan.py)
