"""Notebook 01's experiments: where each sort mode puts the keys inside its files, and write tasks timed warm.

A file's `[min key, max key]` (its footer) is all range pruning sees, and there NONE and
PARTITION_SORT look alike: every file spans the whole history. They differ inside the files:
`key_slices` cuts each base file's rows, in the order they are stored, into equal slices (a
twentieth each) and gives each slice's key range, what a reader that skips inside a file (parquet
row groups, page indexes) works with.

`write_tasks` times bulk inserts per `bulk_insert_parallelism` the way a timing must be taken on a
shared laptop: a throwaway bulk insert of the same shape per setting first (Python workers on every
core, the JIT), then the settings interleaved, repeated; every run's write-stage tasks kept, so a
projection onto a cluster's cores starts from warm task times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd
from tqdm.auto import tqdm

import labformat as lf
from labformat import datasets
from labformat.lab import frames, sweeps, workshop
from labformat.lab.projection import CLUSTER_CORES
from labformat.lab.sweeps import INPUT_PARTITIONS
from labformat.model.enums import SortMode
from labformat.spark import compat

SLICES = 20


def key_slices(table: lf.Table, slices: int = SLICES) -> pd.DataFrame:
    """Per latest base file, its rows in stored order cut into `slices` equal runs: file_id, slice
    (0 first), rows, min_key, max_key. A Spark job; only `slices` rows per file reach the driver.

    A row's place in its file is its commit seqno's last part (`<instant>_<task>_<n>`, counted as the
    task wrote it)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from labformat.io.files import read_files

    latest = table.file_slices()
    columns = ["file_id", "slice", "rows", "min_key", "max_key"]
    if not latest:
        return pd.DataFrame(columns=columns)
    meta = T.StructType([T.StructField(c, T.StringType()) for c in
                         ("_hoodie_file_name", "_hoodie_record_key", "_hoodie_commit_seqno")])
    rows = read_files(table.spark, table.storage.base_uri, [s.path for s in latest], meta).select(
        "_hoodie_file_name", "_hoodie_record_key",
        F.element_at(F.split("_hoodie_commit_seqno", "_"), -1).cast("long").alias("_row"))
    cut = F.ntile(slices).over(Window.partitionBy("_hoodie_file_name").orderBy("_row")) - 1
    found = (rows.withColumn("slice", cut).groupBy("_hoodie_file_name", "slice")
             .agg(F.count("*").alias("rows"), F.min("_hoodie_record_key").alias("min_key"),
                  F.max("_hoodie_record_key").alias("max_key")).toPandas())
    file_ids = {Path(s.path).name: s.file_id for s in latest}
    found["file_id"] = found["_hoodie_file_name"].map(file_ids)
    return found[columns].sort_values(["file_id", "slice"], ignore_index=True)


def slices_at_one_key(slices: pd.DataFrame) -> int:
    """The most slices whose key range holds one key: what a reader that skips slices by their range
    must still read for the worst key (1: the slices' ranges are disjoint)."""
    return frames.max_overlap(slices)


@dataclass(frozen=True)
class SortModeRun:
    """One sort mode's bulk insert of the history: its report, its base files' key ranges (with
    `in_key_order`: are the file's rows stored in key order) and its files' slices (`key_slices`)."""

    report: lf.WriteReport
    files: pd.DataFrame
    slices: pd.DataFrame


def sort_modes(spark, spec: datasets.DatasetSpec, modes: Iterable[str], parallelism: int, input_partitions: int,
               slices: int = SLICES, workdir=None, progress: bool = False) -> dict[str, SortModeRun]:
    """Bulk insert the history once per sort mode with `parallelism` write tasks, the history spread
    over `input_partitions` partitions first (every partition holds every hour, in no
    order, as data read from many sources arrives; NONE and PARTITION_SORT coalesce them into
    at most `parallelism` tasks); per mode its files and their slices."""
    loads = sweeps.bulk_insert_sort_modes(spark, spec, modes, {"bulk_insert_parallelism": parallelism}, workdir,
                                          progress, input_partitions, key_order=True)
    return {mode: SortModeRun(load.report, load.files, key_slices(load.table, slices)) for mode, load in loads.items()}


def layout_summary(runs: dict[str, SortModeRun]) -> pd.DataFrame:
    """Per sort mode: base files, files whose rows are stored in key order, the most files one key lies
    in (what range pruning keeps), slices per file, and the most slices one key lies in (what a reader
    skipping inside files must read)."""
    rows = []
    for mode, run in runs.items():
        mode_files, mode_slices = run.files, run.slices
        per_file = int(mode_slices.groupby("file_id").size().max()) if len(mode_slices) else 0
        rows.append({"sort mode": mode, "base files": len(mode_files),
                     "files in key order": int(mode_files["in_key_order"].sum()),
                     "files at one key (most)": frames.max_overlap(mode_files),
                     "slices per file": per_file, "slices in all": len(mode_slices),
                     "slices at one key (most)": slices_at_one_key(mode_slices)})
    return pd.DataFrame(rows).set_index("sort mode")


# ---------------------------------------------------------------- write tasks, timed warm

@dataclass(frozen=True)
class WriteTasks:
    """Timed GLOBAL_SORT bulk inserts of the history per parallelism, after a warm-up of each.

    `runs`: one row per timed run (parallelism, repeat, seconds, write_stage_tasks, files,
    cores_busy_here, write_stage_s, task_seconds, median_task_s, cores_busy_projected,
    projected_write_stage_s); `tasks[(parallelism, repeat)]`: that run's write-stage tasks."""

    runs: pd.DataFrame
    tasks: dict[tuple[int, int], pd.DataFrame]
    cores: int
    project_to: int

    def median_run(self, parallelism: int) -> pd.DataFrame:
        """The write-stage tasks of the run whose write stage took the median time among `parallelism`'s runs."""
        mine = self.runs[self.runs["parallelism"] == parallelism].sort_values(["write_stage_s", "repeat"])
        row = mine.iloc[(len(mine) - 1) // 2]
        return self.tasks[(parallelism, int(row["repeat"]))]

    def counts(self) -> pd.DataFrame:
        """Per parallelism, the exact counts of every run (they do not vary): tasks, files, cores busy
        here and projected, and the waves the tasks need on this machine's cores and on `project_to`."""
        counts = self.runs.groupby("parallelism")[["write_stage_tasks", "files", "cores_busy_here",
                                                   "cores_busy_projected"]].max()
        counts["waves_here"] = [waves(n, self.cores) for n in counts["write_stage_tasks"]]
        counts[f"waves_on_{self.project_to}"] = [waves(n, self.project_to) for n in counts["write_stage_tasks"]]
        return counts

    def spread(self) -> pd.DataFrame:
        """Per parallelism, each timing as "median (min-max)" over the runs."""
        return frames.spread(self.runs, "parallelism", ["seconds", "write_stage_s", "median_task_s",
                                                        "projected_write_stage_s"])

    def task_cost(self) -> pd.DataFrame:
        """The projection's input, per parallelism: rows per task, the median warm task's seconds
        (median over runs of each run's median task) and its min-max over runs, and the task-seconds
        the write stage spent in all (its tasks' durations summed)."""
        grouped = self.runs.groupby("parallelism")
        out = pd.DataFrame({"median_task_s": grouped["median_task_s"].median(),
                            "fastest_run_s": grouped["median_task_s"].min(),
                            "slowest_run_s": grouped["median_task_s"].max(),
                            "task_seconds": grouped["task_seconds"].median()})
        return out.round(3)


    def describe(self, parallelism: int) -> str:
        """What the timeline of `parallelism`'s median run shows, in numbers: its tasks, their durations,
        its span on this machine's cores, and the same tasks projected onto `project_to` cores."""
        tasks = self.median_run(parallelism)
        projected = frames.project(tasks, self.project_to)
        d = tasks["duration"]
        return (f"the median of {workshop.runs(int((self.runs['parallelism'] == parallelism).sum()), 'warm')} with "
                f"{len(tasks)} write tasks: each task {d.median():.2f} s (median; {d.min():.2f}-{d.max():.2f}); "
                f"on {self.cores} cores they ran in {waves(len(tasks), self.cores)} waves, "
                f"{frames.span_seconds(tasks):.2f} s from the first launch to the last end; projected onto "
                f"{self.project_to} cores: {waves(len(tasks), self.project_to)} wave, "
                f"{frames.span_seconds(projected):.2f} s, {int(projected['lane'].nunique())} of {self.project_to} cores busy")

    def describe_spread(self) -> str:
        """The medians and min-max of the write stage, measured and projected, per parallelism: the numbers
        the spread chart shows."""
        parts = []
        for p, rows in self.runs.groupby("parallelism"):
            here, there = rows["write_stage_s"], rows["projected_write_stage_s"]
            parts.append(f"{p} task{'s' if p != 1 else ''}: {here.median():.2f} s here ({here.min():.2f}-{here.max():.2f}), "
                         f"{there.median():.2f} s projected onto {self.project_to} cores "
                         f"({there.min():.2f}-{there.max():.2f}), {rows['task_seconds'].median():.2f} task-seconds")
        text = (f"write stage over {workshop.runs(int(self.runs.groupby('parallelism').size().min()), 'warm')} each: "
                + "; ".join(parts))
        cost = self.fixed_cost()
        if cost is not None:
            few, many, seconds = cost
            text += (f". Each task beyond the first adds about {seconds:.2f} s of its own: "
                     f"{many:.2f} - {few:.2f} task-seconds over {self.most - self.fewest} more tasks"
                     if seconds > 0 else ". No per-task cost shows above the spread")
        return text

    @property
    def fewest(self) -> int:
        return int(self.runs["parallelism"].min())

    @property
    def most(self) -> int:
        return int(self.runs["parallelism"].max())

    def fixed_cost(self) -> tuple[float, float, float] | None:
        """(median task-seconds with the fewest tasks, with the most, the extra seconds each added task
        costs): what splitting the same rows into more tasks adds. None with one setting."""
        if self.most == self.fewest:
            return None
        by = self.runs.groupby("parallelism")["task_seconds"].median()
        few, many = float(by[self.fewest]), float(by[self.most])
        return few, many, (many - few) / (self.most - self.fewest)


def waves(tasks: int, cores: int) -> int:
    """How many rounds `tasks` equal tasks need on `cores` cores, one task per core at a time."""
    return math.ceil(tasks / cores) if tasks else 0


def write_tasks(spark, spec: datasets.DatasetSpec, parallelisms: Iterable[int], repeats: int = 5,
                project_to: int = CLUSTER_CORES, workdir=None, progress: bool = False) -> WriteTasks:
    """Bulk insert the history (GLOBAL_SORT) once per setting untimed, then `repeats` times each, the
    settings interleaved (their order reversed every other repetition); keep every run's write tasks."""
    cached = datasets.generate(spark, spec)
    history = datasets.load_history(spark, cached).repartition(INPUT_PARTITIONS)
    settings = list(parallelisms)
    cores = compat.default_parallelism(spark)  # the task slots, without asking the UI (slow on a busy machine)

    def bulk_insert(parallelism: int, name: str) -> lf.WriteReport:
        table = lf.Table.create(spark, workshop.scratch(name, workdir), record_key=datasets.RECORD_KEY,
                                precombine_field=datasets.PRECOMBINE_FIELD, partition_field=None)
        return table.bulk_insert(history, {"bulk_insert_sort_mode": SortMode.GLOBAL_SORT,
                                           "bulk_insert_parallelism": parallelism})

    runs = [(0, p) for p in settings[::-1]]  # the warm-up: every setting once, the widest first
    runs += [(repeat, p) for repeat in range(1, repeats + 1) for p in (settings if repeat % 2 else settings[::-1])]
    rows, tasks = [], {}
    for repeat, parallelism in tqdm(runs, desc="bulk inserts (warm-up first)", disable=not progress):
        report = bulk_insert(parallelism, f"parallelism-{parallelism}")
        if repeat == 0:
            continue
        write = frames.write_stage(frames.task_timeline(spark, report, "write"))
        projected = frames.project(write, project_to)
        tasks[(parallelism, repeat)] = write
        rows.append({"parallelism": parallelism, "repeat": repeat, "seconds": report.seconds,
                     "write_stage_tasks": len(write), "files": len(report.files),
                     "cores_busy_here": int(write["lane"].nunique()), "write_stage_s": frames.span_seconds(write),
                     "task_seconds": float(write["duration"].sum()), "median_task_s": float(write["duration"].median()),
                     "cores_busy_projected": int(projected["lane"].nunique()),
                     "projected_write_stage_s": frames.span_seconds(projected)})
    return WriteTasks(pd.DataFrame(rows), tasks, cores, project_to)
