"""Parameter sweeps the workshop runs: sort modes, indexes, file sizes; each on scratch tables, each a frame of reports.

The notebooks, the ipywidgets explorers (`labformat.lab.widgets`) and `scripts/sweep.py` call
the same functions, so a number in a notebook, a widget and a CSV comes from the same code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd
from tqdm.auto import tqdm

import labformat as lf
from labformat import datasets, workload
from labformat.lab import frames, workshop
from labformat.lab.daily import DailyRun, run_daily_upserts
from labformat.lab.frames import key_ranges_frame
from labformat.lab.projection import CLUSTER_CORES
from labformat.model.enums import BloomFilterTypeCode, IndexType, SortMode


INPUT_PARTITIONS = 4


def bulk_insert_sort_modes(spark, spec: datasets.DatasetSpec, modes: Iterable[str], options: Mapping[str, Any],
                           workdir: Path | None = None, progress: bool = False,
                           input_partitions: int = INPUT_PARTITIONS, key_order: bool = False) -> dict[str, SortModeLoad]:
    """Bulk insert the history once per sort mode; per mode the table, the report and its base files'
    key ranges (with `key_order`, also an `in_key_order` column: are the file's rows stored sorted by
    key; a Spark job per mode).

    The history is spread round-robin over `input_partitions` partitions first,
    as data read from many sources arrives: every partition holds every hour, in no order.
    Then NONE writes each task's keys as they come, which is the point. (A fixed count, not
    the core count, so the files are the same on any machine.) NONE and PARTITION_SORT coalesce
    those partitions into at most `bulk_insert_parallelism` write tasks (`write/bulk_insert.py`).
    """
    from pyspark.sql import functions as F

    cached = datasets.generate(spark, spec)
    # A round-robin repartition alone keeps its source's order: each partition holds a sample of the
    # cache's first history file, then one of its second (two at `small`), each a run of time, and a
    # file coalesced from two partitions would show it. Ordered by a hash of the key: in no order.
    history = (datasets.load_history(spark, cached).repartition(input_partitions)
               .sortWithinPartitions(F.xxhash64(datasets.RECORD_KEY)))
    result = {}
    for mode in tqdm(list(modes), desc="sort modes", disable=not progress):
        table = lf.Table.create(spark, workshop.scratch(f"sort-{mode.lower()}", workdir), record_key=datasets.RECORD_KEY,
                                precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None)
        report = table.bulk_insert(history, {**options, "bulk_insert_sort_mode": mode})
        files = key_ranges_frame(table)
        if key_order:
            files["in_key_order"] = files["file_id"].map(frames.files_in_key_order(table))
        result[mode] = SortModeLoad(table, report, files)
    return result


@dataclass(frozen=True)
class SortModeLoad:
    """One sort mode's bulk insert of the history: the table, its report, its base files' key ranges."""

    table: lf.Table
    report: lf.WriteReport
    files: pd.DataFrame


def copy_table(table: lf.Table, name: str, workdir: Path | None = None) -> lf.Table:
    """A copy of `table` (its whole folder) at a scratch path: one bulk insert, many experiments."""
    target = workshop.scratch(name, workdir)
    workshop.copy_table(table.path, target)
    return lf.Table.open(table.spark, target)


def upsert_days(table: lf.Table, spec: datasets.DatasetSpec, days: Iterable[int],
                options: Mapping[str, Any] | None = None, progress: bool = False) -> pd.DataFrame:
    """Upsert the given batch days into `table`; one row per day (`DailyRun.to_pandas` columns)."""
    return run_days(table, spec, days, options, progress).to_pandas()


def daily_upserts(spark, spec: datasets.DatasetSpec, name: str, index_type: IndexType = IndexType.BLOOM,
                  options: Mapping[str, Any] | None = None, days: int | None = None,
                  workdir: Path | None = None, progress: bool = False) -> DailyRun:
    """`run_daily_upserts` on a scratch table called `name`, with an optional progress bar per day."""
    total = days or spec.batch_days
    bar = tqdm(total=total, desc=f"{index_type} upserts", unit="day", disable=not progress)
    try:
        return run_daily_upserts(spark, spec, workshop.scratch(name, workdir), index_type=index_type, options=options,
                                 days=total, on_day=lambda day, report: bar.update(1))
    finally:
        bar.close()


def compare_indexes(spark, spec: datasets.DatasetSpec, indexes: Iterable[str], days: int,
                    options: Mapping[str, Any] | None = None, workdir: Path | None = None,
                    progress: bool = False) -> pd.DataFrame:
    """The same daily upserts through each index type: one row per index and day (`DailyRun.to_pandas`)."""
    frames = [daily_upserts(spark, spec, f"index-{index.lower()}", index, options, days, workdir, progress).to_pandas()
              for index in indexes]
    return pd.concat(frames, ignore_index=True)


def warm_up(table: lf.Table, spec: datasets.DatasetSpec, options: Mapping[str, Any] | None = None,
            day: int = 1) -> pd.DataFrame:
    """One upsert of `day` on a throw-away copy of `table`, kept out of the timings that follow: the
    session's first upserts pay for JIT compilation and Python worker start-up, which would otherwise
    pass for a trend. Returns its row (`day_again`'s columns), to show what that first upsert cost."""
    return day_again(table, spec, day, options, repeats=1)


def day_again(table: lf.Table, spec: datasets.DatasetSpec, day: int = 1, options: Mapping[str, Any] | None = None,
              repeats: int = 3) -> pd.DataFrame:
    """`day`'s upsert again, `repeats` times, each on a fresh copy of `table` (the table as it was
    before that day), deleted after: one row per run (`DailyRun.to_pandas` columns plus `run`).

    Run after a month of upserts, it tells the session's warm-up from the table's growth: the same
    write on the same table, only later in the session."""
    cached = datasets.generate(table.spark, spec)
    frames = []
    for run in range(1, repeats + 1):
        copy = copy_table(table, f"{Path(table.path).name}-again-{run}")
        try:
            report = copy.upsert(datasets.load_batch(table.spark, cached, day), dict(options or {}))
            frames.append(DailyRun(copy.path, copy.index_type, spec.key_style, None, (report,), (day,))
                          .to_pandas().assign(run=run))
        finally:
            workshop.drop(copy.path)
    return pd.concat(frames, ignore_index=True)


def run_days(table: lf.Table, spec: datasets.DatasetSpec, days: Iterable[int],
             options: Mapping[str, Any] | None = None, progress: bool = False) -> DailyRun:
    """Upsert the given batch days into `table`, in order; every report kept (`DailyRun.to_pandas()` per day)."""
    cached = datasets.generate(table.spark, spec)
    days = list(days)
    reports = tuple(table.upsert(datasets.load_batch(table.spark, cached, day), dict(options or {}))
                    for day in tqdm(days, desc="upserts", unit="day", disable=not progress))
    return DailyRun(table.path, table.index_type, spec.key_style, None, reports, tuple(days))


def compare_indexes_timed(base: lf.Table, spec: datasets.DatasetSpec, indexes: Iterable[str], day: int = 1,
                          options: Mapping[str, Any] | None = None, repeats: int = 3,
                          workdir: Path | None = None, progress: bool = False) -> pd.DataFrame:
    """Upsert batch `day` through each index, `repeats` times, each on a fresh copy of the bulk insert;
    indexes alternate within a repetition, after one untimed warm-up per index.

    BLOOM and SIMPLE run on copies of `base` (a write may switch between them); BUCKET needs its
    own layout, so its history is bulk inserted once into a BUCKET table with `base`'s bulk-insert
    options. One row per run: index, repeat, bucket_num (BUCKET only), seconds, tag_s, write_s, keys_read_by_tag (as each index
    counted them: SIMPLE every key its scan read, BLOOM those of the files the exact check opened,
    BUCKET none, since it opens no file), files_rewritten, files_created, file_groups_after.
    """
    spark = base.spark
    cached = datasets.generate(spark, spec)
    batch = datasets.load_batch(spark, cached, day)
    options = dict(options or {})
    origins = {}
    indexes = [IndexType(i) for i in indexes]
    for index in indexes:
        if index is IndexType.BUCKET:
            bucket = lf.Table.create(spark, workshop.scratch("index-bucket-base", workdir), record_key=datasets.RECORD_KEY,
                                     precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None,
                                     options={"index_type": IndexType.BUCKET})
            bucket.bulk_insert(datasets.load_history(spark, cached), {**options, "bulk_insert_sort_mode": SortMode.GLOBAL_SORT})
            origins[index] = bucket
        else:
            origins[index] = base

    def once(index: IndexType, name: str) -> lf.WriteReport:
        copy = copy_table(origins[index], name, workdir)
        try:
            return copy.upsert(batch, {**options, "index_type": index})
        finally:
            workshop.drop(copy.path)

    names = list(origins)
    for index in names:
        once(index, f"index-{index.lower()}-warm-up")
    rows = []
    runs = [(r, i) for r in range(1, repeats + 1) for i in (names if r % 2 else names[::-1])]
    for repeat, index in tqdm(runs, desc="indexes", disable=not progress):
        report = once(index, f"index-{index.lower()}")
        bucket_num = origins[index].config.bucket_num if index is IndexType.BUCKET else None
        rows.append({"index": index.value, "repeat": repeat, "bucket_num": bucket_num,
                     "seconds": report.seconds, "tag_s": report.step("tag").seconds,
                     "write_s": report.step("write").seconds, "keys_read_by_tag": report.funnel.keys_read,
                     "files_rewritten": report.files_rewritten, "files_created": report.files_created,
                     "file_groups_after": len(key_ranges_frame(origins[index])) + report.files_created})
    return pd.DataFrame(rows)


def file_size_sweep(spark, spec: datasets.DatasetSpec, history_files: Iterable[int] = (64, 16, 4), day: int = 1,
                    repeats: int = 5, project_to: int = CLUSTER_CORES, query: str = "drone_id filter",
                    small_file_ratio: float | None = None, workdir: Path | None = None,
                    progress: bool = False) -> pd.DataFrame:
    """The file-size trade-off: per size, the history bulk inserted as `n` GLOBAL_SORT base files with
    Hudi's sizes scaled to them (`workload.scaled_sizes`), then batch `day` upserted; then `query` on
    every table: once counting its storage reads (untimed; a scan of the same shape as the timed ones,
    it warms every core), then `repeats` timed rounds, the tables interleaved (the order reversed
    every other round), so that a drift of the machine's load falls on every size alike.

    One row per size: history_files (planned), bulk_insert_files (written), hours_per_file (of
    readings in a history file, as planned), path (the table's), max_file_size
    and small_file_limit (bytes; `small_file_ratio` overrides Hudi's 100/120), files (after the
    upsert). The upsert: files_rewritten, rows_rewritten and mb_rewritten (new slices of existing
    file groups: the rows copy-on-write copied, and their bytes), write_stage_tasks, write_stage_s
    (here), write_task_min_s and write_task_max_s (its shortest and longest task),
    projected_write_stage_s (the measured write tasks laid onto `project_to` cores), upsert_s. The
    query, by its own counts: files_opened (by its tasks, a footer read each),
    planning_entries (column-stats entries planning read from the metadata table), scan_tasks,
    read_requests (each a ranged GET on S3; opening a file is one more request, a HEAD) and
    mb_read; and its times: planning_s and query_s (medians) with planning_runs_s and
    query_runs_s (every timed run; a query is planning, then the scan of every column of the
    matching rows).
    """
    import statistics

    cached = datasets.generate(spark, spec)
    history, batch = datasets.load_history(spark, cached), datasets.load_batch(spark, cached, day)
    rows, tables = [], []
    for n in tqdm(list(history_files), desc="file sizes", disable=not progress):
        table = lf.Table.create(spark, workshop.scratch(f"size-{n}-files", workdir), record_key=datasets.RECORD_KEY,
                                precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None)
        table.bulk_insert(history, workload.history_options(spec, n))
        written = len(table.file_slices())  # measured: the plan asked for n
        sizes = workload.scaled_sizes(table)
        # The record-size estimate always from the bulk insert (threshold 0): otherwise a history
        # smaller than the small-file limit falls back to Hudi's 1 KB guess and opens a dozen files
        # for one day's inserts (02 shows that effect on its own); here only the file size moves.
        options = {**sizes.options, "record_size_estimation_threshold": 0}
        if small_file_ratio is not None:
            options["small_file_limit"] = int(sizes.max_file_size * small_file_ratio)
        upsert = table.upsert(batch, options)
        write = frames.write_stage(frames.task_timeline(spark, upsert, "write"))
        tables.append(table)
        durations = write["duration"] if len(write) else pd.Series([0.0])
        rows.append({"history_files": n, "bulk_insert_files": written, "hours_per_file": spec.history_days * 24 / n,
                     "path": str(table.path),
                     "max_file_size": options["max_file_size"],
                     "small_file_limit": options["small_file_limit"], "files": len(table.file_slices()),
                     "files_rewritten": upsert.files_rewritten,
                     "rows_rewritten": sum(f.rows for f in upsert.files if not f.created),
                     "mb_rewritten": sum(f.size_bytes for f in upsert.files if not f.created) / 1024**2,
                     "write_stage_tasks": len(write), "write_stage_s": frames.span_seconds(write),
                     "write_task_min_s": float(durations.min()), "write_task_max_s": float(durations.max()),
                     "projected_write_stage_s": frames.span_seconds(frames.project(write, project_to)),
                     "upsert_s": upsert.seconds})
    conditions = [workload.standard_queries(table, spec)[query] for table in tables]
    for row, table, condition in zip(rows, tables, conditions):
        # Counted, never timed (its reads pass through Python); a scan of the same shape as the timed
        # ones, it is their warm-up too: the first scan of a set of files pays for listing and caches.
        counted = table.scan(condition).counting().measure()
        d = counted.details
        row.update(files_opened=d.files_opened, planning_entries=d.stats_entries_read, scan_tasks=d.scan_tasks,
                   read_requests=d.read_requests, mb_read=d.bytes_read / 1024**2 if isinstance(d.bytes_read, int)
                   else d.bytes_read, planning_runs_s=[], query_runs_s=[])
    order = list(range(len(tables)))
    for repeat in tqdm(range(repeats), desc="query rounds", disable=not progress):
        for i in (order if repeat % 2 == 0 else order[::-1]):
            _, scan = tables[i].query(conditions[i])
            rows[i]["planning_runs_s"].append(scan.planning_seconds)
            rows[i]["query_runs_s"].append(scan.seconds)
    for row in rows:
        row["planning_s"] = statistics.median(row["planning_runs_s"]) if row["planning_runs_s"] else float("nan")
        row["query_s"] = statistics.median(row["query_runs_s"]) if row["query_runs_s"] else float("nan")
    return pd.DataFrame(rows)


def tradeoff_numbers(tradeoff: pd.DataFrame) -> str:
    """What `viz.plot_file_size_tradeoff` shows of a `file_size_sweep`, in words: one line per size."""
    lines = []
    for _, r in tradeoff.iterrows():
        runs = [float(x) for x in r["query_runs_s"]]
        timed = (f"{r.query_s:.3f} s ({min(runs):.3f}-{max(runs):.3f} over {workshop.runs(len(runs))})" if runs
                 else "not timed")
        tasks = (f", {r.write_task_min_s:.2f}-{r.write_task_max_s:.2f} s each" if "write_task_max_s" in r.index
                 else "")
        read = f", {r.mb_read:.1f} MB read" if isinstance(r.get("mb_read"), (int, float)) else ""
        lines.append(f"{r.hours_per_file:g} h a file ({r.max_file_size / 1024**2:.2g} MB max): {int(r.rows_rewritten):,} "
                     f"rows rewritten, {int(r.write_stage_tasks)} write tasks{tasks}, write stage on {CLUSTER_CORES} "
                     f"cores {r.projected_write_stage_s:.2f} s (projected); the query opened {int(r.files_opened)} "
                     f"files with {r.read_requests} read requests{read}, in {int(r.scan_tasks)} tasks, {timed}")
    return "\n".join(lines)


def file_read_seconds(tables: Iterable[lf.Table], rounds: int = 5) -> pd.DataFrame:
    """What a file costs a scan on this storage, measured without Spark: every base file of each table
    read whole, one after the other on one thread (as a scan's task reads its files), after one
    untimed round; the tables interleaved each round. One row per table: files, the seconds of a
    round (median, min, max over `rounds`). The rows are the same in every table, so the rounds
    differ by what each file costs beside its rows: the open, the footer, a request per column chunk.
    """
    import statistics

    from labformat.fileformat.parquet_io import read_base_file

    tables = list(tables)
    listed = [[s.path for s in t.file_slices()] for t in tables]
    runs: list[list[float]] = [[] for _ in tables]
    for round_ in range(rounds + 1):
        order = range(len(tables)) if round_ % 2 == 0 else reversed(range(len(tables)))
        for i in order:
            storage = tables[i].context().storage
            started = time.perf_counter()
            for path in listed[i]:
                read_base_file(storage, path)
            if round_ > 0:
                runs[i].append(time.perf_counter() - started)
    return pd.DataFrame([{"files": len(paths), "median_s": statistics.median(r), "min_s": min(r), "max_s": max(r)}
                         for paths, r in zip(listed, runs)])


def projected_file_cost(tradeoff: pd.DataFrame, per_file_s: float) -> pd.DataFrame:
    """A projection, not a measurement: per size of a `file_size_sweep`, the seconds its query's extra
    files (beyond the size that opened the fewest) add to the scan at `per_file_s` each, shared by its
    scan tasks (one per core), beside what the timed runs measured: their median and their spread
    (max - min). One row per hours_per_file."""
    fewest = int(tradeoff["files_opened"].min())
    rows = []
    for _, r in tradeoff.iterrows():
        runs = [float(x) for x in r["query_runs_s"]]
        extra = int(r["files_opened"]) - fewest
        rows.append({"hours_per_file": r["hours_per_file"], "files_opened": int(r["files_opened"]),
                     "extra_files": extra, "scan_tasks": int(r["scan_tasks"]),
                     "projected_extra_s": extra * max(per_file_s, 0.0) / max(int(r["scan_tasks"]), 1),
                     "measured_median_s": float(pd.Series(runs).median()) if runs else float("nan"),
                     "measured_spread_s": (max(runs) - min(runs)) if runs else float("nan")})
    return pd.DataFrame(rows).set_index("hours_per_file")


def projection_note(projected: pd.DataFrame) -> str:
    """`projected_file_cost`'s verdict in words: for the size with the most extra files, its projected
    extra seconds against the spread of its timed runs."""
    row = projected.loc[projected["extra_files"].idxmax()]
    hours = projected["extra_files"].idxmax()
    side = "below" if row.projected_extra_s < row.measured_spread_s else "above"
    return (f"{hours:g} h a file: {int(row.extra_files)} extra files add {row.projected_extra_s:.3f} s by the "
            f"projection, {side} the spread of its timed runs ({row.measured_spread_s:.3f} s, max - min)")


def per_file_note(per_file_s: float, reads: pd.DataFrame | None = None) -> str:
    """The measured cost of one more file, in words (a slope at or below zero: nothing this run could
    measure); with `reads` (`file_read_seconds`), also the slope between each two neighbouring file
    counts, which shows whether one cost a file fits every count."""
    if per_file_s <= 0:
        said = ("one more file costs a read nothing this run could measure (the slope over the rounds below "
                f"is {per_file_s * 1000:.2f} ms): the projection counts it as 0")
    else:
        said = f"one more file costs a read {per_file_s * 1000:.2f} ms here (measured: the slope over the rounds below)"
    if reads is None:
        return said
    steps = neighbour_slopes(reads)
    if len(steps) > 1:
        said += "; between neighbouring sizes: " + ", ".join(
            f"{a} to {b} files {slope * 1000:.2f} ms a file" for a, b, slope in steps)
    return said


def neighbour_slopes(reads: pd.DataFrame) -> list[tuple[int, int, float]]:
    """(fewer files, more files, seconds per extra file) between each two neighbouring file counts of
    `file_read_seconds`' medians, fewest files first."""
    ordered = reads.groupby("files")["median_s"].median().sort_index()
    counts = [int(n) for n in ordered.index]
    return [(a, b, float((ordered[b] - ordered[a]) / (b - a))) for a, b in zip(counts, counts[1:])]


def per_file_seconds(reads: pd.DataFrame) -> float:
    """The seconds one more file adds to a read of the same rows: the least-squares slope of
    `file_read_seconds`' medians over its file counts (0 when every table has as many files)."""
    import numpy as np

    files, seconds = reads["files"].to_numpy(dtype=float), reads["median_s"].to_numpy(dtype=float)
    if len(set(files)) < 2:
        return 0.0
    return float(np.polyfit(files, seconds, 1)[0])


def bloom_filter_sizes(keys_per_file: int, fpp: float = 1e-9,
                       fractions: Iterable[float] = (1, 1 / 3, 1 / 10)) -> list[tuple[int, float]]:
    """Filter sizes worth sweeping for base files of about `keys_per_file` keys: Hudi's default
    (60,000 @ `fpp`), then num_entries = each fraction of the keys per file, at `fpp`.

    At fpp 1e-9 a filter has 30 hash functions, so an overfull one degrades steeply: holding
    twice its num_entries it passes ~0.02% of absent keys, three times ~2%, ten times ~97%
    (`BloomSpec.predicted_fpp`). Keys per file at `tiny` are ~700, at `small` tens of thousands:
    the fractions, not absolute sizes, make the lesson show at both.
    """
    from labformat.config import option

    default = option("bloom_num_entries").default
    sizes = [(default, fpp)] + [(max(1, round(keys_per_file * f)), fpp) for f in fractions]
    return list(dict.fromkeys(sizes))


def bloom_filter_sweep(spark, spec: datasets.DatasetSpec, filters: Iterable[tuple[int, float]], corrections: int = 8,
                       files: int = workload.HISTORY_FILES, options: Mapping[str, Any] | None = None,
                       workdir: Path | None = None, progress: bool = False,
                       history_days: int | None = None) -> pd.DataFrame:
    """Per bloom filter (num_entries, fpp[, type: SIMPLE, the default, or DYNAMIC_V0 with
    `options`' bloom_dynamic_max_entries]): bulk insert the history (its last `history_days`
    days, all by default) with sort mode NONE as `files` base files, then upsert `corrections`
    corrected readings of it through the BLOOM index.

    NONE from round-robin input (as in 01) gives every file readings of every hour, so every
    file's key range spans the whole history: range pruning keeps every file for every key, and
    only the bloom filters tell the files apart. The corrections are few (a late micro-batch), so
    most files hold none of them: a file whose filter lets one of the keys through in vain is
    opened by the exact check for nothing, and all its keys are read. That is what a filter sized
    for fewer keys than a file holds costs (seed 003): file reads, not just probes.

    One row per filter: num_entries, fpp, filter_type, keys_per_file (median rows of the base files),
    predicted_fpp (of that filter holding keys_per_file keys), filter_rows (DYNAMIC_V0 grows a row
    of num_entries keys at a time; SIMPLE has one), corrections, the
    file-level funnel (files_in_snapshot, files_after_range_pruning, files_after_bloom: the files
    the exact check opened, files_matched: those holding a corrected key,
    files_false_positives: opened in vain), the key-level funnel (`viz.KEY_FUNNEL_COLUMNS`),
    tag_s (seconds of the tag step) and seconds (the whole upsert). The corrections are the same
    keys for every filter (the history's `corrections` keys of lowest hash), each with one minute
    newer `updated_at`.
    """
    from pyspark.sql import functions as F

    from labformat.fileformat.bloom_filter import BloomSpec
    from labformat.lab.viz import KEY_FUNNEL_COLUMNS

    cached = datasets.generate(spark, spec)
    history = datasets.load_history(spark, cached)
    if history_days is not None and history_days < spec.history_days:
        first = spec.day_date(spec.history_days - history_days)
        history = history.where(F.to_date("ts") >= F.lit(first))
    fixes = (history.orderBy(F.xxhash64(datasets.RECORD_KEY), datasets.RECORD_KEY).limit(corrections)
             .withColumn(datasets.PRECOMBINE_FIELD, F.col(datasets.PRECOMBINE_FIELD) + F.expr("INTERVAL 1 MINUTE")))
    spread = history.repartition(files)  # round-robin: every task gets readings of every hour
    rows = []
    for num_entries, fpp, *kind in tqdm(list(filters), desc="bloom filters", disable=not progress):
        filter_type = BloomFilterTypeCode(kind[0]) if kind else BloomFilterTypeCode.SIMPLE
        write_options = {**dict(options or {}), "bloom_num_entries": num_entries, "bloom_fpp": fpp,
                         "bloom_filter_type": filter_type}
        name = f"bloom-{num_entries}-{fpp:g}" + ("" if filter_type is BloomFilterTypeCode.SIMPLE else f"-{filter_type.lower()}")
        table = lf.Table.create(spark, workshop.scratch(name, workdir),
                                record_key=datasets.RECORD_KEY, precombine_field=datasets.PRECOMBINE_FIELD,
                                partition_field=None, options={"index_type": IndexType.BLOOM})
        table.bulk_insert(spread, {**write_options, "bulk_insert_sort_mode": SortMode.NONE,
                                   "bulk_insert_parallelism": files})
        keys_per_file = int(key_ranges_frame(table)["rows"].median())
        report = table.upsert(fixes, write_options)
        funnel = report.funnel
        bloom = BloomSpec(type_code=filter_type, num_entries=num_entries, fpp=fpp,
                          max_entries=write_options.get("bloom_dynamic_max_entries", BloomSpec.max_entries))
        row = {"num_entries": num_entries, "fpp": fpp, "filter_type": filter_type.value, "keys_per_file": keys_per_file,
               "predicted_fpp": bloom.predicted_fpp(keys_per_file),
               "filter_rows": len(bloom.row_sizes(keys_per_file)),
               "corrections": report.rows_updated,
               "files_in_snapshot": funnel.files_in_snapshot,
               "files_after_range_pruning": funnel.after_range_pruning,
               "files_after_bloom": funnel.after_bloom, "files_matched": funnel.matched,
               "files_false_positives": funnel.false_positives}
        row.update({key: value for key, value in funnel.as_dict().items() if key in KEY_FUNNEL_COLUMNS})
        row.update(tag_s=report.step("tag").seconds, seconds=report.seconds)
        rows.append(row)
    return pd.DataFrame(rows)


def first_upserts(spark, spec: datasets.DatasetSpec, name: str, options: Mapping[str, Any], days=(1, 2),
                  workdir: Path | None = None) -> pd.DataFrame:
    """A table that starts empty, then upserts `days`: per day, step 5's estimate and its source, the
    records each new file group was planned for (`max_file_size // estimate`), the new files' mean
    records and KB, and the small files step 6 filled. With no commit history the estimate is
    `hoodie.copyonwrite.record.size.estimate` (1 KB), whatever the records really take."""
    from labformat.config import parse_size

    table = lf.Table.create(spark, workshop.scratch(name, workdir), record_key=datasets.RECORD_KEY,
                            precombine_field=datasets.PRECOMBINE_FIELD)
    max_file_size = parse_size(options["max_file_size"])
    rows = []
    for day, report in zip(days, run_days(table, spec, days, options).days):
        new = [f for f in report.files if f.created]
        d = report.details
        rows.append({"day": day, "record_size_estimate": d.record_size, "estimate_from": d.record_size_source,
                     "records_per_new_file_planned": max_file_size // d.record_size,
                     "files_created": len(new), "inserts": report.rows_inserted,
                     "mean_records_per_new_file": round(sum(f.rows for f in new) / len(new)) if new else 0,
                     "mean_kb_per_new_file": round(sum(f.size_bytes for f in new) / len(new) / 1024, 1) if new else 0.0,
                     "small_files": d.small_files,
                     "small_file_inserts": sum(f.inserts for f in report.files if not f.created)})
    return pd.DataFrame(rows)
