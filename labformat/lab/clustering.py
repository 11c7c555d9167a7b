"""Clustering in the lab: a table of small files, clustered, and one query's files read before and after."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta

import pandas as pd
from pyspark.sql import functions as F

import labformat as lf
from labformat import datasets
from labformat.lab import sweeps, workshop
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
# hoodie.parquet.max.file.size (120 MB). Scaled like the max file size, it exceeds a day of the
# workshop's readings at every preset: clustering would write one file.
HUDI_TARGET_OVER_MAX_FILE_SIZE = 8
# The notebook clusters a day of small files into this many: 6 hours of readings a file, so an
# hour's window sits in one of them, at every preset.
CLUSTERED_FILES = 4


def target_for(table: lf.Table, files: int = CLUSTERED_FILES) -> int:
    """A clustering target (bytes) that rewrites every base file of `table` into `files` files: a
    group of B bytes is written as ceil(B / target) files, so the target is just over 1/`files` of the
    table's bytes."""
    total = sum(s.size_bytes for s in table.file_slices())
    return total // files + 1


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
    writes_after: int  # completed writes after `instant`, the latest counted
    cleans: tuple[Clean, ...]

    @property
    def smallest_readable(self) -> int | None:
        """The fewest commits retained after whose clean the query as of `instant` still ran, when the
        run also cleaned with one fewer (and the query failed): what the run showed. None otherwise."""
        by = {c.retained: c.readable for c in self.cleans}
        found = [n for n, readable in by.items() if readable and by.get(n - 1) is False]
        return min(found) if found else None

    def frame(self) -> pd.DataFrame:
        rows = [{"commits retained": c.retained, "clean": c.report.instant or "nothing to delete",
                 "files deleted": getattr(c.report.details, "files_deleted", 0),
                 "KB freed": round(getattr(c.report.details, "bytes_freed", 0) / 1024, 1),
                 f"as of {self.instant}": f"{c.files_read} files read" if c.readable else "cleaned: CleanedInstantError"}
                for c in self.cleans]
        return pd.DataFrame(rows).set_index("commits retained")


def retention(table: lf.Table, instant: str, condition: str, retained=None) -> Retention:
    """Clean `table` with each `cleaner_commits_retained` of `retained` in turn (most first: each clean
    deletes what the one before kept and this one does not; by default every count from the table's
    completed writes down to 1), and after each, run `condition` as of `instant` (time travel): still
    readable, or cleaned."""
    writes = [i.time for i in table.active_timeline.completed_writes()]
    if instant not in writes:
        raise lf.LabformatError(f"{instant} is no completed write of {table.path}")
    if retained is None:
        retained = range(len(writes), 0, -1)
    cleans = []
    for n in sorted(retained, reverse=True):
        report = table.clean({"cleaner_commits_retained": n})
        try:
            _, scan = table.query(condition, as_of=instant)
            cleans.append(Clean(n, report, True, scan.funnel.files_read))
        except lf.CleanedInstantError:
            cleans.append(Clean(n, report, False, None))
    return Retention(instant, len(writes) - 1 - writes.index(instant), tuple(cleans))


def correct_hour(table: lf.Table, cached: datasets.CachedDataset, hour: int) -> lf.WriteReport:
    """Upsert corrections of every reading of `hour` (0-23) on the last history day (each one minute
    newer in `updated_at`): one more commit, rewriting the files that hold that hour."""
    spec = cached.spec
    start = datetime.combine(spec.day_date(spec.history_days - 1), time(hour))
    rows = (datasets.load_history(table.spark, cached)
            .where(f"ts >= '{start:%Y-%m-%d %H:%M:%S}' AND ts < '{start + timedelta(hours=1):%Y-%m-%d %H:%M:%S}'")
            .withColumn(datasets.PRECOMBINE_FIELD, F.col(datasets.PRECOMBINE_FIELD) + F.expr("INTERVAL 1 MINUTE")))
    return table.upsert(rows)


# The layouts `layouts` compares: (label, sort columns, hoodie.layout.optimize.strategy).
LAYOUTS = (("linear: ts", "ts", "linear"), ("linear: drone_id, ts", "drone_id,ts", "linear"),
           ("z-order: drone_id, ts", "drone_id,ts", "z-order"), ("hilbert: drone_id, ts", "drone_id,ts", "hilbert"))


@dataclass(frozen=True)
class Layouts:
    """Copies of one small-file table clustered with each layout, and each query's scan on each."""

    queries: dict[str, str]
    scans: dict[str, dict[str, object]]  # layout label -> query name -> ScanReport; "before clustering" first
    files: dict[str, int]  # layout label -> base files in its snapshot

    def frame(self) -> pd.DataFrame:
        """Files read per query (columns) for each layout (rows), beside the files in the snapshot."""
        rows = [{"layout": label, "files": self.files[label],
                 **{q: scans[q].funnel.files_read for q in self.queries}} for label, scans in self.scans.items()]
        return pd.DataFrame(rows).set_index("layout")

    def bounds_every_filter(self, curve: str, single: list[str], both: str) -> tuple[bool, str]:
        """Does layout `curve` read, for its worst `single`-column query, no more files than each
        other clustered layout's worst, and for the `both`-columns query no more than any, all
        layouts returning the same rows? With the counts, for a claim."""
        frame = self.frame().drop(index="before clustering")
        others = frame.drop(index=curve)
        held = (frame.loc[curve, single].max() <= others[single].max(axis=1).min()
                and frame.loc[curve, both] <= others[both].min()
                and all(len(self.rows_returned(q)) == 1 for q in self.queries))
        counts = "; ".join(f"{label}: {' / '.join(str(row[q]) for q in [*single, both])}"
                           for label, row in frame.iterrows())
        return bool(held), f"files read ({' / '.join([*single, both])}) of {frame['files'].max()}: {counts}"

    def numbers(self) -> str:
        """What `viz.plot_layouts` shows of this run, in words: files read by each query on each layout."""
        frame = self.frame()
        lines = [f"{label} ({int(row['files'])} files): " + ", ".join(f"{q} {int(row[q])}" for q in self.queries)
                 for label, row in frame.iterrows()]
        clustered = frame.drop(index="before clustering", errors="ignore")[list(self.queries)]
        for _, same in clustered.groupby(list(self.queries), sort=False):
            if len(same) > 1:
                lines.append(f"{' and '.join(same.index)} read as many files on every query")
        return "\n".join(lines)

    def rows_returned(self, query: str) -> set[int]:
        """The rows `query` returned on each layout: one value when every layout returned the same rows."""
        return {scans[query].rows_returned for scans in self.scans.values()}


def drone_and_window(cached: datasets.CachedDataset, drone: str = "drone0001") -> dict[str, str]:
    """The drone filter, the one-hour window, and both at once (the two-column filter)."""
    window = window_of(cached)
    return {"drone_id filter": f"drone_id = '{drone}'", "one-hour window": window,
            "drone and hour": f"drone_id = '{drone}' AND {window}"}


def layouts(spark, cached: datasets.CachedDataset, name: str, queries: dict[str, str], files_out: int = 16,
            layouts=LAYOUTS, files_per_day: int = SMALL_FILES_PER_DAY, workdir=None,
            source: lf.Table | None = None) -> Layouts:
    """The last history day as small files (`small_file_table`, or `source`, a copy of one made before),
    copied once per layout, each copy clustered into `files_out` files in that layout (the target size
    is the day's bytes over `files_out`; bloom filters sized for a file's keys); every query on the
    table before clustering and on each copy."""
    if source is None:
        source = small_file_table(spark, cached, workshop.scratch(name, workdir), files_per_day)
    scans = {"before clustering": {q: source.query(c)[1] for q, c in queries.items()}}
    day_bytes = sum(s.size_bytes for s in source.file_slices())
    files = {"before clustering": len(source.file_slices())}
    for label, columns, strategy in layouts:
        table = sweeps.copy_table(source, f"{name}-{strategy}-{columns.replace(',', '-')}", workdir)
        report = table.cluster({"clustering_small_file_limit": day_bytes + 1,
                                "clustering_target_file_max_bytes": day_bytes // files_out + 1,
                                "clustering_sort_columns": columns, "layout_optimize_strategy": strategy,
                                "bloom_num_entries": max(1, cached.spec.rows_per_day // files_out)})
        files[label] = report.details.files_out
        scans[label] = {q: table.query(c)[1] for q, c in queries.items()}
    return Layouts(dict(queries), scans, files)
