"""Metadata table and query skipping: the funnel on drone data, fallbacks, rebuild, skipping's soundness, and the scan plan."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

import labformat as lf
from labformat.model.enums import StatsSource
from labformat.spark.compat import NOT_ON_CONNECT, is_connect
from labformat import datasets
from labformat.lab.daily import run_daily_upserts
from tests.helpers import telemetry

pytestmark = pytest.mark.spark

OPTIONS = {"max_file_size": "24KB", "small_file_limit": 0}


@pytest.fixture(scope="module")
def drone_table(spark, tmp_path_factory):
    """tiny drone data after 2 upsert days; column stats on every column except temperature_c."""
    path = tmp_path_factory.mktemp("query") / "t"
    spec = datasets.spec("tiny", batch_days=2)
    run_daily_upserts(spark, spec, path, "BLOOM", OPTIONS)
    return lf.Table.open(spark, path)


def files_holding(table, condition) -> set[str]:
    """The truth: base files that hold at least one row matching the condition."""
    rows = table.read().filter(condition).select("_hoodie_file_name").distinct().collect()
    return {r[0] for r in rows}


def names(report) -> set[str]:
    return {p.rsplit("/", 1)[-1] for p in report.files_read}


def test_one_hour_window_reads_exactly_the_files_of_that_hour(drone_table):
    window = "ts >= '2024-01-16 10:00:00' AND ts < '2024-01-16 11:00:00'"
    df, report = drone_table.query(window)
    assert report.stats_source.kind is StatsSource.METADATA_TABLE
    assert names(report) == files_holding(drone_table, window)
    assert report.funnel.files_read < report.funnel.files_in_snapshot
    assert report.rows_returned == df.count() == drone_table.read().filter(window).count() > 0
    _, off = drone_table.query(window, options={"hoodie.enable.data.skipping": "false"})
    assert off.funnel.files_read == off.funnel.files_in_snapshot > report.funnel.files_read
    if is_connect(drone_table.spark):  # no accumulators to count row groups with
        assert report.details.row_groups_read == off.details.row_groups_read == NOT_ON_CONNECT
    else:
        # One row group a file here: a file the stats kept has its one row group read.
        assert report.details.row_groups_read == report.details.row_groups_in_files_read >= report.funnel.files_read
        # With data skipping off every file is opened, and the tasks still skip the row groups their
        # statistics rule out: they read only the groups of the files the skipping would have kept.
        assert off.details.row_groups_read == report.details.row_groups_read < off.details.row_groups_in_files_read
    # The whole query's time is its planning and its scan, both measured.
    assert report.seconds == report.planning_seconds + report.execution_seconds > report.planning_seconds > 0


def test_point_lookup_by_record_key_reads_one_file(drone_table):
    key = drone_table.read().select("record_key").orderBy("record_key").limit(1).collect()[0][0]
    df, report = drone_table.query(F.col("record_key") == key)
    assert report.funnel.files_read == 1 and report.rows_returned == 1
    assert str(report.bloom_source).startswith("footers")  # bloom filters are not in this table's metadata


def test_a_filter_on_a_column_without_stats_reads_every_file(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", options={"column_stats_columns": "record_key,ts"})
    spec = datasets.spec("tiny", batch_days=1)
    t.bulk_insert(datasets.history(spark, spec), {"max_file_size": "24KB", "bulk_insert_sort_mode": "GLOBAL_SORT"})
    _, report = t.query("temperature_c > 1000")
    assert report.funnel.files_read == report.funnel.files_in_snapshot > 1
    assert report.rows_returned == 0
    _, by_ts = t.query("ts < '2024-01-15 01:00:00'")
    assert by_ts.funnel.files_read < by_ts.funnel.files_in_snapshot


def test_skipping_off_reads_everything_with_the_same_rows(drone_table):
    condition = "drone_id = 'drone0001' AND battery_pct < 40"
    on_df, on = drone_table.query(condition)
    off_df, off = drone_table.query(condition, options={"data_skipping": False})
    assert off.funnel.files_read == off.funnel.files_in_snapshot
    assert on.rows_returned == off.rows_returned
    assert sorted(r.record_key for r in on_df.collect()) == sorted(r.record_key for r in off_df.collect())


def test_missing_or_corrupt_metadata_falls_back_to_footers_until_rebuilt(spark, tmp_path, caplog, monkeypatch):
    t = lf.Table.create(spark, tmp_path / "t")
    spec = datasets.spec("tiny", batch_days=1)
    report = t.bulk_insert(datasets.history(spark, spec), {"max_file_size": "24KB", "bulk_insert_sort_mode": "GLOBAL_SORT"})
    stats_file = tmp_path / "t" / ".hoodie" / "metadata" / "column_stats" / f"{report.instant}.parquet"
    window = "ts >= '2024-01-15 10:00:00' AND ts < '2024-01-15 11:00:00'"
    _, good = t.query(window)
    assert good.stats_source.kind is StatsSource.METADATA_TABLE

    stats_file.write_bytes(b"not parquet")
    with caplog.at_level("WARNING", logger="labformat.metadata.table"):
        _, corrupt = t.query(window)
    assert str(corrupt.stats_source).startswith("footers (column stats unreadable")
    assert names(corrupt) == names(good) and corrupt.rows_returned == good.rows_returned
    assert "column stats are unreadable" in caplog.text and "using the base files' footers" in caplog.text
    # A damaged file falls back; a bug of ours does not hide behind the fallback.
    with monkeypatch.context() as patched:
        patched.setattr("labformat.metadata.table._read_table", lambda *_: None.missing)
        with pytest.raises(AttributeError):
            t.query(window)

    # A write on top of corrupt metadata still commits; its snapshot lacks the old files' stats.
    first_keys = datasets.history(spark, spec).orderBy("record_key").limit(5).withColumn("battery_pct", F.lit(1.0))
    upsert = t.upsert(first_keys, {"max_file_size": "24KB"})
    assert upsert.instant is not None and upsert.files_rewritten == 1 < len(t.file_slices())
    _, after_write = t.query(window)
    assert str(after_write.stats_source).startswith("footers (column stats are stale")
    assert after_write.rows_returned == t.read().filter(window).count()

    os.remove(stats_file)
    os.remove(stats_file.parent / f"{upsert.instant}.parquet")
    _, missing = t.query(window)
    assert str(missing.stats_source).startswith("footers (no column stats")

    rebuilt = t.rebuild_metadata()
    assert rebuilt.instant is None  # a rebuild changes no snapshot: no instant of its own
    assert (rebuilt.details.of_instant, rebuilt.details.files) == (upsert.instant, len(t.file_slices()))
    _, again = t.query(window)
    assert again.stats_source.kind is StatsSource.METADATA_TABLE and names(again) == names(after_write)


def test_bloom_index_tags_the_same_from_footers_and_metadata(spark, tmp_path):
    spec = datasets.spec("tiny", batch_days=1)
    batch = datasets.batch(spark, spec, 1)
    first = lf.Table.create(spark, tmp_path / "False", options={"bloom_filter_enable": True})
    first.bulk_insert(datasets.history(spark, spec), {"max_file_size": "24KB", "bulk_insert_sort_mode": "GLOBAL_SORT"})
    # One bulk insert, copied: GLOBAL_SORT samples its range boundaries, so two would lay files out differently.
    shutil.copytree(tmp_path / "False", tmp_path / "True")
    reports = {}
    for use in (False, True):
        t = lf.Table.open(spark, tmp_path / str(use))
        reports[use] = (t.upsert(batch, {**OPTIONS, "bloom_use_metadata": use}), t)
    (footer, t_footer), (meta, t_meta) = reports[False], reports[True]
    assert footer.details.lookup_source.kind is StatsSource.FOOTERS
    assert meta.details.lookup_source.kind is StatsSource.METADATA_TABLE
    # Every count the same, whichever source, but what the lookup opened: footers or metadata-table files.
    opened = {"footers_read": None, "metadata_files_read": None}
    assert replace(footer.funnel, **opened) == replace(meta.funnel, **opened)
    assert footer.funnel.footers_read == len(t_footer.file_slices(as_of=footer.instant)) - footer.files_created \
        + footer.funnel.after_range_pruning and footer.funnel.metadata_files_read == 0
    assert meta.funnel.footers_read == 0 and meta.funnel.metadata_files_read == 2
    assert (footer.rows_updated, footer.rows_inserted) == (meta.rows_updated, meta.rows_inserted)
    cols = ["record_key", "battery_pct", "updated_at"]
    assert t_footer.read().select(cols).exceptAll(t_meta.read().select(cols)).count() == 0


def test_uncommitted_metadata_is_never_read(spark, tmp_path):
    """Metadata of an instant that is not completed (a crashed writer's) is ignored by readers."""
    t = lf.Table.create(spark, tmp_path / "t")
    spec = datasets.spec("tiny", batch_days=1)
    done = t.bulk_insert(datasets.history(spark, spec), {"max_file_size": "24KB"})
    stats_dir = tmp_path / "t" / ".hoodie" / "metadata" / "column_stats"
    fake = f"{int(done.instant) + 5}"  # a later instant with no completed commit
    shutil.copy(stats_dir / f"{done.instant}.parquet", stats_dir / f"{fake}.parquet")
    _, report = t.query("battery_pct > 50")
    assert report.stats_source.kind is StatsSource.METADATA_TABLE  # read the completed instant's, not the orphan


# ---- soundness: skipping never changes the answer -------------------------------------------

_SCHEMA = "record_key string, x long, y double, s string, updated_at timestamp"


@pytest.fixture(scope="module")
def random_table(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("sound") / "t"
    t = lf.Table.create(spark, path)
    df = spark.range(0, 600, numPartitions=3).select(
        F.format_string("k%04d", "id").alias("record_key"),
        F.when(F.col("id") % 17 == 0, None).otherwise((F.col("id") * 7) % 100).alias("x"),
        F.when(F.col("id") % 23 == 0, float("nan")).otherwise(F.col("id") / 10.0).alias("y"),
        F.when(F.col("id") % 11 == 0, None).otherwise(F.format_string("s%02d", F.col("id") % 40)).alias("s"),
        F.timestamp_seconds(F.lit(1705300000) + F.col("id") * 60).alias("updated_at"),
    )
    t.bulk_insert(df, {"max_file_size": "6KB", "bulk_insert_sort_mode": "GLOBAL_SORT"})
    return t


comparison = st.one_of(
    st.tuples(st.just("x"), st.sampled_from(["=", "<", "<=", ">", ">=", "<>"]), st.integers(-5, 105).map(str)),
    st.tuples(st.just("y"), st.sampled_from(["=", "<", ">="]), st.floats(-1, 70, allow_nan=False).map(lambda v: f"{v:.1f}")),
    st.tuples(st.just("s"), st.sampled_from(["=", "<", ">"]), st.integers(0, 45).map(lambda i: f"'s{i:02d}'")),
    st.tuples(st.just("record_key"), st.sampled_from(["=", "<", ">="]), st.integers(0, 650).map(lambda i: f"'k{i:04d}'")),
    st.tuples(st.just("updated_at"), st.sampled_from(["<", ">="]),
              st.integers(0, 700).map(lambda m: f"timestamp_seconds({1705300000 + m * 60})")),
).map(lambda t: " ".join(t))
atoms = st.one_of(comparison, st.sampled_from(["x IS NULL", "s IS NOT NULL", "x IN (3, 50, 99)",
                                               "record_key IN ('k0005', 'k0300')", "y BETWEEN 5 AND 9"]))
predicates = st.recursive(atoms, lambda inner: st.one_of(
    st.tuples(inner, inner).map(lambda p: f"({p[0]}) AND ({p[1]})"),
    st.tuples(inner, inner).map(lambda p: f"({p[0]}) OR ({p[1]})"),
    inner.map(lambda p: f"NOT ({p})"),
), max_leaves=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(condition=predicates)
def test_skipping_never_drops_a_file_holding_a_matching_row(random_table, condition):
    _, on = random_table.query(condition)
    _, off = random_table.query(condition, options={"data_skipping": False})
    assert on.rows_returned == off.rows_returned
    assert files_holding(random_table, condition) <= names(on)


# ---- the scan plan: named pruning stages, and a DataFrame without the measuring scan -------------


@contextlib.contextmanager
def jobs_run(spark):
    """The ids of the Spark jobs run on this thread inside the block, as a list filled as they run."""
    sc = spark.sparkContext
    group = f"labformat-test-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "jobs run inside one test block")
    try:
        yield lambda: sc.statusTracker().getJobIdsForGroup(group)
    finally:
        sc._jsc.clearJobGroup()


@pytest.mark.classic_only
def test_scan_to_dataframe_runs_no_spark_job_until_the_caller_acts(spark, drone_table):
    window = "ts >= '2024-01-16 10:00:00' AND ts < '2024-01-16 11:00:00'"
    with jobs_run(spark) as job_ids:
        plan = drone_table.scan(window)
        df = plan.to_dataframe()
        assert job_ids() == []
        assert plan.to_dataframe() is df  # what measure() scans is what the caller got
        rows = df.count()
        assert job_ids() != []  # the tracker does see this thread's jobs
    assert rows == drone_table.read().filter(window).count() > 0
    assert plan.funnel.files_read < plan.funnel.files_in_snapshot


def test_each_stage_reports_what_it_kept_and_from_which_source(drone_table):
    """Not partitioned; column stats in the metadata table; bloom filters only in the footers."""
    key = drone_table.read().select("record_key").orderBy("record_key").limit(1).collect()[0][0]
    plan = drone_table.scan(F.col("record_key") == key)
    partition, bucket, column_stats, bloom = plan.stages
    assert [s.name for s in plan.stages] == ["partition_pruning", "bucket_pruning", "column_stats", "bloom"]
    assert str(partition.source) == "not used (the table is not partitioned)" and partition.kept == plan.snapshot
    assert str(bucket.source) == "not used (a BLOOM table has no buckets)" and bucket.kept == partition.kept
    assert column_stats.source.kind is StatsSource.METADATA_TABLE
    assert set(column_stats.kept) <= set(partition.kept) and set(bloom.kept) <= set(column_stats.kept)
    assert str(bloom.source).startswith("footers (") and len(bloom.kept) == 1
    assert plan.file_slices == bloom.kept
    assert {s.base_file.name for s in bloom.kept} == files_holding(drone_table, F.col("record_key") == key)
    assert plan.funnel.as_dict() == {"files_in_snapshot": len(plan.snapshot), "after_partition_pruning": len(partition.kept),
                           "after_bucket_pruning": len(partition.kept), "after_column_stats": len(column_stats.kept),
                           "after_bloom": 1, "files_read": 1}
    _, queried = drone_table.query(F.col("record_key") == key)
    for r in (plan.measure(), plan.measure(), queried):  # a plan can be measured again
        assert (r.funnel, r.stats_source, r.bloom_source) == (plan.funnel, column_stats.source, bloom.source)
        assert r.files_read == tuple(s.path for s in plan.file_slices) and r.rows_returned == 1


def test_partition_pruning_reads_partition_paths_and_skipping_off_turns_every_stage_off(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    t.bulk_insert(telemetry(spark, 400), {"max_file_size": "8KB"})
    plan = t.scan("day = '2024-01-15' AND signal_dbm < 100")
    partition, _, column_stats, bloom = plan.stages
    assert str(partition.source) == "partition paths"
    assert {s.partition_path for s in partition.kept} == {"2024-01-15"} < {s.partition_path for s in plan.snapshot}
    assert column_stats.source.kind is StatsSource.METADATA_TABLE and 0 < len(column_stats.kept) < len(partition.kept)
    assert str(bloom.source) == "not used (no record-key equality in the condition)" and bloom.kept == column_stats.kept
    assert plan.to_dataframe().count() == t.read().filter("day = '2024-01-15' AND signal_dbm < 100").count() == 50

    off = t.scan("day = '2024-01-15'", options={"data_skipping": False})
    assert [(s.kept, str(s.source)) for s in off.stages] == [(off.snapshot, "off (data skipping disabled)")] * 4


@pytest.mark.classic_only  # the hint is the classic analyzer's (Connect reports the column its own way)
def test_a_condition_on_another_dataframes_column_is_refused_with_the_hint(spark, drone_table):
    """Spark's error class (MISSING_ATTRIBUTES), not its message's words, tells labformat which hint to give."""
    other = spark.range(1).withColumn("battery_pct", F.lit(1.0))
    with pytest.raises(lf.InvalidInputError, match=r"df\['x'\] is bound to the DataFrame df"):
        drone_table.query(other["battery_pct"] > 0)
