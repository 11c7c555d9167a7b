"""Notebook 06's experiments: every index on three workloads of a week-partitioned table; fixed buckets against a splitting ring.

The index table holds two whole weeks of history, bulk inserted (GLOBAL_SORT) into about
`FILES_PER_DAY` base files per day, so a week's partition holds fourteen files of
time-ordered keys. With a partition per day, the partition would do range pruning's work for it
(the day before's corrections reach every file of that day) and SIMPLE and BLOOM would read the
same keys; a week leaves six days of files the index can spare. Workloads:

- `time-ordered`: the seed's daily batch (a new day of readings, corrections of the day before);
- `random keys`: the same batch with UUID-like keys (as `key_style="random"` makes them), on a table
  of such keys;
- `moves`: corrections of the history's last day (a Sunday), a share of them re-dated to the next
  day (a clock corrected across midnight), so their week, the partition value, changes.

Each index upserts each workload once on a fresh copy of its table (BUCKET on a BUCKET table of its
own, RECORD_INDEX on a copy whose record index `rebuild_metadata` built); `tag_timings` then times
two indexes' tag steps, interleaved and repeated.

`bucket_split`: two merge-on-read BUCKET tables partitioned by day, two buckets per day, take the
history and then a day on which the fleet doubled; one keeps its bucket count (SIMPLE engine), the
other (CONSISTENT_HASHING) is resized by `Table.cluster()`, which splits only the buckets past the
split threshold.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from tqdm.auto import tqdm

import labformat as lf
from labformat import datasets
from labformat.errors import ConfigError
from labformat.index import consistent_bucket as ch
from labformat.lab import workshop
from labformat.lab.sweeps import copy_table
from labformat.model.enums import BucketEngine, IndexType, SortMode, TableType
from labformat.spark.jobs import StepRecorder, conf_override
from labformat.spark.ui import SparkUI

INDEXES = (IndexType.SIMPLE, IndexType.BLOOM, IndexType.BUCKET, IndexType.GLOBAL_SIMPLE, IndexType.GLOBAL_BLOOM,
           IndexType.RECORD_INDEX)
WORKLOADS = ("time-ordered", "random keys", "moves")
GLOBAL = tuple(i.value for i in INDEXES if i.is_global)
NON_GLOBAL = tuple(i.value for i in INDEXES if not i.is_global)
# Every global index moves a record whose partition changed (RECORD_INDEX's Hudi default is to keep it in place).
MOVE = {"bloom_update_partition_path": True, "simple_update_partition_path": True,
        "record_index_update_partition_path": True}
PARTITION = "week"  # the index table's partition column: the Monday that starts the reading's week
WEEK_DAYS = 7
HISTORY_WEEKS = 2
FILES_PER_DAY = 2
# Drones 06 takes from its preset's fleet: `small`'s 24 halved, so that its two dozen upserts on fresh
# copies fit the notebook's three minutes. Every lesson here is a count or a ratio of counts.
FLEET = 12


def lab_spec(preset: str) -> datasets.DatasetSpec:
    """The preset's dataset with at least two whole weeks of history (`tiny`'s two days become
    fourteen, and one batch, all this notebook upserts) and at most `FLEET` drones. The history must
    start on a Monday, so that its weeks are whole and its last day is a Sunday."""
    spec = datasets.spec(preset)
    if spec.start_date.weekday() != 0:
        raise ConfigError(f"06 partitions by week: the history must start on a Monday, not {spec.start}")
    if spec.history_days < HISTORY_WEEKS * WEEK_DAYS:
        spec = dataclasses.replace(spec, history_days=HISTORY_WEEKS * WEEK_DAYS, batch_days=1)
    return dataclasses.replace(spec, drones=min(spec.drones, FLEET))


def readings(spark, spec: datasets.DatasetSpec) -> tuple[DataFrame, DataFrame]:
    """The history and batch 1 of `spec`'s drones (the first `spec.drones`), read from the dataset
    of its preset's whole fleet: the one the other notebooks use, generated once, not a second one."""
    fleet = datasets.spec(spec.name).drones
    cached = datasets.generate(spark, dataclasses.replace(spec, drones=max(spec.drones, fleet)))
    ours = F.col("drone_id") < F.lit(f"drone{spec.drones:04d}")
    return datasets.load_history(spark, cached).where(ours), datasets.load_batch(spark, cached, 1).where(ours)


def with_week(df: DataFrame) -> DataFrame:
    """`df` with the partition column `week`: the Monday of the reading's day, as yyyy-MM-dd."""
    monday = F.date_trunc("week", F.to_date(F.col(datasets.PARTITION_FIELD)))
    return df.withColumn(PARTITION, F.date_format(monday, "yyyy-MM-dd"))


@dataclass(frozen=True)
class Workload:
    """One upsert batch and the key style of the table it goes into."""

    name: str
    key_style: str
    batch: DataFrame
    rows: int  # the batch's rows
    moved: int  # of them, records whose partition value differs from the stored one


def random_keys(df: DataFrame) -> DataFrame:
    """`df` keyed as the generator's `key_style="random"` keys it: a UUID-like key made of the md5 of
    the time-ordered key. The same readings, in no time order; no second dataset to generate."""
    digest = F.md5(F.col(datasets.RECORD_KEY))
    parts = [F.substring(digest, start, length) for start, length in ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))]
    return df.withColumn(datasets.RECORD_KEY, F.concat_ws("-", *parts))


def _keyed(spark, spec: datasets.DatasetSpec) -> dict[str, tuple[DataFrame, DataFrame]]:
    """Per key style: the history and batch 1, both carrying `week`."""
    history, batch = readings(spark, spec)
    return {"monotonic": (with_week(history), with_week(batch)),
            "random": (with_week(random_keys(history)), with_week(random_keys(batch)))}


def _moves(history: DataFrame, share: float) -> DataFrame:
    """Corrections of every reading of the history's last day, `share` of them dated to the next day."""
    last_day = history.agg(F.max(datasets.PARTITION_FIELD)).first()[0]
    moved = (F.abs(F.hash("record_key")) % 1000) < int(share * 1000)
    next_day = F.date_format(F.date_add(F.to_date(F.col("day")), 1), "yyyy-MM-dd")
    return with_week(history.where(F.col("day") == last_day)
                     .withColumn("day", F.when(moved, next_day).otherwise(F.col("day")))
                     .withColumn("battery_pct", F.col("battery_pct") - 1)
                     .withColumn("updated_at", F.col("updated_at") + F.expr("INTERVAL 1 DAY")))


def workloads(spark, spec: datasets.DatasetSpec, move_share: float = 0.05) -> dict[str, Workload]:
    """The three workloads at `spec`'s scale, their batches carrying `week`."""
    keyed = _keyed(spark, spec)
    history = keyed["monotonic"][0]
    moves = _moves(history, move_share).persist()
    stored = history.select("record_key", F.col(PARTITION).alias("stored"))
    moved = moves.join(stored, "record_key").where(F.col(PARTITION) != F.col("stored")).count()
    out = {
        "time-ordered": Workload("time-ordered", "monotonic", keyed["monotonic"][1], 0, 0),
        "random keys": Workload("random keys", "random", keyed["random"][1], 0, 0),
        "moves": Workload("moves", "monotonic", moves, 0, moved),
    }
    return {name: Workload(w.name, w.key_style, w.batch, w.batch.count(), w.moved) for name, w in out.items()}


def base_tables(spark, spec: datasets.DatasetSpec, bucket_num: int = 4, files_per_day: int = FILES_PER_DAY,
                options: dict | None = None, workdir: Path | None = None, name: str = "06"
                ) -> dict[tuple[str, IndexType], lf.Table]:
    """Per key style and index: the table its runs copy. The history bulk inserted (GLOBAL_SORT, in
    `files_per_day` write tasks per day of history, so as many files) into a table partitioned by
    week; BUCKET into a BUCKET table of `bucket_num` buckets per week; RECORD_INDEX on a copy of the
    first whose record index `rebuild_metadata` built."""
    options = {**(options or {}), "bulk_insert_sort_mode": SortMode.GLOBAL_SORT,
               "bulk_insert_parallelism": spec.history_days * files_per_day}
    out: dict[tuple[str, IndexType], lf.Table] = {}
    for style, (history, _) in _keyed(spark, spec).items():
        for index in (IndexType.BLOOM, IndexType.BUCKET):
            extra = {"index_type": IndexType.BUCKET, "bucket_num": bucket_num} if index is IndexType.BUCKET else {}
            path = workshop.scratch(f"{name}-{style}-{index.value.lower()}", workdir)
            table = lf.Table.create(spark, path, record_key=datasets.RECORD_KEY, partition_field=PARTITION,
                                    precombine_field=datasets.PRECOMBINE_FIELD, options=extra)
            table.bulk_insert(history, options)
            out[(style, index)] = table
        indexed = copy_table(out[(style, IndexType.BLOOM)], f"{name}-{style}-record-index", workdir)
        indexed.rebuild_metadata({"record_index_enable": True})
        out[(style, IndexType.RECORD_INDEX)] = indexed
    return out


def layout(bases: dict, spec: datasets.DatasetSpec) -> pd.DataFrame:
    """The time-ordered table's partitions: the days of history and the base files each holds."""
    slices = bases[("monotonic", IndexType.BLOOM)].file_slices()
    files = pd.Series([s.partition_path.rsplit("=", 1)[-1] for s in slices]).value_counts().sort_index()
    mondays = [spec.day_date(d) - dt.timedelta(days=spec.day_date(d).weekday()) for d in range(spec.history_days)]
    days = pd.Series([m.isoformat() for m in mondays]).value_counts()
    return pd.DataFrame({"days of history": days.reindex(files.index), "base files": files}).rename_axis(PARTITION)


def origin(bases: dict, key_style: str, index: IndexType) -> lf.Table:
    """The table an index's run on a workload of `key_style` copies."""
    if index in (IndexType.BUCKET, IndexType.RECORD_INDEX):
        return bases[(key_style, index)]
    return bases[(key_style, IndexType.BLOOM)]


def duplicate_keys(table: lf.Table) -> int:
    """Record keys the table stores more than once (counted by Spark)."""
    return table.read().groupBy("record_key").count().where(F.col("count") > 1).count()


def _upsert_copy(bases: dict, load: Workload, index: IndexType, tag: str, options: dict, workdir,
                 count_duplicates: bool = False):
    copy = copy_table(origin(bases, load.key_style, index), f"06-run-{tag}", workdir)
    try:
        report = copy.upsert(load.batch, {**options, "index_type": index})
        return report, (duplicate_keys(copy) if count_duplicates else None)
    finally:
        workshop.drop(copy.path)


def compare(bases: dict, loads: dict[str, Workload], indexes: Iterable[IndexType] = INDEXES,
            options: dict | None = None, workdir: Path | None = None, progress: bool = False) -> pd.DataFrame:
    """Every index on every workload, once each, on a fresh copy: counts only (they do not change
    with a repeat; `tag_timings` times). One row per run: workload, index, seconds, tag_s, read (what
    the tag step read from the table: keys_read, or RECORD_INDEX's index_entries_read),
    keys_read (record keys the tag step read from data files, as the index counted them),
    index_entries_read (RECORD_INDEX), footers_read (BLOOM's key ranges and filters), files_rewritten,
    rows_rewritten (rows of the base files written as a new slice of an existing file group),
    files_created, rows_updated, rows_inserted, rows_deleted, and duplicates (keys stored twice after
    the upsert, counted on a workload that moves records; None for the others, which cannot)."""
    options = {**(options or {}), **MOVE}
    rows = []
    runs = [(name, IndexType(i)) for name in loads for i in indexes]
    for name, index in tqdm(runs, desc="index runs", disable=not progress):
        load = loads[name]
        report, duplicates = _upsert_copy(bases, load, index, "count", options, workdir, load.moved > 0)
        funnel = report.funnel
        rows.append({"workload": name, "index": index.value, "seconds": report.seconds,
                     "tag_s": report.step("tag").seconds,
                     "read": funnel.keys_read if funnel.index_entries_read is None else funnel.index_entries_read,
                     "keys_read": funnel.keys_read,
                     "index_entries_read": funnel.index_entries_read, "footers_read": funnel.footers_read,
                     "files_rewritten": report.files_rewritten,
                     "rows_rewritten": sum(f.rows for f in report.files if not f.created and not f.log_file),
                     "files_created": report.files_created, "rows_updated": report.rows_updated,
                     "rows_inserted": report.rows_inserted, "rows_deleted": report.rows_deleted,
                     "duplicates": duplicates})
    return pd.DataFrame(rows)


def counts(runs: pd.DataFrame, column: str) -> pd.DataFrame:
    """One count per index (rows) and workload (columns)."""
    table = runs.pivot(index="index", columns="workload", values=column)
    order = [i.value for i in INDEXES if i.value in table.index]
    return table.loc[order, [w for w in WORKLOADS if w in table.columns]].astype("Int64")


def measures(runs: pd.DataFrame) -> pd.DataFrame:
    """Per index (rows), for each workload: what the tag step read (record keys from data files, or
    RECORD_INDEX's index entries), the rows the upsert rewrote, and the keys left stored twice (moves)."""
    return pd.concat({"read by the tag step": counts(runs, "read"), "rows rewritten": counts(runs, "rows_rewritten"),
                      "keys stored twice": counts(runs, "duplicates")[["moves"]]}, axis=1)


def tag_timings(bases: dict, load: Workload, indexes: Iterable[IndexType] = (IndexType.BLOOM, IndexType.GLOBAL_SIMPLE),
                repeats: int = 5, options: dict | None = None, workdir: Path | None = None,
                progress: bool = False) -> pd.DataFrame:
    """`load` upserted by each of `indexes` on a fresh copy, `repeats` times, the indexes alternating
    (each repeat reverses their order). Run after `compare`, whose runs of the same upserts warmed every
    index up. One row per run: index, repeat, tag_s, seconds, keys_read."""
    options = {**(options or {}), **MOVE}
    indexes = [IndexType(i) for i in indexes]
    order = [(r, i) for r in range(1, repeats + 1) for i in (indexes if r % 2 else indexes[::-1])]
    rows = []
    for repeat, index in tqdm(order, desc="timed runs", disable=not progress):
        report, _ = _upsert_copy(bases, load, index, "timed", options, workdir)
        rows.append({"index": index.value, "repeat": repeat, "tag_s": report.step("tag").seconds,
                     "seconds": report.seconds, "keys_read": report.funnel.keys_read})
    return pd.DataFrame(rows)


def point_query(table: lf.Table, key: str):
    """A query fixing the record key: its scan funnel (file slices after each pruning stage) and the
    partitions the table has."""
    plan = table.scan(F.col("record_key") == key)
    partitions = len({s.partition_path for s in plan.snapshot})
    return plan.funnel, partitions


def corrections_table(spark, load: Workload, bucket_num: int = 4, workdir: Path | None = None) -> lf.Table:
    """A workload's batch as a BUCKET table of its own (not partitioned), to join the history with."""
    table = lf.Table.create(spark, workshop.scratch("06-corrections", workdir), record_key=datasets.RECORD_KEY,
                            precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None,
                            options={"index_type": IndexType.BUCKET, "bucket_num": bucket_num})
    table.bulk_insert(load.batch.drop(PARTITION))
    return table


def _run_and_measure(spark, df: DataFrame) -> tuple[int, int]:
    """Run `df` once (every column computed, nothing kept); its rows and the bytes its job shuffled,
    read from the Spark UI's stages."""
    ui = SparkUI(spark)  # first: on Spark Connect it says the shuffle bytes are not available there
    recorder = StepRecorder(spark)
    with recorder.step("join"):
        df.write.format("noop").mode("overwrite").save()
    group = recorder.steps[-1].group
    shuffled = sum(stage.shuffle_write_bytes for stage in ui.stages(group)) if group else 0
    return df.count(), shuffled


def join_shuffle(history: lf.Table, corrections: lf.Table) -> pd.DataFrame:
    """The history joined with the corrections on the record key, two ways: the bucket join, and
    Spark's join of the two snapshots. Broadcast joins are off, as for two tables too large to
    broadcast, which is the case a bucket join is for. One row each: exchanges in the physical
    plan, bytes shuffled, rows."""
    spark = history.spark
    rows = []
    with conf_override(spark, {"spark.sql.autoBroadcastJoinThreshold": "-1"}):
        right = corrections.read().selectExpr("record_key", "battery_pct AS corrected_battery_pct")
        joins = {"bucket join": history.join_by_bucket(corrections),
                 "Spark join of the snapshots": history.read().join(right, "record_key")}
        for name, df in joins.items():
            plan = df._jdf.queryExecution().executedPlan().toString()
            n, shuffled = _run_and_measure(spark, df)
            rows.append({"join": name, "exchanges in the plan": plan.count("Exchange"), "bytes shuffled": shuffled,
                         "rows": n})
    return pd.DataFrame(rows).set_index("join")


# ---- bucket count: fixed at creation, or split where the data grew --------------------------------

FIXED, RING = "fixed bucket count (SIMPLE engine)", "consistent hashing (split by the resize)"


def surge_batch(batch: DataFrame, spec: datasets.DatasetSpec, day: int = 1, factor: int = 2) -> DataFrame:
    """`batch`, batch `day` of `spec`'s drones, on a day the fleet grew `factor` times: its rows,
    plus the new day's readings again for each added drone (`drone0012` reads as `drone0000` did, on
    a 12-drone fleet)."""
    new_day = spec.batch_date(day).isoformat()
    readings = batch.where(F.col("day") == new_day).dropDuplicates(["record_key"])
    number = F.substring(F.col("drone_id"), 6, 4).cast("int")
    extra = []
    for copy in range(1, factor):
        drone = F.format_string("drone%04d", number + F.lit(copy * spec.drones))
        extra.append(readings.withColumn("drone_id", drone)
                     .withColumn("record_key", F.concat(F.substring("record_key", 1, 13), drone)))
    for more in extra:
        batch = batch.unionByName(more)
    return batch


@dataclass(frozen=True)
class BucketSplit:
    """What `bucket_split` measured. `buckets`: one row per table, moment ("before the resize",
    "after the resize"), partition and bucket: its file id, rows and base-file KB. `rings`: the
    surging day's hash ring before and after (node value, file id, rows). The rest: the resize's own
    numbers, the table's rows, the surging day, `max_file_size` and the history's base-file bytes
    per row."""

    buckets: pd.DataFrame
    rings: pd.DataFrame
    hot_partition: str
    max_file_size: int
    split_threshold: float
    bytes_per_row: float
    table_rows: int
    rows_rewritten: int  # by the resize (its report)
    buckets_split: int
    file_groups_kept: int  # file groups whose file slice the resize left as it was
    file_groups_before: int

    def summary(self) -> pd.DataFrame:
        """Per table and moment: buckets, buckets past the split threshold, the largest base file, rows."""
        limit = self.split_threshold * self.max_file_size / 1024
        grouped = self.buckets.groupby(["table", "moment"], sort=False)
        return pd.DataFrame({"buckets": grouped.size(),
                             "past the threshold": grouped["KB"].agg(lambda kb: int((kb > limit).sum())),
                             "largest base file KB": grouped["KB"].max().round(0), "rows": grouped["rows"].sum()})

    def hot(self) -> pd.DataFrame:
        """The surging day's buckets in each table, before and after the resize."""
        return self.buckets[self.buckets.partition == self.hot_partition].reset_index(drop=True)


def _bucket_rows(table: lf.Table, name: str, moment: str) -> list[dict]:
    return [{"table": name, "moment": moment, "partition": s.partition_path, "file_id": s.file_id,
             "rows": s.num_records, "KB": (s.size_bytes + s.log_bytes) / 1024,
             "slice": (s.file_id, s.base_instant_time, s.log_paths)} for s in table.file_slices()]


def _ring_rows(table: lf.Table, partition: str, moment: str) -> list[dict]:
    ctx = table.context()
    ring = ch.ring_of(ch.load_rings(ctx.storage, ctx.timeline, table.config.bucket_num), partition,
                      table.config.bucket_num)
    rows = {s.file_id: s.num_records for s in table.file_slices() if s.partition_path == partition}
    return [{"moment": moment, "node": n.value, "file_id": n.file_id, "rows": rows.get(n.file_id, 0)}
            for n in ring.nodes]


def bucket_split(spark, spec: datasets.DatasetSpec, buckets: int = 2, surge: int = 2, headroom: float = 1.25,
                 workdir: Path | None = None) -> BucketSplit:
    """Two merge-on-read BUCKET tables partitioned by day, `buckets` buckets per day, compacted after
    every write (each bucket one base file), take the history, then batch 1 on a day the fleet grew
    `surge` times (`surge_batch`); one keeps its count, the other is resized by `Table.cluster()`.
    `max_file_size` is set so that the split threshold (2x it) is `headroom` times the history's
    median bucket: the history's buckets stay under it, the surging day's pass it. Base files carry a
    1,000-entry bloom filter, not Hudi's 60,000, so that their sizes are the data's."""
    history, batch = readings(spark, spec)
    options = {"bloom_num_entries": 1000}
    tables = {}
    for name, engine in ((FIXED, BucketEngine.SIMPLE), (RING, BucketEngine.CONSISTENT_HASHING)):
        path = workshop.scratch(f"06-split-{engine.value.lower()}", workdir)
        tables[name] = lf.Table.create(spark, path, record_key=datasets.RECORD_KEY,
                                       partition_field=datasets.PARTITION_FIELD,
                                       precombine_field=datasets.PRECOMBINE_FIELD, table_type=TableType.MERGE_ON_READ,
                                       options={"index_type": IndexType.BUCKET, "bucket_num": buckets,
                                                "bucket_engine": engine, "compact_inline": True,
                                                "compact_inline_max_delta_commits": 1})
    for table in tables.values():
        table.bulk_insert(history, options)
    cold = tables[FIXED].file_slices()
    bytes_per_row = sum(s.size_bytes for s in cold) / sum(s.num_records for s in cold)
    median_bucket = float(pd.Series([s.size_bytes for s in cold]).median())
    threshold = 2.0
    options["max_file_size"] = max_file_size = int(headroom * median_bucket / threshold)
    batch = surge_batch(batch, spec, 1, surge)
    for table in tables.values():
        table.upsert(batch, options)
    hot = spec.batch_date(1).isoformat()
    hot_partition = next(s.partition_path for s in tables[FIXED].file_slices() if s.partition_path.endswith(hot))
    rows = _bucket_rows(tables[FIXED], FIXED, "before the resize") + _bucket_rows(tables[RING], RING, "before the resize")
    ring = tables[RING]
    ring_before = _ring_rows(ring, hot_partition, "before the resize")
    before = {r["file_id"]: r["slice"] for r in rows if r["table"] == RING}
    resized = ring.cluster({**options, "bucket_split_threshold": threshold, "bucket_max_num": 4 * buckets})
    after = _bucket_rows(ring, RING, "after the resize")
    kept = sum(1 for r in after if before.get(r["file_id"]) == r["slice"])
    rows += [dict(r, moment="after the resize") for r in rows if r["table"] == FIXED] + after
    frame = pd.DataFrame(rows).drop(columns="slice")
    rings = pd.DataFrame(ring_before + _ring_rows(ring, hot_partition, "after the resize"))
    return BucketSplit(frame, rings, hot_partition, max_file_size, threshold, bytes_per_row,
                       int(sum(s.num_records for s in ring.file_slices())),
                       resized.rows_written if resized.instant else 0,
                       resized.details.clustering_groups if resized.instant else 0, kept, len(before))
