"""A small client of the driver's Spark UI REST API: stages, per-task timings and task timelines by job group."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pandas as pd

from labformat.errors import LabformatError
from labformat.spark.compat import NOT_ON_CONNECT, is_connect
from labformat.spark.jobs import StepRecorder, stage_labels, step_of_group

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The REST listener is fed asynchronously, so a job that just returned may not be listed as done yet.
POLL_SECONDS = 5.0
_POLL_STEP = 0.1
_TERMINAL_STAGE = {"COMPLETE", "FAILED", "SKIPPED"}
_REQUEST_TIMEOUT = 5.0
# The UI's first REST answer starts its JAX-RS handlers: 12 s measured on a 2-core machine at load 20,
# a fraction of a second once they run.
_PROBE_TIMEOUT = 30.0

TASK_COLUMNS = [
    "stage_id", "task_id", "index", "executor_id", "host", "launch_time", "duration_s", "status", "busy_s",
]
TIMELINE_COLUMNS = [
    "stage_id", "stage_name", "stage_label", "task_id", "index", "executor_id", "host", "status",
    "launch", "end", "busy_end", "duration_s", "busy_s", "lane",
]


def parse_time(value: str | None) -> datetime | None:
    """Parse a REST timestamp such as `2024-01-15T09:30:00.123GMT` into an aware UTC datetime."""
    if not value:
        return None
    # strptime's %z does not know "GMT"; the API always means UTC.
    return datetime.strptime(value.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


@dataclass(frozen=True)
class StageInfo:
    """One stage attempt as the Spark UI reports it."""

    stage_id: int
    attempt: int
    name: str
    num_tasks: int
    status: str
    submission_time: datetime | None
    completion_time: datetime | None
    executor_run_time_s: float
    description: str | None = None  # the job description: a `jobs.StagePlan` when labformat set one
    shuffle_write_bytes: int = 0  # bytes its tasks wrote for a shuffle (an exchange's map side)


class SparkUI:
    """Reads the driver's own monitoring REST API (`spark.sparkContext.uiWebUrl`)."""

    def __init__(self, spark: SparkSession, poll_seconds: float = POLL_SECONDS):
        if is_connect(spark):
            raise LabformatError(f"task timings from the Spark UI are {NOT_ON_CONNECT}: the UI is the "
                                 "server's, and a Connect client has no application id to ask it about")
        sc = spark.sparkContext
        url = sc.uiWebUrl
        if not url:
            raise LabformatError(
                "The Spark UI is disabled (sparkContext.uiWebUrl is None), so task timings cannot be read: "
                "start the session with spark.ui.enabled=true."
            )
        self.app_id = sc.applicationId
        self.poll_seconds = poll_seconds
        self.base = self._reachable_base(url.rstrip("/"))

    def _reachable_base(self, url: str) -> str:
        parsed = urllib.parse.urlsplit(url)
        candidates = [url]
        # uiWebUrl may carry a host name that does not resolve or route from here; the UI also
        # listens on loopback, so the same port on 127.0.0.1 is the fallback.
        if parsed.hostname not in ("127.0.0.1", "localhost") and parsed.port:
            candidates.append(f"{parsed.scheme}://127.0.0.1:{parsed.port}")
        errors = []
        for base in candidates:
            try:
                self._fetch(f"{base}/api/v1/applications/{self.app_id}", _PROBE_TIMEOUT)
                return base
            except (urllib.error.URLError, OSError, ValueError) as exc:
                errors.append(f"{base}: {exc}")
        raise LabformatError(
            "The Spark UI REST API is unreachable (" + "; ".join(errors) + "). "
            "Check that the session runs with spark.ui.enabled=true and that its UI port is reachable from here."
        )

    @staticmethod
    def _fetch(url: str, timeout: float = _REQUEST_TIMEOUT) -> Any:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.load(response)

    def _get(self, path: str) -> Any:
        url = f"{self.base}/api/v1/applications/{self.app_id}{path}"
        try:
            return self._fetch(url)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise LabformatError(f"Spark UI REST request {url} failed: {exc} (is spark.ui.enabled=true?)") from exc

    # ---- jobs and stages -------------------------------------------------------------------

    def jobs(self, job_group: str | None = None) -> list[dict[str, Any]]:
        """Raw job records, optionally only those of one job group."""
        jobs: list[dict[str, Any]] = self._get("/jobs")
        if job_group is not None:
            jobs = [job for job in jobs if job.get("jobGroup") == job_group]
        return jobs

    def _raw_stages(self) -> list[dict[str, Any]]:
        stages: list[dict[str, Any]] = self._get("/stages")
        return stages

    def stages(self, job_group: str | None = None) -> list[StageInfo]:
        """All stage attempts, or only those of the jobs in `job_group` (waiting briefly until they are done)."""
        if job_group is None:
            raw = self._raw_stages()
        else:
            raw = self._group_stages(job_group)
        infos = [
            StageInfo(
                stage_id=int(s["stageId"]),
                attempt=int(s.get("attemptId", 0)),
                name=s.get("name", ""),
                num_tasks=int(s.get("numTasks", 0)),
                status=s.get("status", ""),
                submission_time=parse_time(s.get("submissionTime")),
                completion_time=parse_time(s.get("completionTime")),
                executor_run_time_s=s.get("executorRunTime", 0) / 1000.0,
                description=s.get("description"),
                shuffle_write_bytes=int(s.get("shuffleWriteBytes", 0)),
            )
            for s in raw
        ]
        return sorted(infos, key=lambda info: (info.stage_id, info.attempt))

    def _group_stages(self, job_group: str) -> list[dict[str, Any]]:
        deadline = time.monotonic() + self.poll_seconds
        while True:
            jobs = self.jobs(job_group)
            stage_ids = {int(sid) for job in jobs for sid in job.get("stageIds", [])}
            raw = [s for s in self._raw_stages() if int(s["stageId"]) in stage_ids]
            done = (
                bool(jobs)
                and all(job.get("status") != "RUNNING" for job in jobs)
                and all(s.get("status") in _TERMINAL_STAGE for s in raw)
            )
            if done or time.monotonic() >= deadline:
                break
            time.sleep(_POLL_STEP)
        if not jobs:
            raise LabformatError(
                f"The Spark UI lists no job in job group {job_group!r} (after waiting {self.poll_seconds:g} s); "
                "did the step run any Spark action?"
            )
        return raw

    # ---- tasks ---------------------------------------------------------------------------------

    def tasks(self, stage_id: int, attempt: int = 0) -> pd.DataFrame:
        """Per-task rows of one stage attempt: ids, executor, UTC launch time, duration in seconds, status.

        `duration_s` is the driver's view (launch to result handled); `busy_s` is the executor's
        work (deserialize + run + result serialization), see `_busy_seconds`.
        """
        raw = self._get(f"/stages/{int(stage_id)}/{int(attempt)}/taskList?length=100000")
        rows = [
            {
                "stage_id": int(stage_id),
                "task_id": int(t["taskId"]),
                "index": int(t["index"]),
                "executor_id": t.get("executorId"),
                "host": t.get("host"),
                "launch_time": parse_time(t.get("launchTime")),
                # A running task has no duration yet.
                "duration_s": t["duration"] / 1000.0 if t.get("duration") is not None else float("nan"),
                "status": t.get("status"),
                "busy_s": _busy_seconds(t),
            }
            for t in raw
        ]
        frame = pd.DataFrame(rows, columns=TASK_COLUMNS)
        frame["launch_time"] = pd.to_datetime(frame["launch_time"], utc=True)
        frame["duration_s"] = frame["duration_s"].astype(float)
        frame["busy_s"] = frame["busy_s"].astype(float)
        return frame.sort_values(["launch_time", "task_id"], ignore_index=True)

    def total_cores(self) -> int:
        """Task slots of the application: the sum of `totalCores` over its active executors."""
        return sum(int(e.get("totalCores", 0)) for e in self._get("/executors"))

    def task_timeline(self, job_group: str) -> pd.DataFrame:
        """Every task of every stage of `job_group`, with `launch`/`end` in seconds from the first launch,
        a `lane` in 0..total_cores()-1 (earliest-free lane first, laid out by `busy_end`) and a
        `stage_label` saying what its stage does (`jobs.stage_labels`, e.g. "tag: range pruning")."""
        frames = []
        ran = [stage for stage in self.stages(job_group) if stage.status != "SKIPPED"]
        labels = stage_labels(step_of_group(job_group), [(s.stage_id, s.description) for s in ran])
        for stage in ran:
            frame = self.tasks(stage.stage_id, stage.attempt)
            frame["stage_name"] = stage.name
            frame["stage_label"] = labels[stage.stage_id]
            frames.append(frame)
        frames = [f for f in frames if not f.empty]
        if not frames:
            return pd.DataFrame(columns=TIMELINE_COLUMNS)
        tasks = pd.concat(frames, ignore_index=True).sort_values(["launch_time", "task_id"], ignore_index=True)
        start = tasks["launch_time"].min()
        tasks["launch"] = (tasks["launch_time"] - start).dt.total_seconds()
        tasks["end"] = tasks["launch"] + tasks["duration_s"]
        tasks["busy_end"] = tasks["launch"] + tasks["busy_s"]
        tasks["lane"] = assign_lanes(tasks["launch"].tolist(), tasks["busy_end"].tolist(), self.total_cores())
        return tasks[TIMELINE_COLUMNS]


def _busy_seconds(task: dict[str, Any]) -> float:
    """Seconds the executor worked on a task: deserialize + run + result serialization.

    `duration` ends when the driver has handled the result, which happens on another thread after
    the slot was already freed and the next task launched: on a loaded 2-core machine that made a
    third task look concurrent by up to 40 ms. The slot is freed only after this work, so
    `launch + busy` never overlaps the next launch on the same core (beyond ms rounding).
    """
    metrics = task.get("taskMetrics") or {}
    if not metrics:
        return float("nan")
    millis = metrics.get("executorDeserializeTime", 0) + metrics.get("executorRunTime", 0)
    return float(millis + metrics.get("resultSerializationTime", 0)) / 1000.0


# A hand-over between two tasks on one core can look like a few ms of overlap (ms rounding, and
# end times taken on another thread than the launch); more than this is a task no core was free for.
HANDOVER_TOLERANCE_S = 0.01


def assign_lanes(launches: list[float], ends: list[float], lanes: int,
                 tolerance_s: float = HANDOVER_TOLERANCE_S) -> list[int]:
    """The core lane (0..lanes-1) of each task, in input order: tasks taken by launch time (ties in
    input order), each onto the lane that frees up first (lowest lane on ties).

    In local mode every task reports executor `driver`, so the executor id says nothing about
    which core ran it. A NaN end (a task still running) occupies its lane from launch only.
    Raises ValueError when a task launches more than `tolerance_s` before any lane is free:
    more tasks ran at once than there are lanes (a wrong core count, or overlapping data).
    """
    if lanes < 1:
        raise ValueError(f"lanes must be at least 1, got {lanes}")
    free_at = [float("-inf")] * int(lanes)
    result = [-1] * len(launches)
    for i in sorted(range(len(launches)), key=lambda i: launches[i]):
        launch, end = launches[i], ends[i]
        lane = min(range(len(free_at)), key=lambda k: (free_at[k], k))
        if free_at[lane] > launch + tolerance_s:
            raise ValueError(f"task {i} launches at {launch:.3f}s but all {lanes} lanes are busy until "
                             f"{free_at[lane]:.3f}s: more tasks ran at once than there are cores")
        result[i] = lane
        free_at[lane] = end if end == end else launch
    return result


def last_group(recorder: StepRecorder, name: str) -> str:
    """The job group of the most recent `recorder.step(name)` that started a Spark job."""
    for step in reversed(recorder.steps):
        if step.name == name and step.group is not None:
            return step.group
    raise LabformatError(f"No step named {name!r} of this recorder started a Spark job.")

