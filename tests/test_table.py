"""Spark tests of the copy-on-write table: bulk insert, snapshot and time-travel reads, the on-disk format."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import labformat as lf
from labformat.model.base_file import BaseFile
from tests.helpers import ALL_COLUMNS, DATA_COLUMNS, assert_same_rows, footers, hudi_snapshot, snapshot, telemetry, tree

pytestmark = pytest.mark.spark


def test_bulk_insert_then_read_returns_every_row(spark, tmp_path):
    """v6_one_insert: 600 rows in, 600 rows out, meta columns first and filled."""
    t = lf.Table.create(spark, tmp_path / "t")
    df = telemetry(spark, 600)
    report = t.bulk_insert(df)
    assert report.rows_written == 600 and report.rows_inserted == 600
    assert report.files_created == len(report.files) >= 1
    assert report.bytes_written == sum(os.path.getsize(tmp_path / "t" / f.path) for f in report.files)
    got = snapshot(t.read())
    assert list(got.columns) == ALL_COLUMNS
    assert_same_rows(got, snapshot(df), DATA_COLUMNS)
    assert (got["_hoodie_commit_time"] == report.instant).all()
    assert (got["_hoodie_record_key"] == got["record_key"]).all()
    assert got["_hoodie_commit_seqno"].is_unique
    names = {f.path.rsplit("/", 1)[-1] for f in report.files}
    assert set(got["_hoodie_file_name"]) == names
    assert [s.name for s in report.steps] == ["validate", "start_instant", "write", "commit"]
    assert report.step("write").tasks >= 1


def test_on_disk_layout_is_a_hudi_v6_table(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    report = t.bulk_insert(telemetry(spark, 200))
    hoodie = os.listdir(tmp_path / "t" / ".hoodie")
    assert f"{report.instant}.commit" in hoodie and f"{report.instant}.commit.requested" in hoodie
    props = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    for line in ["hoodie.table.type=COPY_ON_WRITE", "hoodie.table.version=6", "hoodie.timeline.layout.version=1",
                 "hoodie.table.recordkey.fields=record_key", "hoodie.table.precombine.field=updated_at",
                 "hoodie.table.partition.fields=day"]:
        assert line in props
    meta = t.commit_metadata(report.instant)
    assert meta.operation_type == "BULK_INSERT" and '"type": "record"' in meta.schema
    assert {s.partition_path for s in meta.write_stats} == {"2024-01-15", "2024-01-16"}
    for f in report.files:
        base = BaseFile.parse(f.path)
        assert base.instant_time == report.instant and "_" not in base.file_id
        assert f.path.startswith(f.partition_path + "/")
        schema = pq.read_schema(tmp_path / "t" / f.path)
        assert schema.names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                    "_hoodie_partition_path", "_hoodie_file_name"]
        kv = pq.read_metadata(tmp_path / "t" / f.path).metadata
        assert kv[b"hoodie_min_record_key"].decode() == f.min_key
        # Hudi's filter under Hudi's key; SIMPLE (labformat's default) carries no type code, as Hudi writes it.
        assert kv[b"org.apache.hudi.bloomfilter"].startswith(b"/////wAAAB4BA")  # version -1, 30 hashes, Murmur
        assert b"hoodie_bloom_filter_type_code" not in kv and b"labformat_bloom_filter" not in kv


def test_hive_style_partition_folders(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day", options={"hive_style_partitioning": True})
    t.bulk_insert(telemetry(spark, 100))
    assert sorted(d for d in os.listdir(tmp_path / "t") if not d.startswith(".")) == ["day=2024-01-15", "day=2024-01-16"]
    got = snapshot(t.read())
    assert len(got) == 100 and set(got["day"]) == {"2024-01-15", "2024-01-16"}
    assert_same_rows(hudi_snapshot(tmp_path / "t"), got, DATA_COLUMNS)


def test_time_travel_reads_each_commit_as_it_was(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    first = t.bulk_insert(telemetry(spark, 300))
    second = t.bulk_insert(telemetry(spark, 200, start=300, prefix="2024011510"))
    assert [i.time for i in t.timeline()] == [first.instant, second.instant]
    assert t.read().count() == 500
    assert t.read(as_of=first.instant).count() == 300
    assert t.read(as_of=second.instant).count() == 500
    with pytest.raises(lf.InstantNotFoundError):
        t.read(as_of="20000101000000000")


def test_hudi_reader_returns_labformats_snapshot_latest_and_as_of(spark, tmp_path):
    """The independent reader (hudi-rs) sees the same keys and values, now and as of the first commit."""
    path = tmp_path / "t"
    t = lf.Table.create(spark, path, partition_field="day")
    first = t.bulk_insert(telemetry(spark, 400), {"bulk_insert_sort_mode": "GLOBAL_SORT"})
    t.bulk_insert(telemetry(spark, 250, start=400, prefix="2024011511"))
    assert_same_rows(hudi_snapshot(path), snapshot(t.read()), ALL_COLUMNS)
    old = hudi_snapshot(path, as_of=first.instant)
    assert len(old) == 400
    assert_same_rows(old, snapshot(t.read(as_of=first.instant)), ALL_COLUMNS)


def ranges_overlap(ranges):
    ordered = sorted(ranges)
    return any(b[0] <= a[1] for a, b in zip(ordered, ordered[1:]))


def test_global_sort_gives_disjoint_key_ranges_and_none_overlaps(spark, tmp_path):
    shuffled = telemetry(spark, 2000).repartition(4)
    for mode, expect_overlap in (("GLOBAL_SORT", False), ("NONE", True)):
        t = lf.Table.create(spark, tmp_path / mode)
        t.bulk_insert(shuffled, {"bulk_insert_sort_mode": mode, "bulk_insert_parallelism": 4})
        found = footers(tmp_path / mode, t.file_slices())
        assert len(found) >= 4
        assert ranges_overlap([(lo, hi) for lo, hi, _ in found]) is expect_overlap, (mode, found)
        assert sum(rows for _, _, rows in found) == 2000


def test_partition_sort_sorts_within_each_file(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t")
    t.bulk_insert(telemetry(spark, 1000).repartition(3), {"bulk_insert_sort_mode": "PARTITION_SORT"})
    for s in t.file_slices():
        keys = pq.read_table(tmp_path / "t" / s.path, columns=["_hoodie_record_key"]).column(0).to_pylist()
        assert keys == sorted(keys)


def test_partition_path_repartition_gives_one_file_per_table_partition(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    t.bulk_insert(telemetry(spark, 1000, partitions=4),
                  {"bulk_insert_sort_mode": "PARTITION_PATH_REPARTITION", "bulk_insert_parallelism": 4})
    per_partition = {}
    for s in t.file_slices():
        per_partition[s.partition_path] = per_partition.get(s.partition_path, 0) + 1
    assert per_partition == {"2024-01-15": 1, "2024-01-16": 1}


def test_partition_sort_on_a_partitioned_table_gives_each_task_whole_table_partitions(spark, tmp_path):
    """Hudi's row writer hash-partitions by partition path on a partitioned table: every input
    partition holds both days here, yet each day lands in one task, so one file, in key order."""
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    t.bulk_insert(telemetry(spark, 1000, partitions=4),
                  {"bulk_insert_sort_mode": "PARTITION_SORT", "bulk_insert_parallelism": 4})
    slices = t.file_slices()
    assert sorted(s.partition_path for s in slices) == ["2024-01-15", "2024-01-16"]
    for s in slices:
        keys = pq.read_table(tmp_path / "t" / s.path, columns=["_hoodie_record_key"]).column(0).to_pylist()
        assert keys == sorted(keys) and len(keys) == 500


def test_partition_path_repartition_without_partitions_coalesces_like_hudi(spark, tmp_path):
    """On a table without partitions every row has the same (empty) partition path: a repartition by
    it would put them all in one task. Hudi coalesces instead, into at most the parallelism."""
    t = lf.Table.create(spark, tmp_path / "t", partition_field=None)
    t.bulk_insert(telemetry(spark, 1200, partitions=6),
                  {"bulk_insert_sort_mode": "PARTITION_PATH_REPARTITION", "bulk_insert_parallelism": 3})
    assert len(t.file_slices()) == 3 and t.read().count() == 1200


def test_smaller_max_file_size_gives_more_smaller_files(spark, tmp_path):
    df = telemetry(spark, 6000, partitions=1)
    sizes = {}
    for limit in ("1MB", "48KB"):
        t = lf.Table.create(spark, tmp_path / limit)
        # A filter for 1,000 keys: Hudi's default 60,000 alone is ~420 KB of footer per file.
        report = t.bulk_insert(df, {"max_file_size": limit, "bloom_num_entries": 1000})
        sizes[limit] = report
    assert len(sizes["48KB"].files) > len(sizes["1MB"].files)
    assert max(f.size_bytes for f in sizes["48KB"].files) < 2 * 48 * 1024
    assert sum(f.rows for f in sizes["48KB"].files) == 6000


def test_report_to_pandas_lists_each_file(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    report = t.bulk_insert(telemetry(spark, 300))
    pdf = report.to_pandas()
    assert len(pdf) == len(report.files) and pdf["rows"].sum() == 300
    assert {"path", "min_key", "max_key", "size_bytes", "created"} <= set(pdf.columns)
    assert report.steps_to_pandas()["seconds"].ge(0).all()


def test_empty_input_commits_nothing(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t")
    report = t.bulk_insert(telemetry(spark, 10).limit(0))
    assert report.instant is None and report.rows_written == 0
    assert t.timeline() == [] and [f for f in os.listdir(tmp_path / "t") if not f.startswith(".")] == []
    # Only the lock's and heartbeats' folders (`.aux`, `.heartbeat`, empty) may be left: Hudi's layout has both.
    assert sorted(os.listdir(tmp_path / "t" / ".hoodie")) in (
        ["hoodie.properties", "hoodie.properties.backup"],
        [".aux", ".heartbeat", "hoodie.properties", "hoodie.properties.backup"])
    assert sorted(p.name for p in (tmp_path / "t" / ".hoodie").rglob("*") if p.is_file()) == [
        "hoodie.properties", "hoodie.properties.backup"]


# ---- bad input: clear errors, table unchanged ------------------------------------------------


@pytest.fixture
def loaded(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    t.bulk_insert(telemetry(spark, 100))
    return t, tmp_path / "t"


@pytest.mark.parametrize("bad_key", [None, "", "   "])
def test_null_or_empty_record_keys_are_rejected_and_the_table_unchanged(spark, loaded, bad_key):
    t, path = loaded
    before = tree(path)
    df = telemetry(spark, 50, start=100).withColumn(
        "record_key", F.when(F.col("signal_dbm") == 120, F.lit(bad_key)).otherwise(F.col("record_key")))
    with pytest.raises(lf.InvalidInputError, match="null or empty record keys"):
        t.bulk_insert(df)
    after = tree(path)
    new = set(after) - set(before)
    # The failed attempt leaves only its rollback record; data files and the table are as they were.
    assert all(name.startswith(".hoodie/") and ".rollback" in name for name in new), new
    assert {k: v for k, v in after.items() if k in before} == before
    assert t.read().count() == 100


@pytest.mark.parametrize("change,error,pattern", [
    (lambda df: df.drop("record_key"), lf.InvalidInputError, "lacks column"),
    (lambda df: df.drop("day"), lf.InvalidInputError, "lacks column"),
    (lambda df: df.withColumn("signal_dbm", F.col("signal_dbm").cast("string")), lf.SchemaMismatchError, "signal_dbm"),
    (lambda df: df.drop("battery_pct"), lf.SchemaMismatchError, "battery_pct"),  # dropped: refused unless reconciled
    (lambda df: df.withColumn("signal_dbm", F.col("signal_dbm").cast("boolean")), lf.SchemaMismatchError, "boolean"),
])
def test_inputs_that_do_not_fit_the_table_leave_it_unchanged(spark, loaded, change, error, pattern):
    t, path = loaded
    before = tree(path)
    with pytest.raises(error, match=pattern):
        t.bulk_insert(change(telemetry(spark, 10, start=500)))
    assert tree(path) == before


def test_bad_options_leave_the_table_unchanged(spark, loaded):
    t, path = loaded
    before = tree(path)
    with pytest.raises(lf.ConfigError, match="hoodie.bulkinsert.sort.mode"):
        t.bulk_insert(telemetry(spark, 10), {"hoodie.bulkinsert.sort.mod": "NONE"})
    assert tree(path) == before


def test_open_and_create_errors(spark, tmp_path):
    with pytest.raises(lf.TableNotFoundError):
        lf.Table.open(spark, tmp_path / "nothing")
    lf.Table.create(spark, tmp_path / "t")
    with pytest.raises(lf.TableExistsError):
        lf.Table.create(spark, tmp_path / "t")
    with pytest.raises(lf.InvalidInputError):
        lf.Table.create(spark, tmp_path / "u", record_key="")
    reopened = lf.Table.open(spark, tmp_path / "t")
    assert reopened.record_key == "record_key" and reopened.name == "t"


@pytest.mark.parametrize("text", ["hoodie.table.name=t\n", "garbage without equals\n",
                                  "hoodie.table.name=t\nhoodie.table.type=MERGE_ON_WRITE\nhoodie.table.version=6\n"
                                  "hoodie.timeline.layout.version=1\nhoodie.table.recordkey.fields=k\n"
                                  "hoodie.table.precombine.field=u\n"])
def test_corrupt_properties_raise_corrupt_table_error(spark, tmp_path, text):
    """A damaged hoodie.properties is read from Hudi's backup copy; with both damaged the table is corrupt."""
    lf.Table.create(spark, tmp_path / "t", partition_field="day")
    (tmp_path / "t" / ".hoodie" / "hoodie.properties").write_text(text)
    assert lf.Table.open(spark, tmp_path / "t").partition_field == "day"
    (tmp_path / "t" / ".hoodie" / "hoodie.properties.backup").write_text(text)
    with pytest.raises(lf.CorruptTableError, match="hoodie.properties.backup"):
        lf.Table.open(spark, tmp_path / "t")


def test_corrupt_commit_file_raises_corrupt_table_error(spark, loaded):
    t, path = loaded
    commit = next(p for p in os.listdir(path / ".hoodie") if p.endswith(".commit"))
    (path / ".hoodie" / commit).write_text("{truncated")
    with pytest.raises(lf.CorruptTableError, match="unreadable commit metadata"):
        lf.Table.open(t.spark, path).read()


def test_errors_share_one_base():
    for error in (lf.ConfigError, lf.InvalidInputError, lf.SchemaMismatchError, lf.TableNotFoundError,
                  lf.TableExistsError, lf.CorruptTableError, lf.InstantNotFoundError, lf.JavaNotFoundError):
        assert issubclass(error, lf.LabformatError)
