"""Notebook 06's experiments: one drone table partitioned by day, three workloads, every index run on each, measured by the indexes themselves.

- `time-ordered`: the seed's daily batch (a new day of readings, corrections of the day before);
- `random keys`: the same batch with UUID-like keys (`key_style="random"`), on a table of such keys;
- `moves`: corrections of the history's last day, a share of them re-dated to the next day (a
  clock corrected across midnight), so their partition value changes.

Each index upserts each workload on a fresh copy of its table (BUCKET on a BUCKET table of its own,
RECORD_INDEX on a copy whose record index was built by `rebuild_metadata`), after one untimed
warm-up per index; the runs alternate their order between repetitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from tqdm.auto import tqdm

import labformat as lf
from labformat import datasets
from labformat.lab import workshop
from labformat.lab.sweeps import copy_table
from labformat.model.enums import BucketEngine, IndexType, SortMode, TableType
from labformat.spark.jobs import StepRecorder, conf_override
from labformat.spark.ui import SparkUI

INDEXES = (IndexType.SIMPLE, IndexType.BLOOM, IndexType.BUCKET, IndexType.GLOBAL_SIMPLE, IndexType.GLOBAL_BLOOM,
           IndexType.RECORD_INDEX)
WORKLOADS = ("time-ordered", "random keys", "moves")
GLOBAL = tuple(i.value for i in INDEXES if i.is_global)
# Every global index moves a record whose partition changed (RECORD_INDEX's Hudi default is to keep it in place).
MOVE = {"bloom_update_partition_path": True, "simple_update_partition_path": True,
        "record_index_update_partition_path": True}


@dataclass(frozen=True)
class Workload:
    """One upsert batch and the key style of the table it goes into."""

    name: str
    key_style: str
    batch: DataFrame
    rows: int  # the batch's rows
    moved: int  # of them, records whose partition value differs from the stored one


def _moves(spark, cached: datasets.CachedDataset, spec: datasets.DatasetSpec, share: float) -> DataFrame:
    """Corrections of every reading of the history's last day, `share` of them dated to the next day."""
    history = datasets.load_history(spark, cached)
    last_day = history.agg(F.max("day")).first()[0]
    moved = (F.abs(F.hash("record_key")) % 1000) < int(share * 1000)
    return (history.where(F.col("day") == last_day)
            .withColumn("day", F.when(moved, F.date_add(F.col("day").cast("date"), 1).cast("string")).otherwise(F.col("day")))
            .withColumn("battery_pct", F.col("battery_pct") - 1)
            .withColumn("updated_at", F.col("updated_at") + F.expr("INTERVAL 1 DAY")))


def workloads(spark, spec: datasets.DatasetSpec, move_share: float = 0.05) -> dict[str, Workload]:
    """The three workloads at `spec`'s scale (the random-key dataset generated and cached on first use)."""
    random_spec = datasets.spec(spec.name, key_style="random")
    cached = {"monotonic": datasets.generate(spark, spec), "random": datasets.generate(spark, random_spec)}
    moves = _moves(spark, cached["monotonic"], spec, move_share).persist()
    history_days = datasets.load_history(spark, cached["monotonic"]).select("record_key", F.col("day").alias("old"))
    moved = moves.join(history_days, "record_key").where(F.col("day") != F.col("old")).count()
    out = {
        "time-ordered": Workload("time-ordered", "monotonic", datasets.load_batch(spark, cached["monotonic"], 1), 0, 0),
        "random keys": Workload("random keys", "random", datasets.load_batch(spark, cached["random"], 1), 0, 0),
        "moves": Workload("moves", "monotonic", moves, 0, moved),
    }
    return {name: Workload(w.name, w.key_style, w.batch, w.batch.count(), w.moved) for name, w in out.items()}


def base_tables(spark, spec: datasets.DatasetSpec, bucket_num: int = 4, options: dict | None = None,
                workdir: Path | None = None, name: str = "06") -> dict[tuple[str, IndexType], lf.Table]:
    """Per key style and index: the table its runs copy. The history bulk inserted (GLOBAL_SORT) into a
    table partitioned by day; BUCKET into a BUCKET table of `bucket_num` buckets; RECORD_INDEX on a
    copy of the first whose record index `rebuild_metadata` built."""
    options = dict(options or {})
    out: dict[tuple[str, IndexType], lf.Table] = {}
    for style in ("monotonic", "random"):
        cached = datasets.generate(spark, datasets.spec(spec.name, key_style=style))
        history = datasets.load_history(spark, cached)
        for index in (IndexType.BLOOM, IndexType.BUCKET):
            extra = {"index_type": IndexType.BUCKET, "bucket_num": bucket_num} if index is IndexType.BUCKET else {}
            path = workshop.scratch(f"{name}-{style}-{index.value.lower()}", workdir)
            table = lf.Table.create(spark, path, record_key=datasets.RECORD_KEY, partition_field=datasets.PARTITION_FIELD,
                                    precombine_field=datasets.PRECOMBINE_FIELD, options=extra)
            table.bulk_insert(history, {**options, "bulk_insert_sort_mode": SortMode.GLOBAL_SORT})
            out[(style, index)] = table
        indexed = copy_table(out[(style, IndexType.BLOOM)], f"{name}-{style}-record-index", workdir)
        indexed.rebuild_metadata({"record_index_enable": True})
        out[(style, IndexType.RECORD_INDEX)] = indexed
    return out


def origin(bases: dict, key_style: str, index: IndexType) -> lf.Table:
    """The table an index's run on a workload of `key_style` copies."""
    if index in (IndexType.BUCKET, IndexType.RECORD_INDEX):
        return bases[(key_style, index)]
    return bases[(key_style, IndexType.BLOOM)]


def duplicate_keys(table: lf.Table) -> int:
    """Record keys the table stores more than once (counted by Spark)."""
    return table.read().groupBy("record_key").count().where(F.col("count") > 1).count()


def run_order(workloads: list[str], indexes: list, repeats: int, timed: Iterable[str] | None = None) -> list[tuple]:
    """(repeat, workload, index) in the order `compare` runs them: every workload once, the untimed
    ones first (so each index has run before its timed runs: their warm-up), then the `timed` ones
    (all by default) again up to `repeats`; each repeat reverses the index order, so that no index
    always runs first while the machine warms up."""
    timed = set(workloads if timed is None else timed)
    ordered = [w for w in workloads if w not in timed] + [w for w in workloads if w in timed]
    return [(r, name, i) for r in range(1, repeats + 1) for name in ordered if r == 1 or name in timed
            for i in (indexes if r % 2 else indexes[::-1])]


def compare(bases: dict, loads: dict[str, Workload], indexes: Iterable[IndexType] = INDEXES, repeats: int = 2,
            options: dict | None = None, workdir: Path | None = None, progress: bool = False,
            warm_up: bool = True, timed: Iterable[str] | None = None) -> pd.DataFrame:
    """Every index on every workload on a fresh copy each time: the workloads named in `timed` (all
    by default) `repeats` times, the others once, first (their counts do not change with a repeat,
    and nobody reads their timings). With `warm_up`, each index's timed runs come after a run of it:
    an untimed workload's when there is one, else one extra untimed run (`warm_up=False`: none, for
    a run whose timings nobody reads).

    One row per run: workload, index, repeat, timed (the workload is timed), seconds, tag_s,
    keys_read (record keys the tag step read from data files, as the index counted them),
    index_entries_read (RECORD_INDEX), files_rewritten, files_created, rows_updated, rows_inserted,
    rows_deleted, and duplicates (keys stored twice after the upsert, counted on the first
    repetition's copy of a workload that moves records; None for the others, which cannot)."""
    options = {**(options or {}), **MOVE}
    indexes = [IndexType(i) for i in indexes]
    timed = set(loads if timed is None else timed)

    def once(load: Workload, index: IndexType, tag: str, count_duplicates: bool):
        copy = copy_table(origin(bases, load.key_style, index), f"06-run-{tag}", workdir)
        try:
            report = copy.upsert(load.batch, {**options, "index_type": index})
            return report, (duplicate_keys(copy) if count_duplicates else None)
        finally:
            workshop.drop(copy.path)

    if warm_up and timed >= set(loads):  # no untimed workload runs first
        for index in indexes:
            once(next(iter(loads.values())), index, "warm-up", False)
    rows = []
    for repeat, name, index in tqdm(run_order(list(loads), indexes, repeats, timed), desc="index runs",
                                    disable=not progress):
        report, duplicates = once(loads[name], index, f"{repeat}", repeat == 1 and loads[name].moved > 0)
        funnel = report.funnel
        rows.append({"workload": name, "index": index.value, "repeat": repeat, "timed": name in timed,
                     "seconds": report.seconds,
                     "tag_s": report.step("tag").seconds, "keys_read": funnel.keys_read,
                     "index_entries_read": funnel.index_entries_read,
                     "files_in_affected_partitions": funnel.files_in_affected_partitions,
                     "files_rewritten": report.files_rewritten, "files_created": report.files_created,
                     "rows_updated": report.rows_updated, "rows_inserted": report.rows_inserted,
                     "rows_deleted": report.rows_deleted, "duplicates": duplicates})
    # The workloads in their own order, whatever order they ran in.
    rank = {name: n for n, name in enumerate(loads)}
    return pd.DataFrame(rows).sort_values(["repeat", "workload"], key=lambda c: c.map(rank) if c.name == "workload" else c,
                                          kind="stable", ignore_index=True)


def counts(runs: pd.DataFrame, column: str) -> pd.DataFrame:
    """One exact count per index (rows) and workload (columns), from the first repetition."""
    first = runs[runs.repeat == 1]
    table = first.pivot(index="index", columns="workload", values=column)
    order = [i.value for i in INDEXES if i.value in table.index]
    return table.loc[order, [w for w in WORKLOADS if w in table.columns]].astype("Int64")


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
    table.bulk_insert(load.batch)
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


# ---- bucket sizing: a fixed bucket count against consistent hashing ---------------------------------

FIXED, RING = "fixed: 2 buckets (SIMPLE engine)", "consistent hashing: 2 buckets, split as it grows"


def bucket_growth(spark, spec: datasets.DatasetSpec, days: int = 2, buckets: int = 2, history_files: int = 5,
                  workdir: Path | None = None) -> tuple[pd.DataFrame, int]:
    """Two unpartitioned merge-on-read BUCKET tables of `buckets` buckets, compacted after every write
    (so each bucket is one base file), take the history, then `days` daily batches: one keeps its
    count (SIMPLE engine), the other (CONSISTENT_HASHING) is resized by `Table.cluster()` after every
    step. `max_file_size` is the history's base-file bytes over `history_files`, measured on the first
    table. One row per table and step: buckets, the largest base file, bytes written (write,
    compaction and resize), the rows the resize moved to another file group (each key's file group
    compared before and after), the rows the resize wrote, the rows. Base files carry a 1,000-entry
    bloom filter, not Hudi's 60,000, so that their sizes are the data's. Returns the steps and
    `max_file_size`."""
    cached = datasets.generate(spark, spec)
    options = {"bloom_num_entries": 1000}
    tables = {}
    for name, engine in ((FIXED, BucketEngine.SIMPLE), (RING, BucketEngine.CONSISTENT_HASHING)):
        path = workshop.scratch(f"06-growth-{engine.value.lower()}", workdir)
        tables[name] = lf.Table.create(spark, path, record_key=datasets.RECORD_KEY, partition_field=None,
                                       precombine_field=datasets.PRECOMBINE_FIELD, table_type=TableType.MERGE_ON_READ,
                                       options={"index_type": IndexType.BUCKET, "bucket_num": buckets,
                                                "bucket_engine": engine, "compact_inline": True,
                                                "compact_inline_max_delta_commits": 1})
    history = datasets.load_history(spark, cached)
    written = {name: table.bulk_insert(history, options).bytes_written for name, table in tables.items()}
    max_file_size = sum(s.size_bytes for s in tables[FIXED].file_slices()) // history_files
    options["max_file_size"] = max_file_size
    steps = []
    for day in tqdm(range(days + 1), desc="bucket growth", leave=False):
        for name, table in tables.items():
            if day:
                report = table.upsert(datasets.load_batch(spark, cached, day), options)
                written[name] = report.bytes_written + (report.compaction.bytes_written if report.compaction else 0)
            moved = resized_rows = splits = 0
            if name == RING:
                before = _file_groups(table, "before")
                resized = table.cluster({**options, "bucket_max_num": 64})
                if resized.instant is not None:
                    written[name] += resized.bytes_written
                    resized_rows, splits = resized.rows_written, resized.details.clustering_groups
                    moved = (before.join(_file_groups(table, "after"), "record_key")
                             .where(F.col("before") != F.col("after")).count())
                before.unpersist()
            slices = table.file_slices()
            steps.append({"step": f"day {day}" if day else "history", "table": name, "buckets": len(slices),
                          "largest base file KB": max(s.size_bytes for s in slices) / 1024,
                          "MB written": written[name] / 1024**2, "buckets split": splits,
                          "rows the resize wrote": resized_rows, "rows moved": moved,
                          "rows": table.read().count()})
    return pd.DataFrame(steps), max_file_size


def _file_groups(table: lf.Table, column: str) -> DataFrame:
    """Each key's file group now, as `column` (a log file's name is its file id behind a dot)."""
    file_id = F.regexp_extract(F.col("_hoodie_file_name"), r"^\.?(.{36}-0)", 1)
    frame = table.read().select("record_key", file_id.alias(column)).persist()
    frame.count()  # read now, before the next write changes the table
    return frame
