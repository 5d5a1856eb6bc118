"""The shape of spread index keys (kernel/store/table.py INDEX_SHARDS): every id picks one shard
of a partition, the shards of a partition are the key and ``~{s}#{key}``, a shard key maps back
to its partition, and no partition key a record can carry is mistaken for a shard."""
from __future__ import annotations

import uuid
from collections import Counter

from chalicelib.kernel.store import table


def test_each_id_picks_one_of_the_partitions_shards_and_maps_back():
    key = table.value_pk('tasks', 'org', 'statusSlug', 'done')
    for _ in range(200):
        id_ = str(uuid.uuid4())
        shard = table.spread_pk(key, id_)
        assert shard in table.spread_keys(key)
        assert table.index_base_pk(shard) == key
        assert table.spread_pk(key, id_) == shard   # stable
    assert len(table.spread_keys(key)) == table.INDEX_SHARDS == len(set(table.spread_keys(key)))
    assert table.spread_keys(key)[0] == key          # shard 0: the key itself (records written before)


def test_ids_spread_evenly():
    counts = Counter(table.index_shard(str(uuid.uuid4())) for _ in range(16_000))
    assert set(counts) == set(range(table.INDEX_SHARDS))
    assert max(counts.values()) < 1.2 * 16_000 / table.INDEX_SHARDS


def test_a_value_that_looks_like_a_shard_is_not_one():
    for value in ('~3#x', '~1#tasks#org', '~', '~12'):
        key = table.value_pk('tasks', 'org', 'title', value)
        assert table.index_base_pk(key) == key
        assert all(table.index_base_pk(s) == key for s in table.spread_keys(key))
    assert table.index_base_pk('~x#tasks#org') == '~x#tasks#org'   # not a shard number
