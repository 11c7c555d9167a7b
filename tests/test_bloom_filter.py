"""Unit tests of the record-key bloom filter: no false negatives, false-positive rate as configured."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labformat.index.bloom_filter import BloomFilter


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=30), min_size=1, max_size=300, unique=True),
       st.sampled_from([0.1, 0.01, 1e-9]))
def test_no_false_negatives(keys, fpp):
    bloom = BloomFilter.for_keys(pa.array(keys, pa.string()), fpp)
    assert bloom.might_contain(np.array(keys, dtype=object)).all()
    again = BloomFilter.from_base64(bloom.to_base64())
    assert again.might_contain(keys).all()


@pytest.mark.parametrize("fpp", [0.05, 0.01, 0.001])
def test_measured_false_positive_rate_is_near_the_configured_one(fpp):
    members = [f"2024011509{i % 60:02d}_drone{i:06d}" for i in range(20_000)]
    probes = np.array([f"absent-{i}" for i in range(200_000)], dtype=object)
    rate = BloomFilter.for_keys(members, fpp).might_contain(probes).mean()
    # 200k probes: the sampling error is far below these bounds.
    assert fpp / 2 <= rate <= fpp * 1.5, rate


def test_serialization_round_trips_bits_exactly():
    bloom = BloomFilter.for_keys([f"k{i}" for i in range(1000)], 0.01)
    again = BloomFilter.from_bytes(bloom.to_bytes())
    assert again.num_bits == bloom.num_bits and again.num_hashes == bloom.num_hashes
    assert np.array_equal(again.bits, bloom.bits)
    assert len(bloom.to_bytes()) == bloom.size_bytes


@pytest.mark.parametrize("data", [b"", b"XXXX" + bytes(20), BloomFilter.for_keys(["a"], 0.1).to_bytes()[:-8]])
def test_corrupt_filters_are_rejected(data):
    with pytest.raises(ValueError):
        BloomFilter.from_bytes(data)


def test_filter_is_sized_by_key_count():
    small = BloomFilter.for_keys([f"k{i}" for i in range(100)], 1e-9)
    large = BloomFilter.for_keys([f"k{i}" for i in range(10_000)], 1e-9)
    assert large.num_bits > 50 * small.num_bits
    assert small.num_hashes == large.num_hashes == 30


def test_exact_key_check_reports_each_key_found_once(tmp_path):
    """Task (c): the keys that passed the bloom filter and really are in the file, each once,
    even when a bulk insert left a key twice in that file."""
    import pyarrow.parquet as pq

    from labformat.index.base import FILE_ID, KEY, PART
    from labformat.index.bloom import check_file

    in_file = ["k1", "k2", "k2", "k5", "k7"]
    pq.write_table(pa.table({"_hoodie_record_key": in_file}), tmp_path / "f1.parquet")
    bloom = BloomFilter.for_keys(pa.array(in_file), 1e-9).to_base64()
    candidates = ["k2", "k3", "k7", "k9"]
    table = pa.table({PART: ["p"] * 4, KEY: candidates, FILE_ID: ["f1"] * 4, "path": ["f1.parquet"] * 4})
    out = check_file(table, tmp_path.as_uri(), {"f1.parquet": bloom}).to_pylist()
    found = sorted(r[KEY] for r in out if r[KEY] is not None)
    assert found == ["k2", "k7"]
    [stats] = [r for r in out if r[KEY] is None]
    assert (stats["candidates"], stats["matched"]) == (4, 2) and stats["after_bloom"] >= 2
    assert all(r[FILE_ID] == "f1" and r[PART] == "p" for r in out)
