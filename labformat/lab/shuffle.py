"""The upsert's deduplicate shuffle by task count: timed here, counted in tasks and waves, and projected onto the seed's 16 cores.

Step 1 runs alone, as the upsert runs it (`write.dedupe.combine_records`, then its count per
partition path), on a day's batch read in `n` partitions: Hudi 0.13+ then shuffles it in `n` tasks.
After one untimed run per task count (every core has run a task of that shape), the counts
alternate, `repeats` times each. The stage that keeps the newest version per key is what the seed's
"upsert parallelism" sets; its tasks, from the Spark UI, are what the projection lays onto 16 cores.

Two numbers price a stage: `startup_s`, what one task of it costs with no rows (measured: its tasks on
the batch cut to one row, all but one of which read nothing), and its work, what the rows cost beyond
that (this batch's: the tasks' busy seconds less one start-up each, the median over the runs; within
the noise at this workshop's sizes). On `c` cores, `n` equal tasks take
`waves(n, c) * (startup_s + work / n)`: `shuffle_seconds`. That is the rule; Spark's scheduler, network
and data locality are left out, so what it gives for the seed's cluster is a projection, for a stated
workload (`SEED_WORK_S`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import pandas as pd

import labformat as lf
from labformat.lab.projection import CLUSTER_CORES, project, task_stage_labels

DEDUPLICATE_STAGE = "keep newest per key"
# The workload the projection onto the seed's cluster states, not measures: a daily batch whose
# deduplicate stage is 2 minutes of one core's work (gigabytes; this workshop's batch is a few MB,
# whose work in that stage is within the noise of its tasks' start-up).
SEED_WORK_S = 120.0


def waves(tasks: int, cores: int) -> int:
    """Rounds of tasks a stage needs: every core takes one task at a time."""
    return -(-int(tasks) // int(cores))


def idle_in_last_wave(tasks: int, cores: int) -> int:
    """Cores with no task in the stage's last wave."""
    return waves(tasks, cores) * int(cores) - int(tasks)


def shuffle_seconds(tasks: int, cores: int, startup_s: float, work_s: float) -> float:
    """The rule: `tasks` equal tasks sharing `work_s` seconds of work, each paying `startup_s`, on `cores` cores."""
    return waves(tasks, cores) * (startup_s + work_s / tasks)


def best_task_counts(cores: int, startup_s: float, work_s: float, tolerance: float = 0.05,
                     candidates: Iterable[int] = range(1, 201)) -> tuple[float, list[int]]:
    """The fastest projected stage over `candidates` task counts, and every count within `tolerance` of it."""
    times = {n: shuffle_seconds(n, cores, startup_s, work_s) for n in candidates}
    best = min(times.values())
    return best, [n for n, t in times.items() if t <= best * (1 + tolerance)]


def _stage_tasks(spark, table: lf.Table, batch, partitions: int) -> pd.DataFrame:
    """Step 1 alone on `batch` read in `partitions` partitions: the tasks of its shuffle stage (Spark UI)."""
    from labformat.spark import SparkUI
    from labformat.spark.jobs import StepRecorder, describe
    from labformat.write.dedupe import combine_records, partition_counts

    ctx = table.context()
    recorder = StepRecorder(spark)
    with recorder.step("deduplicate"):
        deduped = combine_records(ctx, batch.repartition(partitions), partitions)
        with describe(spark, "read input", DEDUPLICATE_STAGE, "count per partition path", before="read batch"):
            partition_counts(deduped, partitions)
    tasks = _timeline(SparkUI, spark, recorder.steps[-1].group)
    stage = tasks[task_stage_labels(tasks).str.endswith(DEDUPLICATE_STAGE)].copy()
    stage["duration"] = stage["busy_s"].fillna(stage["duration_s"])
    stage["launch"] = stage["launch"] - stage["launch"].min()
    return stage


def _timeline(ui, spark, group: str, attempts: int = 3) -> pd.DataFrame:
    """The job group's tasks from the Spark UI, asked again (after a pause) when the UI is too busy to
    answer in time: on a loaded laptop its REST server can miss the request timeout once."""
    import time

    for attempt in range(1, attempts + 1):
        try:
            return ui(spark).task_timeline(group)
        except lf.LabformatError:
            if attempt == attempts:
                raise
            time.sleep(2.0 * attempt)
    raise AssertionError("unreachable")


def _span(tasks: pd.DataFrame) -> float:
    return float((tasks["launch"] + tasks["duration"]).max() - tasks["launch"].min()) if len(tasks) else 0.0


@dataclass(frozen=True)
class ShuffleRuns:
    """What `time_deduplicate` measured: per run its stage, here and projected; the start-up cost of one task."""

    runs: pd.DataFrame  # one row per timed run (tasks, repeat, stage_s, busy_s, work_s, projected_s)
    stages: dict[int, pd.DataFrame]  # per task count, the tasks of its median run (by stage_s)
    startup_s: float  # median busy seconds of a task of the stage with no rows
    startup_tasks: int  # how many such tasks that median is of
    rows: int  # the batch's rows
    cores_here: int
    project_to: int = CLUSTER_CORES

    @property
    def work_s(self) -> float:
        """The batch's work in the stage beyond the tasks' start-up: the median over every timed run."""
        return float(self.runs["work_s"].median())

    def projected(self, tasks: int, work_s: float | None = None) -> pd.DataFrame:
        """`tasks` tasks laid onto `project_to` cores: the median run as measured, or (with `work_s`) equal
        tasks by the rule, each this run's start-up plus an equal share of `work_s` seconds of work."""
        if work_s is None:
            return project(self.stages[tasks], self.project_to)
        equal = pd.DataFrame({"stage_id": 0, "task_id": range(tasks), "index": range(tasks), "launch": 0.0,
                              "duration": self.startup_s + work_s / tasks,
                              "stage_label": f"{tasks} equal tasks (the rule)"})
        return project(equal, self.project_to)

    def by_rule(self, tasks: Iterable[int], work_s: float | None = None) -> pd.DataFrame:
        """Per task count: tasks, waves and idle cores on `project_to` cores, each task's start-up and work,
        and the stage's seconds by the rule (`shuffle_seconds`), for `work_s` seconds of work (this batch's
        by default)."""
        work = self.work_s if work_s is None else work_s
        rows = [{"tasks": n, "waves": waves(n, self.project_to),
                 "idle_cores_in_last_wave": idle_in_last_wave(n, self.project_to),
                 "startup_s_per_task": self.startup_s, "work_s_per_task": work / n,
                 "stage_s": shuffle_seconds(n, self.project_to, self.startup_s, work)} for n in tasks]
        return pd.DataFrame(rows).set_index("tasks")


def time_deduplicate(table: lf.Table, batch, task_counts: Iterable[int] = (20, 48), repeats: int = 5,
                     project_to: int = CLUSTER_CORES, progress: bool = False) -> ShuffleRuns:
    """Step 1's shuffle stage on `batch`, at each task count: one untimed run each, then `repeats`
    interleaved timed runs each (the order reversed every other repetition); and, after the untimed
    runs, one on the batch cut to one row, whose tasks' busy time is the per-task start-up cost."""
    from tqdm.auto import tqdm

    from labformat.lab import workshop

    spark = table.spark
    counts = list(task_counts)
    batch = batch.cache()
    rows = batch.count()
    try:
        for n in counts:  # the warm-up: every core runs tasks of this shape before any is timed
            _stage_tasks(spark, table, batch, n)
        # One row (no row at all and Spark runs no job): all but one of the stage's tasks read nothing
        # from the shuffle, so their busy time is what a task of this stage costs whatever its rows.
        empty = _stage_tasks(spark, table, batch.limit(1), max(counts))
        startup = float(empty["duration"].median()) if len(empty) else 0.0
        order = [(r, n) for r in range(1, repeats + 1) for n in (counts if r % 2 else counts[::-1])]
        records, stages = [], {}
        for repeat, n in tqdm(order, desc="deduplicate shuffles", disable=not progress):
            tasks = _stage_tasks(spark, table, batch, n)
            busy = float(tasks["duration"].sum())
            records.append({"tasks": n, "repeat": repeat, "measured_tasks": len(tasks), "stage_s": _span(tasks),
                            "busy_s": busy, "work_s": max(busy - len(tasks) * startup, 0.0),
                            "projected_s": _span(project(tasks, project_to))})
            stages.setdefault(n, []).append(tasks)
        runs = pd.DataFrame(records)
        median_runs = {}
        for n, measured in stages.items():
            spans = [_span(t) for t in measured]
            median_runs[n] = measured[sorted(range(len(spans)), key=spans.__getitem__)[len(spans) // 2]]
    finally:
        batch.unpersist()
    return ShuffleRuns(runs, median_runs, startup, len(empty), rows, workshop.cores(spark), project_to)


__all__ = ["DEDUPLICATE_STAGE", "SEED_WORK_S", "ShuffleRuns", "best_task_counts", "idle_in_last_wave",
           "shuffle_seconds", "time_deduplicate", "waves"]
