"""The merge-on-read lesson (notebook 04): one month of late corrections into a copy-on-write and a merge-on-read table, what each write cost and what a query then read, and how often to compact.

`side_by_side` runs the two tables day by day, alternating, so drifts of a shared machine hit
both alike: per day the upsert (and the inline compaction it may trigger), then one snapshot
query that no file can be skipped for. `before_and_after_compaction` times the query again,
repeated after a warm-up, on the very same table states (time travel: as of the delta commit that
triggered a compaction, as of the compaction, and the copy-on-write table as of that day).
`compaction_sweep` runs merge-on-read tables side by side with different
`hoodie.compact.inline.max.delta.commits`. Every number comes from the write and scan reports.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
from tqdm.auto import tqdm

import labformat as lf
from labformat import datasets
from labformat.lab import workshop
from labformat.model.enums import TableType

COW, MOR = TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ
LABELS = {COW: "copy-on-write", MOR: "merge-on-read"}
# Hudi's default `hoodie.compact.inline.max.delta.commits`.
HUDI_MAX_DELTA_COMMITS = 5
# A filter no file can be skipped for (every file holds every drone): the query reads every file slice.
FULL_SCAN = "drone_id = 'drone0001'"
SWEEP_DAYS = 4  # Hudi's every-5 compaction once (the bulk insert is delta commit 1)
# The side-by-side run's days: ten give Hudi's every-5 compaction twice (the bulk insert is delta
# commit 1) at a third of a month's time; a preset with fewer batch days runs them all.
SIDE_BY_SIDE_DAYS = 10
# The history as this many GLOBAL_SORT base files (02 and 03 use 32): every one of them takes a late
# correction each day whatever their number, and fewer files keep ten days of two tables and their
# queries within a few minutes on a laptop.
HISTORY_FILES = 8


def side_by_side_days(spec: datasets.DatasetSpec) -> int:
    """The days `side_by_side` upserts: `SIDE_BY_SIDE_DAYS`, or every batch day of a shorter preset."""
    return min(spec.batch_days, SIDE_BY_SIDE_DAYS)


def compaction_every(spec: datasets.DatasetSpec) -> int:
    """Hudi's default of 5 delta commits when the side-by-side run's days reach it at least twice; else
    2 (the `tiny` preset's 3 days would never compact at 5)."""
    return HUDI_MAX_DELTA_COMMITS if (side_by_side_days(spec) + 1) // HUDI_MAX_DELTA_COMMITS >= 2 else 2


def expected_compactions(days: int, every: int | None) -> int:
    """Inline compactions `days` upserts trigger after the bulk insert: that is a delta commit too, so
    a compaction follows delta commit `every`, `2 x every`, ... of `days + 1`."""
    return 0 if every is None else (days + 1) // every


def sweep_settings(spec: datasets.DatasetSpec) -> tuple[int | None, ...]:
    """`max.delta.commits` values the sweep compares (None: never compact): (2, 5, never), or (1, 2,
    never) when the sweep's days are too few for 5 to compact at all (the bulk insert counts as one)."""
    days = min(spec.batch_days, SWEEP_DAYS)
    return (2, HUDI_MAX_DELTA_COMMITS, None) if days + 1 >= HUDI_MAX_DELTA_COMMITS else (1, 2, None)


def setting_label(every: int | None) -> str:
    return "never" if every is None else f"every {every}"


def load(spark, spec: datasets.DatasetSpec, path: Path, table_type: TableType) -> lf.Table:
    """A drone table of `table_type` with the history bulk inserted as the workshop does, as HISTORY_FILES
    GLOBAL_SORT base files."""
    from labformat.lab.sizing import history_options

    cached = datasets.generate(spark, spec)
    table = lf.Table.create(spark, path, record_key=datasets.RECORD_KEY, precombine_field=datasets.PRECOMBINE_FIELD,
                            table_type=table_type)
    table.bulk_insert(datasets.load_history(spark, cached), history_options(spec, HISTORY_FILES))
    return table


def inline_options(every: int | None) -> dict[str, Any]:
    """The write options of inline compaction every `every` delta commits (None: off)."""
    if every is None:
        return {"hoodie.compact.inline": False}
    return {"hoodie.compact.inline": True, "hoodie.compact.inline.max.delta.commits": every}


def upsert_and_query(table: lf.Table, batch, options: dict[str, Any], condition: str = FULL_SCAN) -> dict[str, Any]:
    """One day: the upsert (and its inline compaction, if any), wall-timed, then the snapshot query once."""
    started = time.perf_counter()
    report = table.upsert(batch, options)
    write_s = time.perf_counter() - started
    compaction = report.compaction
    _, scan = table.query(condition)
    return {
        "instant": report.instant,
        "write_s": write_s,
        "compaction_s": compaction.seconds if compaction else 0.0,
        # Two of the upsert's steps: the index lookup and the write (copy-on-write rewrites base
        # files, merge-on-read appends logs).
        "tag_s": report.step("tag").seconds,
        # Key ranges the BLOOM index kept, and the log files it opened: none, since a log of updates
        # holds no key its base file lacks (inserts go to base files).
        "slices_after_range_pruning": report.funnel.after_range_pruning,
        "index_logs_read": report.funnel.log_files_read,
        "write_step_s": report.step("write").seconds,
        "upsert_bytes": report.bytes_written,
        "compaction_bytes": compaction.bytes_written if compaction else 0,
        "bytes_written": report.bytes_written + (compaction.bytes_written if compaction else 0),
        "files_rewritten": report.files_rewritten,
        # Base files rewritten that took no insert: rewritten for updates alone (copy-on-write's cost).
        "rewritten_for_updates": sum(1 for f in report.files if not f.created and not f.log_file and not f.inserts),
        "log_files_written": report.log_files_written,
        "files_created": report.files_created,
        "compacted": compaction is not None,
        "compaction_instant": compaction.instant if compaction else None,
        "slices_compacted": compaction.details.file_slices_compacted if compaction else 0,
        "query_s": scan.seconds,
        "files_read": scan.funnel.files_read,
        "logs_read": scan.details.log_files_read,
        "slices_merged": scan.details.file_slices_merged,
        "bytes_read": scan.bytes_scanned,
        "rows": scan.rows_returned,
    }


@dataclass(frozen=True)
class SideBySide:
    """The month into both tables: one row per (table, day) in `days`; the tables themselves for later reads."""

    days: pd.DataFrame
    tables: dict[str, lf.Table]
    every: int
    options: dict[str, Any]
    condition: str

    def of(self, table_type: TableType) -> pd.DataFrame:
        return self.days[self.days["table_type"] == table_type].set_index("day")

    @property
    def compaction_days(self) -> list[int]:
        mor = self.of(MOR)
        return [int(d) for d in mor.index[mor["compacted"]]]

    def totals(self) -> pd.DataFrame:
        """Per table over the month: write seconds (with compactions), MB written, files rewritten,
        log files written, compactions, median query seconds, log files read."""
        grouped = self.days.groupby("table")
        return pd.DataFrame({
            "write_s": grouped["write_s"].sum(), "compactions": grouped["compacted"].sum(),
            "mb_written": grouped["bytes_written"].sum() / 2**20, "files_rewritten": grouped["files_rewritten"].sum(),
            "log_files_written": grouped["log_files_written"].sum(), "logs_read": grouped["logs_read"].sum(),
            "median_query_s": grouped["query_s"].median()}).loc[[LABELS[COW], LABELS[MOR]]]


def side_by_side(spark, spec: datasets.DatasetSpec, every: int, days: int | None = None,
                 workdir: Path | None = None, progress: bool = False) -> SideBySide:
    """Bulk insert the history into a copy-on-write and a merge-on-read table (inline compaction every
    `every` delta commits), then upsert each of `days` days (`side_by_side_days` by default) into both, alternating, each followed by one
    snapshot query (`FULL_SCAN`). Both use the workshop's sizes, scaled to the copy-on-write table's
    bulk-inserted files (lab.sizing.scaled_sizes)."""
    from labformat.lab.sizing import scaled_sizes

    cached = datasets.generate(spark, spec)
    tables = {t: load(spark, spec, workshop.scratch(f"04-{LABELS[t]}", workdir), t) for t in (COW, MOR)}
    options = scaled_sizes(tables[COW]).options
    per_table = {COW: options, MOR: {**options, **inline_options(every)}}
    for table in tables.values():  # untimed: the first scan of a table pays for listings and Python workers
        table.query(FULL_SCAN)
    rows = []
    for day in tqdm(range(1, (days or side_by_side_days(spec)) + 1), desc="days", disable=not progress):
        batch = datasets.load_batch(spark, cached, day)
        for table_type, table in tables.items():
            rows.append({"table": LABELS[table_type], "table_type": table_type.value, "day": day,
                         **upsert_and_query(table, batch, per_table[table_type])})
    return SideBySide(pd.DataFrame(rows), tables, every, per_table[MOR], FULL_SCAN)


def differing_rows(a: lf.Table, b: lf.Table) -> int:
    """Rows (data columns) one table's snapshot holds and the other's does not, both ways; counted by Spark."""
    columns = list(datasets.COLUMNS)
    left, right = a.read().select(*columns), b.read().select(*columns)
    return left.exceptAll(right).count() + right.exceptAll(left).count()


def _timed_query(table: lf.Table, condition: str, as_of: str) -> tuple[float, Any]:
    _, scan = table.query(condition, as_of=as_of)
    return scan.seconds, scan


def before_and_after_compaction(run: SideBySide, repeats: int = 3) -> pd.DataFrame:
    """The snapshot query on one day's data three ways, via time travel: merge-on-read as of the delta
    commit that triggered the last compaction (its logs merged on read), as of that compaction
    (base files only), and copy-on-write as of the same day. One untimed run of each, then
    `repeats` rounds alternating the three; medians and min-max."""
    if not run.compaction_days:
        raise lf.LabformatError("no compaction ran in this run: nothing to compare before and after")
    day = run.compaction_days[-1]
    mor, cow = run.of(MOR).loc[day], run.of(COW).loc[day]
    contenders = [("merge-on-read, before compaction (logs)", run.tables[MOR], mor["instant"]),
                  ("merge-on-read, after compaction", run.tables[MOR], mor["compaction_instant"]),
                  ("copy-on-write", run.tables[COW], cow["instant"])]
    for _, table, as_of in contenders:
        _timed_query(table, run.condition, as_of)
    times: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
    scans = {}
    for _ in range(repeats):
        for name, table, as_of in contenders:
            seconds, scans[name] = _timed_query(table, run.condition, as_of)
            times[name].append(seconds)
    return pd.DataFrame([{"read": name, "day": day, "median_s": statistics.median(times[name]),
                          "min_s": min(times[name]), "max_s": max(times[name]), "runs": len(times[name]),
                          "files_read": scans[name].funnel.files_read,
                          "logs_read": scans[name].details.log_files_read, "rows": scans[name].rows_returned}
                         for name, _, _ in contenders])


def read_optimized_vs_snapshot(run: SideBySide) -> pd.DataFrame:
    """The merge-on-read table as of the delta commit that triggered the last compaction, read two
    ways: a snapshot query (base files merged with their logs) and a read-optimized one
    (`hoodie.datasource.query.type=read_optimized`: the base files alone). Per read: base files and
    log files it read, rows, and `not_in_other`: its rows the other read does not return (the
    snapshot's: corrected versions the read-optimized read misses; the read-optimized read's: the
    older versions it returns instead), counted by Spark."""
    from labformat.model.enums import QueryType

    if not run.compaction_days:
        raise lf.LabformatError("no compaction ran in this run: no delta commit with logs to read")
    table, as_of = run.tables[MOR], run.of(MOR).loc[run.compaction_days[-1]]["instant"]
    reads = {"snapshot": {}, "read-optimized": {"query_type": QueryType.READ_OPTIMIZED}}
    frames, rows = {}, []
    for name, options in reads.items():
        frames[name], scan = table.query(run.condition, as_of=as_of, options=options)
        rows.append({"read": name, "files_read": scan.funnel.files_read, "logs_read": scan.details.log_files_read,
                     "rows": scan.rows_returned})
    columns = list(datasets.COLUMNS)
    snapshot, optimized = (frames[n].select(*columns) for n in reads)
    rows[0]["not_in_other"] = snapshot.exceptAll(optimized).count()
    rows[1]["not_in_other"] = optimized.exceptAll(snapshot).count()
    return pd.DataFrame(rows).set_index("read")


def compaction_sweep(spark, spec: datasets.DatasetSpec, settings: Iterable[int | None] | None = None,
                     days: int | None = None, workdir: Path | None = None, progress: bool = False) -> pd.DataFrame:
    """Merge-on-read tables compacting inline every N delta commits (None: never), upserted day by day
    side by side (alternating) for `days` days (SWEEP_DAYS by default), each day followed by one
    snapshot query; one row per (setting, day)."""
    from labformat.lab.sizing import scaled_sizes

    settings = tuple(sweep_settings(spec) if settings is None else settings)
    days = min(days or SWEEP_DAYS, spec.batch_days)
    cached = datasets.generate(spark, spec)
    tables = {every: load(spark, spec, workshop.scratch(f"04-sweep-{setting_label(every).replace(' ', '-')}", workdir), MOR)
              for every in settings}
    options = scaled_sizes(next(iter(tables.values()))).options
    for table in tables.values():
        table.query(FULL_SCAN)
    rows = []
    for day in tqdm(range(1, days + 1), desc="days", disable=not progress):
        batch = datasets.load_batch(spark, cached, day)
        for every, table in tables.items():
            rows.append({"setting": setting_label(every), "every": every, "day": day,
                         **upsert_and_query(table, batch, {**options, **inline_options(every)})})
    return pd.DataFrame(rows)


def sweep_totals(sweep: pd.DataFrame) -> pd.DataFrame:
    """Per setting, in the sweep's order: compactions, MB written, log files the queries read (exact), write
    seconds (upserts and compactions) and the queries' mean seconds over the days."""
    grouped = sweep.groupby("setting", sort=False)
    return pd.DataFrame({
        "compactions": grouped["compacted"].sum(), "mb_written": grouped["bytes_written"].sum() / 2**20,
        "files_rewritten": grouped["files_rewritten"].sum() + grouped["slices_compacted"].sum(),
        "logs_read": grouped["logs_read"].sum(), "write_s": grouped["write_s"].sum(),
        "mean_query_s": grouped["query_s"].mean()})


def log_budget(sweep: pd.DataFrame) -> int:
    """Exercise 4.4's read budget: the most log files one query of the sweep merged at its middle setting
    (the log files a query may merge, say for a dashboard's latency)."""
    settings = list(dict.fromkeys(sweep["setting"]))
    return int(sweep[sweep["setting"] == settings[len(settings) // 2]]["logs_read"].max())

