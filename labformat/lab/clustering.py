"""Clustering in the lab: a table of small files, clustered, and one query's files read before and after."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta

import pandas as pd
from pyspark.sql import functions as F

import labformat as lf
from labformat import datasets
from labformat.model.enums import SortMode

# A quarter of an hour of readings per base file: what frequent small commits (a stream writing every
# 15 minutes) leave behind. An hour's window then spans four files at least, whatever the preset.
SMALL_FILES_PER_DAY = 96


def small_file_table(spark, cached: datasets.CachedDataset, path, files_per_day: int = SMALL_FILES_PER_DAY
                     ) -> lf.Table:
    """The last history day at `path` as `files_per_day` GLOBAL_SORT base files (no partitions), bloom
    filters sized for a file's keys."""
    spec = cached.spec
    day = spec.day_date(spec.history_days - 1)
    rows = datasets.load_history(spark, cached).where(F.to_date("ts") == F.lit(day))
    table = lf.Table.create(spark, path, record_key=datasets.RECORD_KEY, precombine_field=datasets.PRECOMBINE_FIELD)
    per_file = max(1, spec.drones * 24 * 60 // files_per_day)
    table.bulk_insert(rows, {"bulk_insert_sort_mode": SortMode.GLOBAL_SORT, "bulk_insert_parallelism": files_per_day,
                             "bloom_num_entries": per_file})
    return table


def window_of(cached: datasets.CachedDataset) -> str:
    """The standard one-hour window (10:00-11:00 on the last history day) as a condition."""
    hour = datetime.combine(cached.spec.day_date(cached.spec.history_days - 1), time(10))
    return f"ts >= '{hour:%Y-%m-%d %H:%M:%S}' AND ts < '{hour + timedelta(hours=1):%Y-%m-%d %H:%M:%S}'"


@dataclass(frozen=True)
class ClusteringRun:
    """One clustering of a table and a query's scan before and after it."""

    report: lf.WriteReport
    before: object  # ScanReport
    after: object

    def frame(self) -> pd.DataFrame:
        rows = [{"table": label, "files_in_snapshot": scan.funnel.files_in_snapshot,
                 "files_read": scan.funnel.files_read, "rows": scan.rows_returned}
                for label, scan in (("before clustering", self.before), ("after clustering", self.after))]
        return pd.DataFrame(rows).set_index("table")

    def summary(self) -> pd.Series:
        d = self.report.details
        return pd.Series({"files in": d.files_in, "files out": d.files_out, "KB in": round(d.bytes_in / 1024, 1),
                          "KB out": round(d.bytes_out / 1024, 1), "sorted by": ", ".join(d.sort_columns)})


# Hudi's clustering target (hoodie.clustering.plan.strategy.target.file.max.bytes, 1 GB) over its
# hoodie.parquet.max.file.size (120 MB): the workshop scales the target with the max file size.
HUDI_TARGET_OVER_MAX_FILE_SIZE = 8


def cluster_and_compare(table: lf.Table, condition: str, target_bytes: int, sort_columns: str = "ts",
                        bloom_num_entries: int | None = None) -> ClusteringRun:
    """Run `condition`, cluster every base file below `target_bytes` into files of that size sorted by
    `sort_columns`, run `condition` again."""
    _, before = table.query(condition)
    options = {"clustering_small_file_limit": target_bytes, "clustering_target_file_max_bytes": target_bytes,
               "clustering_sort_columns": sort_columns}
    if bloom_num_entries is not None:
        options["bloom_num_entries"] = bloom_num_entries
    report = table.cluster(options)
    _, after = table.query(condition)
    return ClusteringRun(report, before, after)


@dataclass(frozen=True)
class Clean:
    """One clean of a retention sweep and what time travel to the instant watched could still read after it."""

    retained: int  # hoodie.cleaner.commits.retained
    report: lf.WriteReport
    readable: bool  # the query as of the watched instant still ran
    files_read: int | None  # by that query; None once its files were cleaned


@dataclass(frozen=True)
class Retention:
    """Cleans of one table with fewer and fewer commits retained, watching one instant."""

    instant: str
    writes_since: int  # completed writes from `instant` to the latest, both counted
    cleans: tuple[Clean, ...]

    def frame(self) -> pd.DataFrame:
        rows = [{"commits retained": c.retained, "clean": c.report.instant or "nothing to delete",
                 "files deleted": getattr(c.report.details, "files_deleted", 0),
                 "KB freed": round(getattr(c.report.details, "bytes_freed", 0) / 1024, 1),
                 f"as of {self.instant}": f"{c.files_read} files read" if c.readable else "cleaned: CleanedInstantError"}
                for c in self.cleans]
        return pd.DataFrame(rows).set_index("commits retained")


def retention(table: lf.Table, instant: str, condition: str, retained=(2, 1)) -> Retention:
    """Clean `table` with each `cleaner_commits_retained` of `retained` in turn (most first: each clean
    deletes what the one before kept and this one does not), and after each, run `condition` as of
    `instant` (time travel): still readable, or cleaned."""
    writes = [i.time for i in table.active_timeline.completed_writes()]
    if instant not in writes:
        raise lf.LabformatError(f"{instant} is no completed write of {table.path}")
    cleans = []
    for n in sorted(retained, reverse=True):
        report = table.clean({"cleaner_commits_retained": n})
        try:
            _, scan = table.query(condition, as_of=instant)
            cleans.append(Clean(n, report, True, scan.funnel.files_read))
        except lf.CleanedInstantError:
            cleans.append(Clean(n, report, False, None))
    return Retention(instant, len(writes) - writes.index(instant), tuple(cleans))
