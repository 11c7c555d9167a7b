"""Unit tests of the record-key bloom filter: no false negatives, false-positive rate as configured."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labformat.fileformat.bloom_filter import BloomFilter


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


# ---- sizing for hoodie.index.bloom.num_entries, whatever the file holds

def _rate(bloom: BloomFilter, n: int = 50_000) -> float:
    return float(bloom.might_contain(np.array([f"absent-{i}" for i in range(n)], dtype=object)).mean())


def test_a_filter_sized_for_num_entries_ignores_how_many_keys_it_holds():
    keys = [f"k{i}" for i in range(700)]
    assert BloomFilter.for_keys(keys, 1e-9, num_entries=60_000).num_bits == BloomFilter.sizing(60_000, 1e-9)[0]
    assert BloomFilter.for_keys(keys[:10], 1e-9, num_entries=70).num_bits == BloomFilter.sizing(70, 1e-9)[0]
    assert BloomFilter.for_keys(keys, 1e-9).num_bits == BloomFilter.sizing(700, 1e-9)[0]  # None: for exactly these


@pytest.mark.parametrize("fpp", [0.01, 1e-9])
def test_a_filter_sized_for_fewer_entries_than_keys_lets_more_false_positives_through(fpp):
    keys = [f"2024011509{i % 60:02d}_drone{i:06d}" for i in range(3_000)]
    rates = {n: _rate(BloomFilter.for_keys(keys, fpp, num_entries=n)) for n in (3_000, 1_000, 300)}
    assert rates[3_000] <= max(3 * fpp, 1e-4)  # sized for what it holds: about fpp
    assert rates[1_000] > 10 * rates[3_000] and rates[1_000] > 0.01
    assert rates[300] > rates[1_000] and rates[300] > 0.5
    for n, rate in rates.items():  # and the measured rate follows the formula
        predicted = BloomFilter.predicted_fpp(n, fpp, len(keys))
        assert abs(rate - predicted) <= max(0.2 * predicted, 5e-4), (n, rate, predicted)
    # No false negatives, however overfull.
    assert BloomFilter.for_keys(keys, fpp, num_entries=30).might_contain(keys).all()


def test_predicted_fpp_is_the_configured_one_at_num_entries():
    for fpp in (0.05, 0.01, 1e-9):
        assert BloomFilter.predicted_fpp(60_000, fpp, 60_000) == pytest.approx(fpp, rel=0.15)
    assert BloomFilter.predicted_fpp(60_000, 1e-9, 700) < 1e-30
    assert BloomFilter.predicted_fpp(70, 1e-9, 700) > 0.9


def test_sized_as_compares_the_configured_sizing_not_the_key_count():
    encoded = BloomFilter.for_keys([f"k{i}" for i in range(500)], 1e-9, num_entries=100).to_base64()
    assert BloomFilter.sized_as(encoded, 100, 1e-9)
    assert not BloomFilter.sized_as(encoded, 500, 1e-9)
    assert not BloomFilter.sized_as(encoded, 100, 1e-6)


def test_bloom_num_entries_option():
    from labformat import config as C
    from labformat.errors import ConfigError

    assert C.resolve(None, [C.Scope.WRITE]).bloom_num_entries == 60_000
    by_key = C.resolve({"hoodie.index.bloom.num_entries": "700"}, [C.Scope.WRITE])
    assert by_key.bloom_num_entries == 700 and by_key.explicit == {"bloom_num_entries"}
    for bad in (0, -5, 1.5, True, "lots"):
        with pytest.raises(ConfigError, match="bloom_num_entries"):
            C.resolve({"bloom_num_entries": bad}, [C.Scope.WRITE])


def test_the_exact_check_counts_the_keys_it_reads(tmp_path):
    """keys_read: every row of a file the exact check opened; none when no candidate passed the filter."""
    import pyarrow.parquet as pq

    from labformat.index.base import FILE_ID, KEY, PART
    from labformat.index.bloom import check_file

    in_file = [f"k{i:03d}" for i in range(300)]
    pq.write_table(pa.table({"_hoodie_record_key": in_file}), tmp_path / "f1.parquet")
    exact = BloomFilter.for_keys(pa.array(in_file), 1e-9).to_base64()
    full = BloomFilter.for_keys(pa.array(in_file), 1e-9, num_entries=3).to_base64()  # every bit set

    def stats(bloom, candidates):
        table = pa.table({PART: ["p"] * len(candidates), KEY: candidates, FILE_ID: ["f1"] * len(candidates),
                          "path": ["f1.parquet"] * len(candidates)})
        [row] = [r for r in check_file(table, tmp_path.as_uri(), {"f1.parquet": bloom}).to_pylist() if r[KEY] is None]
        return row

    absent = [f"x{i}" for i in range(20)]
    assert (stats(exact, absent)["after_bloom"], stats(exact, absent)["keys_read"]) == (0, 0)
    row = stats(full, absent)  # an overfull filter passes them all: a false positive costs a file read
    assert (row["after_bloom"], row["matched"], row["keys_read"]) == (20, 0, 300)
    row = stats(exact, absent + ["k007"])
    assert (row["after_bloom"], row["matched"], row["keys_read"]) == (1, 1, 300)
