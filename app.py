"""The Chalice application: creates the app, installs the middleware, registers each feature's
blueprint. No logic lives here (docs/architecture.md: features -> kernel -> core; the front doors
in chalicelib/front/)."""
import os

from chalice import Chalice

from chalicelib.features.bridges import routes as bridges
from chalicelib.features.documents import routes as documents
from chalicelib.features.documents import store_fs_routes as store_fs
from chalicelib.features.events import routes as events
from chalicelib.features.extraction import routes as extraction
from chalicelib.features.identity import authorizer
from chalicelib.features.identity import routes as account
from chalicelib.features.mcp import routes as mcp
from chalicelib.features.parsing import routes as parsing
from chalicelib.features.review_ui import routes as review_ui
from chalicelib.features.tasks import routes as tasks_routes
from chalicelib.features.work import internal_routes as internal
from chalicelib.features.work import reprocess_routes as reprocess
from chalicelib.features.work import routes as work_routes
from chalicelib.front import middleware
from chalicelib.kernel.http import aliases, docs, health
from chalicelib.kernel.http import request as http
from chalicelib.kernel.http import routes as family_routes

app = Chalice(app_name='platform-api', configure_logs=False)  # logs: core/observability.py
# Responses are all text (JSON, or a service bridge's text answer); these request types arrive
# as bytes (small document uploads, chalicelib/features/documents/routes.py).
app.api.binary_types = list(documents.BINARY_TYPES)
http.bind(app)
middleware.install(app)
app.register_blueprint(family_routes.bp)
app.register_blueprint(aliases.bp)          # the platform SDK's other paths (docs/api/clients.md)
app.register_blueprint(account.bp)
app.register_blueprint(docs.bp)
app.register_blueprint(health.bp)
app.register_blueprint(internal.bp)
app.register_blueprint(tasks_routes.bp)
app.register_blueprint(bridges.bp)
app.register_blueprint(events.bp)
app.register_blueprint(work_routes.bp)
app.register_blueprint(mcp.bp)            # the MCP tool connector (/mcp) and its metadata
app.register_blueprint(documents.bp)
app.register_blueprint(store_fs.bp)        # the SDK's and CLI's store file API (/api/stores/...)
app.register_blueprint(extraction.bp)      # data objects, attributes, exceptions, review (docs/api/extraction.md)
app.register_blueprint(parsing.bp)         # parsed documents: text, the SDK's families and KDDB content
app.register_blueprint(reprocess.bp)       # parse a family again (the engine's parse stage)
app.register_blueprint(review_ui.bp)       # the reviewer's page (/review: docs/api/review-page.md)
app.register_blueprint(authorizer.bp)  # the gateway's Lambda authorizer (infra/usage_plan.py)

# Event handlers (chalicelib/front/handlers.py; infra/app.py sets their event sources up when
# packaging: batch item failures, the data stack's redriven queue and table stream).
_QUEUE = os.environ.get('ACTIVITY_QUEUE_NAME', 'platform-local-activity-starts')
_STREAM = f"arn:aws:dynamodb:us-east-1:000000000000:table/{os.environ.get('TABLE_NAME', 'platform-local')}/stream/0"


@app.on_sqs_message(queue=_QUEUE)
def activity_start_worker(event):
    from chalicelib.front import handlers  # noqa: PLC0415 - lazy: cold start
    return handlers.sqs_batch(event.to_dict(), event.context)


@app.schedule('rate(1 minute)')
def scheduled_jobs(event):
    from chalicelib.front import handlers  # noqa: PLC0415 - lazy: cold start
    return handlers.schedule_tick(event.to_dict(), event.context)


# The stream's batches: up to 1,000 records, gathered for up to 1 s. A batch's events are recorded
# and counted in chunks of 40 (features/events/outbox.py), each chunk's counting a few write units
# of its own, so fuller batches cost every write less; an event is published up to ~1 s later at
# low load (docs/scale.md "The stream's batches"; make run's poller uses the same two settings).
OUTBOX_BATCH_SIZE = 1000
OUTBOX_BATCHING_WINDOW_SECONDS = 1


@app.on_dynamodb_record(stream_arn=_STREAM, batch_size=OUTBOX_BATCH_SIZE,
                        maximum_batching_window_in_seconds=OUTBOX_BATCHING_WINDOW_SECONDS)
def outbox_publisher(event):
    from chalicelib.front import handlers  # noqa: PLC0415 - lazy: cold start
    return handlers.stream_batch(event.to_dict(), event.context)
