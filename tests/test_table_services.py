"""Table services: cleaning (`clean`) and clustering (`replacecommit`), each checked against labformat's own read and hudi-rs's.

Each table is tiny and its history is in the test's docstring: W1 is the bulk insert, W2... the
writes after it; X and Y are the two file groups of a one-file-per-day table.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import labformat as lf
from labformat.model.enums import LayoutStrategy, Operation, StatsSource
from labformat.schema import RECORD_KEY
from labformat import config as C
from labformat.errors import CleanedInstantError, ConfigError, InstantNotFoundError, WriteConflictError
from labformat.model.instant import Action
from labformat.write import clean as _clean
from labformat.write import clustering as _clustering
from labformat.write.operation import execute
from labformat.write.upsert import Upsert
from labformat.write.transaction import WriteTransaction
from tests.helpers import kill_points, snapshot, telemetry, tree
from tests.test_merge_on_read import MOR, assert_agrees_with_hudi, corrections, crash, hudi_read, values

pytestmark = pytest.mark.spark
# Every base file of these tables is small (a few KB of rows beside a bloom filter of ~320 KB): cluster
# them all, into one file per partition.
CLUSTER_ALL = {"clustering_small_file_limit": "64MB", "clustering_target_file_max_bytes": "64MB"}


def base_files(path) -> list:
    """The table's base files (the metadata table's parquet files under .hoodie are not)."""
    return [p for p in path.rglob("*.parquet") if ".hoodie" not in p.relative_to(path).parts]


def key_of_day(t: lf.Table, day: str, n: int = 0) -> str:
    pdf = snapshot(t.read())
    return sorted(pdf[pdf["day"] == day]["record_key"])[n]


def four_writes(spark, t: lf.Table) -> tuple[list[str], str, str]:
    """W1 bulk insert (X: day 15, Y: day 16), W2 and W3 update a key of X, W4 one of Y."""
    instants = [t.bulk_insert(telemetry(spark, 40, partitions=1)).instant]
    x_key, y_key = key_of_day(t, "2024-01-15"), key_of_day(t, "2024-01-16")
    for n, key in enumerate([x_key, x_key, y_key]):
        instants.append(t.upsert(corrections(spark, [key], 10.0 + n, seconds=10_000 + n)).instant)
    return instants, x_key, y_key


# ---- cleaning -----------------------------------------------------------------------------------

def test_clean_keeps_the_slices_of_the_retained_commits_and_the_last_before_them(spark, tmp_path):
    """COW W1-W4, clean retaining 2 (earliestCommitToRetain W3): X's W1 slice goes; X's W2 slice (the last
    before W3) and Y's W1 slice stay, so W2's snapshot still reads, W1's is cleaned. A second clean finds
    nothing, bad options change nothing; retaining 1 (earliestCommitToRetain W4) then deletes X's W2 slice,
    and Y's W1 slice, Y's last before W4, stays for W3's snapshot."""
    path = tmp_path / "cow"
    t = lf.Table.create(spark, path, partition_field="day")
    (w1, w2, w3, w4), x_key, y_key = four_writes(spark, t)
    expected = values(snapshot(t.read()))
    as_of = {w: values(snapshot(t.read(as_of=w))) for w in (w2, w3)}
    all_files = {p.relative_to(path).as_posix(): p.stat().st_size for p in base_files(path)}
    assert len(all_files) == 5
    report = t.clean({"cleaner_commits_retained": 2})
    gone = sorted(f for f in all_files if not (path / f).exists())
    assert len(gone) == 1 and gone[0].startswith("2024-01-15/") and w1 in gone[0]  # X's slice of W1
    assert report.details.files_deleted == 1 and report.details.file_slices_deleted == 1
    assert report.details.bytes_freed == sum(all_files[f] for f in gone)
    assert report.details.earliest_commit_to_retain == w3 and report.seconds > 0
    assert report.details.earliest_readable_instant == w2
    # Hudi's three timeline files; the plan names the files, the completed clean the deleted ones.
    for suffix in ("clean.requested", "clean.inflight", "clean"):
        assert (path / f".hoodie/{report.instant}.{suffix}").exists()
    plan = json.loads((path / f".hoodie/{report.instant}.clean.requested").read_text())
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["earliestInstantToRetain"]["timestamp"] == w3
    planned = [e["filePath"] for entries in plan["filePathsToBeDeletedPerPartition"].values() for e in entries]
    assert sorted(p.rsplit("/", 1)[-1] for p in planned) == sorted(f.rsplit("/", 1)[-1] for f in gone)
    body = json.loads((path / f".hoodie/{report.instant}.clean").read_text())
    assert body["totalFilesDeleted"] == 1 and body["earliestCommitToRetain"] == w3
    assert [i.action.value for i in t.timeline()][-1] == "clean"
    # The latest snapshot, the retained one and the one just before it read as before, through both readers.
    assert_agrees_with_hudi(t, path, expected)
    assert_agrees_with_hudi(t, path, as_of[w3], as_of=w3)
    assert_agrees_with_hudi(t, path, as_of[w2], as_of=w2)
    with pytest.raises(CleanedInstantError, match=f"{w1}.*clean {report.instant}.*{w2}"):
        t.read(as_of=w1)
    with pytest.raises(InstantNotFoundError):  # CleanedInstantError is one
        t.file_slices(as_of=w1)
    assert t.clean({"cleaner_commits_retained": 2}).instant is None
    # Bad options: a clear ConfigError, the table exactly as it was.
    before = tree(path)
    with pytest.raises(ConfigError, match="cleaner.commits.retained"):
        t.clean({"hoodie.cleaner.commits.retained": 0})
    with pytest.raises(ConfigError, match="KEEP_LATEST_COMMITS"):
        t.clean({"cleaner_policy": "KEEP_NOTHING"})
    assert tree(path) == before
    last = t.clean({"hoodie.cleaner.commits.retained": "1"})
    assert last.details.files_deleted == 1 and last.details.earliest_readable_instant == w3
    assert sorted(p.name.rsplit("_", 1)[-1] for p in base_files(path)) == sorted(f"{w}.parquet" for w in (w1, w3, w4))
    with pytest.raises(CleanedInstantError):
        t.read(as_of=w2)
    assert_agrees_with_hudi(t, path, as_of[w3], as_of=w3)
    assert_agrees_with_hudi(t, path, expected)
    assert_agrees_with_hudi(t, path, expected, as_of=w4)


def test_keep_latest_commits_spares_the_last_slice_before_the_retained_commits_and_groups_replaced_at_them(
        spark, tmp_path):
    """COW W1 bulk insert (8 small files a day: groups A* on day 15, B* on day 16), R1 clusters day 15 into
    A', W2 updates A', R2 clusters day 16 into B', W3 updates A', W4 updates B'. Clean retaining 3
    (earliestCommitToRetain R2): A* (replaced at R1, before it) go and A''s R1 slice, while B* (replaced at
    R2 itself) and A''s W2 slice stay: W2's snapshot reads them. Clean retaining 2 (earliestCommitToRetain
    W3): B* go now, and A''s W2 slice, the last before W3, stays for R2's snapshot. Hudi's CleanPlanner
    keeps the same; both readers agree on every snapshot left readable."""
    path = tmp_path / "cow"
    t = lf.Table.create(spark, path, partition_field="day")
    w1 = t.bulk_insert(telemetry(spark, 40, partitions=8)).instant
    a_star = {s.file_id for s in t.file_slices() if s.partition_path == "2024-01-15"}
    b_star = {s.file_id for s in t.file_slices() if s.partition_path == "2024-01-16"}
    assert len(a_star) == len(b_star) == 8

    def one_day(day):
        return {**CLUSTER_ALL, "clustering_partitions": day}

    r1 = t.cluster(one_day("2024-01-15")).instant
    w2 = t.upsert(corrections(spark, [key_of_day(t, "2024-01-15", 1)], 20.0)).instant
    r2 = t.cluster(one_day("2024-01-16")).instant
    w3 = t.upsert(corrections(spark, [key_of_day(t, "2024-01-15", 2)], 30.0, seconds=10_001)).instant
    w4 = t.upsert(corrections(spark, [key_of_day(t, "2024-01-16", 3)], 40.0, seconds=10_002)).instant
    [a_new] = [s.file_id for s in t.file_slices() if s.partition_path == "2024-01-15"]
    [b_new] = [s.file_id for s in t.file_slices() if s.partition_path == "2024-01-16"]
    as_of = {w: values(snapshot(t.read(as_of=w))) for w in (w2, r2, w3, w4)}

    def on_disk() -> set[tuple[str, str]]:  # (file id, instant) of each base file left
        return {(p.name.split("_")[0], p.stem.rsplit("_", 1)[-1]) for p in base_files(path)}

    everything = on_disk()
    assert len(everything) == 16 + 3 + 2  # A*, B*; A' at R1, W2, W3; B' at R2, W4
    first = t.clean({"cleaner_commits_retained": 3})
    assert everything - on_disk() == {(f, w1) for f in a_star} | {(a_new, r1)}
    assert first.details.earliest_commit_to_retain == r2 and first.details.earliest_readable_instant == w2
    assert first.details.replaced_file_groups_deleted == 8 and first.details.files_deleted == 9
    for w in (w2, r2, w3, w4):
        assert_agrees_with_hudi(t, path, as_of[w], as_of=w)
    with pytest.raises(CleanedInstantError):
        t.read(as_of=r1)
    second = t.clean({"cleaner_commits_retained": 2})
    assert everything - on_disk() == {(f, w1) for f in a_star | b_star} | {(a_new, r1)}
    assert (a_new, w2) in on_disk() and (b_new, r2) in on_disk()
    assert second.details.earliest_commit_to_retain == w3 and second.details.earliest_readable_instant == r2
    assert second.details.replaced_file_groups_deleted == 8 and second.details.files_deleted == 8
    for w in (r2, w3, w4):
        assert_agrees_with_hudi(t, path, as_of[w], as_of=w)
    with pytest.raises(CleanedInstantError):
        t.read(as_of=w2)


def test_keep_latest_file_versions_keeps_the_newest_slices_of_each_file_group(spark, tmp_path):
    """COW W1-W4, KEEP_LATEST_FILE_VERSIONS with 1 version: 3 of the 5 base files go; only W4 stays readable."""
    path = tmp_path / "cow"
    t = lf.Table.create(spark, path, partition_field="day")
    (w1, w2, w3, w4), _, _ = four_writes(spark, t)
    expected = values(snapshot(t.read()))
    report = t.clean({"cleaner_policy": "KEEP_LATEST_FILE_VERSIONS", "cleaner_fileversions_retained": 1})
    assert report.details.files_deleted == 3 and len(list(base_files(path))) == 2
    assert report.details.earliest_readable_instant == w4
    with pytest.raises(CleanedInstantError):
        t.read(as_of=w3)
    assert_agrees_with_hudi(t, path, expected)


def test_a_clean_that_died_midway_is_finished_by_the_next_one(spark, tmp_path):
    """COW W1-W4, a clean (retaining 1: X's W1 and W2 slices) requested and inflight whose writer died after
    deleting one of its two files: the next clean finishes its plan and completes it; there is nothing
    more to delete."""
    path = tmp_path / "cow"
    t = lf.Table.create(spark, path, partition_field="day")
    (w1, w2, w3, w4), _, _ = four_writes(spark, t)
    expected = values(snapshot(t.read()))
    ctx, cfg = t.context(), C.write_options({"cleaner_commits_retained": 1, "heartbeat_interval_ms": 100,
                                       "heartbeat_tolerable_misses": 0})
    doomed, earliest, readable = _clean.plan_clean(ctx.timeline, cfg)
    plan = _clean.plan_body(doomed, ctx.storage, cfg.cleaner_policy, earliest, readable, w4)
    dying = WriteTransaction(ctx, Operation.CLEAN, Action.CLEAN, options=cfg)
    dead = dying.start(plan=plan)
    dying._stop_heartbeat()  # the writer died: its heartbeat stops, its instant stays inflight
    (path / plan["labformat.paths"][0]).unlink()
    assert len(plan["labformat.paths"]) == 2
    report = t.clean({"cleaner_commits_retained": 1})
    assert report.instant is None and report.details.finished_dead_cleans == (dead.time,)
    assert (path / f".hoodie/{dead.time}.clean").exists() and not t.context().timeline.pending()
    assert all(not (path / p).exists() for p in plan["labformat.paths"]) and len(base_files(path)) == 3
    with pytest.raises(CleanedInstantError, match=dead.time):
        t.read(as_of=w2)
    assert_agrees_with_hudi(t, path, expected)


def test_clean_on_merge_on_read_deletes_a_compacted_slice_with_its_log_files(spark, home):
    """MOR W1 bulk insert, W2 update in X (a log), compaction, W3 update in X (a log of the new slice),
    clean retaining 1: X's first slice goes with its log; Y's only slice and the new one stay, and the
    compaction's snapshot still reads. On each storage backend."""
    path = home.uri("mor")
    t = lf.Table.create(spark, path, partition_field="day", table_type=MOR, storage_options=home.storage_options)
    w1 = t.bulk_insert(telemetry(spark, 40, partitions=1)).instant
    key = key_of_day(t, "2024-01-15")
    w2 = t.upsert(corrections(spark, [key], 1.0)).instant
    compaction = t.compact().instant
    t.upsert(corrections(spark, [key], 2.0, seconds=10_001))
    expected = values(snapshot(t.read()))
    compacted = values(snapshot(t.read(as_of=compaction)))
    first_log = [p for p in home.files("mor") if p.rsplit("/", 1)[-1].startswith(".") and f"_{w1}.log." in p]
    assert len(first_log) == 1
    report = t.clean({"cleaner_commits_retained": 1})
    assert report.details.files_deleted == 2 and report.details.file_slices_deleted == 1
    left = home.files("mor")
    assert first_log[0] not in left
    assert len([p for p in left if p.endswith(".parquet") and not p.startswith(".hoodie/")]) == 2
    assert_agrees_with_hudi(t, path, expected)
    ro = values(snapshot(t.read(options={"query_type": "READ_OPTIMIZED"})))
    assert values(hudi_read(path, home.storage_options, read_optimized=True)) == ro
    # The compaction is the write just before earliestCommitToRetain (W3): its snapshot is whole.
    assert report.details.earliest_readable_instant == compaction
    assert_agrees_with_hudi(t, path, compacted, as_of=compaction)
    with pytest.raises(CleanedInstantError):
        t.read(as_of=w2)


# ---- clustering ---------------------------------------------------------------------------------

def test_clustering_rewrites_small_files_sorted_and_the_view_hides_the_replaced_ones(spark, tmp_path):
    """COW W1 bulk insert of 16 small files (8 tasks x 2 days), clustering sorted by signal_dbm into 1 file a
    day, W2 upsert (BLOOM) and W3 upsert (SIMPLE) of keys now in the new file groups, clean retaining 1:
    same rows throughout (labformat and hudi-rs, latest and as of W1), a range query reads fewer files,
    and the clean deletes the 16 replaced files and the clustering's slices W2 rewrote."""
    path = tmp_path / "cow"
    t = lf.Table.create(spark, path, partition_field="day")
    w1 = t.bulk_insert(telemetry(spark, 40, partitions=8)).instant
    old = {s.file_id: s for s in t.file_slices()}
    assert len(old) == 16
    expected = values(snapshot(t.read()))
    _, before = t.query("signal_dbm < 10")
    report = t.cluster({**CLUSTER_ALL, "clustering_sort_columns": "signal_dbm"})
    d = report.details
    assert (d.files_in, d.files_out, d.clustering_groups) == (16, 2, 2) and report.files_created == 2
    assert d.bytes_in == sum(s.size_bytes for s in old.values()) and d.bytes_out == report.bytes_written > 0
    assert report.rows_written == 40 and report.seconds > 0
    # Hudi's layout: the plan in the requested file, the replaced file groups in the completed one.
    requested = json.loads((path / f".hoodie/{report.instant}.replacecommit.requested").read_text())
    assert requested["operationType"] == "CLUSTER" and len(requested["clusteringPlan"]["inputGroups"]) == 2
    assert (path / f".hoodie/{report.instant}.replacecommit.inflight").exists()
    body = json.loads((path / f".hoodie/{report.instant}.replacecommit").read_text())
    assert body["operationType"] == "CLUSTER"
    assert sorted(f for ids in body["partitionToReplaceFileIds"].values() for f in ids) == sorted(old)
    new = t.file_slices()
    assert len(new) == 2 and not {s.file_id for s in new} & set(old)
    for s in new:  # each new base file is sorted by the sort column
        column = pq.read_table(path / s.path, columns=["signal_dbm"]).column(0).to_pylist()
        assert column == sorted(column) and len(column) == 20
    assert_agrees_with_hudi(t, path, expected)
    assert_agrees_with_hudi(t, path, expected, as_of=w1)
    assert len(t.file_slices(as_of=w1)) == 16
    _, after = t.query("signal_dbm < 10")
    assert after.rows_returned == before.rows_returned == 10
    assert after.funnel.files_read == 2 < before.funnel.files_read == 4
    assert after.stats_source.kind is StatsSource.METADATA_TABLE  # the metadata table follows the replaced file groups
    # The indexes find keys in the new file groups: updates, never inserts.
    keys = [key_of_day(t, "2024-01-15", 3), key_of_day(t, "2024-01-16", 5)]
    for n, index in enumerate(["BLOOM", "SIMPLE"]):
        up = t.upsert(corrections(spark, keys, 50.0 + n, seconds=10_000 + n), {"index_type": index})
        assert (up.rows_updated, up.rows_inserted, up.files_created) == (2, 0, 0), up.summary()
        assert {f.file_id for f in up.files} == {s.file_id for s in new}
        expected.update({k: 50.0 + n for k in keys})
    assert_agrees_with_hudi(t, path, expected)
    assert t.cluster(CLUSTER_ALL).instant is None  # one file a day: nothing to put together
    cleaned = t.clean({"cleaner_commits_retained": 1})
    assert cleaned.details.replaced_file_groups_deleted == 16
    assert len(list(base_files(path))) == 4  # each new file group's slices of W2 (the last before W3) and W3
    assert_agrees_with_hudi(t, path, expected)


def test_clustering_a_merge_on_read_table_leaves_slices_with_logs_alone(spark, tmp_path):
    """MOR W1 bulk insert of 16 small files, W2 update of one key (a log file), clustering: 15 files in,
    the slice with the log file kept as it is; both readers agree, and W3 updates a clustered key."""
    path = tmp_path / "mor"
    t = lf.Table.create(spark, path, partition_field="day", table_type=MOR)
    t.bulk_insert(telemetry(spark, 40, partitions=8))
    key = key_of_day(t, "2024-01-15")
    t.upsert(corrections(spark, [key], 9.0))
    with_log = [s for s in t.file_slices() if s.has_logs]
    assert len(with_log) == 1
    expected = values(snapshot(t.read()))
    report = t.cluster(CLUSTER_ALL)
    assert (report.details.files_in, report.details.files_out) == (15, 2)
    assert with_log[0] in t.file_slices() and len(t.file_slices()) == 3
    assert_agrees_with_hudi(t, path, expected)
    other = key_of_day(t, "2024-01-16", 2)
    up = t.upsert(corrections(spark, [other], 8.0))
    assert up.rows_updated == 1 and up.log_files_written == 1
    assert_agrees_with_hudi(t, path, {**expected, other: 8.0})


def grid(spark, side: int = 16):
    """side x side rows, one per cell (a, b), keys in row-major order, written by 8 tasks (with the
    columns `telemetry` has, so that hudi-rs's read compares)."""
    return spark.range(side * side, numPartitions=8).select(
        F.format_string("k%04d", "id").alias("record_key"), F.format_string("drone%04d", F.col("id") % side)
        .alias("drone_id"), F.lit("2024-01-15").alias("day"), F.col("id").cast("int").alias("signal_dbm"),
        (F.col("id") % side).cast("int").alias("a"),
        (F.col("id") / side).cast("int").alias("b"), F.col("id").cast("double").alias("battery_pct"),
        F.timestamp_seconds(F.lit(1705300000) + F.col("id")).alias("updated_at"))


@pytest.mark.parametrize("strategy, files_read", [
    ("linear", {"a = 5": 1, "b = 5": 4, "a = 5 AND b = 5": 1, "a < 8 AND b < 8": 2}),
    ("z-order", {"a = 5": 2, "b = 5": 2, "a = 5 AND b = 5": 1, "a < 8 AND b < 8": 1}),
    ("hilbert", {"a = 5": 2, "b = 5": 2, "a = 5 AND b = 5": 1, "a < 8 AND b < 8": 1}),
])
def test_clustering_layout_strategies_decide_which_column_filters_prune(spark, tmp_path, strategy, files_read):
    """A 16 x 16 grid of (a, b) in 8 small files, clustered on a,b into 4 files: linear puts a's values
    in order (a filter on b reads every file), z-order and Hilbert each file a quadrant (a filter on either
    column reads half the files, a quadrant's filter one). Same rows, which hudi-rs reads too."""
    path = tmp_path / strategy
    t = lf.Table.create(spark, path)
    t.bulk_insert(grid(spark))
    expected = values(snapshot(t.read()))
    size = sum(s.size_bytes for s in t.file_slices())
    report = t.cluster({"clustering_small_file_limit": size, "clustering_target_file_max_bytes": size // 4 + 1,
                        "clustering_sort_columns": "a,b", "hoodie.layout.optimize.strategy": strategy})
    assert report.details.files_out == 4 and report.details.layout == strategy
    requested = json.loads((path / f".hoodie/{report.instant}.replacecommit.requested").read_text())
    assert requested["clusteringPlan"]["strategy"]["strategyParams"]["hoodie.layout.optimize.strategy"] == strategy
    for condition, files in files_read.items():
        _, scan = t.query(condition)
        assert (scan.funnel.files_in_snapshot, scan.funnel.files_read) == (4, files), condition
    assert_agrees_with_hudi(t, path, expected)


def test_layout_order_walks_each_curve():
    """On an 8 x 8 grid: linear runs down the first column; z-order fills 2 x 2 then 4 x 4 blocks; each
    Hilbert step moves to a neighbouring cell; ties and nulls keep every row."""
    rows = pa.table({RECORD_KEY: [f"k{i:02d}" for i in range(64)], "a": [i % 8 for i in range(64)],
                     "b": [i // 8 for i in range(64)]})
    cells = {s: [(rows["a"][i].as_py(), rows["b"][i].as_py()) for i in _clustering.layout_order(rows, ["a", "b"], s)
                 .to_pylist()] for s in LayoutStrategy}
    assert cells[LayoutStrategy.LINEAR][:8] == [(0, b) for b in range(8)]
    assert sorted(cells[LayoutStrategy.ZORDER][:4]) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {max(cell) for cell in cells[LayoutStrategy.ZORDER][:16]} == {0, 1, 2, 3}
    walk = cells[LayoutStrategy.HILBERT]
    assert all(abs(x1 - x0) + abs(y1 - y0) == 1 for (x0, y0), (x1, y1) in zip(walk, walk[1:]))
    assert all(sorted(c) == sorted(cells[LayoutStrategy.LINEAR]) for c in cells.values())
    with_nulls = pa.table({RECORD_KEY: ["x", "y", "z"], "a": [2, None, 2], "b": ["p", "q", None]})
    assert sorted(_clustering.layout_order(with_nulls, ["a", "b"], LayoutStrategy.ZORDER).to_pylist()) == [0, 1, 2]


def test_clustering_refuses_bucket_tables_and_unknown_sort_columns_leaving_the_table_as_it_was(spark, tmp_path):
    bucket = lf.Table.create(spark, tmp_path / "bucket", partition_field="day", options={"index_type": "BUCKET"})
    bucket.bulk_insert(telemetry(spark, 10))
    before = tree(tmp_path / "bucket")
    with pytest.raises(ConfigError, match="BUCKET"):
        bucket.cluster(CLUSTER_ALL)
    assert tree(tmp_path / "bucket") == before
    t = lf.Table.create(spark, tmp_path / "cow", partition_field="day")
    t.bulk_insert(telemetry(spark, 10, partitions=4))
    before = tree(tmp_path / "cow")
    with pytest.raises(ConfigError, match="'nope'"):
        t.cluster({**CLUSTER_ALL, "clustering_sort_columns": "signal_dbm,nope"})
    with pytest.raises(ConfigError, match="z-order.*at most 16"):
        t.cluster({**CLUSTER_ALL, "clustering_sort_columns": ",".join(["signal_dbm"] * 17),
                   "layout_optimize_strategy": "Z-ORDER"})
    with pytest.raises(ConfigError, match="layout.optimize.strategy"):
        t.cluster({**CLUSTER_ALL, "hoodie.layout.optimize.strategy": "spiral"})
    with pytest.raises(ConfigError, match="target.file.max.bytes"):
        t.cluster({"hoodie.clustering.plan.strategy.target.file.max.bytes": "1.5"})
    assert tree(tmp_path / "cow") == before


def test_a_write_on_a_file_group_clustering_replaced_conflicts_either_way(spark, tmp_path):
    """COW W1 bulk insert of 8 small files; (a) an upsert planned before a clustering commits after it:
    WriteConflictError, rolled back; (b) a clustering planned before an upsert of one of its file groups
    commits after it: WriteConflictError, rolled back. The rows are those of the writes that committed."""
    path = tmp_path / "cow"
    t = lf.Table.create(spark, path, partition_field="day")
    t.bulk_insert(telemetry(spark, 40, partitions=4))
    key = key_of_day(t, "2024-01-15")
    cfg = C.write_options(None)
    stale = t.context()
    clustered = t.cluster(CLUSTER_ALL)
    expected = values(snapshot(t.read()))
    with pytest.raises(WriteConflictError, match=clustered.instant) as caught:
        execute(Upsert(corrections(spark, [key], 1.0), Operation.UPSERT), stale, cfg)
    assert caught.value.other == clustered.instant
    assert_agrees_with_hudi(t, path, expected)

    path2 = tmp_path / "cow2"
    t2 = lf.Table.create(spark, path2, partition_field="day")
    t2.bulk_insert(telemetry(spark, 40, partitions=4))
    stale = t2.context()
    up = t2.upsert(corrections(spark, [key], 2.0))
    with pytest.raises(WriteConflictError, match=up.instant):
        execute(_clustering.Clustering(), stale, C.write_options(CLUSTER_ALL))
    assert not list(path2.glob(".hoodie/*.replacecommit*"))
    assert [i.action.value for i in t2.timeline()] == ["commit", "commit", "rollback"]
    assert_agrees_with_hudi(t2, path2, values(snapshot(t2.read())))
    assert values(snapshot(t2.read()))[key] == 2.0


@pytest.mark.slow
@pytest.mark.parametrize(("home", "point"), kill_points(["after_write", "before_publish"], every_point_locally=False),
                         indirect=["home"])
def test_writer_killed_during_a_clustering_is_rolled_back(spark, home, point):
    """COW W1 bulk insert of 8 small files, a clustering killed at `point` (its base files written), an
    upsert by the next writer, which rolls it back: its files and instant files go, both readers agree,
    and a clustering then succeeds. On each storage backend."""
    path = home.uri("cow")
    t = lf.Table.create(spark, path, partition_field="day", storage_options=home.storage_options)
    first = t.bulk_insert(telemetry(spark, 40, partitions=4))
    before = values(snapshot(t.read()))

    def base_files_now() -> set[str]:
        return {p for p in home.files("cow") if p.endswith(".parquet") and not p.startswith(".hoodie/")}

    def replacecommits() -> list[str]:
        return [f.path for f in home.storage("cow").list(".hoodie") if ".replacecommit" in f.path]

    parquet_before = base_files_now()
    crash(path, "cluster", point, options={**CLUSTER_ALL, "heartbeat_interval_ms": 100,
                                           "heartbeat_tolerable_misses": 1, "lock_expire_minutes": 0.01})
    leftovers = base_files_now() - parquet_before
    assert leftovers and [p for p in replacecommits() if p.endswith(".replacecommit.inflight")]
    reopened = lf.Table.open(spark, path, storage_options=home.storage_options)
    assert [i.time for i in reopened.timeline()] == [first.instant] and len(reopened.file_slices()) == 8
    assert_agrees_with_hudi(reopened, path, before)
    key = sorted(before)[0]
    report = reopened.upsert(corrections(spark, [key], 44.0))
    assert len(report.rolled_back) == 1 and not leftovers & base_files_now()
    assert not replacecommits()
    assert [i.action.value for i in reopened.timeline()] == ["commit", "rollback", "commit"]
    assert_agrees_with_hudi(reopened, path, {**before, key: 44.0})
    assert reopened.cluster(CLUSTER_ALL).details.files_out == 2
    assert_agrees_with_hudi(reopened, path, {**before, key: 44.0})
