"""The Chalice application: creates the app, installs the middleware, registers blueprints.
No logic lives here (see chalicelib/: api -> services -> store/query -> core)."""
from chalice import Chalice

from chalicelib.api import (
    account,
    authorizer,
    bridges,
    docs,
    documents,
    events,
    health,
    http,
    internal,
    middleware,
    resources,
    workflow,
)

app = Chalice(app_name='platform-api', configure_logs=False)  # logs: core/observability.py
# Responses are all text (JSON, or a service bridge's text answer); these request types arrive
# as bytes (small document uploads, chalicelib/api/documents.py).
app.api.binary_types = list(documents.BINARY_TYPES)
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
app.register_blueprint(documents.bp)
app.register_blueprint(authorizer.bp)  # the gateway's Lambda authorizer (infra/usage_plan.py)
