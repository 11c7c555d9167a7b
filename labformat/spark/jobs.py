"""Step timing with real task counts: each step runs under its own Spark job group."""

from __future__ import annotations

import itertools
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterator

from labformat.model.report import NOT_ON_CONNECT, StepReport
from labformat.spark.compat import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_group_ids = itertools.count()
_GROUP = re.compile(r"labformat-(?P<step>.+)-\d+")


class StepRecorder:
    """Collects StepReports; `with rec.step("write"): ...` times a step and counts its tasks.

    Task counts come from Spark's status tracker: the tasks that completed in the stages of
    the jobs the step started (skipped stages, whose output was reused, count zero). On a Spark
    Connect session they come from the server's progress reports (the last report of each
    operation lists every stage with its completed tasks); the number of Spark jobs is not
    reported there (`jobs` is NOT_ON_CONNECT) and a step has no job group for the Spark UI.
    """

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.connect = is_connect(spark)
        self.steps: list[StepReport] = []

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        group = f"labformat-{name}-{next(_group_ids)}"
        if self.connect:
            with self._connect_step(name, group):
                yield
            return
        sc = self.spark.sparkContext
        sc.setJobGroup(group, f"labformat {name}", interruptOnCancel=False)
        started = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - started
            tracker = sc.statusTracker()
            job_ids = tracker.getJobIdsForGroup(group)
            tasks = 0
            for job_id in job_ids:
                job = tracker.getJobInfo(job_id)
                for stage_id in (job.stageIds if job else []):
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        tasks += stage.numCompletedTasks
            # None removes a property (pyspark annotates the value as str only)
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
            self.steps.append(StepReport(name, seconds, tasks, len(job_ids), group if job_ids else None))

    @contextmanager
    def _connect_step(self, name: str, tag: str) -> Iterator[None]:
        latest: dict[tuple[str | None, int], int] = {}  # (operation, stage) -> completed tasks

        def progress(stages: list[Any] | None, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
            for stage in stages or ():
                latest[(operation_id, stage.stage_id)] = stage.num_completed_tasks

        self.spark.addTag(tag)  # the step's operations can be interrupted together (interruptTag)
        self.spark.registerProgressHandler(progress)  # type: ignore[arg-type]  # any callable; annotated as an ABC
        started = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - started
            self.spark.removeProgressHandler(progress)  # type: ignore[arg-type]  # as registered
            self.spark.removeTag(tag)
            self.steps.append(StepReport(name, seconds, sum(latest.values()), NOT_ON_CONNECT, None))

    def ran_in(self, name: str, other: str) -> None:
        """Step `name`'s Spark work ran inside step `other`'s job (a fused job): `name` keeps its own
        (driver) time, no jobs and no tasks of its own, and points at `other`'s job group, so that
        its task timeline is the job that did its work."""
        group = next((s.group for s in reversed(self.steps) if s.name == other), None)
        for i in range(len(self.steps) - 1, -1, -1):
            if self.steps[i].name == name:
                self.steps[i] = replace(self.steps[i], group=group)
                return


def step_of_group(group: str) -> str:
    """The step name a `StepRecorder` job group stands for: `labformat-tag-7` -> `tag` (else the group itself)."""
    match = _GROUP.fullmatch(group)
    return match["step"] if match else group


# ---- stage labels: what each Spark stage of a step does ---------------------------------------

# The stage that writes the base files, in every write: the "write tasks" of a write step.
WRITE_BASE_FILES = "write base files"
_PLAN_PREFIX = "labformat stages: "
_PLAN_SEP = " > "
_PLAN = re.compile(re.escape(_PLAN_PREFIX) + r"(?P<stages>.*?)(?: \(before: (?P<before>.*)\))?")


@dataclass(frozen=True)
class StagePlan:
    """What the stages of one Spark action do, in the order they run; the last is the result stage.

    Read from the end: stages that ran before the first named one (a broadcast, a range sample,
    a shuffle of the input's own) are all `before`. Travels as the job description
    (`spark.job.description`), so the Spark UI shows it too.
    """

    stages: tuple[str, ...]
    before: str | None = None

    def __post_init__(self) -> None:
        names = self.stages + ((self.before,) if self.before is not None else ())
        if not self.stages or any(not n or _PLAN_SEP.strip() in n or "(" in n or ")" in n for n in names):
            raise ValueError(f"stage labels must be non-empty, without '>' or parentheses: {names!r}")

    def format(self) -> str:
        text = _PLAN_PREFIX + _PLAN_SEP.join(self.stages)
        return text if self.before is None else f"{text} (before: {self.before})"

    @classmethod
    def parse(cls, description: str | None) -> "StagePlan | None":
        """The plan a job description carries; None for any other description."""
        match = _PLAN.fullmatch(description or "")
        if match is None:
            return None
        return cls(tuple(match["stages"].split(_PLAN_SEP)), match["before"])


@contextmanager
def describe(spark: SparkSession, *stages: str, before: str | None = None) -> Iterator[None]:
    """Label the stages of the Spark action(s) run inside: `with describe(spark, "read input", "write base files"):`.

    Sets the job description (kept by the step's job group); the previous one is restored after.
    """
    if is_connect(spark):  # no job descriptions on Connect: its stages keep Spark's numbers
        yield
        return
    sc = spark.sparkContext
    previous = sc.getLocalProperty("spark.job.description")
    sc.setLocalProperty("spark.job.description", StagePlan(tuple(stages), before).format())
    try:
        yield
    finally:
        sc.setLocalProperty("spark.job.description", previous)  # type: ignore[arg-type]  # None removes it


def stage_labels(step: str, stages: list[tuple[int, str | None]]) -> dict[int, str]:
    """A readable label per stage: `step: what it does`, from the `StagePlan`s in the stages' descriptions.

    `stages`: (stage id, job description) of the stages that ran, in any order. Stages sharing a
    plan are laid onto it from the last one back (skipped stages never ran, so a plan counts its
    stages from the result stage); a stage with no plan is `step: stage <id>`, as Spark numbers it.
    """
    by_description: dict[str | None, list[int]] = {}
    for stage_id, description in sorted(dict(stages).items()):  # one entry per stage, even if retried
        by_description.setdefault(description, []).append(stage_id)
    labels = {}
    for description, ids in by_description.items():
        plan = StagePlan.parse(description)
        if plan is None:
            labels.update({sid: f"{step}: stage {sid}" for sid in ids})
            continue
        extra = len(ids) - len(plan.stages)
        names = list(plan.stages[max(0, -extra):])
        if extra > 0:
            names = [plan.before or f"before {plan.stages[0]}"] * extra + names
        labels.update({sid: f"{step}: {name}" for sid, name in zip(ids, names)})
    return labels


@contextmanager
def conf_override(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Spark SQL settings changed for the duration of the block, then put back as they were (unset
    where they were unset)."""
    conf = spark.conf
    saved = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                conf.unset(key)
            else:
                conf.set(key, old)
