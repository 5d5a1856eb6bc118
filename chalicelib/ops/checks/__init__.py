"""Extension checks of ``python -m chalicelib.ops.check_table``: every module here is imported
before a run, and its ``@check('name')`` functions run with the built-in ones.

A module here looks like::

    from chalicelib.ops.check_table import Snapshot, Violation, check

    @check('outbox-published')
    def outbox_published(snap: Snapshot):
        for row in snap.items_with_prefix('OUTBOX#'):       # claims the items: "checked"
            if row.raw.get('published') is None and ...:
                yield Violation('outbox-published', row.pk, 'outbox item never published')

Documents (families without their S3 object or current version) and work (activities stuck
without a queued message, outbox items never published) add theirs here.
"""
