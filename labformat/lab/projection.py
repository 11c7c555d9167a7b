"""A projection of measured Spark tasks onto N cores: their durations re-laid as Spark's scheduler would."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from labformat.errors import InvalidInputError
from labformat.spark.jobs import WRITE_BASE_FILES

# The laptop teaches the seed article's cluster: 16 cores.
CLUSTER_CORES = 16


def _check_cores(cores: int) -> int:
    if isinstance(cores, bool) or int(cores) != cores or cores < 1:
        raise InvalidInputError(f"cores must be a whole number of at least 1, got {cores!r}")
    return int(cores)


def _check_durations(durations: Sequence[float], what: str = "durations") -> list[float]:
    values = [float(d) for d in durations]
    bad = [d for d in values if not (d >= 0 and d != float("inf"))]  # NaN fails `d >= 0` too
    if bad:
        raise InvalidInputError(f"task {what} must be finite and non-negative seconds; got {bad[:5]}")
    return values


def schedule(durations: Sequence[float], cores: int, start: float = 0.0) -> list[tuple[int, float]]:
    """(lane, start time) of each task of one stage, taken in the given order, each onto the lane
    that frees up first (the lowest lane on ties), all lanes free at `start`.

    >>> schedule([2.0, 1.0, 1.0, 1.0], cores=2)
    [(0, 0.0), (1, 0.0), (1, 1.0), (0, 2.0)]
    """
    cores = _check_cores(cores)
    free_at = [float(start)] * cores
    placed = []
    for duration in _check_durations(durations):
        lane = min(range(cores), key=lambda i: (free_at[i], i))
        placed.append((lane, free_at[lane]))
        free_at[lane] += duration
    return placed


def _stage_span(durations: list[float], cores: int, start: float) -> float:
    return max((s + d for (_, s), d in zip(schedule(durations, cores, start), durations)), default=start)


def makespan(stages: Sequence[Sequence[float]], cores: int) -> float:
    """Seconds from the first task's start to the last one's end when the stages run one after
    another (each starts when the previous has finished: a shuffle barrier) on `cores` lanes.

    >>> makespan([[1.0] * 20], cores=16)  # 20 equal tasks on 16 cores: two waves
    2.0
    """
    cores = _check_cores(cores)
    end = 0.0
    for durations in stages:
        end = _stage_span(_check_durations(durations), cores, end)
    return end


def task_durations(tasks: pd.DataFrame) -> pd.Series:
    """The measured seconds of each task: `duration`, else the executor's `busy_s`, else the driver's `duration_s`."""
    for column in ("duration", "busy_s", "duration_s"):
        if column in tasks.columns:
            measured = tasks[column].astype(float)
            break
    else:
        raise InvalidInputError("tasks need a duration column (duration, busy_s or duration_s); "
                                f"got {list(tasks.columns)}")
    if "duration" not in tasks.columns and "busy_s" in tasks.columns and "duration_s" in tasks.columns:
        measured = measured.fillna(tasks["duration_s"].astype(float))
    return measured


def task_stage_labels(tasks: pd.DataFrame) -> pd.Series:
    """Each task's stage label: the `stage_label` column where there is one (what the stage does), else "stage N"."""
    fallback = "stage " + tasks["stage_id"].astype(str)
    if "stage_label" not in tasks.columns:
        return fallback.rename("stage_label")
    return tasks["stage_label"].where(tasks["stage_label"].notna(), fallback).rename("stage_label")


def project(tasks: pd.DataFrame, cores: int) -> pd.DataFrame:
    """The same tasks laid onto `cores` lanes as Spark's scheduler would run them: a projection,
    not a measurement.

    Every task keeps the duration measured on this machine (`task_durations`); nothing is
    invented. Stages run one after another, in the order they ran here (by first launch), each
    starting when the previous one has finished (a shuffle barrier); within a stage, tasks are
    taken in task `index` order, each onto the earliest-free lane (lowest lane on ties).
    Ignored: the per-task launch overhead of a real cluster, data locality and network, and
    independent stages that Spark could run side by side. Left out: the driver's time between
    stages (planning, Python between Spark actions), which is in no task. Returns the rows in their order with
    `launch`, `duration` and `lane` replaced (and `end`/`busy_end` where present), and `stage_label`.
    """
    cores = _check_cores(cores)
    if "stage_id" not in tasks.columns:
        raise InvalidInputError(f"tasks need a stage_id column; got {list(tasks.columns)}")
    durations = pd.Series(_check_durations(task_durations(tasks)), index=tasks.index, dtype=float)
    out = tasks.copy()
    out["stage_label"] = task_stage_labels(tasks)
    out["duration"] = durations
    launches = pd.Series(0.0, index=tasks.index, dtype=float)
    lanes = pd.Series(0, index=tasks.index, dtype=int)
    if "launch" in tasks.columns:
        ran_at = tasks.groupby("stage_id")["launch"].min()
        stage_order = sorted(ran_at.index, key=lambda s: (ran_at[s], s))
    else:
        stage_order = sorted(tasks["stage_id"].unique())
    order_by = [c for c in ("index", "task_id") if c in tasks.columns]
    stage_start = 0.0
    for stage in stage_order:
        mine = tasks[tasks["stage_id"] == stage]
        rows = mine.sort_values(order_by, kind="stable").index if order_by else mine.index
        placed = schedule(durations[rows].tolist(), cores, stage_start)
        for row, (lane, start) in zip(rows, placed):
            lanes.at[row], launches.at[row] = lane, start
        stage_start = max([start + durations[row] for row, (_, start) in zip(rows, placed)], default=stage_start)
    out["launch"] = launches
    out["lane"] = lanes
    for column in ("end", "busy_end"):
        if column in out.columns:
            out[column] = launches + durations
    return out


def write_stage_tasks(tasks: pd.DataFrame) -> pd.DataFrame:
    """The tasks of the stage(s) that write base files ("write: write base files"), not every stage of a write step."""
    return tasks[task_stage_labels(tasks).str.endswith(": " + WRITE_BASE_FILES)]


def against_measurement(tasks: pd.DataFrame, cores: int) -> pd.DataFrame:
    """The projection checked where it can be: the measured `tasks` (with `launch`) laid onto the
    `cores` they really ran on, beside the span they really took, from the first launch to the last
    task's end. The difference is what the projection leaves out (task launch, the scheduler's
    order, stages overlapping) on this machine or cluster; projected onto other cores it is an
    estimate with at least that error. One row: cores, measured_s, projected_s, error_pct.
    """
    cores = _check_cores(cores)
    if tasks.empty or "launch" not in tasks.columns:
        raise InvalidInputError("the check needs measured tasks with a `launch` column (fr.task_timeline)")
    durations = task_durations(tasks)
    measured = float((tasks["launch"] + durations).max() - tasks["launch"].min())
    projected_tasks = project(tasks, cores)
    projected = float((projected_tasks["launch"] + projected_tasks["duration"]).max())
    error = (projected - measured) / measured * 100 if measured > 0 else float("nan")
    return pd.DataFrame([{"cores": cores, "measured_s": measured, "projected_s": projected, "error_pct": error}])
