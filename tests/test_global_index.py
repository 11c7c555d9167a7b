"""Global indexes (GLOBAL_SIMPLE, GLOBAL_BLOOM, RECORD_INDEX): random upserts and deletes whose records change partition,
against a dict model of Hudi's rule (`hoodie.{bloom,simple}.index.update.partition.path`), through
labformat and hudi-rs; what the global lookup costs; the non-global duplicate it avoids."""

from __future__ import annotations

import shutil
import tempfile

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import labformat as lf
from labformat.fileformat.log_file import BlockType, read_blocks
from labformat.model.enums import IndexType, TableType
from tests.helpers import hudi_snapshot

pytestmark = pytest.mark.spark

SCHEMA = "record_key string, p string, updated_at long, value long"
KEYS = [f"k{i:02d}" for i in range(16)]
PARTITIONS = ["a", "b", "c"]
UPDATE_PATH = {IndexType.GLOBAL_BLOOM: "bloom_update_partition_path",
               IndexType.GLOBAL_SIMPLE: "simple_update_partition_path",
               IndexType.RECORD_INDEX: "record_index_update_partition_path"}

record = st.tuples(st.sampled_from(KEYS), st.sampled_from(PARTITIONS), st.integers(0, 3), st.integers(0, 9))
operations = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(record, min_size=1, max_size=10)),
    st.tuples(st.just("delete"), st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(PARTITIONS)),
                                          min_size=1, max_size=5)),
), min_size=2, max_size=4)


def apply_to_model(model: dict, op, move: bool) -> None:
    """model: key -> (folder, p, updated_at, value). The newest version of a key in a batch wins
    (whatever partition it names); a stored key is updated where it is (move=False: its folder
    stays) or moved to the partition its new version names (move=True)."""
    if op[0] == "delete":
        for key, _ in op[1]:
            model.pop(key, None)  # wherever it is: the partition the input names does not matter
        return
    winners: dict[str, tuple] = {}
    for key, p, updated_at, value in op[1]:
        # highest updated_at wins; ties go to the larger remaining columns, in order (p, then value)
        if key not in winners or (updated_at, p, value) > (winners[key][2], winners[key][1], winners[key][3]):
            winners[key] = (key, p, updated_at, value)
    for key, (_, p, updated_at, value) in winners.items():
        folder = p if move or key not in model else model[key][0]
        model[key] = (folder, p, updated_at, value)


def check(table, path: str, model: dict) -> None:
    expected = pd.DataFrame(sorted((k, folder, p, u, v) for k, (folder, p, u, v) in model.items()),
                            columns=["record_key", "_hoodie_partition_path", "p", "updated_at", "value"])
    columns = list(expected.columns)
    ours = table.read().select(*columns).toPandas().sort_values("record_key").reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, expected, check_dtype=False)
    theirs = hudi_snapshot(path)
    if len(expected):
        pd.testing.assert_frame_equal(theirs[columns].reset_index(drop=True), expected, check_dtype=False)
    else:
        assert len(theirs) == 0


@pytest.mark.parametrize("index_type,move,table_type", [
    (index_type, move, TableType.COPY_ON_WRITE) for index_type in UPDATE_PATH for move in (True, False)
] + [(index_type, True, TableType.MERGE_ON_READ) for index_type in UPDATE_PATH],
    ids=lambda v: {True: "update_partition_path", False: "stay"}.get(v, str(v)) if isinstance(v, bool) else str(v))
@settings(max_examples=1, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking:
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # minutes of Spark
@given(ops=operations)
def test_a_global_index_keeps_one_copy_of_every_key_as_hudi_does(spark, index_type, move, table_type, ops):
    path = tempfile.mkdtemp(prefix="lf-global-")
    try:
        table = lf.Table.create(spark, path, partition_field="p",
                                options={"index_type": index_type, "table_type": table_type})
        # RECORD_INDEX: its deltas merged into a new base every other commit, and 3 shards for 16 keys.
        options = {UPDATE_PATH[index_type]: move, "max_file_size": "3KB", "small_file_limit": "2KB",
                   "metadata_compact_max_delta_commits": 2, "record_index_shards": 3}
        first = [(k, PARTITIONS[i % 3], 0, 0) for i, k in enumerate(KEYS[::2])]
        table.bulk_insert(spark.createDataFrame(first, SCHEMA))
        model = {k: (p, p, 0, 0) for k, p, _, _ in first}
        check(table, path, model)
        for op in ops:
            if op[0] == "upsert":
                report = table.upsert(spark.createDataFrame(op[1], SCHEMA), options)
                distinct = {r[0] for r in op[1]}
                # A moved record is an insert in its new partition (and a delete in its old one).
                assert report.rows_updated + report.rows_inserted == len(distinct)
            else:
                report = table.delete(spark.createDataFrame(op[1], "record_key string, p string"), options)
                assert report.rows_deleted == len({k for k, _ in op[1]} & set(model))
            apply_to_model(model, op, move)
            check(table, path, model)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_moved_record_is_counted_as_a_delete_and_an_insert(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="p", options={"index_type": IndexType.GLOBAL_BLOOM})
    t.bulk_insert(spark.createDataFrame([(k, p, 0, 0) for k, p in [("k1", "a"), ("k2", "a"), ("k3", "b")]], SCHEMA))
    files = len(t.file_slices())
    report = t.upsert(spark.createDataFrame([("k1", "b", 1, 5), ("k3", "b", 1, 6)], SCHEMA))
    assert (report.rows_deleted, report.rows_inserted, report.rows_updated) == (1, 1, 1)
    # A global lookup reads every partition: partition a's files were candidates, though no record names a.
    assert report.funnel.files_in_affected_partitions == report.funnel.files_in_snapshot == files
    rows = {r.record_key: r._hoodie_partition_path for r in t.read().collect()}
    assert rows == {"k1": "b", "k2": "a", "k3": "b"}


def test_a_non_global_index_stores_a_moved_record_twice(spark, tmp_path):
    """What the global indexes exist for: BLOOM looks `k1` up in partition b only, so the copy in a stays."""
    t = lf.Table.create(spark, tmp_path / "t", partition_field="p")
    t.bulk_insert(spark.createDataFrame([("k1", "a", 0, 0)], SCHEMA))
    t.upsert(spark.createDataFrame([("k1", "b", 1, 5)], SCHEMA))
    assert sorted((r._hoodie_partition_path, r.value) for r in t.read().collect()) == [("a", 0), ("b", 5)]
    t.upsert(spark.createDataFrame([("k1", "c", 2, 7)], SCHEMA), {"index_type": IndexType.GLOBAL_SIMPLE})
    # Switched to a global index, the key is found in both partitions: both copies are replaced by one.
    assert sorted((r._hoodie_partition_path, r.value) for r in t.read().collect()) == [("c", 7)]


def test_merge_on_read_moves_a_record_with_a_delete_block_beside_the_updates(spark, tmp_path):
    """On merge-on-read the old copy goes in a delete block of the old file group's new log file, after
    the data block of that group's updates; the record is inserted in its new partition."""
    t = lf.Table.create(spark, tmp_path / "m", partition_field="p",
                        options={"index_type": IndexType.GLOBAL_SIMPLE, "table_type": TableType.MERGE_ON_READ})
    t.bulk_insert(spark.createDataFrame([("k1", "a", 0, 0), ("k2", "a", 0, 0)], SCHEMA), {"bulk_insert_parallelism": 1})
    assert len(t.file_slices()) == 1
    report = t.upsert(spark.createDataFrame([("k1", "b", 1, 5), ("k2", "a", 1, 6)], SCHEMA))
    assert (report.rows_deleted, report.rows_inserted, report.rows_updated) == (1, 1, 1)
    logs = [f for f in report.files if ".log." in f.path]
    assert len(logs) == 1 and logs[0].partition_path == "a"
    blocks = read_blocks((tmp_path / "m" / logs[0].path).read_bytes())
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.DELETE]
    expected = [("k1", "b", 5), ("k2", "a", 6)]
    assert sorted((r.record_key, r._hoodie_partition_path, r.value) for r in t.read().collect()) == expected
    theirs = hudi_snapshot(t.path)
    assert sorted(zip(theirs.record_key, theirs._hoodie_partition_path, theirs.value)) == expected
    # a's base file still holds k1, deleted by the log since: not a copy to remove again, nor to delete twice.
    again = t.upsert(spark.createDataFrame([("k1", "b", 2, 8)], SCHEMA))
    assert (again.rows_deleted, again.rows_updated, again.rows_inserted) == (0, 1, 0)
    t.upsert(spark.createDataFrame([("k2", "a", 2, 7)], SCHEMA), {"simple_update_partition_path": False})
    assert sorted((r.record_key, r.value) for r in t.read().collect()) == [("k1", 8), ("k2", 7)]
    gone = t.delete(spark.createDataFrame([("k1", "z")], "record_key string, p string"))
    assert gone.rows_deleted == 1 and sorted(r.record_key for r in t.read().collect()) == ["k2"]
