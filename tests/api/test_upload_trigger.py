"""An upload sends its family's parse trigger itself, at once (features/documents/service.py ->
kernel/hooks.py ``after_create`` -> features/work/pipelines.py ``trigger_created``;
docs/operations/worker.md "Fairness between organizations"): the parse does not wait for the
table stream to read the created event behind another organization's burst. The stream's trigger
stays (the fallback), and the double trigger parses once."""
from __future__ import annotations

import pytest

from chalicelib.features.work import store as work_store
from tests.api.test_parse_fanout import parse_run, parsed_events, settle, store, upload  # noqa: F401 - fixture

pytestmark = pytest.mark.usefixtures('net')   # tests/api/conftest.py: no packet leaves this machine


def test_an_uploads_parse_trigger_is_sent_at_upload_and_the_streams_second_one_parses_nothing_more(
        api, org_id, store, work, monkeypatch):  # noqa: F811 - the fixture
    sent: list[tuple[dict, str | None]] = []
    real = work_store.send_messages

    def spying(messages, **kwargs):
        sent.extend((body, kwargs.get('group')) for body, _ in messages)
        return real(messages, **kwargs)
    monkeypatch.setattr(work_store, 'send_messages', spying)

    family = upload(api, store, 'now/a.pdf')
    triggers = [(b, g) for b, g in sent if b.get('type') == 'pipeline.stages']
    assert triggers == [({'type': 'pipeline.stages', 'documentFamilyId': family['id'], 'trigger': 'created'},
                         org_id)], sent                      # sent by the upload, in its organization's group
    work.drain(seconds=20)                                   # the queue only: the stream not read yet
    first = parse_run(api, family['id'])
    assert first['status'] == 'SUCCEEDED' and first['attempts'] == 1, first['statusMessages']

    settle(work)                                             # now the stream: its trigger too
    triggers = [b for b, _ in sent if b.get('type') == 'pipeline.stages']
    assert len(triggers) == 2 and triggers[0] == triggers[1], triggers
    again = parse_run(api, family['id'])                     # one parse run (the only one), not run again
    assert (again['id'], again['attempts'], again['status']) == (first['id'], 1, 'SUCCEEDED')
    assert len(parsed_events(api, family['id'])) == 1
    versions = {e['parse']['documentVersion'] for e in parsed_events(api, family['id'])}
    assert api.get(f"/api/document-families/{family['id']}").json['documentVersion'] in versions
