"""The copy-on-write merge task on its own (no Spark): update-only rewrites against the general path."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labformat.fileformat.bloom_filter import BloomSpec
from labformat.fileformat.footers import BLOOM_FOOTER
from labformat.helper_columns import TARGET
from labformat.write.arrow_writer import WriteSpec
from labformat.write.merge import Target, _replace_in_place, merge_file_group

DATA = ("record_key", "value", "updated_at")


ENTRIES = 1000  # bloom_num_entries of every merge here: each filter is sized for it, not for the file's keys


def _spec(root, instant: str, fpp: float = 1e-6, max_file_size: int = 64 * 1024 * 1024,
          num_entries: int = ENTRIES) -> WriteSpec:
    return WriteSpec(f"file://{root}", instant, "record_key", DATA, max_file_size, "snappy", fpp, num_entries)


def _rows(keys, value: float, ts: int) -> pa.Table:
    n = len(keys)
    return pa.table({"record_key": pa.array(keys, pa.string()), "value": pa.array([value] * n),
                     "updated_at": pa.array([ts] * n, pa.int64()), TARGET: pa.array([0] * n, pa.int32())})


def _merge_all(root, rows: pa.Table, instant: str, old_path: str | None, fpp: float = 1e-6,
               max_file_size: int = 64 * 1024 * 1024, num_entries: int = ENTRIES) -> list[dict]:
    target = Target("", "fg1", old_path, "null" if old_path is None else "x")
    spec = _spec(root, instant, fpp, max_file_size, num_entries)
    out = list(merge_file_group(rows.to_batches(max_chunksize=7), spec, {0: target}, "upsert"))
    return pa.Table.from_batches(out).to_pylist()


def _merge(root, rows: pa.Table, instant: str, old_path: str | None, fpp: float = 1e-6,
           max_file_size: int = 64 * 1024 * 1024, num_entries: int = ENTRIES) -> dict:
    stats = _merge_all(root, rows, instant, old_path, fpp, max_file_size, num_entries)
    assert len(stats) == 1  # one base file
    return stats[0]


def _read(root, stat) -> pa.Table:
    return pq.read_table(root / stat["path"])


def _footer_bloom(root, stat) -> str:
    return pq.read_metadata(root / stat["path"]).metadata[BLOOM_FOOTER.encode()].decode()


def test_update_only_merge_replaces_rows_in_place_and_keeps_the_filter(tmp_path):
    keys = [f"k{i:04d}" for i in range(200)]
    first = _merge(tmp_path, _rows(keys, 1.0, 1), "20260101000000000", None)
    updated = keys[10:200:7]
    second = _merge(tmp_path, _rows(list(reversed(updated)), 2.0, 2), "20260102000000000", first["path"])

    table = _read(tmp_path, second)
    assert table.column("_hoodie_record_key").to_pylist() == keys  # still sorted, nothing added or lost
    values = dict(zip(table.column("record_key").to_pylist(), table.column("value").to_pylist()))
    assert all(values[k] == (2.0 if k in set(updated) else 1.0) for k in keys)
    commit = dict(zip(keys, table.column("_hoodie_commit_time").to_pylist()))
    assert {commit[k] for k in updated} == {"20260102000000000"}
    assert {commit[k] for k in keys if k not in set(updated)} == {"20260101000000000"}
    assert (second["num_update_writes"], second["num_inserts"]) == (len(updated), 0)
    # The old filter is carried over, and it is exactly what a rebuild would give.
    assert _footer_bloom(tmp_path, second) == _footer_bloom(tmp_path, first)
    assert _footer_bloom(tmp_path, second) == BloomSpec("SIMPLE", ENTRIES, 1e-6).build(pa.array(keys)).to_base64()


def test_a_merge_with_inserts_sorts_and_rebuilds_the_filter(tmp_path):
    keys = [f"k{i:04d}" for i in range(0, 200, 2)]
    first = _merge(tmp_path, _rows(keys, 1.0, 1), "20260101000000000", None)
    incoming = ["k0003", "k0004", "k0199"]  # two inserts, one update
    second = _merge(tmp_path, _rows(incoming, 2.0, 2), "20260102000000000", first["path"])
    table = _read(tmp_path, second)
    expected = sorted(set(keys) | set(incoming))
    assert table.column("_hoodie_record_key").to_pylist() == expected
    assert (second["num_update_writes"], second["num_inserts"]) == (1, 2)
    assert _footer_bloom(tmp_path, second) == BloomSpec("SIMPLE", ENTRIES, 1e-6).build(pa.array(expected)).to_base64()


def test_a_changed_fpp_rebuilds_the_filter_of_an_update_only_merge(tmp_path):
    keys = [f"k{i:04d}" for i in range(100)]
    first = _merge(tmp_path, _rows(keys, 1.0, 1), "20260101000000000", None, fpp=1e-3)
    second = _merge(tmp_path, _rows(keys[:5], 2.0, 2), "20260102000000000", first["path"], fpp=1e-6)
    assert _footer_bloom(tmp_path, second) == BloomSpec("SIMPLE", ENTRIES, 1e-6).build(pa.array(keys)).to_base64()
    assert _footer_bloom(tmp_path, second) != _footer_bloom(tmp_path, first)


def test_a_changed_num_entries_rebuilds_the_filter_of_an_update_only_merge(tmp_path):
    keys = [f"k{i:04d}" for i in range(100)]
    first = _merge(tmp_path, _rows(keys, 1.0, 1), "20260101000000000", None, num_entries=10)
    second = _merge(tmp_path, _rows(keys[:5], 2.0, 2), "20260102000000000", first["path"], num_entries=500)
    assert _footer_bloom(tmp_path, first) == BloomSpec("SIMPLE", 10, 1e-6).build(pa.array(keys)).to_base64()
    assert _footer_bloom(tmp_path, second) == BloomSpec("SIMPLE", 500, 1e-6).build(pa.array(keys)).to_base64()
    third = _merge(tmp_path, _rows(keys[5:9], 3.0, 3), "20260103000000000", second["path"], num_entries=500)
    assert _footer_bloom(tmp_path, third) == _footer_bloom(tmp_path, second)  # same settings: carried over


def test_an_unsorted_base_file_comes_out_sorted_after_an_update(tmp_path):
    keys = [f"k{i:04d}" for i in range(50)]
    shuffled = keys[25:] + keys[:25]
    first = _merge(tmp_path, _rows(keys, 1.0, 1), "20260101000000000", None)
    # Rewrite the base file in a shuffled order, as a NONE-sorted bulk insert could leave it.
    table = _read(tmp_path, first)
    order = pa.array([keys.index(k) for k in shuffled])
    pq.write_table(table.take(order), tmp_path / first["path"])
    second = _merge(tmp_path, _rows(["k0030", "k0001"], 2.0, 2), "20260102000000000", first["path"])
    out = _read(tmp_path, second)
    assert out.column("_hoodie_record_key").to_pylist() == keys
    assert pc.sum(pc.equal(out.column("value"), 2.0)).as_py() == 2


@pytest.mark.parametrize("fpp", [1e-3, 1e-9])
def test_built_as_reads_the_layout_from_the_header(fpp):
    keys = pa.array([f"k{i}" for i in range(1000)])
    simple = BloomSpec("SIMPLE", 1000, fpp)
    encoded = simple.build(keys).to_base64()
    assert simple.built_as(encoded, None, 1000) and simple.built_as(encoded, "SIMPLE", 1000)
    assert not BloomSpec("SIMPLE", 5000, fpp).built_as(encoded, None, 1000)
    assert not BloomSpec("DYNAMIC_V0", 1000, fpp).built_as(encoded, None, 1000)
    assert not simple.built_as("bm90IGEgZmlsdGVy", None, 1000) and not simple.built_as("n*t b64", None, 1000)
    assert not simple.built_as("TEZCRgFAAAAAAAAAAA8AAAAzbTssZYYt3w==", "LFBF1_SIPHASH_DOUBLE_HASHING", 3)
    # DYNAMIC_V0's rows depend on how many keys it holds, and on max entries past num_entries.
    dynamic = BloomSpec("DYNAMIC_V0", 400, fpp, 1000)
    encoded = dynamic.build(keys).to_base64()
    assert dynamic.built_as(encoded, "DYNAMIC_V0", 1000)
    assert not dynamic.built_as(encoded, "DYNAMIC_V0", 999)
    assert not BloomSpec("DYNAMIC_V0", 400, fpp, 500).built_as(encoded, "DYNAMIC_V0", 1000)


def test_an_update_only_merge_keeps_a_dynamic_v0_filter_and_its_footer_type(tmp_path):
    keys = [f"k{i:04d}" for i in range(200)]
    spec = _spec(tmp_path, "20260101000000000", num_entries=60)
    spec = WriteSpec(**{**spec.__dict__, "bloom_type": "DYNAMIC_V0", "bloom_max_entries": 150})
    target = Target("", "fg1", None, "null")
    [first] = pa.Table.from_batches(list(merge_file_group(_rows(keys, 1.0, 1).to_batches(max_chunksize=7), spec,
                                                          {0: target}, "upsert"))).to_pylist()
    kv = pq.read_metadata(tmp_path / first["path"]).metadata
    assert kv[b"hoodie_bloom_filter_type_code"] == b"DYNAMIC_V0"
    expected = BloomSpec("DYNAMIC_V0", 60, 1e-6, 150).build(pa.array(keys)).to_base64()
    assert _footer_bloom(tmp_path, first) == expected
    spec = WriteSpec(**{**spec.__dict__, "instant_time": "20260102000000000"})
    target = Target("", "fg1", first["path"], "20260101000000000")
    [second] = pa.Table.from_batches(list(merge_file_group(_rows(keys[3:9], 2.0, 2).to_batches(), spec,
                                                           {0: target}, "upsert"))).to_pylist()
    assert _footer_bloom(tmp_path, second) == expected and second["bloom_type"] == "DYNAMIC_V0"


def test_dictionary_encoding_only_where_values_repeat(tmp_path):
    keys = [f"k{i:04d}" for i in range(500)]
    rows = _rows(keys, 1.0, 1)
    rows = rows.set_column(rows.schema.get_field_index("value"), "value",
                           pa.array([float(i) for i in range(500)]))  # every value distinct
    stat = _merge(tmp_path, rows, "20260101000000000", None)
    group = pq.ParquetFile(tmp_path / stat["path"]).metadata.row_group(0)
    encodings = {group.column(i).path_in_schema: group.column(i).encodings for i in range(group.num_columns)}
    repeated = ("_hoodie_commit_time", "_hoodie_file_name", "updated_at")
    distinct = ("_hoodie_record_key", "_hoodie_commit_seqno", "record_key", "value")
    assert all("RLE_DICTIONARY" in encodings[c] for c in repeated), encodings
    assert all("RLE_DICTIONARY" not in encodings[c] for c in distinct), encodings
    assert _read(tmp_path, stat).column("value").to_pylist() == [float(i) for i in range(500)]


def test_a_merge_past_the_maximum_file_size_writes_one_base_file(tmp_path):
    # Hudi's merge handle: the file group gets one new base file whatever its size; only the
    # driver's sizing of inserts keeps files near the maximum. `_merge` asserts a single file.
    keys = [f"k{i:04d}" for i in range(300)]
    first = _merge(tmp_path, _rows(keys[::2], 1.0, 1), "20260101000000000", None)
    assert first["file_size"] > 1024 and first["num_inserts"] == 150
    second = _merge(tmp_path, _rows(keys[:20], 2.0, 2), "20260102000000000", first["path"], max_file_size=1024)
    assert (second["file_id"], second["num_writes"]) == ("fg1", 160)
    assert (second["num_update_writes"], second["num_inserts"]) == (10, 10)
    assert _read(tmp_path, second).column("_hoodie_record_key").to_pylist() == sorted(set(keys[::2]) | set(keys[:20]))


def test_a_new_file_group_rolls_over_past_the_maximum_file_size(tmp_path):
    # Hudi's create handle: inserts into a new file group go on in further new file groups once
    # the data written passes the maximum; the first keeps the file id the driver chose.
    keys = [f"k{i:05d}" for i in range(3000)]
    stats = _merge_all(tmp_path, _rows(list(reversed(keys)), 1.0, 1), "20260101000000000", None,
                       max_file_size=8 * 1024)
    assert len(stats) > 1 and stats[0]["file_id"] == "fg1" and len({s["file_id"] for s in stats}) == len(stats)
    assert sum(s["num_inserts"] for s in stats) == 3000 and stats[0]["incoming_bytes"] > 0
    ranges = [(s["min_key"], s["max_key"]) for s in stats]
    assert all(hi < lo for (_, hi), (lo, _) in zip(ranges, ranges[1:]))  # key-sorted, ranges do not overlap
    assert ranges[0][0] == keys[0] and ranges[-1][1] == keys[-1]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.one_of(st.none(), st.floats(allow_nan=False))), max_size=30),
       st.data())
def test_replace_in_place_takes_each_replaced_row_from_the_new_rows(rows, data):
    old = pa.table({"k": pa.array([f"k{i:03d}" for i in range(len(rows))], pa.string()),
                    "v": pa.array([v for _, v in rows], pa.float64())})
    old = pa.concat_tables([old.slice(0, len(rows) // 2), old.slice(len(rows) // 2)])  # two chunks
    replaced = data.draw(st.lists(st.integers(0, max(len(rows) - 1, 0)), unique=True)) if rows else []
    order = data.draw(st.permutations(replaced))
    new_rows = pa.table({"k": pa.array([f"k{i:03d}" for i in order], pa.string()),
                         "v": pa.array([-float(i) for i in order], pa.float64())})
    position = pc.index_in(old.column("k"), value_set=new_rows.column("k"))

    merged = _replace_in_place(old, new_rows, position)

    expected = [(-float(i), True) if i in set(replaced) else (rows[i][1], False) for i in range(len(rows))]
    assert merged.column("k").to_pylist() == old.column("k").to_pylist()
    assert merged.column("v").to_pylist() == [v for v, _ in expected]
