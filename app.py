"""The Chalice application: creates the app, installs the middleware, registers blueprints.
No logic lives here (see chalicelib/: api -> services -> store/query -> core)."""
import os

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
    mcp,
    middleware,
    resources,
    store_fs,
    work,
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
app.register_blueprint(work.bp)
app.register_blueprint(mcp.bp)            # the MCP tool connector (/mcp) and its metadata
app.register_blueprint(documents.bp)
app.register_blueprint(store_fs.bp)        # the SDK's and CLI's store file API (/api/stores/...)
app.register_blueprint(authorizer.bp)  # the gateway's Lambda authorizer (infra/usage_plan.py)

# Event handlers (chalicelib/api/handlers.py; infra/app.py sets their event sources up when
# packaging: batch item failures, the data stack's redriven queue and table stream).
_QUEUE = os.environ.get('ACTIVITY_QUEUE_NAME', 'platform-local-activity-starts')
_STREAM = f"arn:aws:dynamodb:us-east-1:000000000000:table/{os.environ.get('TABLE_NAME', 'platform-local')}/stream/0"


@app.on_sqs_message(queue=_QUEUE)
def activity_start_worker(event):
    from chalicelib.api import handlers  # noqa: PLC0415 - lazy: cold start
    return handlers.sqs_batch(event.to_dict(), event.context)


@app.schedule('rate(1 minute)')
def scheduled_jobs(event):
    from chalicelib.api import handlers  # noqa: PLC0415 - lazy: cold start
    return handlers.schedule_tick(event.to_dict(), event.context)


@app.on_dynamodb_record(stream_arn=_STREAM)
def outbox_publisher(event):
    from chalicelib.api import handlers  # noqa: PLC0415 - lazy: cold start
    return handlers.stream_batch(event.to_dict(), event.context)
