"""Spark tests of upsert and delete: reports, parallelism, file sizing, bad input."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import labformat as lf
from labformat.model.enums import Operation, StatsSource
from labformat.model.report import UPSERT_STEPS
from tests.helpers import telemetry
from tests.test_table import tree

pytestmark = pytest.mark.spark


@pytest.fixture
def loaded(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    t.bulk_insert(telemetry(spark, 400), {"bulk_insert_sort_mode": "GLOBAL_SORT"})
    return t, tmp_path / "t"


def changed(spark, start, n, battery):
    return telemetry(spark, n, start=start).withColumn("battery_pct", F.lit(battery)).withColumn(
        "updated_at", F.timestamp_seconds(F.lit(1800000000)))


def test_upsert_report_counts_and_steps(spark, loaded):
    t, _ = loaded
    batch = changed(spark, 350, 100, -1.0)  # 50 updates (350..399) and 50 inserts (400..449)
    report = t.upsert(batch, {"index_type": "BLOOM"})
    assert (report.rows_in, report.rows_updated, report.rows_inserted, report.rows_deleted) == (100, 50, 50, 0)
    assert [s.name for s in report.steps] == ["validate", "deduplicate", "latest_file_slices", "tag", "small_files",
                                              "record_size", "assign_inserts", "start_instant", "write", "commit"]
    assert tuple(s.name for s in report.steps) == UPSERT_STEPS  # the names charts and scripts order by
    assert report.step("write").tasks >= report.details.write_targets
    assert report.step("deduplicate").tasks > 0 and report.step("tag").tasks > 0
    assert report.funnel.false_positives is not None
    assert report.funnel.matched <= report.funnel.after_bloom <= report.funnel.after_range_pruning \
        <= report.funnel.files_in_snapshot
    assert report.details.lookup_source.kind is StatsSource.FOOTERS
    assert report.details.write_amplification > 1  # copy-on-write rewrites whole files
    rewritten = [f for f in report.files if not f.created]
    assert rewritten and all(f.prev_size_bytes > 0 and f.prev_min_key for f in rewritten)
    got = t.read()
    assert got.count() == 450 and got.filter(F.col("battery_pct") == -1.0).count() == 100
    # Carried-over rows keep the instant that wrote them; changed rows get the new one.
    instants = {r[0] for r in got.select("_hoodie_commit_time").distinct().collect()}
    assert report.instant in instants and len(instants) == 2


def test_in_batch_duplicates_newest_precombine_wins(spark, loaded):
    t, _ = loaded
    newer = changed(spark, 0, 10, 11.0)
    older = changed(spark, 0, 10, 22.0).withColumn("updated_at", F.timestamp_seconds(F.lit(1700000000)))
    report = t.upsert(older.unionByName(newer).unionByName(older))
    assert report.rows_in == 30 and report.rows_deduplicated == 20 and report.rows_updated == 10
    values = {r.battery_pct for r in t.read().filter(F.col("signal_dbm") < 10).select("battery_pct").collect()}
    assert values == {11.0}


@pytest.mark.parametrize("mode,parallelism,expected", [
    ("HUDI_0_13", 0, 3),  # the input's partition count
    ("HUDI_0_13", 2, 2),  # min(input partitions, parallelism)
    ("HUDI_0_13", 50, 3),
    ("LEGACY", 0, 200),  # Hudi < 0.13: a fixed 200
    ("LEGACY", 7, 7),
])
def test_deduplication_shuffle_parallelism(spark, loaded, mode, parallelism, expected):
    t, _ = loaded
    batch = changed(spark, 0, 30, 1.0).repartition(3)
    report = t.upsert(batch, {"upsert_parallelism_mode": mode, "upsert_parallelism": parallelism})
    assert report.details.shuffle_parallelism == expected
    # Spark really ran that many tasks for the shuffle's reduce side (plus the input's map side).
    assert report.step("deduplicate").tasks >= expected


def test_smaller_max_file_size_gives_more_write_tasks_and_smaller_files(spark, tmp_path):
    reports = {}
    for size in ("1MB", "6KB"):
        t = lf.Table.create(spark, tmp_path / size)
        t.bulk_insert(telemetry(spark, 300))
        reports[size] = t.upsert(telemetry(spark, 3000, start=300, prefix="2024011510"),
                                 {"max_file_size": size, "small_file_limit": "4KB"})
    big, small = reports["1MB"], reports["6KB"]
    assert small.step("write").tasks > big.step("write").tasks
    assert len(small.files) > len(big.files)
    assert max(f.size_bytes for f in small.files) < max(f.size_bytes for f in big.files)


def test_updates_never_split_a_file_group(spark, tmp_path):
    # Base files over max_file_size (the bloom filter and footer are not counted when a bulk
    # insert rolls over) are rewritten as one file each, day after day: only inserts make files.
    t = lf.Table.create(spark, tmp_path / "t")
    t.bulk_insert(telemetry(spark, 600), {"max_file_size": "6KB", "bulk_insert_sort_mode": "GLOBAL_SORT"})
    before = {s.file_id: s.size_bytes for s in t.file_slices()}
    assert len(before) > 1 and max(before.values()) > 6 * 1024
    for battery in (-1.0, -2.0):
        batch = changed(spark, 0, 600, battery).sample(fraction=0.2, seed=7)  # updates spread over every file
        report = t.upsert(batch, {"max_file_size": "6KB", "small_file_limit": 0})
        assert report.rows_inserted == 0 and report.files_created == 0
        assert {f.file_id for f in report.files} <= set(before)
    assert {s.file_id for s in t.file_slices()} == set(before)


def test_inserts_fill_small_files_first(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t")
    t.bulk_insert(telemetry(spark, 50))
    before = {s.file_id for s in t.file_slices()}
    report = t.upsert(telemetry(spark, 50, start=50, prefix="2024011510"), {"small_file_limit": "1MB"})
    assert report.details.small_files == len(before)
    assert report.files_created == 0 and {f.file_id for f in report.files} <= before
    assert t.read().count() == 100
    # Room for every insert: step 6 planned all 50 for the small files, and the files took them.
    assert report.details.small_file_inserts_planned == 50 == sum(f.inserts for f in report.files)


def test_step_6_plans_a_small_files_room_by_the_record_size_estimate(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t")
    t.bulk_insert(telemetry(spark, 40), {"bulk_insert_parallelism": 1})
    (small,) = t.file_slices()
    report = t.upsert(telemetry(spark, 3000, start=40, prefix="2024011510"),
                      {"small_file_limit": small.size_bytes + 1, "max_file_size": 3 * small.size_bytes})
    room = (3 * small.size_bytes - small.size_bytes) // report.details.record_size
    assert 0 < room < 3000 and report.details.small_file_inserts_planned == room
    (packed,) = [f for f in report.files if f.file_id == small.file_id]
    # The rows reach it by a hash weighted by the plan: about the room, rarely exactly.
    assert abs(packed.inserts - room) <= max(10, room // 4)


def test_delete_reports_only_keys_that_existed(spark, loaded):
    t, _ = loaded
    keys = telemetry(spark, 20, start=390).select("record_key", "day")  # 10 exist, 10 do not
    report = t.delete(keys)
    assert report.rows_deleted == 10 and t.read().count() == 390
    nothing = t.delete(telemetry(spark, 5, start=9000, prefix="2030010100").select("record_key", "day"))
    assert nothing.rows_deleted == 0 and nothing.instant is None


def test_deleting_every_row_of_a_file_group_leaves_it_empty(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "t")
    t.bulk_insert(telemetry(spark, 30))
    report = t.delete(telemetry(spark, 30).select("record_key"))
    assert report.rows_deleted == 30 and t.read().count() == 0
    assert all(f.rows == 0 for f in report.files)


def test_empty_batch_commits_nothing(spark, loaded):
    t, path = loaded
    before = tree(path)
    report = t.upsert(changed(spark, 0, 10, 1.0).limit(0))
    assert report.instant is None and report.rows_written == 0
    assert tree(path) == before


@pytest.mark.parametrize("change,error,pattern", [
    (lambda df: df.drop("updated_at"), lf.InvalidInputError, "updated_at"),
    (lambda df: df.withColumn("signal_dbm", F.col("signal_dbm").cast("string")), lf.SchemaMismatchError, "signal_dbm"),
    (lambda df: df.withColumn("record_key", F.when(F.col("signal_dbm") == 3, None).otherwise(F.col("record_key"))),
     lf.InvalidInputError, "null or empty record keys"),
])
def test_bad_upserts_leave_the_table_unchanged(spark, loaded, change, error, pattern):
    t, path = loaded
    before = tree(path)
    with pytest.raises(error, match=pattern):
        t.upsert(change(changed(spark, 0, 10, 1.0)))
    after = tree(path)
    assert {k: v for k, v in after.items() if k in before} == before
    assert all(k.startswith(".hoodie/") and ".rollback" in k for k in set(after) - set(before))
    assert t.read().count() == 400


def test_bucket_tables_cannot_switch_index(spark, tmp_path):
    t = lf.Table.create(spark, tmp_path / "b", options={"index_type": "BUCKET", "bucket_num": 2})
    t.bulk_insert(telemetry(spark, 100))
    assert len({s.file_id.split("-")[0] for s in t.file_slices()}) == 2  # laid out by bucket
    with pytest.raises(lf.ConfigError, match="BUCKET"):
        t.upsert(changed(spark, 0, 5, 1.0), {"index_type": "BLOOM"})
    plain = lf.Table.create(spark, tmp_path / "p")
    plain.bulk_insert(telemetry(spark, 10))
    with pytest.raises(lf.ConfigError, match="BUCKET"):
        plain.upsert(changed(spark, 0, 5, 1.0), {"index_type": "BUCKET"})
    assert plain.upsert(changed(spark, 0, 5, 1.0), {"index_type": "SIMPLE"}).rows_updated == 5


def test_steps_run_without_adaptive_execution_and_the_session_gets_its_settings_back(spark, loaded):
    t, _ = loaded
    conf = spark.conf
    before = {key: conf.get(key, None) for key in ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions")}
    report = t.upsert(changed(spark, 350, 100, -2.0))
    # One job per step: adaptive execution would submit each query stage as a job of its own.
    assert report.step("deduplicate").jobs == report.step("tag").jobs == 1
    assert {key: conf.get(key, None) for key in before} == before
    with pytest.raises(lf.InvalidInputError):  # a failing task: the settings come back all the same
        t.upsert(changed(spark, 0, 10, 1.0).withColumn(
            "record_key", F.when(F.col("signal_dbm") == 3, None).otherwise(F.col("record_key"))))
    assert {key: conf.get(key, None) for key in before} == before


# ---- hoodie.combine.before.upsert --------------------------------------------------------------

def test_combine_before_upsert_false_on_a_unique_batch_writes_what_deduplication_would(spark, loaded):
    t, _ = loaded
    report = t.upsert(changed(spark, 350, 100, -1.0), {"hoodie.combine.before.upsert": "false"})
    assert (report.rows_in, report.rows_deduplicated, report.rows_updated, report.rows_inserted) == (100, 0, 50, 50)
    assert t.read().count() == 450
    assert t.read().filter(F.col("battery_pct") == -1.0).count() == 100


def test_combine_before_upsert_false_writes_every_duplicate(spark, loaded):
    t, _ = loaded
    twice = changed(spark, 0, 2, 5.0).unionByName(changed(spark, 1000, 1, 6.0))  # 2 updates, 1 insert
    batch = twice.unionByName(twice)
    kept = t.upsert(batch, {"combine_before_upsert": False})
    # As Hudi warns: without combining, a key twice in the batch is stored twice.
    assert (kept.rows_in, kept.rows_deduplicated, kept.rows_updated, kept.rows_inserted) == (6, 0, 4, 2)
    rows = t.read()
    assert rows.count() == 400 - 2 + 6
    per_key = {r.record_key: r["count"] for r in rows.groupBy("record_key").count().filter("count > 1").collect()}
    assert per_key == {"202401150900_drone0000": 2, "202401150900_drone0001": 2, "202401150910_drone0000": 2}


def test_combine_before_upsert_true_keeps_one_row_per_key(spark, loaded):
    t, _ = loaded
    twice = changed(spark, 0, 2, 5.0).unionByName(changed(spark, 1000, 1, 6.0))
    report = t.upsert(twice.unionByName(twice))  # the default: hoodie.combine.before.upsert=true
    assert (report.rows_in, report.rows_deduplicated, report.rows_updated, report.rows_inserted) == (6, 3, 2, 1)
    assert t.read().count() == 401 and t.read().select("record_key").distinct().count() == 401


def test_combine_before_upsert_false_still_refuses_null_precombine_values(spark, loaded):
    t, path = loaded
    before = tree(path)
    batch = changed(spark, 0, 5, 1.0).withColumn("updated_at", F.lit(None).cast("timestamp"))
    with pytest.raises(lf.InvalidInputError, match="null precombine"):
        t.upsert(batch, {"combine_before_upsert": False})
    assert {k: v for k, v in tree(path).items() if k in before} == before


# ---- Spark jobs per step ---------------------------------------------------------------------------

def _jobs(report) -> dict[str, int]:
    return {s.name: s.jobs for s in report.steps if s.jobs}


def test_spark_jobs_per_upsert_step_with_a_partition_field(spark, loaded):
    t, _ = loaded
    # BLOOM: its matches join the records by a shuffle in the write's job, never a broadcast job.
    assert _jobs(t.upsert(changed(spark, 350, 100, -1.0), {"index_type": "BLOOM"})) == \
        {"deduplicate": 1, "tag": 1, "write": 1}
    # SIMPLE's tag: the profile only. Its keys are read by labformat's own tasks (no job inferring the files'
    # schema) and joined by a shuffle in the write's job (Spark cannot size a Python scan to broadcast it).
    assert _jobs(t.upsert(changed(spark, 350, 100, -2.0), {"index_type": "SIMPLE"})) == \
        {"deduplicate": 1, "tag": 1, "write": 1}


def test_without_a_partition_field_bloom_counts_step_1_in_the_tag_job(spark, tmp_path):
    from labformat.spark import SparkUI

    t = lf.Table.create(spark, tmp_path / "flat")
    t.bulk_insert(telemetry(spark, 400), {"bulk_insert_sort_mode": "GLOBAL_SORT"})
    older = changed(spark, 350, 10, 9.25).withColumn("updated_at", F.timestamp_seconds(F.lit(1700000000)))
    report = t.upsert(changed(spark, 350, 100, -1.0).unionByName(older), {"upsert_parallelism": 3})
    assert _jobs(report) == {"tag": 1, "write": 1}
    # Step 1's counts come from the tag step's job: 10 stale duplicates dropped, the newest won.
    assert (report.rows_in, report.rows_deduplicated, report.rows_updated, report.rows_inserted) == (110, 10, 50, 50)
    assert t.read().filter(F.col("battery_pct") == 9.25).count() == 0 and t.read().count() == 450
    dedupe, tag = report.step("deduplicate"), report.step("tag")
    assert dedupe.tasks == 0 and dedupe.group == tag.group is not None
    timeline = SparkUI(spark).task_timeline(dedupe.group)
    per_stage = timeline.groupby("stage_label").size().to_dict()
    assert per_stage["tag: keep newest per key, range pruning"] == report.details.shuffle_parallelism == 3
    assert {"tag: read input", "tag: count per partition path", "tag: bloom + exact check, counts"} <= set(per_stage)
    assert _jobs(t.upsert(changed(spark, 0, 5, 2.0), {"combine_before_upsert": False})) == {"tag": 1, "write": 1}


def test_task_keys_follow_sparks_hash_partitioner(spark):
    from labformat.write.routing import spark_hash_long, task_keys

    values = [0, 1, -1, 42, 2**31, -(2**63), 2**63 - 1, 123456789012]
    hashed = spark.createDataFrame([(v,) for v in values], "v long").select(F.hash("v").alias("h")).collect()
    assert [r.h for r in hashed] == [spark_hash_long(v) for v in values]
    for n in (1, 2, 7, 33):
        keys = task_keys(n)
        rows = (spark.createDataFrame([(k,) for k in keys], "k long").repartition(n, "k")
                .select("k", F.spark_partition_id().alias("p")).collect())
        assert [dict((r.k, r.p) for r in rows)[k] for k in keys] == list(range(n))


def test_deduplication_keeps_columns_named_like_sql_keywords(spark, tmp_path):
    # Step 1 builds its newest-record struct as SQL text: columns named `order`, `select` or `from`
    # (valid Avro names) must survive it, in their order.
    base = telemetry(spark, 20).withColumn("order", F.lit(1.0)).withColumn("select", F.lit("a")) \
        .withColumn("from", F.lit(2))
    t = lf.Table.create(spark, tmp_path / "t", partition_field="day")
    t.bulk_insert(base)
    newer = base.limit(5).withColumn("updated_at", F.timestamp_seconds(F.lit(1800000000))) \
        .withColumn("select", F.lit("b"))
    older = base.limit(5).withColumn("select", F.lit("c"))
    report = t.upsert(older.unionByName(newer))
    assert report.rows_deduplicated == 5 and report.rows_updated == 5
    got = t.read()
    assert [c for c in got.columns if not c.startswith("_hoodie")] == base.columns
    assert sorted(r[0] for r in got.groupBy("select").count().collect()) == ["a", "b"]
    assert got.filter(F.col("select") == "b").count() == 5
    # Step 1's own output keeps the input's column order (its struct puts the precombine field first).
    from labformat import config as C
    from labformat.write.dedupe import deduplicate

    deduped, _ = deduplicate(t.context(), newer, C.write_options(), Operation.UPSERT, 1)
    assert [c for c in deduped.columns if not c.startswith("_lf_")] == newer.columns
