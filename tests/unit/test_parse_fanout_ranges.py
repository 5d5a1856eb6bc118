"""The page ranges of a big document and the pacing of the stage's looks (chalicelib/features/parsing/readers/limits.py
``FanOut``; docs/operations/parsing.md "Big documents")."""
from __future__ import annotations

from chalicelib.features.parsing.readers.limits import FANOUT, FanOut


def test_ranges_cover_every_page_once_in_order_within_the_range_limit():
    for pages in (1, 9, 10, 11, 199, 200, 201, 500, 1999, 2000):
        for scan in (True, False):
            ranges = FANOUT.ranges(pages, scan)
            assert [p for first, last in ranges for p in range(first, last + 1)] == list(range(1, pages + 1))
            assert len(ranges) <= FANOUT.max_ranges
            size = max(FANOUT.range_pages(scan), -(-pages // FANOUT.max_ranges))
            assert all(last - first + 1 == size for first, last in ranges[:-1])
            assert 1 <= ranges[-1][1] - ranges[-1][0] + 1 <= size
    assert FANOUT.ranges(500, True)[:2] == [(1, 10), (11, 20)] and len(FANOUT.ranges(500, True)) == 50
    assert FANOUT.ranges(500, False) == [(1, 200), (201, 400), (401, 500)]
    assert FANOUT.ranges(200, False) == [(1, 200)]   # one range: read in one chain, not split


def test_past_max_ranges_a_range_grows_instead():
    fan = FanOut(ocr_range_pages=10, max_ranges=20)
    ranges = fan.ranges(500, True)
    assert len(ranges) == 20 and ranges[0] == (1, 25) and ranges[-1] == (476, 500)


def test_looks_back_off_to_their_ceiling():
    fan = FanOut(check_seconds=5, max_check_seconds=60)
    assert [fan.look_after(n) for n in range(7)] == [5, 10, 20, 40, 60, 60, 60]
    assert fan.look_after(10_000) == 60
