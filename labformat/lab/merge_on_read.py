"""The merge-on-read lesson (notebook 04): late corrections into both table types, write costs, query reads, how often to compact.

`side_by_side` upserts the same days into a copy-on-write table and merge-on-read tables compacting
inline every 3 and 4 delta commits and never (`hoodie.compact.inline.max.delta.commits`), after a
warm-up (the first day's upsert into throwaway copies, so no table pays for the first upsert of the
session), the table that goes first rotating from day to day, so drifts of a shared machine hit
them all alike. One of the merge-on-read tables (`every`) is compared with copy-on-write; all of
them make the compaction sweep, the others sharing its table until the first day they would
compact differently (`fork_day`). Per day it records the upsert (and the inline compaction it may
trigger) and what the table's latest file slices then hold: the base files and log files a
snapshot query that no file can be skipped for would read (no query runs: the file slices are
metadata). `before_and_after_compaction` times that query, repeated after a warm-up and
interleaved, on the very same table states (time travel: as of the delta commit that triggered a
compaction, and as of the compaction); `snapshot_vs_copy_on_write` compares its rows with
copy-on-write's. `compaction_sweep` runs merge-on-read tables alone, for the explorer widget.
Every number comes from the write and scan reports and the tables' file slices; the days' seconds
are single runs (days differ), the lesson's exact quantities are bytes and files.
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
# The run's days: six let every 4 pile up 3 log files on a file slice after its first compaction, so
# the sweep tells every 3 (at most 2) from every 4 (exercise 4.4's budget of 2); every 4 compacts once
# (after day 3) and leaves five days without a compaction, enough runs to time against copy-on-write.
# A preset with fewer batch days runs them all.
SIDE_BY_SIDE_DAYS = 6
SWEEP_DAYS = SIDE_BY_SIDE_DAYS
# Three settings: each is six upserts more, and a notebook runs within 3 minutes at `small` on 2 cores.
SWEEP_SETTINGS = (3, 4, None)
# Exercise 4.4's read budget: the log files a query may merge into any one base file. 3, so that over
# six days its rarest setting within it (every 4) is not exercise 4.3's most-writing one (every 3).
LOG_BUDGET = 3
# The history as this many GLOBAL_SORT base files (02 and 03 use 32): every one of them takes a late
# correction each day whatever their number, and each file is a task of every step of every upsert:
# with 4 (measured at `small` on 2 cores) an upsert takes about 0.6 s less than with 8, which keeps
# six days of four tables within the notebook's 3 minutes.
HISTORY_FILES = 4


def lab_spec(preset: str) -> datasets.DatasetSpec:
    """The preset with late corrections (1% of a day's readings, up to 30 days old) and only the batch
    days this notebook upserts (`SIDE_BY_SIDE_DAYS`, or every batch of a shorter preset): a week of
    batches to generate, not the preset's month."""
    import dataclasses

    full = datasets.spec(preset, scenario="late")
    return dataclasses.replace(full, batch_days=min(full.batch_days, max(SIDE_BY_SIDE_DAYS, SWEEP_DAYS)))


def side_by_side_days(spec: datasets.DatasetSpec) -> int:
    """The days `side_by_side` upserts: `SIDE_BY_SIDE_DAYS`, or every batch day of a shorter preset."""
    return min(spec.batch_days, SIDE_BY_SIDE_DAYS)


def compaction_every(spec: datasets.DatasetSpec) -> int:
    """The setting compared with copy-on-write: 4 over the full six days (one compaction, after day 3,
    and five days without one); 3 for a preset with fewer days (tiny's 3 compact once, on day 2).
    Hudi's default, 5, would compact after day 4 only."""
    return 4 if side_by_side_days(spec) >= SIDE_BY_SIDE_DAYS else 3


def expected_compactions(days: int, every: int | None) -> int:
    """Inline compactions `days` upserts trigger after the bulk insert: that is a delta commit too, so
    a compaction follows delta commit `every`, `2 x every`, ... of `days + 1`."""
    return 0 if every is None else (days + 1) // every


def compacted_on(day: int, every: int | None) -> bool:
    """Whether the upsert of `day` triggers an inline compaction: it is delta commit `day + 1` (the bulk
    insert is the first), and a compaction follows every `every`-th."""
    return every is not None and (day + 1) % every == 0


def expected_log_depth(day: int, every: int | None) -> int:
    """The log files the deepest file slice holds after the upsert of `day` (and its compaction, if
    any), when every upsert corrects that slice: the upserts since the last compaction."""
    if compacted_on(day, every):
        return 0
    since = [d for d in range(1, day) if compacted_on(d, every)]
    return day - (since[-1] if since else 0)


def fork_day(setting: int | None, every: int | None, days: int) -> int | None:
    """The first of `days` on which a merge-on-read table compacting every `setting` delta commits acts
    unlike one compacting every `every`: their compactions differ. Until then the two are the same
    table (the same upserts of the same file slices); None if that lasts all `days`."""
    return next((d for d in range(1, days + 1) if compacted_on(d, setting) != compacted_on(d, every)), None)


def sweep_settings(spec: datasets.DatasetSpec) -> tuple[int | None, ...]:
    """`max.delta.commits` values the sweep compares (None: never compact): `SWEEP_SETTINGS`, every
    preset alike (each of 3 and 4 compacts once in `tiny`'s 3 days)."""
    return SWEEP_SETTINGS


def setting_label(every: int | None) -> str:
    return "never" if every is None else f"every {every}"


def load(spark, spec: datasets.DatasetSpec, path: Path, table_type: TableType) -> lf.Table:
    """A drone table of `table_type` with the history bulk inserted as the workshop does, as HISTORY_FILES
    GLOBAL_SORT base files."""
    from labformat.workload import history_options

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


def upsert_day(table: lf.Table, batch, options: dict[str, Any]) -> dict[str, Any]:
    """One day's upsert (and its inline compaction, if any), wall-timed, and what the table's latest
    file slices hold after it (from the timeline's metadata, no data read): the base files and log
    files a snapshot query that no file can be skipped for (`FULL_SCAN`) reads, and the most log
    files it merges into one base file."""
    started = time.perf_counter()
    report = table.upsert(batch, options)
    write_s = time.perf_counter() - started
    compaction = report.compaction
    slices = table.file_slices()
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
        "files_read": len(slices),
        "logs_read": sum(len(f.log_paths) for f in slices),
        "slices_merged": sum(1 for f in slices if f.log_paths),
        # The deepest file slice: the log files a query merges into one base file.
        "max_logs_per_slice": max((len(f.log_paths) for f in slices), default=0),
    }


def _warm_up(tables: dict[Any, lf.Table], batch, options: dict[Any, dict[str, Any]], workdir: Path | None) -> None:
    """A throwaway job of the same shape as each table's first day: `batch` upserted into a copy of each
    table, so that no table's measured day pays for the session's first upsert
    (JIT compilation, Python workers importing pyarrow on every core). The copies are dropped."""
    from labformat.lab.sweeps import copy_table

    for key, table in tables.items():
        copy = copy_table(table, f"{Path(str(table.path)).name}-warm-up", workdir)
        copy.upsert(batch, options[key])
        workshop.drop(copy.path)


def _turns(items: list, day: int) -> list:
    """`items` rotated by `day`: each day another one goes first, so none always pays for going first."""
    shift = (day - 1) % len(items)
    return items[shift:] + items[:shift]


@dataclass(frozen=True)
class SideBySide:
    """The days into every table: one row per (table, day) of copy-on-write and the merge-on-read table
    compacting every `every` in `days`, one row per (setting, day) of every merge-on-read table in
    `sweep` (the `every` one included, when it is one of the settings); the two compared tables for
    later reads."""

    days: pd.DataFrame
    tables: dict[str, lf.Table]
    every: int
    options: dict[str, Any]
    condition: str
    sweep: pd.DataFrame

    def of(self, table_type: TableType) -> pd.DataFrame:
        return self.days[self.days["table_type"] == table_type].set_index("day")

    @property
    def compaction_days(self) -> list[int]:
        mor = self.of(MOR)
        return [int(d) for d in mor.index[mor["compacted"]]]

    def totals(self) -> pd.DataFrame:
        """Per table over the days: write seconds (with compactions), MB written, files rewritten, log
        files written, compactions, and the log files the day's snapshot queries would merge."""
        grouped = self.days.groupby("table")
        return pd.DataFrame({
            "write_s": grouped["write_s"].sum(), "compactions": grouped["compacted"].sum(),
            "mb_written": grouped["bytes_written"].sum() / 2**20, "files_rewritten": grouped["files_rewritten"].sum(),
            "log_files_written": grouped["log_files_written"].sum(),
            "logs_read": grouped["logs_read"].sum()}).loc[[LABELS[COW], LABELS[MOR]]]


def side_by_side(spark, spec: datasets.DatasetSpec, every: int, days: int | None = None,
                 settings: Iterable[int | None] | None = None, workdir: Path | None = None,
                 progress: bool = False) -> SideBySide:
    """Bulk insert the history into a copy-on-write and a merge-on-read table (inline compaction every
    `every` delta commits), warm up (`_warm_up`), then upsert each of `days` days (`side_by_side_days`
    by default) into every table, the one that goes first rotating from day to day (`upsert_day`:
    what each wrote, and what a snapshot query would then read). The sweep's other `settings`
    (`sweep_settings` by default; None: never compact) share the merge-on-read table until their
    `fork_day`: that morning each gets a copy of it, and goes on alone; its rows of the days before
    are the shared table's (`upsert_of` names the setting whose table ran the upsert). All use the
    workshop's sizes, scaled to the copy-on-write table's bulk-inserted files
    (workload.scaled_sizes). Each row records its table's turn that day (`turn`: 0 first)."""
    from labformat.workload import scaled_sizes
    from labformat.lab.sweeps import copy_table

    settings = tuple(dict.fromkeys(sweep_settings(spec) if settings is None else settings))
    total = days or side_by_side_days(spec)
    cached = datasets.generate(spark, spec)
    tables = {t: load(spark, spec, workshop.scratch(f"04-{LABELS[t]}", workdir), t) for t in (COW, MOR)}
    options = scaled_sizes(tables[COW]).options
    per_table = {COW: options, MOR: {**options, **inline_options(every)}}
    # (table, its options, its rows in `days` (a table type), its setting): the compared two first.
    contenders = [(tables[COW], options, COW, None), (tables[MOR], per_table[MOR], MOR, every)]
    forks = {s: fork_day(s, every, total) for s in settings if s != every}
    _warm_up(tables, datasets.load_batch(spark, cached, 1), per_table, workdir)
    rows, sweep = [], []
    for day in tqdm(range(1, total + 1), desc="days", disable=not progress):
        batch = datasets.load_batch(spark, cached, day)
        for s in [s for s, d in forks.items() if d == day]:  # from today on, unlike the shared table
            copy = copy_table(tables[MOR], f"04-{LABELS[MOR]}-{setting_label(s).replace(' ', '-')}", workdir)
            contenders.append((copy, {**options, **inline_options(s)}, None, s))
        for turn, (table, table_options, table_type, setting) in enumerate(_turns(contenders, day)):
            done = {"day": day, "turn": turn, **upsert_day(table, batch, table_options)}
            if table_type is not None:
                rows.append({"table": LABELS[table_type], "table_type": table_type.value, **done})
            if table_type is COW:
                continue
            served = [setting] if table_type is None else [every] + [s for s, d in forks.items() if d is None or d > day]
            sweep += [{"setting": setting_label(s), "every": s, "upsert_of": setting_label(setting), **done}
                      for s in served if s in settings]
    order = {setting_label(s): i for i, s in enumerate(settings)}
    sweep_frame = pd.DataFrame(sweep)
    if len(sweep_frame):  # the settings in their order, day by day: `groupby(sort=False)` keeps it
        sweep_frame = (sweep_frame.assign(_order=sweep_frame["setting"].map(order))
                       .sort_values(["day", "_order"], kind="stable").drop(columns="_order").reset_index(drop=True))
    return SideBySide(pd.DataFrame(rows), tables, every, per_table[MOR], FULL_SCAN, sweep_frame)


def write_cost(run: SideBySide) -> pd.DataFrame:
    """What the cow-vs-mor chart shows, in numbers: per table, over the days without a compaction, the
    days with one, and all days: MB written (total, and a day's min-median-max) and the write's seconds
    (a day's min-median-max; one run a day, the tables taking turns to go first)."""
    compacted = set(run.compaction_days)
    every_day = list(run.of(MOR).index)
    rows = []
    for kind, chosen in (("without a compaction", [d for d in every_day if d not in compacted]),
                         ("with a compaction", [d for d in every_day if d in compacted]),
                         ("all days", every_day)):
        for table_type in (COW, MOR) if chosen else ():
            days = run.of(table_type).loc[chosen]
            mb, seconds = days["bytes_written"] / 2**20, days["write_s"]
            rows.append({"days": kind, "table": LABELS[table_type], "n": len(chosen), "mb_total": mb.sum(),
                         "mb_min": mb.min(), "mb_median": mb.median(), "mb_max": mb.max(),
                         "write_s_min": seconds.min(), "write_s_median": seconds.median(),
                         "write_s_max": seconds.max()})
    return pd.DataFrame(rows).set_index(["days", "table"])


def read_cost(run: SideBySide) -> pd.DataFrame:
    """The read side of the cow-vs-mor chart, in numbers (exact): per table, the base files and log files a
    snapshot query reads after a day and the log files in its deepest file slice, fewest to most over
    the days, and on the compaction days."""
    compacted = set(run.compaction_days)
    rows = []
    for table_type in (COW, MOR):
        days = run.of(table_type)
        on = days.loc[[d for d in days.index if d in compacted]]
        rows.append({"table": LABELS[table_type],
                     "base_files": f"{days.files_read.min()}-{days.files_read.max()}",
                     "log_files": f"{days.logs_read.min()}-{days.logs_read.max()}",
                     "deepest_slice": f"{days.max_logs_per_slice.min()}-{days.max_logs_per_slice.max()}",
                     "log_files_on_compaction_days": on.logs_read.tolist()})
    return pd.DataFrame(rows).set_index("table")


def compare_rows(left, right) -> tuple[int, int, int]:
    """Two reads of the drone table, as Spark DataFrames: (rows of `left`, rows of `right`, records whose
    data columns differ between them or that only one holds), in one Spark job: a full outer join on
    the record key, each read scanned once."""
    from pyspark.sql import functions as F

    key, columns = datasets.RECORD_KEY, list(datasets.COLUMNS)
    a = left.select(F.col(key).alias("_key"), F.struct(*columns).alias("_left"))
    b = right.select(F.col(key).alias("_key"), F.struct(*columns).alias("_right"))
    differ = ~F.col("_left").eqNullSafe(F.col("_right"))
    found = a.join(b, "_key", "full_outer").agg(
        F.count("_left").alias("left"), F.count("_right").alias("right"),
        F.sum(F.when(differ, 1).otherwise(0)).alias("differing")).first()
    return int(found["left"]), int(found["right"]), int(found["differing"] or 0)


def differing_rows(a: lf.Table, b: lf.Table) -> int:
    """Records whose latest version differs between two tables' snapshots (or that one lacks): `compare_rows`."""
    return compare_rows(a.read(), b.read())[2]


def _timed_query(table: lf.Table, condition: str, as_of: str) -> tuple[float, Any]:
    _, scan = table.query(condition, as_of=as_of)
    return scan.seconds, scan


def before_and_after_compaction(run: SideBySide, repeats: int = 5) -> pd.DataFrame:
    """The snapshot query on one day's data two ways, via time travel: merge-on-read as of the delta
    commit that triggered the last compaction (its logs merged on read) and as of that compaction
    (base files only, as copy-on-write's query reads). One untimed run of each (the warm-up), then
    `repeats` rounds of the two, each round starting with the other; per read its medians, min-max
    and every run's seconds (`seconds`, in the order they ran)."""
    if not run.compaction_days:
        raise lf.LabformatError("no compaction ran in this run: nothing to compare before and after")
    day = run.compaction_days[-1]
    mor = run.of(MOR).loc[day]
    contenders = [("merge-on-read, before compaction (logs)", mor["instant"]),
                  ("merge-on-read, after compaction", mor["compaction_instant"])]
    table = run.tables[MOR]
    for _, as_of in contenders:
        _timed_query(table, run.condition, as_of)
    times: dict[str, list[float]] = {name: [] for name, _ in contenders}
    scans = {}
    for round_ in range(1, repeats + 1):
        for name, as_of in _turns(contenders, round_):
            seconds, scans[name] = _timed_query(table, run.condition, as_of)
            times[name].append(seconds)
    return pd.DataFrame([{"read": name, "day": day, "median_s": statistics.median(times[name]),
                          "min_s": min(times[name]), "max_s": max(times[name]), "runs": len(times[name]),
                          "seconds": times[name],
                          "files_read": scans[name].funnel.files_read,
                          "logs_read": scans[name].details.log_files_read, "rows": scans[name].rows_returned}
                         for name, _ in contenders])


def snapshot_vs_copy_on_write(run: SideBySide) -> dict[str, int]:
    """The snapshot query (`run.condition`) as of the delta commit that triggered the last compaction, on
    merge-on-read (its logs merged on read) and on copy-on-write as of the same day: each one's rows,
    and the records that differ between them (`compare_rows`)."""
    if not run.compaction_days:
        raise lf.LabformatError("no compaction ran in this run: no delta commit with logs to read")
    day = run.compaction_days[-1]
    reads = [table.scan(run.condition, as_of=run.of(t).loc[day]["instant"]).to_dataframe()
             for t, table in ((MOR, run.tables[MOR]), (COW, run.tables[COW]))]
    merged, copied, differing = compare_rows(*reads)
    return {"day": day, "merge_on_read_rows": merged, "copy_on_write_rows": copied, "differing": differing}


def read_optimized_vs_snapshot(run: SideBySide) -> pd.DataFrame:
    """The merge-on-read table as of the delta commit that triggered the last compaction, read two
    ways: a snapshot query (base files merged with their logs) and a read-optimized one
    (`hoodie.datasource.query.type=read_optimized`: the base files alone). Per read: base files and
    log files it read (its plan), rows, and `differing`: the records whose version differs between
    the two reads (a correction still in a log: the snapshot returns it, the read-optimized read the
    version the last compaction left), by `compare_rows`."""
    from labformat.model.enums import QueryType

    if not run.compaction_days:
        raise lf.LabformatError("no compaction ran in this run: no delta commit with logs to read")
    table, as_of = run.tables[MOR], run.of(MOR).loc[run.compaction_days[-1]]["instant"]
    reads = {"snapshot": {}, "read-optimized": {"query_type": QueryType.READ_OPTIMIZED}}
    frames, rows = [], []
    for name, options in reads.items():
        plan = table.scan(run.condition, as_of=as_of, options=options)
        frames.append(plan.to_dataframe())
        rows.append({"read": name, "files_read": len(plan.file_slices),
                     "logs_read": sum(len(s.log_paths) for s in plan.file_slices)})
    counted = compare_rows(*frames)
    for row, count in zip(rows, counted):
        row.update(rows=count, differing=counted[2])
    return pd.DataFrame(rows).set_index("read")


def compaction_sweep(spark, spec: datasets.DatasetSpec, settings: Iterable[int | None] | None = None,
                     days: int | None = None, workdir: Path | None = None, progress: bool = False) -> pd.DataFrame:
    """Merge-on-read tables alone (the explorer widget's sweep; the notebook's comes with `side_by_side`),
    compacting inline every N delta commits (None: never), upserted day by day side by side for
    `days` days (SWEEP_DAYS by default), another setting going first each day; one row per (setting,
    day), the columns of `SideBySide.sweep`. Each table is a copy of one bulk insert of the history.
    No query runs: the log files a snapshot query would merge come from the file slices (`upsert_day`)."""
    from labformat.workload import scaled_sizes
    from labformat.lab.sweeps import copy_table

    settings = tuple(sweep_settings(spec) if settings is None else settings)
    days = min(days or SWEEP_DAYS, spec.batch_days)
    cached = datasets.generate(spark, spec)
    name = lambda every: f"04-sweep-{setting_label(every).replace(' ', '-')}"  # noqa: E731
    source = load(spark, spec, workshop.scratch("04-sweep-history", workdir), MOR)
    tables = {every: copy_table(source, name(every), workdir) for every in settings}
    options = scaled_sizes(source).options
    rows = []
    for day in tqdm(range(1, days + 1), desc="days", disable=not progress):
        batch = datasets.load_batch(spark, cached, day)
        for every in _turns(list(settings), day):
            rows.append({"setting": setting_label(every), "every": every, "day": day,
                         **upsert_day(tables[every], batch, {**options, **inline_options(every)})})
    return pd.DataFrame(rows)  # day 1 runs the settings in their order: `groupby(sort=False)` keeps it


def sweep_totals(sweep: pd.DataFrame) -> pd.DataFrame:
    """Per setting, in the sweep's order (exact): compactions, MB written, base files written whole
    (by upserts and compactions), the log files the day's snapshot queries merge (`logs_read`, a
    query a day reading every slice) and the most of them in one file slice; then the write seconds
    of the days (upserts and compactions, one run each)."""
    grouped = sweep.groupby("setting", sort=False)
    return pd.DataFrame({
        "compactions": grouped["compacted"].sum(), "mb_written": grouped["bytes_written"].sum() / 2**20,
        "files_rewritten": grouped["files_rewritten"].sum() + grouped["slices_compacted"].sum(),
        "logs_read": grouped["logs_read"].sum(), "max_logs_per_slice": grouped["max_logs_per_slice"].max(),
        "write_s": grouped["write_s"].sum()})


def within_budget(sweep: pd.DataFrame, budget: int) -> pd.DataFrame:
    """Exercise 4.4's choice, from the sweep: per setting its compactions, the most log files one of its
    queries merged into one base file, whether that stays within `budget`, and `rarest`: within the
    budget with the fewest compactions of those within it (every setting that ties)."""
    per = sweep_totals(sweep)[["compactions", "max_logs_per_slice"]].astype(int)
    per["within"] = per["max_logs_per_slice"] <= budget
    fewest = per.loc[per["within"], "compactions"].min() if per["within"].any() else None
    per["rarest"] = per["within"] & (per["compactions"] == fewest)
    return per
