"""The consistent-hashing bucket engine: Hudi's XXH32 (checked against lz4-java's in the JVM), the ring and its
splits, random writes and resizes against a dict model through labformat and hudi-rs, pruning by the ring."""

from __future__ import annotations

import json
import shutil
import tempfile

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import labformat as lf
from labformat.index import consistent_bucket as ch
from labformat.model.enums import StatsSource
from tests.helpers import hudi_snapshot

pytestmark = pytest.mark.spark

SCHEMA = "record_key string, p string, updated_at long, value long"
CH = {"index_type": "BUCKET", "bucket_engine": "CONSISTENT_HASHING", "bucket_num": 2}
# Split every bucket past 1 KB (every bucket: base files carry a bloom filter), up to 6 per partition.
RESIZE = {"bucket_max_num": 6, "bucket_split_threshold": 1.0, "max_file_size": "1KB"}
KEYS = [f"k{i:03d}" for i in range(60)]
NON_ASCII = ["", "é", "drone_ü_7", "日本語のキー", "😀", "202401010000_drone0001"]


def jvm_xxhash32(spark, text: str) -> int:
    """lz4-java's XXH32 (what Hudi's HashID.getXXHash32 calls), from the jar Spark ships."""
    data = bytearray(text.encode("utf-8"))
    factory = spark.sparkContext._jvm.net.jpountz.xxhash.XXHashFactory.fastestInstance()
    return factory.hash32().hash(data, 0, len(data), 0) & ch.HASH_MASK


def test_a_keys_hash_is_lz4_javas_xxhash32(spark):
    for key in NON_ASCII + KEYS[:5]:
        assert ch.key_hash(key, ()) == jvm_xxhash32(spark, key), key
    # A complex key hashes its hash fields' values joined with nothing between them.
    assert ch.key_hash("drone:d7,ts:0900", ("drone",)) == jvm_xxhash32(spark, "d7")
    assert ch.key_hash("drone:d7,ts:0900", ()) == jvm_xxhash32(spark, "d70900")


def test_the_initial_ring_splits_the_hash_space_evenly_and_the_same_for_every_writer():
    ring = ch.Ring.initial("2024/01/01", 4)
    values = [n.value for n in ring.nodes]
    assert values[-1] == ch.HASH_MASK and len(values) == 4
    assert np.ptp(np.diff([0] + values)) <= 1  # even steps
    assert ring == ch.Ring.initial("2024/01/01", 4)  # deterministic: prefixes are name-based UUIDs
    assert ring.nodes[0].file_id_prefix != ch.Ring.initial("2024/01/02", 4).nodes[0].file_id_prefix
    assert ch.Ring.from_json(ring.to_json()) == ring
    # The first node at least its hash; past the last value wraps to the first (none here: the last is the mask).
    assert list(ring.buckets_of(np.array([0, values[0], values[0] + 1, ch.HASH_MASK]))) == [0, 0, 1, 3]


@pytest.mark.parametrize("index", [0, 2])
def test_a_split_halves_one_range_and_moves_no_other_key(index):
    ring = ch.Ring.initial("", 3)
    split, children = ring.split(index, "20240101000000000")
    assert len(split.nodes) == 4 and split.seq_no == 1 and children[1].value == ring.nodes[index].value
    hashes = np.array([ch.key_hash(f"key{i}", ()) for i in range(3000)])
    before = [ring.nodes[i].file_id for i in ring.buckets_of(hashes)]
    after = [split.nodes[i].file_id for i in split.buckets_of(hashes)]
    parent = ring.nodes[index].file_id
    moved = [(b, a) for b, a in zip(before, after) if b != a]
    assert moved and all(b == parent for b, _ in moved)  # only the parent's keys move
    assert {a for _, a in moved} | {a for b, a in zip(before, after) if b == parent} == {n.file_id for n in children}
    share = sum(a == children[0].file_id for a in after) / sum(b == parent for b in before)
    assert 0.4 < share < 0.6  # the middle of the range: about half the keys each


def test_consistent_hashing_needs_a_merge_on_read_bucket_table(spark, tmp_path):
    with pytest.raises(lf.ConfigError, match="MERGE_ON_READ"):
        lf.Table.create(spark, tmp_path / "cow", options=CH)
    with pytest.raises(lf.ConfigError, match="BUCKET"):
        lf.Table.create(spark, tmp_path / "bloom", table_type="MERGE_ON_READ", options={"bucket_engine": "CONSISTENT_HASHING"})
    t = lf.Table.create(spark, tmp_path / "ok", table_type="MERGE_ON_READ", options=CH)
    assert "hoodie.index.bucket.engine=CONSISTENT_HASHING" in (tmp_path / "ok/.hoodie/hoodie.properties").read_text()
    assert lf.Table.open(spark, tmp_path / "ok").context().config.bucket_engine == "CONSISTENT_HASHING"
    assert t.read().count() == 0


def ring_placement(table) -> dict[str, str]:
    """key -> the file id the table's current rings give it."""
    rows = table.read().select("record_key", "_hoodie_partition_path").collect()
    rings = ch.load_rings(table.context().storage, table.context().timeline, CH["bucket_num"])
    out = {}
    for r in rows:
        ring = ch.ring_of(rings, r["_hoodie_partition_path"], CH["bucket_num"])
        out[r["record_key"]] = ring.nodes[int(ring.buckets_of(np.array([ch.key_hash(r["record_key"], ())]))[0])].file_id
    return out


record = st.tuples(st.sampled_from(KEYS), st.integers(0, 3), st.integers(0, 9))
operations = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(record, min_size=1, max_size=25)),
    st.tuples(st.just("delete"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=6)),
    st.tuples(st.just("resize")),
), min_size=3, max_size=5)


@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking:
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # minutes of Spark
@example(ops=[("upsert", [(k, 1, 5) for k in KEYS[:40:3]]), ("resize",),
              ("upsert", [(k, 2, 6) for k in KEYS[1::4]]), ("delete", KEYS[::5]), ("resize",),
              ("upsert", [(k, 3, 7) for k in KEYS[::7]])])
@given(ops=operations)
def test_writes_and_resizes_keep_every_key_where_its_ring_says(spark, ops):
    path = tempfile.mkdtemp(prefix="lf-ch-")
    try:
        table = lf.Table.create(spark, path, partition_field="p", table_type="MERGE_ON_READ", options=CH)
        model: dict[str, tuple] = {}
        for op in [("upsert", [(k, 0, 0) for k in KEYS[::2]])] + list(ops):
            if op[0] == "upsert":
                rows = [(k, "ab"[int(k[1:]) % 2], u, v) for k, u, v in op[1]]
                report = table.upsert(spark.createDataFrame(rows, SCHEMA))
                winners: dict[str, tuple] = {}
                for row in rows:
                    if row[0] not in winners or (row[2], row[3]) > winners[row[0]][2:]:
                        winners[row[0]] = row
                assert report.rows_inserted == len(set(winners) - set(model))
                assert report.rows_updated == len(set(winners) & set(model))
                model.update(winners)
            elif op[0] == "delete":
                keys = [(k, "ab"[int(k[1:]) % 2]) for k in op[1]]
                report = table.delete(spark.createDataFrame(keys, "record_key string, p string"))
                assert report.rows_deleted == len(set(op[1]) & set(model))
                for k in op[1]:
                    model.pop(k, None)
            else:
                before = {s.file_id for s in table.file_slices()}
                report = table.cluster(RESIZE)
                after = {s.file_id for s in table.file_slices()}
                if report.instant is not None:
                    assert len(after) == len(before) + report.details.clustering_groups
            expected = pd.DataFrame(sorted(model.values()), columns=["record_key", "p", "updated_at", "value"])
            ours = table.read().select(*expected.columns).toPandas().sort_values("record_key").reset_index(drop=True)
            pd.testing.assert_frame_equal(ours, expected, check_dtype=False)
            theirs = hudi_snapshot(path)
            assert (sorted(theirs["record_key"]) if len(theirs) else []) == sorted(model)
            files = dict(table.read().select("record_key", "_hoodie_file_name").collect())
            placement = ring_placement(table)
            # each key in its ring's file group (a log file's name is its file id behind a dot)
            assert all(files[k].lstrip(".").startswith(placement[k]) for k in model)
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def grown(spark, tmp_path_factory):
    """A consistent-hashing table of two partitions, 2 buckets each, resized once to 4 each."""
    path = tmp_path_factory.mktemp("ch") / "t"
    table = lf.Table.create(spark, path, partition_field="p", table_type="MERGE_ON_READ", options=CH)
    rows = [(k, "ab"[int(k[1:]) % 2], 0, 1) for k in KEYS]
    table.bulk_insert(spark.createDataFrame(rows, SCHEMA))
    table.upsert(spark.createDataFrame([(k, p, 1, 2) for k, p, _, _ in rows[:20]], SCHEMA))
    report = table.cluster({**RESIZE, "bucket_max_num": 4})
    return table, report


def test_a_resize_splits_each_big_bucket_once_within_the_maximum(grown):
    table, report = grown
    slices = table.file_slices()
    assert report.details.clustering_groups == 4 and report.details.files_out == 8
    assert {p: sum(s.partition_path == p for s in slices) for p in "ab"} == {"a": 4, "b": 4}
    assert not any(s.has_logs for s in slices)  # the split merged each parent's logs
    assert table.cluster({**RESIZE, "bucket_max_num": 4}).instant is None  # at the maximum: nothing to do
    assert table.cluster({"max_file_size": "1KB"}).instant is None  # Hudi's default maximum: the initial count
    ring_dir = f"{table.path}/.hoodie/.bucket_index/consistent_hashing_metadata/a"
    ring = ch.Ring.from_json(open(f"{ring_dir}/{report.instant}.hashing_meta").read())
    assert ring.seq_no == 2 and {n.file_id for n in ring.nodes} == {s.file_id for s in slices if s.partition_path == "a"}
    assert json.loads(open(f"{ring_dir}/{ch.INIT_INSTANT}.hashing_meta").read())["numBuckets"] == 2


def test_a_ring_whose_resize_never_completed_is_not_read(grown):
    table, _ = grown
    storage = table.context().storage
    rings = ch.load_rings(storage, table.context().timeline, 2)
    stray = ch.ring_path("a", "29990101000000000")
    try:
        storage.replace(stray, ch.Ring.initial("a", 7).to_json().encode())
        assert ch.load_rings(storage, table.context().timeline, 2) == rings
    finally:
        storage.delete(stray)


def test_a_point_query_opens_the_one_bucket_its_ring_names_per_partition(grown):
    table, _ = grown
    rows, report = table.query("record_key = 'k007'")
    assert [r.record_key for r in rows.collect()] == ["k007"]
    assert report.funnel.after_bucket_pruning == 2  # one of four file groups in each of the two partitions
    assert report.bucket_source.kind is StatsSource.HASH
    placement = ring_placement(table)
    kept = {s.file_id for s in table.scan("record_key IN ('k007', 'k010')").stage("bucket_pruning").kept}
    assert {placement["k007"], placement["k010"]} <= kept and len(kept) <= 4


def test_a_resize_plans_the_biggest_buckets_first_within_the_maximum_and_skips_a_one_hash_bucket():
    from labformat import config as C
    from labformat.model.file_group import FileSlice
    from labformat.write.clustering import plan_resize

    ring = ch.Ring.initial("p", 3)
    # The middle bucket squeezed to a single hash: nothing left to split.
    ring = ch.Ring("p", ring.instant, 3, 0, (ring.nodes[0], ch.Node(ring.nodes[0].value + 1, "squeezed"),
                                                 ring.nodes[2]))
    sizes = {ring.nodes[0].file_id: 5000 * 1024, "squeezed-0": 9000 * 1024, ring.nodes[2].file_id: 7000 * 1024}
    slices = [FileSlice("p", f, "001", f"p/{f}_1-0-0_001.parquet", size_bytes=n) for f, n in sizes.items()]
    options = C.write_options({"max_file_size": "1MB", "bucket_max_num": 4})
    splits = plan_resize({"p": ring}, slices, options, 3, "002")
    assert [s.slice.file_id for s in splits] == [ring.nodes[2].file_id]  # the biggest splittable; then 4 = max
    assert len(splits[0].ring.nodes) == 4
    assert plan_resize({"p": ring}, slices, C.write_options({"max_file_size": "1MB"}), 3, "002") == []  # max: 3
