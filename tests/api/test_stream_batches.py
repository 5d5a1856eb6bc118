"""The table stream's batches (app.py ``outbox_publisher``: up to OUTBOX_BATCH_SIZE records,
gathered for up to OUTBOX_BATCHING_WINDOW_SECONDS, as Lambda's event source mapping gathers them),
and `make run`'s poller honouring the same two settings (localdev/pollers.py ``StreamReader``;
docs/scale.md "The stream's batches")."""
from __future__ import annotations

from localdev.pollers import StreamReader


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def reader(work, batch_size: int, window: float, clock: Clock) -> tuple[StreamReader, list[int]]:
    """A second reader of the table's stream from its start, recording each batch's size."""
    sizes: list[int] = []

    def handler(event, context):
        sizes.append(len(event['Records']))
        return work.app.outbox_publisher(event, context)
    return StreamReader(handler, work.cfg.table_name, region=work.cfg.region, endpoint_url=None,
                        batch_size=batch_size, window_seconds=window, clock=clock), sizes


def project(api, org_id) -> dict:
    return api.post('/api/projects', {'name': 'p', 'organizationId': org_id}).json


def test_records_wait_for_the_window_then_go_in_one_batch(api, org_id, work):
    clock = Clock()
    stream, sizes = reader(work, 1000, 1.0, clock)
    pid = project(api, org_id)['id']
    first = stream.poll_once()
    assert first['records'] == 0 and first['waiting'] > 0 and sizes == []   # the project's, held
    for i in range(3):
        assert api.post('/api/tasks', {'projectId': pid, 'title': f't{i}'}).status == 201
    clock.now = 0.9
    held = stream.poll_once()
    assert held['records'] == 0 and held['waiting'] > first['waiting'] and sizes == []
    clock.now = 1.0
    went = stream.poll_once()
    assert went == {'records': held['waiting'], 'failed': 0, 'waiting': 0} and sizes == [held['waiting']]
    events = api.get("/api/events?filter=eventType=='tasks.created'").json
    assert events['totalElements'] == 3   # recorded, once each, by the one batch


def test_a_full_batch_goes_without_waiting(api, org_id, work):
    clock = Clock()
    stream, sizes = reader(work, 5, 60.0, clock)
    project(api, org_id)
    assert stream.poll_once()['records'] == 5 and sizes == [5]


def test_without_a_window_every_read_goes_at_once(api, org_id, work):
    """The tests' own draining (tests/work_support.py) and the benches keep Lambda's default."""
    stream, sizes = reader(work, 100, 0.0, Clock())
    project(api, org_id)
    got = stream.poll_once()
    assert got['records'] > 0 and got['waiting'] == 0 and sizes == [got['records']]


def test_the_app_declares_the_batches_make_run_reads(work):
    source = next(s for s in work.app.app.event_sources if s.name == 'outbox_publisher')
    assert (source.batch_size, source.maximum_batching_window_in_seconds) == \
        (work.app.OUTBOX_BATCH_SIZE, work.app.OUTBOX_BATCHING_WINDOW_SECONDS) == (1000, 1)
